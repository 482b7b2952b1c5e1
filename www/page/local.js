// The model in this browser (provider kind `local`) as the page's lifecycle knows it: absent,
// downloading (with progress), loading, ready or failed. "Try a small model" makes it the provider
// at once — a message typed meanwhile is held, shown with its progress, and sent when the model
// is ready (issue 34) — then downloads the default model (sha256 checked) and loads it once.
import { LocalModel } from '../local/client.js';
import { DEFAULT_MODEL, DEFAULT_LOCAL_N_CTX } from '../local/catalog.js';
import * as settingsStore from '../settings.js';
import { scriptUrl } from './dom.js';

export function install(ctx) {
  let client = null;
  let download = null;

  const model = () => (client ??= new LocalModel(scriptUrl('local/worker.js')));

  /** The window the page's model is loaded with: the user's, else the default. */
  function windowOf() {
    const local = settingsStore.loadSettings().providers?.local ?? {};
    return settingsStore.modelSettings(local).n_ctx ?? DEFAULT_LOCAL_N_CTX;
  }

  /**
   * Why the model in the page cannot run here, or null: Chrome's extension pages may not start
   * the `blob:` workers llama.cpp's wasm build starts.
   */
  function unavailable() {
    if (location.protocol !== 'chrome-extension:') return null;
    return 'The model in the page cannot run inside the extension: Chrome\'s rules for extensions forbid the workers llama.cpp starts. Use it in the app palaver serve (or any static host) serves, or connect a provider here.';
  }

  /** Where the default model is served (`palaver serve`'s /models/ wants its token), or null. */
  function defaultSource() {
    const proxy = ctx.workspace.proxy();
    if (location.protocol === 'chrome-extension:') {
      return proxy ? { url: `${proxy.url}/models/${DEFAULT_MODEL.file}`, headers: { authorization: `Bearer ${proxy.token}` } } : null;
    }
    const url = new URL(DEFAULT_MODEL.path, location.href);
    const sameServer = proxy && new URL(proxy.url).origin === url.origin;
    return { url: url.href, headers: sameServer ? { authorization: `Bearer ${proxy.token}` } : {} };
  }

  /** Runs one download at a time, reporting its progress to the page's state (`total`: its size, when known). */
  async function run(start, total = 0) {
    download?.abort();
    const controller = new AbortController();
    download = controller;
    ctx.store.dispatch({ type: 'local_download', progress: { loaded: 0, total } });
    try {
      return await start({
        signal: controller.signal,
        n_ctx: windowOf(),
        onProgress: (progress) => ctx.store.dispatch(progress.phase === 'check' ? { type: 'local_loading' } : { type: 'local_download', progress }),
      });
    } finally {
      if (download === controller) download = null;
    }
  }

  /** The default model's id once it is stored, downloading it (sha256 checked) when it is not. */
  async function fetchDefault() {
    if ((await model().list()).some((m) => m.id === DEFAULT_MODEL.file)) return DEFAULT_MODEL.file;
    const source = defaultSource();
    if (!source) throw new Error('In the extension, pick the .gguf file from disk (Settings → Model in this browser), or pair palaver serve, which serves the default model.');
    const expected = { size: DEFAULT_MODEL.size, sha256: DEFAULT_MODEL.sha256 };
    const stored = await run((options) => model().download(source.url, DEFAULT_MODEL.file, expected, { ...options, headers: source.headers }), DEFAULT_MODEL.size);
    return stored.id;
  }

  /** "Try a small model in this browser": the provider at once, then the download and the load. */
  async function tryDefault() {
    const settings = settingsStore.loadSettings();
    const current = settings.providers?.local ?? {};
    const kept = Object.fromEntries(settingsStore.MODEL_SETTINGS.filter((k) => k in current).map((k) => [k, current[k]]));
    settingsStore.saveSettings(settingsStore.withProvider(settings, 'local', '', DEFAULT_MODEL.file, { n_ctx: DEFAULT_MODEL.n_ctx, max_tokens: DEFAULT_MODEL.max_tokens, ...kept }));
    ctx.store.dispatch({ type: 'local_download', progress: { loaded: 0, total: DEFAULT_MODEL.size } });
    await ctx.engine.configure();
    ctx.engine.ensure().catch(() => {});
    try {
      await fetchDefault();
      const waiting = await load();
      cacheRuntime();
      // A message written while it downloaded or loaded goes by itself: then nothing is asked for.
      ctx.say(`${DEFAULT_MODEL.label} is ready: it runs in this browser, offline too.${waiting ? '' : ' Write below to ask it something.'}`);
    } catch (error) {
      ctx.store.dispatch({ type: 'local_failed', error: error.message });
    }
  }

  /** Loads the chosen model so the first answer does not wait for it; true when a message was waiting for it. */
  async function load() {
    const chosen = settingsStore.activeProvider(settingsStore.loadSettings()).model;
    ctx.store.dispatch({ type: 'local_loading' });
    await model().call('load', { model: chosen, n_ctx: windowOf() });
    const waiting = Boolean(ctx.store.state.held);
    ctx.store.dispatch({ type: 'local_ready' });
    return waiting;
  }

  /** At start, with the model in the page chosen: ready when it is stored (loaded in the background). */
  async function check() {
    const settings = settingsStore.loadSettings();
    const chosen = settingsStore.activeProvider(settings);
    if (chosen.kind !== 'local' || !chosen.model) return;
    const why = unavailable();
    if (why) return ctx.store.dispatch({ type: 'local_failed', error: why });
    try {
      const stored = (await model().list()).some((m) => m.id === chosen.model);
      if (!stored) return ctx.store.dispatch({ type: 'local_failed', error: `${chosen.model} is not stored in this browser (download it again in Settings → Model in this browser)` });
      await load();
    } catch (error) {
      ctx.store.dispatch({ type: 'local_failed', error: error.message });
    }
    return undefined;
  }

  /**
   * Asks the offline cache to keep llama.cpp's files (loaded only on use), so the model in the page
   * answers offline too.
   */
  async function cacheRuntime() {
    const registration = await navigator.serviceWorker?.getRegistration?.().catch(() => null);
    if (!registration) return;
    const worker = registration.active ?? await Promise.race([
      navigator.serviceWorker.ready.then((r) => r.active),
      new Promise((resolve) => setTimeout(() => resolve(null), 30_000)),
    ]);
    worker?.postMessage({ type: 'cache-runtime' });
  }

  ctx.local = {
    model,
    windowOf,
    unavailable,
    defaultSource,
    run,
    tryDefault,
    check,
    load,
    cacheRuntime,
    cancel: () => download?.abort(),
    transport: (url, init) => model().transport(url, init, { n_ctx: windowOf() }),
  };
}
