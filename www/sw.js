// The offline cache (SPEC §10): the app shell and pkg/ are cached on install; requests for them go
// to the network first (so a deployed update takes effect on the next reload) and fall back to the
// cache when the network is gone, so the app opens and past chats (in IndexedDB) are readable
// offline. Provider streams, the proxy API and other origins are never touched. The cache name
// carries a version; activating this worker deletes every other Palaver cache.
// The file list and the version are generated with the wasm package (scripts/shell-list.mjs):
// every file of www/ and pkg/'s bundle, the version a hash of their contents. The page's CSP
// requires Trusted Types here too, hence the one policy, which allows only that script.
const workerPolicy = self.trustedTypes?.createPolicy('palaver', {
  createScriptURL: (url) => (url === '../pkg/shell.js' ? url : ''),
});
importScripts(workerPolicy ? workerPolicy.createScriptURL('../pkg/shell.js') : '../pkg/shell.js');
const { version: VERSION, files: SHELL, runtime: RUNTIME = [] } = self.palaverShell;
/** Where the files loaded only on use live (llama.cpp in wasm for the model in the page). */
const RUNTIME_PREFIX = new URL('../pkg/vendor/', self.location).pathname;

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(VERSION).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    const current = await caches.open(VERSION);
    for (const name of await caches.keys()) {
      if (!name.startsWith('palaver-shell-') || name === VERSION) continue;
      // The model runtime a user already has stays usable offline across app updates (the
      // network refreshes it on its next use online).
      const old = await caches.open(name);
      for (const request of await old.keys()) {
        if (new URL(request.url).pathname.startsWith(RUNTIME_PREFIX) && !(await current.match(request))) {
          await current.put(request, await old.match(request));
        }
      }
      await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

/**
 * `{type: 'cache-runtime'}` from the page (once it has a model in the page): the files llama.cpp
 * needs are cached now, whichever context fetched them first, so the model answers offline.
 */
self.addEventListener('message', (event) => {
  if (event.data?.type !== 'cache-runtime') return;
  event.waitUntil((async () => {
    const cache = await caches.open(VERSION);
    for (const path of RUNTIME) {
      const url = new URL(path, self.location).href;
      if (!(await cache.match(url))) await cache.add(url).catch(() => {});
    }
    event.source?.postMessage({ type: 'runtime-cached' });
  })());
});

const shellUrls = new Set(SHELL.map((path) => new URL(path, self.location).href));

function isShell(url) {
  return shellUrls.has(url.origin + url.pathname) || url.pathname.startsWith(new URL('../pkg/', self.location).pathname);
}

self.addEventListener('fetch', (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== 'GET' || url.origin !== self.location.origin) return;
  if (request.mode !== 'navigate' && !isShell(url)) return;
  event.respondWith((async () => {
    const cache = await caches.open(VERSION);
    const key = request.mode === 'navigate' ? new URL('./', self.location).href : url.origin + url.pathname;
    try {
      const response = await fetch(request);
      if (response.ok) await cache.put(key, response.clone());
      return response;
    } catch (error) {
      const cached = await cache.match(key);
      if (cached) return cached;
      throw error;
    }
  })());
});
