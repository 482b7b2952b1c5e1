// Issue 21 in the page, against a real CouchDB-protocol server (pouchdb-server from npm, LevelDB in
// a temp folder, an admin and a database only its member may use): two browser profiles set up
// Settings → Sync as a person would and a chat replicates both ways, into the open chat of the
// other; both edit the chat offline and both keep every message, in one order; a 5 000-message chat
// replicates, survives a server restart mid-way (resumed from the checkpoint, not from the start),
// and one new turn afterwards costs bytes of a turn, not of the chat; wrong credentials, a server
// that fails, a URL that is not CouchDB: a clear status, nothing lost here.
// node tests/browser/sync.mjs   (after build_pkg and `cargo build`; tests/couch's packages installed)
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import {
  root, check, failed, watchdog, startDouble, startServe, launch, tempDir, cleanup, openaiStream, setProvider, sendAndWait, waitIdle, openChatId, importFile, chatMenu,
} from './harness.mjs';
import { couchServer } from './couch.mjs';
import { setSync as setSyncAs, syncStatus, waitSync } from './sync-page.mjs';
import { inThemes } from './axe.mjs';

watchdog(420, 'the sync page test');
const ADMIN = { username: 'alice', password: 'wonderland' };
const DB = 'palaver-chats';
const couchDir = await tempDir('palaver-couch-');
const workspace = await tempDir('palaver-sync-ws-');
const profiles = [await tempDir('palaver-sync-a-'), await tempDir('palaver-sync-b-')];
const contexts = [];
const pageErrors = [];
const sse = (body) => ({ body, headers: { 'content-type': 'text/event-stream' } });
const auth = `Basic ${Buffer.from(`${ADMIN.username}:${ADMIN.password}`).toString('base64')}`;

// --- the server: pouchdb-server, and a counting proxy in front of it ---

const couchServerHere = await couchServer(couchDir);
const couchPort = couchServerHere.port;
const startCouch = () => couchServerHere.start();
const stopCouch = () => couchServerHere.stop();

const traffic = { sent: 0, received: 0, byPath: {}, since: [] };
// Each `_bulk_get`: the revisions asked for, and whether the whole answer came back. "Fetched
// twice" is a revision asked for again after an answer that carried it was delivered.
const bulkGets = [];
function revisionsAsked(body) {
  try {
    return (JSON.parse(body.toString('utf8')).docs ?? []).map((d) => `${d.id}@${d.rev ?? ''}`);
  } catch {
    return [];
  }
}
let proxyMode = 'pass';
let bulkGetDelay = 0; // ms before each _bulk_get is answered (to catch a replication mid-way)
const proxy = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const path = req.url.split('?')[0].split('/').slice(2).join('/') || 'db';
    traffic.sent += body.length + req.url.length;
    traffic.byPath[path] = (traffic.byPath[path] ?? 0) + body.length;
    if (path === '_changes') traffic.since.push(new URL(req.url, 'http://x').searchParams.get('since'));
    if (proxyMode === 'fail') {
      res.writeHead(503, { 'content-type': 'application/json', 'access-control-allow-origin': req.headers.origin ?? '*', 'access-control-allow-credentials': 'true' });
      return res.end('{"error":"unavailable","reason":"the server is down for maintenance"}');
    }
    const delay = path === '_bulk_get' ? bulkGetDelay : 0;
    const record = path === '_bulk_get' ? { asked: revisionsAsked(body), delivered: false } : null;
    if (record) bulkGets.push(record);
    setTimeout(() => forward(req, res, body, record), delay);
  });
});
function forward(req, res, body, record) {
  {
    const upstream = http.request({ host: '127.0.0.1', port: couchPort, path: req.url, method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.on('data', (c) => { traffic.received += c.length; res.write(c); });
      up.on('end', () => res.end(() => { if (record && up.statusCode === 200) record.delivered = true; }));
    });
    upstream.on('error', () => { res.destroy(); });
    upstream.end(body);
  }
}
await new Promise((ok) => proxy.listen(0, '127.0.0.1', ok));
const COUCH = `http://127.0.0.1:${proxy.address().port}`;

const couchRequest = (method, path, body) => couchServerHere.request(method, path, body, auth);

// --- the page ---


/** The chat's packed copy in `page`'s IndexedDB (issue 41: a long chat is read from one record),
 * with what its chat record lists as written since; `null` without one (an assertion on storage). */
function packedIn(page, chat) {
  return page.evaluate((chat) => new Promise((ok) => {
    const open = indexedDB.open('palaver');
    open.onsuccess = () => {
      const db = open.result;
      if (!db.objectStoreNames.contains('packed_messages')) return ok(null);
      const tx = db.transaction(['packed_messages', 'chats']);
      const copy = tx.objectStore('packed_messages').get(chat);
      const record = tx.objectStore('chats').get(chat);
      tx.oncomplete = () => {
        const changes = record.result?.packed_changes;
        ok(copy.result && Array.isArray(changes) ? { changes } : null);
        db.close();
      };
    };
    open.onerror = () => ok(null);
  }), chat);
}
async function browser(profile) {
  const context = await launch(profile);
  contexts.push(context);
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'warning' || m.type() === 'error') console.log(`  [${profile.slice(-8)}] console: ${m.text()}`); });
  await page.goto(serve.printed);
  return { page, context };
}

/** Settings → Sync, as a person fills it (this server and database, the admin, by default). */
const setSync = (page, options = {}) => setSyncAs(page, { url: COUCH, database: DB, ...ADMIN, ...options });

/** Settings → Sync → "Sync now", as a person asks for it. */
async function syncNow(page) {
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-sync]');
  await page.click('[data-testid=sync-now]');
  await page.click('[data-testid=cancel-settings]');
}

const live = (s) => s.state === 'live';
/** A chat's messages as stored here, in order: `[role, content]`. */
const stored = (page, id) => page.evaluate(async (chat) => {
  // What is stored in this browser (an assertion on storage, never a reason to wait before acting).
  const peek = await (await globalThis.palaverApp.engine()).peekChat(chat, 100000).catch(() => ({ messages: [] }));
  return peek.messages.map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`);
}, id);
async function waitStored(page, id, predicate, what, timeout = 30_000) {
  const started = Date.now();
  let messages = [];
  while (Date.now() - started < timeout) {
    messages = await stored(page, id);
    if (predicate(messages)) return messages;
    await new Promise((r) => setTimeout(r, 150));
  }
  console.log(`  (waited for ${what}: ${JSON.stringify(messages.slice(-6))})`);
  return messages;
}
const shown = (page) => page.locator('[data-testid=message]').allTextContents();

await startCouch();
// An admin, and a database only its member may use (so wrong credentials are refused).
check((await couchServerHere.secure(ADMIN, DB)).created, 'pouchdb-server runs with an admin and the database');
const anonymous = await fetch(`http://127.0.0.1:${couchPort}/${DB}/_changes`);
check(anonymous.status === 401, `the database refuses anyone else (${anonymous.status})`);

const double = await startDouble();
const serve = await startServe(workspace, []);

try {
  // 1. A: a chat with one turn; Settings → Sync; it reaches the server.
  const { page: a, context: contextA } = await browser(profiles[0]);
  const url = await double.script('sync', [
    sse(openaiStream({ text: 'Answer one, in A.' })),
    sse(openaiStream({ text: 'Answer two, in B.' })),
    sse(openaiStream({ text: 'Offline answer in A.' })),
    sse(openaiStream({ text: 'Offline answer in B.' })),
    sse(openaiStream({ text: 'Kept answer in B.' })),
    sse(openaiStream({ text: 'A turn after the long chat.' })),
  ]);
  await setProvider(a, { baseUrl: url, key: 'sk-sync-CANARY' });
  await sendAndWait(a, 'Hello from A', 1);
  const id = await openChatId(a);
  // A keeps the password (encrypted, like API keys): A reloads later and syncs on.
  await setSync(a, { remember: true });
  const aLive = await waitSync(a, (s) => live(s) && s.pushed >= 3, 'A to push its chat');
  if (aLive.state !== 'live') console.log('  traffic:', JSON.stringify(traffic.byPath));
  check(aLive.state === 'live' && aLive.pushed >= 3, `A pushes its chat and listens (${JSON.stringify(aLive)})`);
  check(/In sync/.test(await a.textContent('[data-testid=sync-status]')), `the sidebar says so (${await a.textContent('[data-testid=sync-status]')})`);
  await inThemes(a, 'sync live in the sidebar', 'sync-live');
  await a.click('[data-testid=settings]');
  await a.click('[data-testid=settings-tab-sync]');
  await inThemes(a, 'Settings → Sync, live', 'sync-settings');
  await a.click('[data-testid=cancel-settings]');
  const onServer = await couchRequest('GET', `${DB}/_all_docs`);
  const ids = onServer.body?.rows?.map((r) => r.id) ?? [];
  check(ids.includes(`chat:${id}`) && ids.filter((d) => d.startsWith(`msg:${id}:`)).length === 2, `the server holds the chat and its 2 messages (${ids.length} docs)`);
  const everything = JSON.stringify((await couchRequest('GET', `${DB}/_all_docs?include_docs=true`)).body);
  check(!everything.includes('sk-sync-CANARY') && !everything.includes(ADMIN.password) && !everything.includes('base_url'), 'no key, password or setting is synced');

  // 2. B (another profile): the chat arrives; B answers in it; A, with the chat open, shows it.
  const { page: b, context: contextB } = await browser(profiles[1]);
  await setSync(b);
  await waitSync(b, (s) => live(s) && s.pulled >= 3, 'B to pull');
  const listedInB = await b.locator(`[data-testid=chat-item][data-chat-id="${id}"]`).waitFor({ timeout: 10_000 }).then(() => true, () => false);
  check(listedInB, 'B lists the chat made in A');
  await setProvider(b, { baseUrl: url, key: 'sk-sync-CANARY' });
  await b.locator(`[data-testid=chat-item][data-chat-id="${id}"]`).click();
  await b.waitForFunction((chat) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === chat && !document.querySelector('[data-testid=loading-earlier]') && document.querySelectorAll('[data-testid=message]').length === 2, id, { timeout: 10_000 }).catch(() => {});
  const inB = await shown(b);
  check(inB.some((t) => t.includes('Hello from A')) && inB.some((t) => t.includes('Answer one, in A.')), `B shows A's chat (${inB.length} messages)`);
  await sendAndWait(b, 'Hello from B', 2);
  await a.waitForFunction(() => [...document.querySelectorAll('[data-testid=message]')].some((m) => m.textContent.includes('Answer two, in B.')), null, { timeout: 20_000 }).catch(() => {});
  const inA = await shown(a);
  check(inA.length === 4 && inA[2].includes('Hello from B') && inA[3].includes('Answer two, in B.'), `A's open chat shows B's turn, in order (${inA.length} messages)`);
  if (inA.length !== 4) console.log('  A:', JSON.stringify(await syncStatus(a)), JSON.stringify(await stored(a, id)), 'B:', JSON.stringify(await syncStatus(b)), JSON.stringify(await stored(b, id)));
  await a.screenshot({ path: join(workspace, '..', 'palaver-sync-a.png') }).catch(() => {});

  // 3. Both offline, both answer in the chat; back online, both hold all 8 messages in one order.
  await contextA.setOffline(true);
  await contextB.setOffline(true);
  await waitSync(a, (s) => s.state === 'offline', 'A offline', 5000);
  check((await syncStatus(a)).state === 'offline' && /Offline/.test(await a.textContent('[data-testid=sync-status]')), 'offline is shown as such');
  // The provider double is on 127.0.0.1 as well: offline in Chromium cuts it too, so the turns are
  // made with the double reachable again but the sync server still cut off (a failing proxy).
  proxyMode = 'fail';
  await contextA.setOffline(false);
  await contextB.setOffline(false);
  await sendAndWait(a, 'Offline from A', 3);
  await sendAndWait(b, 'Offline from B', 3);
  const failing = await waitSync(a, (s) => s.state === 'retrying', 'A retrying', 10_000);
  // A 503 to a request, or to its CORS preflight (then the browser says it cannot reach it).
  check(failing.state === 'retrying' && /unavailable|503|cannot be reached/.test(failing.text), `a failing server: retrying, with its reason (${failing.text})`);
  check((await stored(a, id)).length === 6, 'nothing lost here while the server fails');
  proxyMode = 'pass';
  await syncNow(a);
  await syncNow(b);
  const has8 = (m) => m.length === 8;
  const mergedA = await waitStored(a, id, has8, 'A to hold 8 messages');
  const mergedB = await waitStored(b, id, has8, 'B to hold 8 messages');
  check(has8(mergedA) && JSON.stringify(mergedA) === JSON.stringify(mergedB), `both devices keep every message, in the same order (${mergedA.length} / ${mergedB.length})`);
  check(mergedA.includes('user: Offline from A') && mergedA.includes('user: Offline from B'), 'both offline turns are kept');
  await a.waitForFunction(() => document.querySelectorAll('[data-testid=message]').length === 8, null, { timeout: 15_000 }).catch(() => {});
  check((await shown(a)).length === 8, `A's open chat shows the merged chat (${(await shown(a)).length})`);

  // 3b. A deletes the chat while B, cut off from the server, adds a turn to it: the addition wins
  // (the merge rule): back in sync, both devices hold the chat with every message, and say so.
  await waitSync(a, live, 'A live before the delete');
  proxyMode = 'fail';
  await a.locator(`[data-testid=chat-item][data-chat-id="${id}"]`).click();
  await chatMenu(a, 'delete-chat');
  await a.locator(`[data-testid=chat-item][data-chat-id="${id}"]`).waitFor({ state: 'detached', timeout: 10_000 }).catch(() => {});
  await b.locator(`[data-testid=chat-item][data-chat-id="${id}"]`).click();
  await sendAndWait(b, 'Added in B while A deleted it', 5);
  // A's deletion reaches the server first, then B's turn.
  proxyMode = 'pass';
  await syncNow(a);
  await waitSync(a, (s) => live(s), 'A to push its deletion');
  await syncNow(b);
  const keptB = await waitStored(b, id, (m) => m.length === 10, 'B to keep the chat whole');
  const keptA = await waitStored(a, id, (m) => m.length === 10, 'A to get the chat back whole');
  check(keptA.length === 10 && JSON.stringify(keptA) === JSON.stringify(keptB), `a chat deleted on A while B added to it is kept whole on both (${keptA.length} / ${keptB.length} messages)`);
  const toldB = await b.getByTestId('status').innerText().catch(() => '');
  check(/deleted on another device, but this one added to it/.test(toldB), `B is told its chat was kept (${toldB})`);

  // 4. A 5 000-message chat; the server restarted mid-way; resumed, not started again.
  // B is away while A imports and pushes the chat; then B pulls it, slowly enough to be cut.
  await contextB.setOffline(true);
  const history = gunzipSync(readFileSync(join(root, '../shared/bench/history-5k.json.gz'))).toString('utf8');
  const longId = await importFile(a, history, 'history-5k.json');
  const total = (await stored(a, longId)).length;
  const pushedBefore = (await syncStatus(a)).pushed;
  await a.reload();
  const pushStarted = Date.now();
  const expected = 11 + 1 + total; // the first chat and its 10 messages, the long chat and its messages
  for (let i = 0; i < 600; i++) {
    if ((await couchRequest('GET', DB)).body?.doc_count >= expected) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const docCount = (await couchRequest('GET', DB)).body?.doc_count;
  check(docCount === expected, `A pushed the ${total}-message chat: the server holds ${docCount} of ${expected} documents (${((Date.now() - pushStarted) / 1000).toFixed(1)} s after the reload; ${pushedBefore} pushed before it)`);
  const pulledBefore = (await syncStatus(b)).pulled;
  const askedAtPull = bulkGets.length;
  bulkGetDelay = 400;
  await contextB.setOffline(false);
  await waitSync(b, (s) => s.pulled - pulledBefore > 400, 'B to be mid-way', 60_000);
  await stopCouch();
  const cut = (await syncStatus(b)).pulled - pulledBefore;
  await waitSync(b, (s) => s.state === 'retrying', 'B retrying', 10_000);
  const bulkBefore = traffic.byPath._bulk_get ?? 0;
  const listedBefore = traffic.since.length;
  const askedBefore = bulkGets.length;
  bulkGetDelay = 0;
  await startCouch();
  await syncNow(b);
  const done = await waitStored(b, longId, (m) => m.length === total, `B to hold all ${total} messages`, 120_000);
  const pulledAfter = (await waitSync(b, live, 'B live')).pulled - pulledBefore;
  check(done.length === total, `the ${total}-message chat replicated (${done.length})`);
  // Once caught up, B packs the long chat it pulled (not between batches, each of which would
  // undo the copy): its first opening reads one record, not 5 000.
  let packedAfterPull = null;
  for (let i = 0; i < 100 && !(packedAfterPull = await packedIn(b, longId)); i++) await new Promise((r) => setTimeout(r, 100));
  check(packedAfterPull?.changes.length === 0, `B packed the long chat it pulled, before anyone opened it (${packedAfterPull ? 'a copy, nothing written since' : 'no copy'})`);
  const resumedFrom = traffic.since[listedBefore];
  // Only B pulls in this step (A has nothing new to fetch): a revision delivered before the cut
  // and asked for again after the restart was fetched twice. B's count of pulled documents is no
  // measure of that: besides the long chat it may take newer revisions of the first chat's
  // document (the merge of step 3 settling), printed here.
  const delivered = new Set(bulkGets.slice(0, askedBefore).filter((r) => r.delivered).flatMap((r) => r.asked));
  const again = bulkGets.slice(askedBefore).flatMap((r) => r.asked).filter((rev) => delivered.has(rev));
  const others = bulkGets.slice(askedAtPull).filter((r) => r.delivered).flatMap((r) => r.asked).filter((rev) => !rev.startsWith(`msg:${longId}:`));
  console.log(`  fetched in this step besides the long chat's messages: ${[...new Set(others)].join(', ')}`);
  check(cut > 0 && cut < total && again.length === 0, `after the restart nothing was fetched twice: ${cut} before the cut, ${pulledAfter} documents pulled in all; fetched again: ${again.length ? again.slice(0, 5).join(', ') : 'none'}`);
  check(Number(resumedFrom) > 0, `the first _changes after the restart starts from the checkpoint (since=${resumedFrom}), not from 0`);
  console.log(`  _bulk_get request bytes after the restart: ${(traffic.byPath._bulk_get ?? 0) - bulkBefore}`);

  // 5. One new turn in the long chat: bytes of a turn, not of the chat.
  // B opened the long chat once (its packed copy written then), went back to the first one and
  // reloaded: the long chat is not in B's engine when B pulls the turn into its records.
  const firstClick = Date.now();
  await b.locator(`[data-testid=chat-item][data-chat-id="${longId}"]`).click();
  await b.waitForFunction((chat) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === chat && document.querySelector('[data-testid=show-earlier]') && !document.querySelector('[data-testid=loading-earlier]'), longId, { timeout: 20_000 }).catch(() => {});
  console.log(`  B: the first click on the long chat it pulled → usable ${Date.now() - firstClick} ms`);
  await b.locator(`[data-testid=chat-item][data-chat-id="${id}"]`).click();
  await b.waitForFunction((chat) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === chat, id, { timeout: 20_000 }).catch(() => {});
  await b.reload();
  await setSync(b); // B's password was not remembered
  check(await packedIn(b, longId), 'B opened the long chat and keeps a packed copy of it');
  await a.locator(`[data-testid=chat-item][data-chat-id="${longId}"]`).click();
  await a.waitForFunction((chat) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === chat && !document.querySelector('[data-testid=loading-earlier]'), longId, { timeout: 20_000 });
  const assistants = await a.locator('[data-testid=message][data-role=assistant]').count();
  await waitSync(a, live, 'A live');
  const sentBefore = traffic.sent;
  const pathsBefore = { ...traffic.byPath };
  await a.fill('[data-testid=composer]', 'One more turn');
  await a.click('[data-testid=send]');
  await waitIdle(a, Math.min(assistants + 1, 200), 20_000).catch(() => {});
  // The turn is pushed when the server holds its two messages.
  const docsBefore = (await couchRequest('GET', DB)).body?.doc_count ?? 0;
  for (let i = 0; i < 100 && ((await couchRequest('GET', DB)).body?.doc_count ?? 0) < docsBefore + 2; i++) await new Promise((r) => setTimeout(r, 200));
  await new Promise((r) => setTimeout(r, 1500));
  const turnBytes = traffic.sent - sentBefore;
  if (turnBytes >= 40_000) console.log('  by path:', JSON.stringify(Object.fromEntries(Object.entries(traffic.byPath).map(([k, v]) => [k, v - (pathsBefore[k] ?? 0)]).filter(([, v]) => v))));
  const chatBytes = history.length;
  check(turnBytes > 0 && turnBytes < 40_000, `one new turn in a ${total}-message chat sent ${turnBytes} bytes (the chat is ${chatBytes} bytes)`);
  console.log(`  bytes sent by the page for one turn: ${turnBytes}; all traffic so far sent ${traffic.sent}, received ${traffic.received}`);
  // B pulls the turn; its copy of the long chat went with the pull: opened now, the chat ends
  // with the new turn.
  await waitStored(b, longId, (m) => m.some((text) => text.includes('One more turn')), 'B to pull the new turn');
  // The pull listed the turn's messages for B's copy, as a save does, and kept it: B opens the
  // long chat from one record plus the two pulled ones, not from its 5 000 records again.
  const kept = await packedIn(b, longId);
  check(kept && kept.changes.length >= 2, `B's packed copy of the long chat stayed through the pull, which listed the turn (${kept ? `${kept.changes.length} messages listed` : 'the copy went'})`);
  const clicked = Date.now();
  await b.locator(`[data-testid=chat-item][data-chat-id="${longId}"]`).click();
  await b.getByText('One more turn').first().waitFor({ timeout: 20_000 }).catch(() => {});
  const onScreen = Date.now() - clicked;
  // Usable: the whole chat in the engine and drawn ("show earlier" offered, nothing loading).
  await b.waitForFunction(() => document.querySelector('[data-testid=show-earlier]') && !document.querySelector('[data-testid=loading-earlier]'), null, { timeout: 20_000 }).catch(() => {});
  console.log(`  B: click on the long chat → A's new turn on screen ${onScreen} ms, the chat usable ${Date.now() - clicked} ms`);
  const lastInB = await b.locator('[data-testid=message][data-role=user]').last().textContent().catch(() => '');
  check(lastInB.includes('One more turn'), `B opens the long chat with A's new turn, not its packed copy from before (${lastInB.slice(0, 60)})`);

  // 6. Wrong password; a URL that is not CouchDB: clear status, chats kept.
  const listedChats = (page) => page.locator('[data-testid=chat-item]').count();
  const before = await listedChats(a);
  await setSync(a, { password: 'wrong', remember: true });
  const refused = await waitSync(a, (s) => s.state === 'stopped', 'A stopped', 10_000);
  const said = await a.textContent('[data-testid=sync-status]');
  check(/name and password/.test(said), `wrong credentials: "${said}"`);
  await inThemes(a, 'sync refused', 'sync-refused');
  await a.screenshot({ path: join(workspace, '..', 'palaver-sync-refused.png') }).catch(() => {});
  await setSync(a, { url: serve.origin });
  const notCouch = await waitSync(a, (s) => s.state === 'stopped' && !/name and password/.test(s.text), 'A stopped again', 10_000);
  check(/should be the CouchDB server/.test(notCouch.text), `a URL that is not CouchDB: ${notCouch.text}`);
  await setSync(a, { database: 'Not A Name' });
  // A person reads the sentence when it shows (the previous stop's line goes first).
  await a.locator('[data-testid=sync-status]').filter({ hasText: /database name/ }).waitFor({ timeout: 5_000 }).catch(() => {});
  check(/database name/.test(await a.textContent('[data-testid=sync-status]')), `a bad database name is refused before any request (${await a.textContent('[data-testid=sync-status]')})`);
  check(await listedChats(a) === before, `every chat is still here (${before})`);
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
} catch (error) {
  check(false, `the sync test ran to its end (${error.stack ?? error})`);
} finally {
  for (const context of contexts) await context.close().catch(() => {});
  double.child.kill();
  serve.child.kill();
  proxy.close();
  couchServerHere.kill();
  await cleanup(couchDir, workspace, ...profiles);
}
process.exit(failed() ? 1 : 0);
