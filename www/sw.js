// The offline cache (SPEC §10): the app shell and pkg/ are cached on install and served from the
// cache first, so the app opens offline and past chats (in IndexedDB) are readable. Every file is
// checked against the shell list's sha256 before it is kept: a file that does not match is never
// cached, so whatever answers on the app's port while `palaver serve` is stopped cannot plant a page
// at the app's origin (SECURITY F7). Only a navigation to the app's own page is answered with the
// shell; a navigation elsewhere on the origin goes to the network and is never kept as the shell.
// An update comes as a new list (pkg/shell.js changes, so this worker updates): the new version is
// cached whole and checked before it takes over, and every other Palaver cache is deleted.
// The list, the hashes and the version are generated with the wasm package (scripts/shell-list.mjs).
// The page's CSP requires Trusted Types here too, hence the one policy, which allows only that script.
const workerPolicy = self.trustedTypes?.createPolicy('palaver', {
  createScriptURL: (url) => (url === '../pkg/shell.js' ? url : ''),
});
importScripts(workerPolicy ? workerPolicy.createScriptURL('../pkg/shell.js') : '../pkg/shell.js');
const { version: VERSION, files: SHELL, runtime: RUNTIME = [], hashes: HASHES = {} } = self.palaverShell;
/** Each file's expected sha256 by its URL. */
const EXPECTED = new Map(Object.entries(HASHES).map(([path, hex]) => [new URL(path, self.location).href, hex]));
const ROOT = new URL('./', self.location);
/** Where the files loaded only on use live (llama.cpp in wasm for the model in the page). */
const RUNTIME_PREFIX = new URL('../pkg/vendor/', self.location).pathname;

self.addEventListener('install', (event) => {
  addShellRoutes(event);
  // All or nothing: one file that does not match fails the install, and the old version stays.
  event.waitUntil((async () => {
    const cache = await caches.open(VERSION);
    const files = await Promise.all(SHELL.map(async (path) => {
      const url = new URL(path, self.location).href;
      return [url, await verified(url)];
    }));
    for (const [url, response] of files) await cache.put(url, response);
    await self.skipWaiting();
  })().catch(async (error) => {
    await caches.delete(VERSION);
    throw error;
  }));
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
      if (!(await cache.match(url))) await verified(url).then((response) => cache.put(url, response)).catch(() => {});
    }
    event.source?.postMessage({ type: 'runtime-cached' });
  })());
});

/** `url` fetched from the network, if its bytes are the ones the shell list names. */
async function verified(url) {
  const response = await fetch(url, { cache: 'no-cache' });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  const want = EXPECTED.get(url);
  const digest = await crypto.subtle.digest('SHA-256', await response.clone().arrayBuffer());
  const got = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
  if (!want || got !== want) throw new Error(`${url} does not match the shell list`);
  return response;
}

/**
 * Routes the browser follows without starting this worker (the static routing API; a browser
 * without it runs the fetch handler, which answers the same): the shell's files straight from
 * this version's cache, the page itself too when asked for by its own address, and `palaver
 * serve`'s API and other origins (providers) from the network. A cold start asked the worker for
 * ~60 modules, one at a time in its thread, and started it only to hear "not mine" for each API
 * call (issue 41). A file missing from the cache goes to the network, as the fetch handler's miss
 * does. Everything else — a shell file asked for with a query, a navigation with one (answered
 * with the cached page, SECURITY F7), the files kept on use (pkg/vendor/) — goes through the
 * fetch handler, as before.
 */
function addShellRoutes(event) {
  if (!event.addRoutes) return;
  const at = (pathname, extra = {}) => ({ urlPattern: new URLPattern({ pathname, search: '' }), ...extra });
  const files = SHELL.filter((path) => path !== './').map((path) => new URL(path, self.location).pathname);
  const fromCache = (condition) => ({ condition, source: { cacheName: VERSION } });
  const shell = [
    fromCache(at(ROOT.pathname, { requestMode: 'navigate' })),
    ...files.map((pathname) => fromCache(at(pathname))),
  ];
  const ownOrigin = new URLPattern({ protocol: self.location.protocol.slice(0, -1), hostname: self.location.hostname, port: self.location.port });
  const network = [
    { condition: { urlPattern: new URLPattern({ pathname: `${ROOT.pathname}api/*` }) }, source: 'network' },
    { condition: { not: { urlPattern: ownOrigin } }, source: 'network' },
  ];
  // Set apart: a browser that knows the first kind of route but not `not` still takes the shell's.
  const unset = (error) => console.warn('a route was not set; the worker answers instead:', error.message);
  event.addRoutes(shell).catch(unset);
  event.addRoutes(network).catch(unset);
}

/** The cache key a request is answered from, or null when the worker leaves it alone. */
function shellKey(request, url) {
  if (request.mode === 'navigate') {
    // Only the app's own page is the shell (a link to /icon.svg is not).
    return url.pathname === ROOT.pathname || url.pathname === `${ROOT.pathname}index.html` ? ROOT.href : null;
  }
  const key = url.origin + url.pathname;
  return EXPECTED.has(key) ? key : null;
}

/** The open cache, opened once per worker start rather than once per request. */
let shellCache = null;

self.addEventListener('fetch', (event) => {
  const request = event.request;
  const url = new URL(request.url);
  if (request.method !== 'GET' || url.origin !== self.location.origin) return;
  const key = shellKey(request, url);
  if (key === null) return;
  event.respondWith((async () => {
    const cache = await (shellCache ??= caches.open(VERSION));
    const cached = await cache.match(key);
    if (cached) return cached;
    // Not cached yet (a file loaded on use): kept only if it matches; otherwise the network's
    // answer is shown as it would be without this worker, and never kept.
    return verified(key).then(async (response) => {
      await cache.put(key, response.clone());
      return response;
    }, () => fetch(request));
  })());
});
