// llama.cpp in the model worker, through npm `@wllama/wllama` (its server code compiled to wasm:
// OpenAI-shaped chat completions, the GGUF's own chat template, tool calls where the template has
// them). One model is loaded at a time; loading another (or the same one with another window)
// unloads the first. Runs only in the model worker (`worker.js`), never on the page's thread.
import * as store from './store.js';
import { ModelError } from './store.js';

const WASM = new URL('../../pkg/vendor/wllama/wllama.wasm', import.meta.url).href;
/**
 * llama.cpp's JS (wllama, ~150 KB) is fetched when a model is first loaded: the worker also answers
 * Settings' `info` and `list`, which a person setting up a hosted provider opens too.
 */
const loadWllama = () => import('../../pkg/vendor/wllama/wllama.js').then((module) => module.Wllama);
/**
 * The prompt is read this many tokens at a time, and its progress is said after each batch (the
 * page shows it): a long prompt takes a minute on two cores; 32 tokens take ~1.2 s there, so the
 * first figure shows after about a second. llama.cpp's default (2048) would say nothing until the
 * whole prompt is read. Measured on 426 tokens: 17–20 s at 2048, 17.2–17.7 s at 64, 17.7–18.3 s
 * at 32 (the first figure after 3.3 s at 64, 1.1–1.4 s at 32).
 */
const PROMPT_BATCH = 32;
/** Sampling is seeded: the same chat and settings give the same answer. */
export const SEED = 42;

/** Threads for llama.cpp: several only when the page is cross-origin isolated (SharedArrayBuffer). */
export function threadCount() {
  if (!self.crossOriginIsolated) return 1;
  const cores = navigator.hardwareConcurrency || 1;
  return cores < 2 ? 1 : Math.max(2, Math.min(8, Math.floor(cores / 2)));
}

/** Whether this browser's WebAssembly can hold a model (64-bit memory; Safari lacks it). */
export function canRun() {
  try {
    new WebAssembly.Memory({ address: 'i64', initial: 1n });
    return true;
  } catch {
    return false;
  }
}

/** llama.cpp's own warnings and errors, the last few kept: a failed load is explained by them. */
class NativeLog {
  lines = [];

  /** Called with the error of a worker wllama started (an `Event`, not a log line). */
  onWorkerError = null;

  keep = (...args) => {
    const event = args.find((a) => typeof Event !== 'undefined' && a instanceof Event);
    if (event) this.onWorkerError?.(event.message || 'a worker of llama.cpp could not start (this context forbids the workers it needs)');
    this.lines.push(args.map((a) => (a === event ? `worker error: ${event.message || 'it could not start'}` : String(a))).join(' '));
    if (this.lines.length > 40) this.lines.shift();
  };

  logger() {
    return { debug() {}, log() {}, warn: this.keep, error: this.keep };
  }

  /** Why the load failed, in llama.cpp's words ("tensor … data is not within the file bounds"). */
  reason() {
    const loading = this.lines.find((line) => /error loading model:/.test(line));
    const cause = loading?.replace(/^.*error loading model:\s*/, '') ?? this.lines.find((line) => /gguf|failed|error/i.test(line));
    return cause?.replace(/^llama_model_loader:\s*/, '').trim() || 'llama.cpp refused the file';
  }
}
const WARN = 3; // wllama's LogLevel.WARN: llama.cpp's warnings and errors reach the logger
/** A load that has not finished by then has hung (a worker that never started): it fails. */
const LOAD_TIMEOUT_MS = 180_000;

/** `work`, unless a worker of wllama dies first or the time runs out: never a hang. */
function guarded(work, log) {
  let timer;
  const failed = new Promise((_, reject) => {
    log.onWorkerError = (message) => reject(new Error(message));
    timer = setTimeout(() => reject(new Error(`the model did not load within ${LOAD_TIMEOUT_MS / 1000} s`)), LOAD_TIMEOUT_MS);
  });
  return Promise.race([work, failed]).finally(() => {
    clearTimeout(timer);
    log.onWorkerError = null;
  });
}

export class Runtime {
  wllama = null;
  /** `{id, n_ctx, threads, size}` of the loaded model. */
  loaded = null;
  #loading = Promise.resolve();

  info() {
    return { loaded: this.loaded, threads: this.loaded?.threads ?? threadCount(), isolated: Boolean(self.crossOriginIsolated), can_run: canRun() };
  }

  /** Loads `id` with a window of `n_ctx` tokens unless it is loaded so already. Calls queue. */
  ensure(id, n_ctx) {
    const next = this.#loading.catch(() => {}).then(() => this.#load(id, n_ctx));
    this.#loading = next;
    return next;
  }

  async #load(id, n_ctx) {
    if (this.loaded?.id === id && this.loaded.n_ctx === n_ctx) return this.loaded;
    await this.unload();
    if (!canRun()) {
      throw new ModelError('unsupported', 'This browser cannot run a model in the page: its WebAssembly lacks 64-bit memory (Chrome, Edge and Firefox have it). Connect a provider instead.');
    }
    const file = await store.open(id);
    store.checkMemory(file.size);
    const threads = threadCount();
    const log = new NativeLog();
    const Wllama = await loadWllama();
    const wllama = new Wllama({ default: WASM }, { logger: log.logger() });
    const started = performance.now();
    let info;
    try {
      await guarded(wllama.loadModel([file], { n_ctx, n_batch: PROMPT_BATCH, n_threads: threads, seed: SEED, jinja: true, log_level: WARN }), log);
      info = wllama.getLoadedContextInfo();
    } catch (error) {
      log.keep(describe(error));
    }
    // wllama resolves even when llama.cpp refused the file; its answer says `success: false`.
    if (!info?.success) {
      await wllama.exit().catch(() => {});
      const cause = log.reason();
      const failure = new ModelError('load_failed', `The model ${id} could not be loaded (llama.cpp: ${cause}). The file may be damaged or incomplete, or not a model llama.cpp knows; delete it and download or pick it again.`);
      failure.cause = cause;
      throw failure;
    }
    this.wllama = wllama;
    this.loaded = { id, n_ctx: info.n_ctx ?? n_ctx, threads: wllama.getNumThreads(), size: file.size, load_ms: Math.round(performance.now() - started), images: wllama.supportInputModality?.('image') ?? false };
    return this.loaded;
  }

  async unload() {
    const wllama = this.wllama;
    this.wllama = null;
    this.loaded = null;
    if (wllama) await wllama.exit().catch(() => {});
  }

  /**
   * The chunks of a streamed chat completion for an OpenAI chat request `body`, as llama-server
   * sends them (usage in the last chunk when `stream_options.include_usage`).
   */
  async stream(body, signal) {
    if (!this.wllama) throw new ModelError('load_failed', 'No model is loaded.');
    const params = {
      ...body,
      messages: messagesFor(body.messages ?? [], this.loaded.images),
      stream: true,
      // llama.cpp's progress chunks while it reads the prompt (`prompt_progress`).
      return_progress: true,
      seed: body.seed ?? SEED,
      abortSignal: signal,
    };
    delete params.model;
    return this.wllama.createChatCompletion(params);
  }
}

/** The request's messages as llama.cpp takes them: image parts only for a model that reads them. */
function messagesFor(messages, images) {
  return messages.map((message) => {
    if (!Array.isArray(message.content)) return message;
    const parts = message.content;
    if (parts.some((p) => p.type === 'image_url') && !images) {
      throw new ModelError('images_unsupported', 'This model cannot read images: remove the image, or use a provider whose model can.');
    }
    if (parts.every((p) => p.type === 'text')) return { ...message, content: parts.map((p) => p.text).join('\n\n') };
    return { ...message, content: parts.map((p) => (p.type === 'image_url' ? { type: 'image', data: dataUrlBytes(p.image_url?.url) } : p)) };
  });
}

function dataUrlBytes(url) {
  const base64 = String(url ?? '').split(',')[1] ?? '';
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
  return bytes.buffer;
}

export function describe(error) {
  const text = String(error?.message ?? error ?? 'unknown error').split('\n')[0];
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
