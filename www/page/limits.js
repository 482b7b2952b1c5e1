// What the page learns about the configured model's limits, and when (issue 35): asked of the
// provider when Settings are saved and before the first request (`provider-info.js`: its window,
// its own answer limit, whether it reads images), kept in the provider's settings under `said`,
// and the window a provider reported when it refused a prompt (the engine's `context_usage.learned`)
// kept the same way — exactly what the server said. The engine is then reconfigured.
import * as settingsStore from '../settings.js';
import * as info from '../provider-info.js';
import * as secrets from './secrets.js';
import { count } from '../format.js';

/** How long a first message waits for the provider's answer about its limits. */
const ASK_TIMEOUT_MS = 3000;

export function install(ctx) {
  let asking = null;

  /** Asks the provider about the active model when what it said is missing or for another model. */
  function refresh(force = false) {
    const settings = settingsStore.loadSettings();
    const provider = settingsStore.activeProvider(settings);
    if (!settingsStore.isConfigured(settings) || provider.kind === 'local') return Promise.resolve();
    if (!force && provider.said?.model === provider.model) return asking ?? Promise.resolve();
    const key = secrets.keyFor(provider.kind, provider.base_url);
    asking = info.modelInfo(provider.kind, provider.base_url, key, provider.model)
      .then((said) => keep(provider.kind, provider.model, said))
      .catch(() => {})
      .finally(() => { asking = null; });
    return asking;
  }

  /** Stores what the provider said for `kind`'s `model` (if that is still the configured one). */
  async function keep(kind, model, said) {
    const settings = settingsStore.loadSettings();
    const config = settings.providers?.[kind];
    if (!config || config.model !== model) return;
    config.said = { model, n_ctx: said.n_ctx, max_output_tokens: said.max_output_tokens, input_modalities: said.input_modalities, server: said.server, from: said.from };
    settingsStore.saveSettings(settings);
    await ctx.engine.configure();
  }

  /**
   * A provider refused a prompt and reported its window: kept as what it said, and a window the
   * user set larger is corrected (the server's is the truth), with one sentence.
   */
  async function learned(model, nCtx) {
    if (!model?.provider || !(nCtx > 0)) return;
    const settings = settingsStore.loadSettings();
    const config = settings.providers?.[model.provider];
    if (!config || (config.said?.n_ctx === nCtx && !(Number(config.n_ctx) > nCtx))) return;
    const typed = Number(config.n_ctx);
    config.said = { ...(config.said ?? {}), model: config.model, n_ctx: nCtx, from: 'refusal' };
    if (typed > nCtx) config.n_ctx = nCtx;
    settingsStore.saveSettings(settings);
    // Said as soon as it is kept: the engine's own refusal at the new window may already show.
    ctx.say(typed > nCtx
      ? `The server's window is ${count(nCtx)} tokens, not ${count(typed)}: Settings now say so.`
      : `The server's window is ${count(nCtx)} tokens: kept in Settings.`, false, { leadsError: true });
    await ctx.engine.configure();
  }

  ctx.limits = {
    refresh,
    learned,
    /** Resolves when what the provider says is known (or after a moment, whatever it says). */
    ready: () => Promise.race([refresh(), new Promise((resolve) => setTimeout(resolve, ASK_TIMEOUT_MS))]),
  };
}
