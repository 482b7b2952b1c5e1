// What the paired `palaver serve` gives the chat: the workspace tools (`GET /api/tools`), one tool
// call, the workspace context for the system prompt (instruction files and the flat file list,
// read through the same tools), whether the workspace keeps chats. The engine assembles the prompt
// (`Engine.assembleSystemPrompt`) and builds every request; this module only asks the server.

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
  return { ok: response.ok, status: response.status, body, headers: response.headers };
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

/** What `palaver serve` recorded of a chat's writes: `{recording, changes}` (none unpaired). */
export async function listChanges(proxy, chatId) {
  if (!proxy) return { recording: false, changes: [] };
  const { ok, body } = await proxyFetch(proxy, `/api/changes?chat=${encodeURIComponent(chatId)}`);
  return ok ? body : { recording: false, changes: [] };
}

/**
 * One side of a recorded change, for its diff: `{text}` or `{binary: true}`; throws with the
 * server's sentence (a content the chat's changes do not name, or one pruned).
 */
export async function changeContent(proxy, chatId, hash) {
  if (!proxy) throw new Error('no workspace is paired: start palaver serve and open the address it prints');
  const { ok, body } = await proxyFetch(proxy, `/api/changes/content?chat=${encodeURIComponent(chatId)}&hash=${encodeURIComponent(hash)}`);
  if (!ok) throw new Error(body.error?.message ?? body.content ?? 'palaver serve does not have it');
  return body;
}

/**
 * Puts back the files chat `chatId` changed from its tool call `callId` on, as `palaver serve`
 * recorded them (issue 39), or only `path`: `{restored: [path], skipped: [{path, reason}]}`.
 * Throws with the server's sentence.
 */
export async function restoreChanges(proxy, chatId, callId, force = false, path = undefined) {
  if (!proxy) throw new Error('no workspace is paired: start palaver serve and open the address it prints');
  const { ok, body } = await proxyFetch(proxy, '/api/changes/restore', { method: 'POST', body: JSON.stringify({ chat_id: chatId, call_id: callId, force, path }) });
  if (!ok) throw new Error(body.content ?? body.error ?? `the server answered ${body}`);
  return body;
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
    const { ok, status, body, headers } = await proxyFetch(proxy, '/api/tools');
    if (status === 401) return { tools: [], problem: 'The workspace tools refused this page: the pairing token is wrong or from an earlier run of `palaver serve`. Open the address it prints again.' };
    if (!ok || !Array.isArray(body)) return { tools: [], problem: `The workspace tools answered HTTP ${status}; the model gets none this time.` };
    // The MCP tools version they were listed at: the events stream's first `hello` of it is no change.
    const version = Number(headers.get('x-palaver-tools-version') ?? NaN);
    return { tools: body, problem: null, version: Number.isFinite(version) ? version : null };
  } catch {
    return { tools: [], problem: `palaver serve does not answer at ${proxy.url}: start it again and reload this page; until then the model has no workspace tools.` };
  }
}

/**
 * The workspace context for the system prompt: the repository map, the flat file list, the instruction files found in
 * it (the README only when there is none), and the date. Files are read only when listed, so a
 * workspace without them costs no failed requests.
 */
/** Tokens of the system prompt's repository map. */
const REPO_MAP_BUDGET = 1024;

/** The system prompt's workspace context; `instructionFiles` (the engine's names, or a promise of
 *  them) are read when the file tree lists them. */
export async function workspaceContext(proxy, instructionFiles) {
  const context = { instructions: [], files: [], files_truncated: false, date: new Date().toISOString().slice(0, 10) };
  if (!proxy) return context;
  // The repository map (seed 002) is drawn meanwhile; a server without `repo_map` leaves it out.
  const map = proxyTool(proxy, 'repo_map', { budget: REPO_MAP_BUDGET }).catch(() => null);
  const tree = await proxyTool(proxy, 'file_tree', { flat: true }).catch(() => null);
  const drawn = await map;
  if (drawn && !drawn.is_error) context.repo_map = drawn.content;
  if (!tree || tree.is_error) return context;
  context.files = tree.content.split('\n').filter((line) => line && !line.startsWith('['));
  context.files_truncated = Boolean(tree.data?.truncated);
  const listed = new Set(context.files);
  const names = await instructionFiles; // the engine's list, which may still be compiling
  const readme = names.at(-1);
  let wanted = names.slice(0, -1).filter((path) => listed.has(path));
  if (!wanted.length && listed.has(readme)) wanted = [readme];
  const read = async (path) => {
    const reply = await proxyTool(proxy, 'read_file', { path }).catch(() => null);
    return reply && !reply.is_error && reply.content.trim() ? { path, text: reply.content } : null;
  };
  context.instructions = (await Promise.all(wanted.map(read))).filter(Boolean);
  return context;
}
