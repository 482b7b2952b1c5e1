// Settings: the provider, `palaver serve`'s address and the tool rules live in localStorage; API keys never do
// (they are `page/secrets.js`'s: the tab's memory, or the vault when "remember" is ticked).

const SETTINGS_KEY = 'palaver.settings';
export const PROVIDER_KINDS = ['openai-chat', 'anthropic', 'gemini', 'openai-responses', 'local'];
/**
 * The `local` kind (the model in the page) has no server: its requests go to the page's model
 * worker. This stands in for a base URL, and names the target in "What the model sees".
 */
export const LOCAL_BASE_URL = 'local://this-browser';

/**
 * The stored settings: the active provider `kind`, every configured provider's `{base_url, model}`
 * by kind (switching kinds keeps the others), remember_key, proxy_url/proxy_token, tool_policy.
 */
export function loadSettings() {
  let parsed = {};
  try {
    parsed = JSON.parse(localStorage.getItem(SETTINGS_KEY) ?? '{}') ?? {};
  } catch {
    parsed = {};
  }
  if (typeof parsed !== 'object' || Array.isArray(parsed)) parsed = {};
  const kind = PROVIDER_KINDS.includes(parsed.kind) ? parsed.kind : 'openai-chat';
  const providers = typeof parsed.providers === 'object' && parsed.providers ? { ...parsed.providers } : {};
  // The first shape kept one provider's base_url/model at the top level.
  if (parsed.base_url && !providers[kind]) providers[kind] = { base_url: parsed.base_url, model: parsed.model ?? '' };
  const { base_url: _b, model: _m, ...rest } = parsed;
  return { ...rest, kind, providers };
}

/** The model settings a provider may carry besides its URL and model (numbers or a string). */
export const MODEL_SETTINGS = ['n_ctx', 'max_tokens', 'temperature', 'reasoning_effort', 'thinking_budget', 'tool_use', 'edit_blocks'];

/** The active provider: `{kind, base_url, model, …model settings}` ('' when not configured). */
export function activeProvider(settings) {
  const config = settings.providers?.[settings.kind] ?? {};
  return { ...config, kind: settings.kind, base_url: config.base_url ?? '', model: config.model ?? '' };
}

/** `settings` with `kind` active and configured as given (`extra`: its model settings). */
export function withProvider(settings, kind, baseUrl, model, extra = null) {
  const current = settings.providers?.[kind] ?? {};
  const kept = extra ?? Object.fromEntries(MODEL_SETTINGS.filter((k) => k in current).map((k) => [k, current[k]]));
  const base_url = kind === 'local' ? LOCAL_BASE_URL : baseUrl;
  // What the provider said of the model stays while the model and its server do.
  const said = current.said && current.base_url === base_url && current.model === model ? { said: current.said } : {};
  return { ...settings, kind, providers: { ...settings.providers, [kind]: { base_url, model, ...kept, ...said } } };
}

/** Whether anything can answer: a provider with a base URL, or a model chosen for the page. */
export function isConfigured(settings) {
  const provider = activeProvider(settings);
  return provider.kind === 'local' ? Boolean(provider.model) : Boolean(provider.base_url);
}

/** A provider's model settings as the engine takes them: valid numbers and efforts only. */
export function modelSettings(config) {
  const out = {};
  for (const key of ['n_ctx', 'max_tokens', 'thinking_budget']) {
    const n = Number(config?.[key]);
    if (config?.[key] !== '' && config?.[key] != null && Number.isInteger(n) && n > 0) out[key] = n;
  }
  const t = Number(config?.temperature);
  if (config?.temperature !== '' && config?.temperature != null && Number.isFinite(t) && t >= 0 && t <= 2) out.temperature = t;
  if (['low', 'medium', 'high'].includes(config?.reasoning_effort)) out.reasoning_effort = config.reasoning_effort;
  if (typeof config?.tool_use === 'boolean') out.tool_use = config.tool_use;
  if (config?.edit_blocks === true) out.edit_blocks = true;
  return out;
}

/**
 * What the provider said of the configured model (`page/limits.js` keeps it under `said`), as the
 * engine takes it: the window (unless the user set one), the model's own answer limit, what it
 * reads, and — for a llama.cpp server — that it can say how far it has read a prompt.
 */
export function saidSettings(config) {
  const said = config?.said;
  if (!said || said.model !== config.model) return {};
  const out = {};
  if (said.n_ctx > 0 && !(Number(config.n_ctx) > 0)) out.n_ctx = said.n_ctx;
  if (said.max_output_tokens > 0) out.max_output_tokens = said.max_output_tokens;
  if (Array.isArray(said.input_modalities)) out.input_modalities = said.input_modalities;
  if (said.server === 'llama.cpp') out.return_progress = true;
  return out;
}

export function saveSettings(settings) {
  const { key: _never, ...kept } = settings; // a key must not reach localStorage by accident
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(kept));
}

/**
 * The user's tool rules for the engine (`EngineConfig.tool_rules`): every tool's rule, the
 * engine's default (`defaults`, from `Engine.defaultToolRules()`) where the user chose none.
 */
export function toolRules(settings, defaults) {
  const policy = {};
  for (const [tool, rule] of Object.entries(defaults)) policy[tool] = settings.tool_policy?.[tool] ?? rule;
  return policy;
}

/** `http://127.0.0.1:N/#token=T` as printed by `palaver serve` → {url, token}; null when not a URL. */
export function parseProxyUrl(text) {
  if (!text) return null;
  try {
    const url = new URL(text.trim());
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
    return { url: url.origin, token: new URLSearchParams(url.hash.slice(1)).get('token') ?? '' };
  } catch {
    return null;
  }
}

/** The origin a key is bound to: where requests with it go ('' when not a URL). */
export function originOf(baseUrl) {
  try {
    return new URL(baseUrl).origin;
  } catch {
    return '';
  }
}

/**
 * Reads `#provider=KIND&base_url=URL&model=M` and `#token=T` from the address, removes the
 * fragment (the token must not stay in the address bar or history) and returns what it proposes.
 * A `key` in the fragment is ignored: keys are typed, never carried in links. The provider part
 * is only a proposal for the settings form (SECURITY E1): any site can link here.
 */
export function takeFragment(location, history) {
  const params = new URLSearchParams(location.hash.slice(1));
  if (![...params.keys()].length) return {};
  history.replaceState(null, '', location.pathname + location.search);
  const provider = {};
  const kind = params.get('provider');
  if (PROVIDER_KINDS.includes(kind)) provider.kind = kind;
  if (params.get('base_url')) provider.base_url = params.get('base_url');
  if (params.get('model')) provider.model = params.get('model');
  return { provider, token: params.get('token') ?? null };
}

/**
 * The fallback list of Settings (`kind model` per line) as thread params' `fallback_models`;
 * lines whose kind is not one Palaver knows are left out.
 */
export function parseFallbackModels(text) {
  return String(text ?? '').split('\n').map((line) => line.trim().split(/\s+/)).filter(([kind]) => PROVIDER_KINDS.includes(kind))
    .map(([provider, ...model]) => ({ provider, model: model.join(' ') }));
}

export const formatFallbackModels = (list) => (list ?? []).map((m) => `${m.provider} ${m.model}`.trim()).join('\n');
