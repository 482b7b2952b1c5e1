// What the transcript shows with no chat open: how to start. When nothing can answer yet (no
// provider, no model in the page) the two ways to get an answer come first — a small model in
// this browser (its download's progress and Cancel right there) or a provider (Settings) — then
// how to import chats from elsewhere. Drawn from the page's state, so it is never stale.
import * as settingsStore from '../settings.js';
import * as localView from '../views/local-model.js';
import { el, button } from '../view.js';
import { SMALL_MODEL_NOTE } from '../local/catalog.js';
import { $ } from '../page/dom.js';

export function install(ctx) {
  function show() {
    if (ctx.chat.id) return;
    const importButton = button('empty-import', 'Import an export file…', 'import', { onclick: () => $('import-file').click() });
    const state = ctx.store.state;
    const settings = settingsStore.loadSettings();
    if (!settingsStore.isConfigured(settings) || (state.usesLocal && state.local !== 'ready')) {
      $('transcript').replaceChildren(firstRun(importButton, state, settings));
      return;
    }
    const text = ctx.chats.all().length
      ? 'Pick a chat, or write below to start a new one.'
      : 'No chats here yet. Write below to start one, or import chats exported from another browser or from the Palaver site (each keeps its own storage).';
    $('transcript').replaceChildren(el('div', { class: 'empty', testid: 'empty-state' }, el('p', { text }), importButton));
  }

  /** Nothing can answer yet: a small model in this browser, or a provider. */
  function firstRun(importButton, state, settings) {
    const unavailable = ctx.local.unavailable();
    const busy = state.usesLocal && (state.local === 'downloading' || state.local === 'loading');
    const tryLocal = unavailable ? null : button('try-local', 'Try a small model in this browser (98 MB, offline after the first load)', 'try-local', {
      class: 'primary', disabled: busy, onclick: () => ctx.local.tryDefault(),
    });
    const progress = el('div', { class: 'progress', testid: 'first-run-progress', hidden: !busy });
    if (busy) localView.renderProgress(progress, state.local === 'loading' ? { phase: 'check', loaded: 0, total: 0 } : (state.localProgress ?? { loaded: 0, total: 0 }), 'Downloading SmolLM2 135M Instruct');
    localView.bind(progress, { cancel: () => ctx.local.cancel() });
    const failed = state.usesLocal && state.local === 'failed' ? el('p', { class: 'error', testid: 'first-run-status', role: 'status', text: state.localError }) : null;
    return el('div', { class: 'empty first-run', testid: 'empty-state' },
      el('p', { text: 'Nothing can answer yet. Choose how:' }),
      el('div', { class: 'choices' },
        tryLocal,
        button('connect-provider', 'Connect a provider', 'connect-provider', { onclick: () => ctx.settings.open('provider') })),
      el('p', { class: 'note', testid: 'small-model-note', text: unavailable ?? SMALL_MODEL_NOTE }),
      progress, failed,
      ctx.workspace.proxy() || settings.proxy_url ? null : el('p', { class: 'hint', testid: 'pair-hint',
        text: 'To let it read and change your files: run `palaver serve` in your project and open the address it prints (or paste that address in Settings → Workspace).' }),
      el('p', { text: 'Chats from another browser or the extension? Each keeps its own storage: import their export.' }),
      importButton);
  }

  // The offer follows the model's download and the settings as they change; progress alone
  // updates the bar in place (Cancel stays under the pointer).
  let last = '';
  ctx.store.watch((state) => {
    if (ctx.chat?.id) return;
    const key = `${state.provider}/${state.usesLocal}/${state.local}`;
    const bar = $('transcript').querySelector('[data-testid=first-run-progress]');
    if (key === last && bar && state.local === 'downloading') {
      localView.renderProgress(bar, state.localProgress ?? { loaded: 0, total: 0 }, 'Downloading SmolLM2 135M Instruct');
      return;
    }
    last = key;
    show();
  });

  ctx.empty = { show };
}
