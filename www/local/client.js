// The page's side of the model in the page: a client of the model worker (`worker.js`), started on
// first use. `transport` has `fetch`'s shape, so the engine sends `local` requests through it
// exactly as it sends OpenAI chat requests over the network (`Palaver.setLocalTransport`).
//
// To the worker: {id, op: 'info'|'list'|'remove'|'download'|'import'|'load'|'unload'|'chat', …}
// and {op: 'cancel', target}. From it: {id, type: 'result', value} | {id, type: 'error', error}
// | {id, type: 'progress', loaded, total} | {id, type: 'head', status, headers?, body?}
// | {id, type: 'data', text} | {id, type: 'end'}.

export class LocalModelError extends Error {
  constructor({ kind, message }) {
    super(message);
    this.name = 'LocalModelError';
    this.kind = kind;
  }
}

const encoder = new TextEncoder();

export class LocalModel {
  #worker = null;
  #seq = 0;
  #calls = new Map();

  /** `scriptUrl`: the worker's URL (a TrustedScriptURL where the page's CSP requires one). */
  constructor(scriptUrl) {
    this.scriptUrl = scriptUrl;
  }

  #start() {
    if (this.#worker) return this.#worker;
    this.#worker = new Worker(this.scriptUrl, { type: 'module', name: 'palaver-model' });
    this.#worker.onmessage = ({ data }) => this.#calls.get(data.id)?.(data);
    this.#worker.onerror = (event) => this.#crashed(event.message || 'the model worker failed to start');
    return this.#worker;
  }

  /** The worker died: every call under way fails with the reason; the next call starts a new one. */
  #crashed(reason) {
    this.#worker?.terminate();
    this.#worker = null;
    for (const handler of this.#calls.values()) handler({ type: 'error', error: { kind: 'crashed', message: `The model worker stopped: ${reason}` } });
    this.#calls.clear();
  }

  #send(message, handler) {
    const id = (this.#seq += 1);
    this.#calls.set(id, handler);
    this.#start().postMessage({ ...message, id });
    return id;
  }

  /** One request/answer operation; `onProgress({loaded, total})` for downloads; `signal` cancels. */
  call(op, args = {}, { onProgress, signal } = {}) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(new LocalModelError({ kind: 'cancelled', message: 'Cancelled.' }));
        return;
      }
      const id = this.#send({ op, ...args }, (data) => {
        if (data.type === 'progress') return onProgress?.(data);
        this.#calls.delete(id);
        signal?.removeEventListener('abort', cancel);
        if (data.type === 'error') reject(new LocalModelError(data.error));
        else resolve(data.value);
      });
      const cancel = () => this.#worker?.postMessage({ op: 'cancel', target: id });
      signal?.addEventListener('abort', cancel, { once: true });
    });
  }

  info() {
    return this.call('info');
  }

  /** The stored models: `[{id, size}]`. */
  list() {
    return this.call('list');
  }

  remove(model) {
    return this.call('remove', { model });
  }

  /**
   * Stores the GGUF at `url` as `model` (`expected`: `{size?, sha256?}` it must have), then loads
   * it once with a window of `n_ctx` to prove it works; progress has `phase: 'check'` then.
   */
  download(url, model, expected, { n_ctx, headers, ...options } = {}) {
    return this.call('download', { url: new URL(url, location.href).href, model, expected, n_ctx, headers }, options);
  }

  /** Stores a GGUF the user picked, checked the same way. */
  importFile(file, { n_ctx, ...options } = {}) {
    return this.call('import', { file, n_ctx }, options);
  }

  /**
   * `fetch(url, init)` answered by the model in the page: resolves to a `Response` streaming the
   * OpenAI chat SSE bytes (or a refusal's status and JSON body); `init.signal` stops generation.
   * `options.n_ctx`: the window to load the model with.
   */
  transport(url, init, options = {}) {
    const signal = init?.signal;
    return new Promise((resolve, reject) => {
      const aborted = () => new DOMException('The request was aborted.', 'AbortError');
      if (signal?.aborted) {
        reject(aborted());
        return;
      }
      let body;
      try {
        body = JSON.parse(init.body);
      } catch {
        reject(new TypeError('the request body is not JSON'));
        return;
      }
      let stream = null;
      let opened = false;
      const readable = new ReadableStream({
        start: (controller) => {
          stream = controller;
        },
        cancel: () => stop(),
      });
      const finish = () => {
        this.#calls.delete(id);
        signal?.removeEventListener('abort', onAbort);
      };
      const id = this.#send({ op: 'chat', body, n_ctx: options.n_ctx }, (data) => {
        if (data.type === 'head') {
          opened = true;
          if (data.status === 200) {
            resolve(new Response(readable, { status: 200, headers: { 'content-type': 'text/event-stream' } }));
          } else {
            resolve(new Response(JSON.stringify(data.body ?? {}), { status: data.status, headers: { 'content-type': 'application/json', ...(data.headers ?? {}) } }));
            stream.close();
          }
        } else if (data.type === 'data') {
          stream.enqueue(encoder.encode(data.text));
        } else if (data.type === 'end') {
          finish();
          if (!opened) reject(signal?.aborted ? aborted() : new TypeError('the model worker ended the request without an answer'));
          else closeQuietly(stream);
        } else if (data.type === 'error') {
          finish();
          const error = new TypeError(data.error?.message ?? 'the model worker failed');
          if (!opened) reject(error);
          else stream.error(error);
        }
      });
      const stop = () => this.#worker?.postMessage({ op: 'cancel', target: id });
      const onAbort = () => {
        stop();
        finish();
        if (!opened) reject(aborted());
        else {
          try {
            stream.error(aborted());
          } catch {
            // already closed
          }
        }
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

function closeQuietly(controller) {
  try {
    controller.close();
  } catch {
    // closed or errored already
  }
}
