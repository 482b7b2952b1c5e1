// What makes the chat an agent, fetched by the page and handed to the engine: the workspace tools
// of `palaver serve` (`GET /api/tools`), the workspace context for the system prompt (instruction
// files and the flat file list, read through the same tools), and the provider's model list with
// each model's context window. The engine assembles the prompt (`Engine.assembleSystemPrompt`)
// and builds every request; this module only asks servers.

/** `{url, token}` of the paired proxy, or null. */
export function proxyOf(settings) {
  return settings.proxy_url ? { url: settings.proxy_url, token: settings.proxy_token ?? '' } : null;
}

async function proxyFetch(proxy, path, init = {}) {
  const response = await fetch(`${proxy.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${proxy.token}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
  });
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { content: text, is_error: true };
  }
  return { ok: response.ok, status: response.status, body };
}

/**
 * Whether the paired workspace keeps chats (`.palaver/chats`, issue 21): a first visit opens the
 * engine at once to offer them. Unreachable or refusing: no.
 */
export async function workspaceHasChats(proxy) {
  try {
    const { ok, body } = await proxyFetch(proxy, '/api/chats');
    return ok && body.enabled === true && Array.isArray(body.chats) && body.chats.length > 0;
  } catch {
    return false;
  }
}

/** One workspace tool call: `{content, data?, is_error}`. */
export async function proxyTool(proxy, name, args) {
  const { ok, body } = await proxyFetch(proxy, `/api/tools/${name}`, { method: 'POST', body: JSON.stringify(args) });
  return { ...body, is_error: !ok || Boolean(body.is_error) };
}

/**
 * The workspace tools to offer the model: `{tools, problem}`. With no paired proxy, or one that
 * does not answer, there are none, and `problem` says why in one sentence with the fix.
 */
export async function workspaceTools(proxy) {
  if (!proxy) {
    return { tools: [], problem: 'The model has no workspace tools: run `palaver serve` in your project and open the address it prints (or paste it in Settings) to pair this page.' };
  }
  try {
    const { ok, status, body } = await proxyFetch(proxy, '/api/tools');
    if (status === 401) return { tools: [], problem: 'The workspace tools refused this page: the pairing token is wrong or from an earlier run of `palaver serve`. Open the address it prints again.' };
    if (!ok || !Array.isArray(body)) return { tools: [], problem: `The workspace tools answered HTTP ${status}; the model gets none this time.` };
    return { tools: body, problem: null };
  } catch {
    return { tools: [], problem: `palaver serve does not answer at ${proxy.url}: start it again and reload this page; until then the model has no workspace tools.` };
  }
}

/**
 * The workspace context for the system prompt: the flat file list, the instruction files found in
 * it (the README only when there is none), and the date. Files are read only when listed, so a
 * workspace without them costs no failed requests.
 */
export async function workspaceContext(proxy, instructionFiles) {
  const context = { instructions: [], files: [], files_truncated: false, date: new Date().toISOString().slice(0, 10) };
  if (!proxy) return context;
  const tree = await proxyTool(proxy, 'file_tree', { flat: true }).catch(() => null);
  if (!tree || tree.is_error) return context;
  context.files = tree.content.split('\n').filter((line) => line && !line.startsWith('['));
  context.files_truncated = Boolean(tree.data?.truncated);
  const listed = new Set(context.files);
  const readme = instructionFiles.at(-1);
  let wanted = instructionFiles.slice(0, -1).filter((path) => listed.has(path));
  if (!wanted.length && listed.has(readme)) wanted = [readme];
  const read = async (path) => {
    const reply = await proxyTool(proxy, 'read_file', { path }).catch(() => null);
    return reply && !reply.is_error && reply.content.trim() ? { path, text: reply.content } : null;
  };
  context.instructions = (await Promise.all(wanted.map(read))).filter(Boolean);
  return context;
}

// --- models ---

/** Context windows of well-known models, for providers whose list does not say (prefix match). */
const KNOWN_WINDOWS = [
  ['gpt-4.1', 1_047_576], ['gpt-4o', 128_000], ['gpt-4-turbo', 128_000], ['gpt-4', 8_192], ['gpt-3.5-turbo', 16_385],
  ['gpt-5', 400_000], ['o1', 200_000], ['o3', 200_000], ['o4-mini', 200_000],
  ['claude-', 200_000],
  ['gemini-1.5-pro', 2_097_152], ['gemini-1.5-flash', 1_048_576], ['gemini-2', 1_048_576], ['gemini-', 1_048_576],
  ['llama3.1', 131_072], ['llama3.2', 131_072], ['llama3', 8_192], ['qwen2.5', 32_768], ['mistral', 32_768],
  ['smollm2', 8_192],
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
 * The provider's models: `[{id, n_ctx?}]`, sorted by id. Throws an Error whose message is one
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
  if (kind === 'openai-chat' && models.some((m) => !m.n_ctx)) {
    const served = await llamaCppWindow(base);
    if (served) for (const model of models) model.n_ctx ??= served;
  }
  for (const model of models) model.n_ctx ??= knownWindow(model.id);
  return models.sort((a, b) => a.id.localeCompare(b.id));
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
      .map((m) => ({ id: String(m.name ?? '').replace(/^models\//, ''), n_ctx: positive(m.inputTokenLimit) }))
      .filter((m) => m.id);
  }
  const list = Array.isArray(body?.data) ? body.data : Array.isArray(body?.models) ? body.models : null;
  if (!list) return null;
  return list
    .map((m) => ({
      id: String(m.id ?? m.name ?? m.model ?? ''),
      // OpenRouter: context_length; vLLM: max_model_len; llama.cpp: meta.n_ctx_train (a ceiling).
      n_ctx: positive(m.context_length) ?? positive(m.max_model_len) ?? positive(m.max_context_length) ?? positive(m.meta?.n_ctx),
    }))
    .filter((m) => m.id);
}

/** llama.cpp's `/props` says the window the server was started with (`n_ctx`). */
async function llamaCppWindow(base) {
  try {
    const root = base.replace(/\/v1$/, '');
    const response = await fetch(`${root}/props`);
    if (!response.ok) return undefined;
    const props = await response.json();
    return positive(props?.default_generation_settings?.n_ctx) ?? positive(props?.n_ctx);
  } catch {
    return undefined;
  }
}

function positive(value) {
  const n = Number(value);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : undefined;
}
