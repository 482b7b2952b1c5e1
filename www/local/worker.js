// The model worker: everything of the model in the page that is heavy — downloads into OPFS,
// llama.cpp (wllama, itself in nested workers), the token stream — runs here, so the page's main
// thread only renders. The page talks to it through `client.js`; messages are
// `{id, op, …}` in and `{id, type, …}` out (see `client.js` for both lists).
//
// A chat request answers like a fetch of an OpenAI-compatible server: a head (status, and the
// error body for a refusal) then Server-Sent Events text, so the engine decodes it on the same
// path as any OpenAI chat stream.
import * as store from './store.js';
import { ModelError } from './store.js';
import { Runtime, describe } from './runtime.js';

const runtime = new Runtime();
/** Operations under way that a `cancel` can stop: id → AbortController. */
const running = new Map();
/** How often a waiting stream sends an SSE comment, so the engine's stall watchdog sees life. */
const KEEP_ALIVE_MS = 5000;

const post = (message) => self.postMessage(message);

self.onmessage = async ({ data }) => {
  const { id, op } = data ?? {};
  if (op === 'cancel') {
    running.get(data.target)?.abort();
    return;
  }
  const controller = new AbortController();
  running.set(id, controller);
  try {
    if (op === 'chat') {
      await chat(id, data, controller.signal);
      return;
    }
    const value = await operation(data, controller.signal, (progress) => post({ id, type: 'progress', ...progress }));
    post({ id, type: 'result', value });
  } catch (error) {
    post({ id, type: 'error', error: { kind: error?.kind ?? 'failed', message: describe(error) } });
  } finally {
    running.delete(id);
  }
};

async function operation(data, signal, onProgress) {
  switch (data.op) {
    case 'info':
      return runtime.info();
    case 'list':
      return store.list();
    case 'remove':
      if (runtime.loaded?.id === store.modelId(data.model)) await runtime.unload();
      await store.remove(data.model);
      return store.list();
    case 'download':
      return checked(await store.download(data.url, data.model, { expected: data.expected ?? {}, headers: data.headers, signal, onProgress }), data.n_ctx, onProgress);
    case 'import':
      return checked(await store.importFile(data.file, { signal, onProgress }), data.n_ctx, onProgress);
    case 'load':
      return runtime.ensure(data.model, data.n_ctx);
    case 'unload':
      await runtime.unload();
      return null;
    default:
      throw new ModelError('bad_request', `unknown operation ${data.op}`);
  }
}

/**
 * A model just stored is loaded once before it is offered: a truncated or damaged GGUF, or one
 * llama.cpp does not know, is refused now (and removed) rather than at the first message. The
 * load is not wasted: the model stays loaded for that message.
 */
async function checked(stored, n_ctx, onProgress) {
  onProgress({ phase: 'check', loaded: stored.size, total: stored.size });
  try {
    const loaded = await runtime.ensure(stored.id, n_ctx);
    return { ...stored, load_ms: loaded.load_ms };
  } catch (error) {
    await store.remove(stored.id).catch(() => {});
    if (error?.kind !== 'load_failed') throw error;
    throw new ModelError('damaged', `${stored.id} is not a model this page can load (llama.cpp said: ${error.cause ?? describe(error)}). It may be truncated or damaged, or of an architecture llama.cpp does not know; it was not kept.`);
  }
}

/** One chat completion, answered as an HTTP response of an OpenAI-compatible server. */
async function chat(id, { body, n_ctx }, signal) {
  let iterator;
  try {
    await runtime.ensure(body?.model, n_ctx);
    iterator = (await runtime.stream(body, signal))[Symbol.asyncIterator]();
  } catch (error) {
    if (!signal.aborted) post({ id, type: 'head', ...refusal(error) });
    post({ id, type: 'end' });
    return;
  }
  post({ id, type: 'head', status: 200 });
  const send = (text) => post({ id, type: 'data', text });
  const keepAlive = setInterval(() => send(': the model is working\n\n'), KEEP_ALIVE_MS);
  try {
    // Read to the end even after an abort: wllama then rejects the chunk being awaited, and a
    // rejection nobody awaits would surface as an uncaught error.
    for (;;) {
      const { done, value } = await iterator.next();
      if (done) break;
      if (!signal.aborted) send(`data: ${JSON.stringify(value)}\n\n`);
    }
    if (!signal.aborted) send('data: [DONE]\n\n');
  } catch (error) {
    if (!signal.aborted) send(`data: ${JSON.stringify({ error: errorBody(error) })}\n\n`);
  } finally {
    clearInterval(keepAlive);
    post({ id, type: 'end' });
  }
}

/**
 * A refusal as the engine reads a provider's: a status and an error body. A model that is not
 * stored is `model_not_found`; a prompt over the window is llama.cpp's own
 * `exceed_context_size_error` with `n_ctx` (the engine learns the window and cuts the history);
 * a model that cannot load is not retried (the same file fails the same way).
 */
function refusal(error) {
  const body = { error: errorBody(error) };
  const type = body.error.type;
  if (type === 'model_not_found') return { status: 404, body };
  if (type === 'exceed_context_size_error') return { status: 400, body };
  if (type === 'invalid_request_error') return { status: 400, body };
  return { status: 500, headers: { 'x-should-retry': 'false' }, body };
}

function errorBody(error) {
  const message = describe(error);
  const n_ctx = runtime.loaded?.n_ctx;
  if (/context size|context length|kv cache|context window/i.test(message)) {
    return {
      type: 'exceed_context_size_error',
      message: `The chat no longer fits the model's window: ${message} (the context length is ${n_ctx ?? 'unknown'} tokens).`,
      ...(n_ctx ? { n_ctx } : {}),
    };
  }
  const kind = error?.kind;
  if (kind === 'model_not_found') return { type: 'model_not_found', message };
  if (kind === 'images_unsupported') return { type: 'invalid_request_error', message };
  if (kind === 'load_failed' || kind === 'unsupported' || kind === 'too_large') return { type: 'model_load_failed', message };
  return { type: 'server_error', message: `The model in the page failed: ${message}` };
}
