// The key vault: API keys and the sync password the user asked to remember, in IndexedDB as
// AES-GCM ciphertext under a wrapping CryptoKey the browser will not export (SECURITY C16, C17),
// each bound to the origin it was given for (E1).
//
// A second lock where the app is served from this machine (SECURITY F7): any page served at the
// app's origin can use the browser's key, and while `palaver serve` is stopped any process may
// serve that origin (`127.0.0.1:8787`). There, a remembered secret is also encrypted under a key
// only `palaver serve` holds (`GET /api/vault`, behind the token): without `palaver serve`
// answering with the token, nothing decrypts. A secret remembered before the second lock existed
// is locked again the first time it is read with it.

const VAULT_DB = 'palaver-vault';
let serverKey = null;

/** Whether this page is served from this machine (a port any local process could take over). */
export function needsServerLock() {
  return ['127.0.0.1', 'localhost', '[::1]'].includes(location.hostname);
}

/** Unlocks with `palaver serve`'s secret (`proxy`: its {url, token}); false when it cannot. */
export async function unlock(proxy) {
  if (!needsServerLock()) return true;
  if (serverKey) return true;
  if (!proxy) return false;
  try {
    const response = await fetch(`${proxy.url}/api/vault`, { headers: { authorization: `Bearer ${proxy.token}` }, credentials: 'omit' });
    if (!response.ok) return false;
    const { secret } = await response.json();
    const bytes = Uint8Array.from(atob(secret), (c) => c.charCodeAt(0));
    serverKey = await crypto.subtle.importKey('raw', bytes, 'AES-GCM', false, ['encrypt', 'decrypt']);
    bytes.fill(0);
    return true;
  } catch {
    return false;
  }
}

/** Whether remembered secrets can be read and written now. */
export const unlocked = () => !needsServerLock() || serverKey !== null;

function open() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(VAULT_DB, 1);
    request.onupgradeneeded = () => request.result.createObjectStore('keys');
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

async function inVault(mode, work) {
  const db = await open();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction('keys', mode);
      const result = work(tx.objectStore('keys'));
      tx.oncomplete = () => resolve(result.result);
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  } finally {
    db.close();
  }
}

async function wrappingKey() {
  const existing = await inVault('readonly', (store) => store.get('wrapping-key'));
  if (existing) return existing;
  const key = await crypto.subtle.generateKey({ name: 'AES-GCM', length: 256 }, false, ['encrypt', 'decrypt']);
  await inVault('readwrite', (store) => store.put(key, 'wrapping-key'));
  return key;
}

async function seal(key, bytes) {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  return { iv, ciphertext: new Uint8Array(await crypto.subtle.encrypt({ name: 'AES-GCM', iv }, key, bytes)) };
}

const opened = (key, sealed) => crypto.subtle.decrypt({ name: 'AES-GCM', iv: sealed.iv }, key, sealed.ciphertext);

/**
 * Stores `secret` for `name` (a provider kind, or `sync`), bound to the origin it is sent to.
 * Throws where the second lock is needed and `palaver serve` did not give it.
 */
export async function remember(name, secret, origin) {
  if (!unlocked()) throw new Error('Keys can be remembered only while palaver serve answers: start it and reload.');
  let sealed = await seal(await wrappingKey(), new TextEncoder().encode(secret));
  let server = false;
  if (serverKey) {
    const inner = new Uint8Array([...sealed.iv, ...sealed.ciphertext]);
    sealed = await seal(serverKey, inner);
    server = true;
  }
  await inVault('readwrite', (store) => store.put({ ...sealed, origin, server }, `key:${name}`));
}

export async function forget(name) {
  await inVault('readwrite', (store) => store.delete(`key:${name}`));
}

/**
 * The remembered secret for `name` and the origin it is bound to: `{key, origin}`, `{key: ''}`
 * (none, or it no longer decrypts), or `{key: '', locked: true}` (the second lock is missing).
 * A record from before keys were bound has no origin; it is bound to `fallbackOrigin`.
 */
export async function recall(name, fallbackOrigin) {
  try {
    const record = await inVault('readonly', (store) => store.get(`key:${name}`));
    if (!record) return { key: '', origin: '' };
    if (record.server && !serverKey) return { key: '', origin: '', locked: true };
    let sealed = record;
    if (record.server) {
      const inner = new Uint8Array(await opened(serverKey, record));
      sealed = { iv: inner.slice(0, 12), ciphertext: inner.slice(12) };
    } else if (needsServerLock() && !serverKey) {
      return { key: '', origin: '', locked: true };
    }
    const key = new TextDecoder().decode(await opened(await wrappingKey(), sealed));
    const origin = record.origin ?? fallbackOrigin;
    // Remembered before the second lock: locked again now.
    if (!record.server && serverKey) await remember(name, key, origin);
    return { key, origin };
  } catch {
    return { key: '', origin: '' };
  }
}
