// Settings → Model in this browser: how it runs (threads), the models stored in this browser with
// their sizes (Use, Delete), and ways to get one — the default model, a .gguf from disk, or a URL —
// each with its download's progress and Cancel. "Use" fills the provider's model field (Save
// makes it the provider).
import * as localView from '../views/local-model.js';
import { DEFAULT_MODEL, SMALL_MODEL_NOTE } from '../local/catalog.js';
import { el, button } from '../view.js';

const q = (view, id) => view.querySelector(`[data-testid=${id}]`);
const modelField = () => document.querySelector('[data-testid=provider-model]');

export default {
  id: 'local',
  label: 'Model in this browser',
  build(ctx) {
    const view = el('section', { class: 'settings-section', testid: 'local-model' },
      el('p', { class: 'notice', testid: 'local-note', text: SMALL_MODEL_NOTE }),
      el('p', { testid: 'local-threads' }),
      el('div', { testid: 'local-store' },
        el('ul', { testid: 'local-models', 'aria-label': 'Models stored in this browser' }),
        el('p', { class: 'inline-actions' },
          button('local-download-default', 'Download SmolLM2 135M (98 MB)', 'local-download-default', { onclick: () => store(view, ctx, `Downloading ${DEFAULT_MODEL.label}`, (options) => {
            const source = ctx.local.defaultSource();
            if (!source) throw new Error('In the extension, pick the .gguf file from disk, or pair palaver serve, which serves the default model.');
            return ctx.local.model().download(source.url, DEFAULT_MODEL.file, { size: DEFAULT_MODEL.size, sha256: DEFAULT_MODEL.sha256 }, { ...options, headers: source.headers });
          }) }),
          button('local-pick', 'Pick a .gguf file…', 'local-pick', { onclick: () => q(view, 'local-file').click() }),
          el('input', { type: 'file', testid: 'local-file', accept: '.gguf', hidden: true })),
        el('label', {}, 'Or download a GGUF from its URL ', el('input', { testid: 'local-url', type: 'url', placeholder: 'https://…/model.gguf' })),
        el('p', { class: 'inline-actions' }, button('local-download-url', 'Download from the URL', 'local-download-url', { onclick: () => fromUrl(view, ctx) }))),
      el('div', { testid: 'local-progress', class: 'progress', hidden: true }),
      el('p', { testid: 'local-status', role: 'status' }));
    q(view, 'local-file').addEventListener('change', () => {
      const file = q(view, 'local-file').files[0];
      q(view, 'local-file').value = '';
      if (file) store(view, ctx, `Storing ${file.name}`, (options) => ctx.local.model().importFile(file, options));
    });
    localView.bind(view, {
      use: (id) => {
        modelField().value = id;
        document.querySelector('[data-testid=provider-kind]').value = 'local';
        document.querySelector('[data-testid=provider-kind]').dispatchEvent(new Event('change'));
        modelField().value = id;
        this.refresh(view, ctx);
      },
      remove: async (id) => {
        try {
          await ctx.local.model().remove(id);
          if (modelField().value === id) modelField().value = '';
          say(view, `${id} was deleted from this browser.`);
        } catch (error) {
          say(view, error.message, true);
        }
        this.refresh(view, ctx);
      },
      cancel: () => view.download?.abort(),
    });
    view.refreshList = () => this.refresh(view, ctx);
    return view;
  },
  fill(_settings, view, ctx) {
    say(view, '');
    this.refresh(view, ctx);
  },
  collect: (settings) => settings,
  /** How it runs, and the stored models with their sizes. */
  async refresh(view, ctx) {
    const unavailable = ctx.local.unavailable();
    q(view, 'local-store').hidden = Boolean(unavailable);
    if (unavailable) {
      q(view, 'local-threads').textContent = unavailable;
      return;
    }
    try {
      const [info, models] = await Promise.all([ctx.local.model().info(), ctx.local.model().list()]);
      q(view, 'local-threads').textContent = localView.threadsText(info);
      localView.renderModels(q(view, 'local-models'), models, modelField().value.trim());
      q(view, 'local-download-default').hidden = models.some((m) => m.id === DEFAULT_MODEL.file);
    } catch (error) {
      say(view, error.message, true);
    }
  },
};

function say(view, text, error = false) {
  q(view, 'local-status').textContent = text;
  q(view, 'local-status').className = error ? 'error' : '';
}

/** A download or import: its progress here; the model it stores becomes the chosen one. */
async function store(view, ctx, label, start) {
  say(view, '');
  const progress = q(view, 'local-progress');
  view.download?.abort();
  const controller = new AbortController();
  view.download = controller;
  try {
    const stored = await start({ signal: controller.signal, n_ctx: ctx.local.windowOf(), onProgress: (p) => localView.renderProgress(progress, p, label) });
    modelField().value = stored.id;
    ctx.local.cacheRuntime();
    say(view, `${stored.id} is stored in this browser. Choose it as the provider's model (Model in this browser) and Save to use it.`);
  } catch (error) {
    say(view, error.message, true);
  } finally {
    progress.hidden = true;
    if (view.download === controller) view.download = null;
  }
  await view.refreshList();
}

function fromUrl(view, ctx) {
  const text = q(view, 'local-url').value.trim();
  let url;
  try {
    url = new URL(text);
  } catch {
    say(view, 'Give the full address of a .gguf file (https://…/model.gguf).', true);
    return;
  }
  const name = decodeURIComponent(url.pathname.split('/').pop() || 'model.gguf');
  store(view, ctx, `Downloading ${name}`, (options) => ctx.local.model().download(url.href, name, {}, options));
}
