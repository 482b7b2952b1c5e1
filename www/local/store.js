// The models kept in this browser for the model in the page: GGUF files in the origin private file
// system (OPFS), folder `palaver-models/`. Runs in the model worker (synchronous access handles are
// worker-only, and a 98 MB download must not touch the page's main thread).
//
// A file is written under a `.partial-` name and renamed only once it is whole (every byte the
// server announced, the GGUF magic, the sha256 when one is known), so a listing never shows half a
// model and a failed or cancelled download leaves nothing behind. Each refusal is a `ModelError`
// whose `kind` names the cause and whose message says what to do.

const FOLDER = 'palaver-models';
const PARTIAL = '.partial-';
const GGUF_MAGIC = [0x47, 0x47, 0x55, 0x46]; // "GGUF"

/** The largest model the page tries to load: wasm memory is capped at 4 GiB for threads. */
export const MAX_MODEL_BYTES = 3.5 * 1024 ** 3;

export class ModelError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'ModelError';
    this.kind = kind;
  }
}

const mb = (bytes) => `${(bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0)} MB`;

async function folder() {
  if (!navigator.storage?.getDirectory) {
    throw new ModelError('unsupported', 'This browser cannot keep files for a model (no origin private file system).');
  }
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(FOLDER, { create: true });
}

/** A stored model's id: the file's own name, reduced to safe characters, ending in `.gguf`. */
export function modelId(name) {
  const base = String(name ?? '').split(/[\\/]/).pop().replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^\.+/, '');
  if (!base) return 'model.gguf';
  return base.toLowerCase().endsWith('.gguf') ? base : `${base}.gguf`;
}

/** The stored models: `[{id, size}]`, by name. Leftover partial files are removed on the way. */
export async function list() {
  const dir = await folder();
  const models = [];
  for await (const [name, handle] of dir.entries()) {
    if (handle.kind !== 'file') continue;
    if (name.startsWith(PARTIAL)) {
      await dir.removeEntry(name).catch(() => {});
      continue;
    }
    const file = await handle.getFile();
    models.push({ id: name, size: file.size });
  }
  return models.sort((a, b) => a.id.localeCompare(b.id));
}

export async function remove(id) {
  const dir = await folder();
  await dir.removeEntry(modelId(id)).catch((error) => {
    if (error?.name !== 'NotFoundError') throw error;
  });
}

/** The stored model as a `File` (read lazily by llama.cpp). */
export async function open(id) {
  const dir = await folder();
  try {
    return await (await dir.getFileHandle(modelId(id))).getFile();
  } catch (error) {
    if (error?.name === 'NotFoundError' || error?.name === 'TypeError') {
      throw new ModelError('model_not_found', `The model ${id} is not stored in this browser: download it again (Settings → Model in this browser).`);
    }
    throw error;
  }
}

/** Refuses a model larger than the page's memory can hold. */
export function checkMemory(size) {
  if (!Number.isFinite(size) || size <= 0) return;
  if (size > MAX_MODEL_BYTES) {
    throw new ModelError('too_large', `This model is ${mb(size)}: larger than a page can load (about ${mb(MAX_MODEL_BYTES)} at most, the limit of WebAssembly memory here). Pick a smaller or more quantized GGUF.`);
  }
  const device = navigator.deviceMemory;
  if (device && size > device * 1024 ** 3 * 0.6) {
    throw new ModelError('too_large', `This model is ${mb(size)}, too much for the memory this device reports (${device} GB). Pick a smaller or more quantized GGUF.`);
  }
}

/** Refuses a model the page cannot hold or store, before a byte is stored. */
export async function checkRoom(size) {
  if (!Number.isFinite(size) || size <= 0) return;
  checkMemory(size);
  const estimate = await navigator.storage?.estimate?.().catch(() => null);
  if (estimate?.quota) {
    const free = estimate.quota - (estimate.usage ?? 0);
    if (free < size) {
      throw new ModelError('quota', `Not enough storage for this site: the model needs ${mb(size)} and ${mb(Math.max(0, free))} are free. Delete a stored model or old chats, or free disk space, then try again.`);
    }
  }
}

/**
 * Downloads `url` into the store as `id`. `expected`: `{size?, sha256?}` known in advance (the
 * default model). `headers`: `palaver serve`'s token for its `/models/` (F9). `onProgress({loaded,
 * total})` is called as bytes arrive; `signal` cancels.
 */
export async function download(url, id, { expected = {}, headers = {}, signal, onProgress } = {}) {
  let response;
  try {
    response = await fetch(url, { signal, cache: 'no-store', headers, credentials: 'omit' });
  } catch (error) {
    if (signal?.aborted) throw cancelled();
    throw new ModelError('network', `The model could not be downloaded from ${url}: ${error?.message ?? 'the network failed'}. Check the address and that the server allows this page (CORS).`);
  }
  if (!response.ok || !response.body) {
    throw new ModelError('http', `The model could not be downloaded: ${url} answered HTTP ${response.status}.`);
  }
  const announced = Number(response.headers.get('content-length')) || undefined;
  const total = expected.size ?? announced;
  try {
    if (expected.size && announced && announced !== expected.size) {
      throw new ModelError('damaged', `The server sends ${mb(announced)} for this model, not the ${mb(expected.size)} it should be: nothing was stored.`);
    }
    await checkRoom(total);
  } catch (error) {
    response.body.cancel().catch(() => {});
    throw error;
  }
  return write(id, response.body, { total, sha256: expected.sha256, signal, onProgress, source: 'download' });
}

/** Stores a GGUF the user picked from disk. */
export async function importFile(file, { signal, onProgress } = {}) {
  await checkRoom(file.size);
  return write(modelId(file.name), file.stream(), { total: file.size, signal, onProgress, source: 'file' });
}

function cancelled() {
  return new ModelError('cancelled', 'The download was cancelled; nothing was stored.');
}

/** Streams `body` into a partial file, checks it, and renames it into place. */
async function write(id, body, { total, sha256, signal, onProgress, source }) {
  id = modelId(id);
  const dir = await folder();
  const partialName = `${PARTIAL}${id}`;
  const handle = await dir.getFileHandle(partialName, { create: true });
  const access = await handle.createSyncAccessHandle();
  const reader = body.getReader();
  const abort = () => reader.cancel().catch(() => {});
  signal?.addEventListener('abort', abort, { once: true });
  let loaded = 0;
  let reported = 0;
  try {
    access.truncate(0);
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (signal?.aborted) throw cancelled();
        throw new ModelError('cut', `The download stopped at ${mb(loaded)}${total ? ` of ${mb(total)}` : ''}: ${error?.message ?? 'the connection broke'}. Nothing was kept; try again.`);
      }
      if (signal?.aborted) throw cancelled();
      if (chunk.done) break;
      if (loaded < 4) checkMagic(chunk.value, loaded, source);
      writeAll(access, chunk.value, loaded);
      loaded += chunk.value.byteLength;
      if (onProgress && (loaded - reported > 512 * 1024 || loaded === total)) {
        reported = loaded;
        onProgress({ loaded, total });
      }
    }
    access.flush();
    if (loaded < 4) throw notGguf(source);
    if (total && loaded !== total) {
      throw new ModelError('cut', `The download stopped at ${mb(loaded)} of ${mb(total)}. Nothing was kept; try again.`);
    }
    access.close();
    if (sha256) await checkSha256(handle, sha256);
    await dir.removeEntry(id).catch(() => {});
    await handle.move(id);
    onProgress?.({ loaded, total: loaded });
    return { id, size: loaded };
  } catch (error) {
    try {
      access.close();
    } catch {
      // already closed
    }
    await dir.removeEntry(partialName).catch(() => {});
    if (error?.name === 'QuotaExceededError') {
      throw new ModelError('quota', `This browser's storage for the site is full after ${mb(loaded)}${total ? ` of ${mb(total)}` : ''}: nothing was kept. Delete a stored model or old chats, or free disk space, then try again.`);
    }
    throw error;
  } finally {
    signal?.removeEventListener('abort', abort);
  }
}

function writeAll(access, bytes, at) {
  let written = 0;
  while (written < bytes.byteLength) {
    const n = access.write(bytes.subarray(written), { at: at + written });
    if (n <= 0) throw new ModelError('quota', 'The browser refused to store more of the model: its storage for this site is full.');
    written += n;
  }
}

function notGguf(source) {
  return new ModelError('not_gguf', source === 'file'
    ? 'This file is not a GGUF model (its first bytes are not "GGUF"). Pick a .gguf file, e.g. from a model\'s page on a model hub.'
    : 'The address does not serve a GGUF model (its first bytes are not "GGUF"): check the URL.');
}

/** The first four bytes of the stream must be the GGUF magic; `offset` is where `bytes` start. */
function checkMagic(bytes, offset, source) {
  for (let i = 0; i < bytes.byteLength && offset + i < 4; i += 1) {
    if (bytes[i] !== GGUF_MAGIC[offset + i]) throw notGguf(source);
  }
}

async function checkSha256(handle, sha256) {
  const buffer = await (await handle.getFile()).arrayBuffer();
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', buffer));
  const hex = [...digest].map((b) => b.toString(16).padStart(2, '0')).join('');
  if (hex !== sha256) {
    throw new ModelError('damaged', `The downloaded model is damaged (its sha256 is ${hex.slice(0, 12)}…, not ${sha256.slice(0, 12)}…): nothing was kept. Try again; if it repeats, the server's copy is wrong.`);
  }
}
