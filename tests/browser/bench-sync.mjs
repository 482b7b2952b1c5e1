// Sync, measured beside PouchDB's own replicator (issue 41, goal 7): the 5,000-message chat pushed
// and pulled through the same pouchdb-server (tests/couch), in the same Chromium, each side in a
// fresh profile. Palaver: Settings → Sync as a person fills it; pushed from the moment the imported
// chat is stored until the server holds every document, pulled from Save (the dialog closed) until the status is live
// with every document received. PouchDB (npm `pouchdb`, its browser build, IndexedDB): the same
// documents (read back from the server after Palaver's push) replicated from a local database to
// a new one on the server, and from the server into a new local database. The results are
// compared: the same number of documents on each side, and the chat's messages in Palaver.
// node tests/browser/bench-sync.mjs [--rounds N]   (after build_pkg and `cargo build`; tests/couch's packages installed)
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import { root, watchdog, startServe, launch, tempDir, cleanup, importFile } from './harness.mjs';
import { couchServer } from './couch.mjs';
import { setSync, waitSync } from './sync-page.mjs';

const argv = process.argv.slice(2);
const rounds = Number(argv[argv.indexOf('--rounds') + 1] || 3) || 3;
watchdog(300 * rounds, 'the sync benchmark');
const ADMIN = { username: 'alice', password: 'wonderland' };
const history = gunzipSync(readFileSync(join(root, '../shared/bench/history-5k.json.gz'))).toString('utf8');
const pouchdbJs = readFileSync(join(root, 'tests/couch/node_modules/pouchdb/dist/pouchdb.min.js'));
const couchDir = await tempDir('palaver-bench-couch-');
const workspace = await tempDir('palaver-bench-sync-ws-');
const couch = await couchServer(couchDir);
await couch.start();
const serve = await startServe(workspace, []);
// PouchDB's page: a plain origin serving the page and PouchDB's browser build.
const pouchHost = http.createServer((req, res) => {
  if (req.url === '/pouchdb.min.js') return res.end(pouchdbJs);
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<!doctype html><title>PouchDB</title><script src="/pouchdb.min.js"></script>');
});
await new Promise((ok) => pouchHost.listen(0, '127.0.0.1', ok));
const pouchOrigin = `http://127.0.0.1:${pouchHost.address().port}`;
const dirs = [couchDir, workspace];
const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;
const docCount = async (db) => (await couch.request('GET', db, null, auth)).body?.doc_count;
let auth = null;

/** A page in a new browser profile, at `url`. */
async function freshPage(url) {
  const profile = await tempDir('palaver-bench-sync-profile-');
  dirs.push(profile);
  const context = await launch(profile);
  const page = await context.newPage();
  await page.goto(url);
  return { page, context };
}

async function palaverRound(db) {
  ({ auth } = await couch.secure(ADMIN, db));
  const options = { url: couch.origin, database: db, ...ADMIN };
  const a = await freshPage(serve.printed);
  await setSync(a.page, options);
  await waitSync(a.page, (s) => s.state === 'live', 'A live');
  const chat = await importFile(a.page, history, 'history-5k.json');
  const messages = (await a.page.evaluate(async (id) => (await (await globalThis.palaverApp.engine()).peekChat(id, 100000)).messages.length, chat));
  const expected = 1 + messages; // the chat's document and one per message
  const pushStarted = Date.now();
  while ((await docCount(db)) < expected && Date.now() - pushStarted < 240_000) await new Promise((r) => setTimeout(r, 50));
  const push = Date.now() - pushStarted;
  const onServer = await docCount(db);
  await a.context.close();
  const b = await freshPage(serve.printed);
  await setSync(b.page, options);
  const pullStarted = Date.now(); // from Save, as PouchDB's from its call
  const status = await waitSync(b.page, (s) => s.state === 'live' && s.pulled >= expected, 'B to pull every document', 240_000);
  const pull = Date.now() - pullStarted;
  const pulled = await b.page.evaluate(async (id) => (await (await globalThis.palaverApp.engine()).peekChat(id, 100000)).messages.length, chat);
  await b.context.close();
  if (onServer !== expected || pulled !== messages || status.pulled < expected) {
    throw new Error(`Palaver's sync did not carry the chat whole: ${onServer} of ${expected} documents on the server, ${pulled} of ${messages} messages pulled`);
  }
  return { push, pull, documents: expected };
}

/** PouchDB: the documents of `source` (as Palaver pushed them) pushed from a local database to a
 * new one on the server, then pulled from it into a new local database in another profile. */
async function pouchRound(source, db) {
  await couch.secure(ADMIN, db);
  const all = (await couch.request('GET', `${source}/_all_docs?include_docs=true`, null, auth)).body.rows;
  const docs = all.map(({ doc }) => { const { _rev, ...rest } = doc; return rest; });
  const remote = `${couch.origin}/${db}`;
  const a = await freshPage(`${pouchOrigin}/`);
  const push = await a.page.evaluate(async ({ docs, remote, user }) => {
    const local = new PouchDB('bench-local');
    for (let i = 0; i < docs.length; i += 500) await local.bulkDocs(docs.slice(i, i + 500));
    const started = performance.now();
    await PouchDB.replicate(local, new PouchDB(remote, { auth: user }));
    return performance.now() - started;
  }, { docs, remote, user: ADMIN });
  await a.context.close();
  const onServer = await docCount(db);
  const b = await freshPage(`${pouchOrigin}/`);
  const { pull, pulled } = await b.page.evaluate(async ({ remote, user }) => {
    const local = new PouchDB('bench-pulled');
    const started = performance.now();
    await PouchDB.replicate(new PouchDB(remote, { auth: user }), local);
    const pull = performance.now() - started;
    return { pull, pulled: (await local.info()).doc_count };
  }, { remote, user: ADMIN });
  await b.context.close();
  if (onServer !== docs.length || pulled !== docs.length) {
    throw new Error(`PouchDB did not carry the documents whole: ${onServer} and ${pulled} of ${docs.length}`);
  }
  return { push, pull, documents: docs.length };
}

try {
  const rows = [];
  for (let round = 1; round <= rounds; round++) {
    const palaver = await palaverRound(`palaver-${round}`);
    const pouch = await pouchRound(`palaver-${round}`, `pouchdb-${round}`);
    if (pouch.documents !== palaver.documents) throw new Error(`different work: ${palaver.documents} and ${pouch.documents} documents`);
    rows.push({ palaver, pouch });
    console.log(`round ${round} (${palaver.documents} documents): push Palaver ${seconds(palaver.push)}, PouchDB ${seconds(pouch.push)}; pull Palaver ${seconds(palaver.pull)}, PouchDB ${seconds(pouch.pull)}`);
  }
  const median = (values) => values.sort((x, y) => x - y)[Math.floor(values.length / 2)];
  const push = [median(rows.map((r) => r.palaver.push)), median(rows.map((r) => r.pouch.push))];
  const pull = [median(rows.map((r) => r.palaver.pull)), median(rows.map((r) => r.pouch.pull))];
  console.log(`push the 5,000-message chat, median of ${rounds}: Palaver ${seconds(push[0])}, PouchDB's replicator ${seconds(push[1])} (Palaver takes ${(push[0] / push[1]).toFixed(2)}x PouchDB's time)`);
  console.log(`pull it into a new device, median of ${rounds}: Palaver ${seconds(pull[0])}, PouchDB's replicator ${seconds(pull[1])} (Palaver takes ${(pull[0] / pull[1]).toFixed(2)}x PouchDB's time)`);
} finally {
  couch.kill();
  serve.child.kill();
  pouchHost.close();
  await cleanup(...dirs);
}
