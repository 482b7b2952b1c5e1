// What a provider says of its models, asked by the page (issue 35): the model list, and for the
// chosen model its context window, the most it may write in one answer and what it reads (text,
// images). Each server says it its own way — OpenRouter's `context_length`, `top_provider` and
// `architecture.input_modalities`; vLLM's `max_model_len`; Gemini's `inputTokenLimit` and
// `outputTokenLimit`; llama.cpp's `/props` (`n_ctx`, `n_predict`, `modalities`); Ollama's
// `/api/show`; LM Studio's `/api/v0/models` — and a table of well-known models is used only when
// the server says nothing. This module only asks; `page/limits.js` decides when and keeps it.

/** Context windows of well-known models, when the provider does not say (prefix match). */
const KNOWN_WINDOWS = [
  ['gpt-4.1', 1_047_576], ['gpt-4o', 128_000], ['gpt-4-turbo', 128_000], ['gpt-4', 8_192], ['gpt-3.5-turbo', 16_385],
  ['gpt-5', 400_000], ['o1', 200_000], ['o3', 200_000], ['o4-mini', 200_000],
  ['claude-', 200_000],
  ['gemini-1.5-pro', 2_097_152], ['gemini-1.5-flash', 1_048_576], ['gemini-2', 1_048_576], ['gemini-', 1_048_576],
  ['llama3.1', 131_072], ['llama3.2', 131_072], ['llama3', 8_192], ['qwen2.5', 32_768], ['mistral', 32_768],
];

/** The window of a well-known model by name, or undefined. */
export function knownWindow(model) {
  const name = String(model ?? '').toLowerCase().replace(/^models\//, '').split('/').pop();
  return KNOWN_WINDOWS.find(([prefix]) => name.startsWith(prefix))?.[1];
}

function authHeaders(kind, key) {
  if (!key) return {};
  if (kind === 'anthropic') return { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'anthropic-dangerous-direct-browser-access': 'true' };
  if (kind === 'gemini') return { 'x-goog-api-key': key };
  return { authorization: `Bearer ${key}` };
}

/** A one-sentence reason for a failed request to a provider, with the fix. */
function failureSentence(status, url) {
  if (status === 401 || status === 403) return `The provider refused the key (HTTP ${status}): check it in Settings.`;
  if (status === 404) return `There is no model list at ${url} (HTTP 404): check the base URL (it usually ends in /v1); you can still type a model name.`;
  return `The model list failed with HTTP ${status}; you can still type a model name.`;
}

/**
 * The provider's models: `[{id, n_ctx?, max_output?, modalities?}]`, sorted by id, with what the
 * server itself says (its `/props` for a llama.cpp server). Throws an Error whose message is one
 * sentence saying what is wrong (bad key, wrong URL, server down or refusing this page).
 */
export async function listModels(kind, baseUrl, key) {
  const base = String(baseUrl ?? '').replace(/\/+$/, '');
  if (!/^https?:\/\//.test(base)) throw new Error('The base URL must start with http:// or https://.');
  const url = `${base}/models`;
  let response;
  try {
    response = await fetch(url, { headers: authHeaders(kind, key) });
  } catch {
    throw new Error(await unreachableSentence(base, url));
  }
  if (!response.ok) throw new Error(failureSentence(response.status, url));
  let body;
  try {
    body = await response.json();
  } catch {
    throw new Error(`${url} did not answer with a model list (not JSON): check the base URL.`);
  }
  const models = parseModels(kind, body);
  if (!models) throw new Error(`${url} did not answer with a model list: check the base URL.`);
  if (kind === 'openai-chat') {
    // A llama.cpp server runs one model with the window it was started with: its /props says.
    const props = await llamaCppProps(base);
    if (props) for (const model of models) Object.assign(model, { n_ctx: props.n_ctx ?? model.n_ctx, max_output: props.max_output ?? model.max_output, modalities: props.modalities ?? model.modalities, server: 'llama.cpp' });
  }
  return models.sort((a, b) => a.id.localeCompare(b.id));
}

/**
 * What the provider says of `model`: `{n_ctx?, max_output_tokens?, input_modalities?, server?, from}`
 * (`from`: `provider`, or `table` when only the table knew the window; `server: 'llama.cpp'` when
 * its `/props` answered). Never throws: a provider
 * that cannot be asked gives the table's window, or nothing.
 */
export async function modelInfo(kind, baseUrl, key, model) {
  let listed = null;
  if (kind !== 'local') {
    const models = await listModels(kind, baseUrl, key).catch(() => []);
    listed = models.find((m) => m.id === model || m.id.endsWith(`/${model}`)) ?? (models.length === 1 && models[0].server ? models[0] : null);
    // Ollama (its list says `owned_by: library`) tells a model's window only through /api/show.
    if (!listed?.n_ctx && listed?.ollama) listed = { ...listed, ...(await ollamaShow(baseUrl, model)) };
  }
  if (listed?.n_ctx) {
    return { n_ctx: listed.n_ctx, max_output_tokens: listed.max_output, input_modalities: listed.modalities, server: listed.server, from: 'provider' };
  }
  const table = knownWindow(model);
  return { n_ctx: table, max_output_tokens: listed?.max_output, input_modalities: listed?.modalities, from: table ? 'table' : 'none' };
}

/**
 * Why a request could not be read: the same TypeError means "nothing answers" or "it answers but
 * does not allow this page (CORS)". A no-cors request (no headers, an opaque answer the page cannot
 * read) tells them apart: it goes through only when something answers.
 */
async function unreachableSentence(base, url) {
  const answers = await fetch(url, { mode: 'no-cors', credentials: 'omit' }).then(() => true, () => false);
  return answers
    ? `${base} answers, but refuses requests from this page (CORS): allow the origin ${location.origin} on that server (for Ollama, OLLAMA_ORIGINS), or reach it through a provider that allows browsers.`
    : `Nothing answered at ${base}: check that the server runs and that the address is right.`;
}

/** The models of one list body, or null when it is not a model list. */
function parseModels(kind, body) {
  if (kind === 'gemini') {
    if (!Array.isArray(body?.models)) return null;
    return body.models
      .filter((m) => !m.supportedGenerationMethods || m.supportedGenerationMethods.includes('generateContent'))
      .map((m) => ({ id: String(m.name ?? '').replace(/^models\//, ''), n_ctx: positive(m.inputTokenLimit), max_output: positive(m.outputTokenLimit), modalities: ['text', 'image'] }))
      .filter((m) => m.id);
  }
  const list = Array.isArray(body?.data) ? body.data : Array.isArray(body?.models) ? body.models : null;
  if (!list) return null;
  return list
    .map((m) => ({
      id: String(m.id ?? m.name ?? m.model ?? ''),
      // OpenRouter: context_length; vLLM: max_model_len; LM Studio: max_context_length.
      n_ctx: positive(m.context_length) ?? positive(m.max_model_len) ?? positive(m.max_context_length) ?? positive(m.top_provider?.context_length),
      max_output: positive(m.top_provider?.max_completion_tokens) ?? positive(m.max_completion_tokens) ?? positive(m.max_output_tokens),
      modalities: modalitiesOf(m),
      ollama: m.owned_by === 'library',
    }))
    .filter((m) => m.id);
}

/** What a listed model reads, where its list says: OpenRouter's architecture, LM Studio's type. */
function modalitiesOf(model) {
  const said = model.architecture?.input_modalities ?? model.input_modalities;
  if (Array.isArray(said)) return said.map(String);
  if (model.type === 'vlm') return ['text', 'image'];
  if (model.type === 'llm') return ['text'];
  return undefined;
}

/**
 * llama.cpp's `/props`: the window the server runs (`n_ctx`), its default answer limit
 * (`n_predict`, -1 for none) and whether it reads images (`modalities.vision`).
 */
async function llamaCppProps(base) {
  try {
    const response = await fetch(`${base.replace(/\/v1$/, '')}/props`);
    if (!response.ok) return null;
    const props = await response.json();
    const settings = props?.default_generation_settings ?? {};
    const n_ctx = positive(settings.n_ctx) ?? positive(props?.n_ctx);
    if (!n_ctx) return null;
    const vision = props?.modalities?.vision;
    return {
      n_ctx,
      max_output: positive(settings.n_predict) ?? positive(settings.params?.n_predict),
      modalities: typeof vision === 'boolean' ? (vision ? ['text', 'image'] : ['text']) : undefined,
    };
  } catch {
    return null;
  }
}

/** Ollama's `/api/show`: the model's context length and whether it has vision. */
async function ollamaShow(baseUrl, model) {
  try {
    const root = String(baseUrl).replace(/\/+$/, '').replace(/\/v1$/, '');
    const response = await fetch(`${root}/api/show`, { method: 'POST', body: JSON.stringify({ model }) });
    if (!response.ok) return {};
    const shown = await response.json();
    const key = Object.keys(shown?.model_info ?? {}).find((k) => k.endsWith('.context_length'));
    const capabilities = Array.isArray(shown?.capabilities) ? shown.capabilities : null;
    return {
      n_ctx: positive(shown?.model_info?.[key]),
      modalities: capabilities ? (capabilities.includes('vision') ? ['text', 'image'] : ['text']) : undefined,
    };
  } catch {
    return {};
  }
}

function positive(value) {
  const n = Number(value);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : undefined;
}
