// The model in the page as a person meets it: a download's progress (bar, bytes and %, Cancel),
// the stored models with their sizes (Use, Delete), and how it runs (threads). Pure rendering:
// the actions come from `bind`'s handlers; the work is `LocalModel`'s (www/local/client.js).
import { el, button } from '../view.js';
import { formatBytes } from '../local/catalog.js';

/** `98.4 MB of 98.4 MB (100%)`, or the bytes alone while the total is unknown (nothing before the first). */
export function progressText({ loaded = 0, total }) {
  if (!total) return loaded ? `${formatBytes(loaded)}` : '';
  const percent = Math.min(100, Math.floor((100 * loaded) / total));
  return `${formatBytes(loaded)} of ${formatBytes(total)} (${percent}%)`;
}

/**
 * A download under way in `node`: the label, a bar, bytes and %, and Cancel; built once and then
 * updated, so Cancel stays under the pointer. `progress.phase === 'check'`: the model is stored and
 * being loaded once to prove it works.
 */
export function renderProgress(node, progress, label) {
  if (!node.querySelector('progress')) {
    const bar = el('progress', { testid: 'download-bar', max: 1, value: 0 });
    bar.setAttribute('aria-label', label);
    node.replaceChildren(el('span', { class: 'label' }), bar, el('span', { testid: 'download-text' }), button('download-cancel', 'Cancel', 'download-cancel'));
  }
  const checking = progress.phase === 'check';
  const bar = node.querySelector('progress');
  bar.max = progress.total || 1;
  if (progress.total && !checking) bar.value = progress.loaded;
  else if (checking) bar.removeAttribute('value'); // indeterminate while llama.cpp loads it
  node.querySelector('.label').textContent = checking ? 'Checking that the model loads…' : label;
  // While it is checked there is nothing to count (the bytes are all stored): no "0 B".
  node.querySelector('[data-testid=download-text]').textContent = checking ? '' : progressText(progress);
  node.dataset.phase = checking ? 'check' : 'download';
  node.hidden = false;
}

/** The stored models: name, size, Use (fills the model field) and Delete. */
export function renderModels(node, models, chosen) {
  if (!models.length) {
    node.replaceChildren(el('li', { class: 'empty-list', text: 'No model is stored in this browser yet.' }));
    return;
  }
  node.replaceChildren(...models.map((model) => el('li', { 'data-model': model.id, class: model.id === chosen ? 'chosen' : '' },
    el('span', { class: 'name', text: model.id }),
    el('span', { class: 'size', testid: 'local-model-size', text: formatBytes(model.size) }),
    button('local-use', model.id === chosen ? 'In use' : 'Use', 'local-use', { disabled: model.id === chosen }),
    button('local-delete', 'Delete', 'local-delete'))));
}

/** How the model runs here: threads, and why only one when the page is not cross-origin isolated. */
export function threadsText(info) {
  if (!info?.can_run) return 'This browser cannot run a model in the page (its WebAssembly lacks 64-bit memory).';
  if (info.isolated) return `Runs on ${info.threads} threads (this page is cross-origin isolated).`;
  return 'Runs on 1 thread: this page is not cross-origin isolated (palaver serve sends the headers that allow threads; a static host needs COOP and COEP).';
}

/** Clicks in the models list and the progress box go to `handlers.use(id)`, `remove(id)`, `cancel()`. */
export function bind(node, handlers) {
  node.addEventListener('click', (event) => {
    const target = event.target.closest('button');
    if (!target) return;
    const model = target.closest('[data-model]')?.dataset.model;
    if (target.dataset.action === 'local-use' && model) handlers.use?.(model);
    if (target.dataset.action === 'local-delete' && model) handlers.remove?.(model);
    if (target.dataset.action === 'download-cancel') handlers.cancel?.();
  });
}
