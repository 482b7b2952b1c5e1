// SECURITY B2/B3 in a real Chromium: the browser is killed (SIGKILL) in the middle of a large save
// transaction (10 000 messages in one IndexedDB transaction); reopening shows every
// acknowledged save and, of the interrupted one, all of it or nothing — and loads without error.
// node tests/browser/crash.mjs   (after scripts/lib.sh build_pkg; uses /usr/bin/chromium)
import { createServer } from 'node:http';
import { readdir, readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { check, failed, watchdog, root, launch as launchChromium, tempDir, cleanup } from './harness.mjs';

// Never hang CI: the whole test gets two minutes.
watchdog(120, 'the crash test');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' };

/** SIGKILLs every process of the browser using `profile` (found through /proc, no procps). */
async function killProfileProcesses(profile) {
  let killed = 0;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(`--user-data-dir=${profile}`)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
        killed++;
      } catch {
        // already gone
      }
    }
  }
  return killed;
}

const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
  const allowed = path.startsWith('/pkg/') || path.startsWith('/tests/browser/');
  try {
    if (!allowed || path.includes('..')) throw new Error('not served');
    const body = await readFile(join(root, path));
    res.writeHead(200, { 'content-type': types[extname(path)] ?? 'application/octet-stream' });
    res.end(body);
  } catch {
    res.writeHead(404);
    res.end();
  }
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const url = `http://127.0.0.1:${server.address().port}/tests/browser/host.html`;

// A persistent profile: if the crash takes the whole browser down (headless often does), the
// next launch reads the same IndexedDB from disk, as after a real crash.
const profile = await tempDir('palaver-crash-');
const launch = () => launchChromium(profile);
let context = await launch();
try {
  const page = await context.newPage();
  page.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  await page.goto(url);
  await page.waitForFunction(() => window.ready === true);
  // An acknowledged save first.
  const small = await page.evaluate(async () => {
    const id = await window.palaver.importChat(JSON.stringify([{ role: 'user', content: 'saved before the crash' }]));
    for (let i = 0; i < 200 && window.palaver.recordsWritten() < 2; i++) await new Promise((r) => setTimeout(r, 25));
    return { id, written: window.palaver.recordsWritten() };
  });
  check(small.written >= 2, `the small chat was acknowledged (${small.written} records)`);
  // Then a 10 000-message save, and the renderer dies while it is being written.
  // importChat resolves only once the chat is stored, so it is not awaited: its save starts in
  // the same task (parse, restore, save effect) and is under way when the browser dies.
  // A probe tells "rolled back" from "never started": a read of the messages store opened after
  // the save's write transaction waits until that transaction ends (IndexedDB orders them), so a
  // probe still pending when the browser dies proves the write was under way.
  await page.evaluate(async () => {
    // 1,000 characters each (10 MB): with 200 the whole save once ended before the kill landed.
    const messages = Array.from({ length: 10000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} `.padEnd(1000, 'x') }));
    window.palaver.importChat(JSON.stringify(messages)).catch(() => {});
    window.probe = 'not opened';
    await new Promise((r) => setTimeout(r, 0));
    const open = indexedDB.open('crash-test');
    open.onsuccess = () => {
      const count = open.result.transaction('messages', 'readonly').objectStore('messages').count();
      window.probe = 'pending';
      count.onsuccess = () => { window.probe = `read ${count.result}`; };
    };
  });
  await page.waitForFunction(() => window.probe !== 'not opened', null, { timeout: 5_000 }).catch(() => {});
  // Kill the browser outright (SIGKILL, as a crash or an OOM kill would), mid-transaction: at
  // once (on a quiet machine the whole save can end within a few tens of milliseconds).
  const probe = await page.evaluate(() => window.probe);
  const killed = await killProfileProcesses(profile);
  check(probe === 'pending', `the 10 000-message save was being written when the browser died (a read queued behind it: ${probe})`);
  check(killed > 0, `the browser was killed mid-save (${killed} processes)`);
  await context.close().catch(() => {});
  context = await launch();
  const fresh = await context.newPage();
  fresh.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  await fresh.goto(url);
  await fresh.waitForFunction(() => window.ready === true);
  const after = await fresh.evaluate(async (smallId) => {
    const chats = await window.palaver.listChats();
    const count = async (id) => (id ? (await window.palaver.openChat(id)).messages.length : 0);
    const bigId = chats.find((c) => c.id !== smallId)?.id;
    const smallText = chats.some((c) => c.id === smallId) ? (await window.palaver.openChat(smallId)).messages.map((m) => m.content).join('|') : '';
    return { small: chats.some((c) => c.id === smallId) ? await count(smallId) : 0, smallText, big: await count(bigId), chats: chats.length };
  }, small.id);
  check(after.small === 1 && after.smallText === 'saved before the crash', `the acknowledged chat survived the crash, word for word (${after.small} message: ${after.smallText})`);
  check(after.chats <= 2 && (after.big === 0 || after.big === 10000), `the interrupted save is all or nothing (${after.big} of 10000 messages)`);
  console.log(`B2: after the crash the big chat has ${after.big} messages (${after.big ? 'committed before the crash' : 'rolled back'})`);
} finally {
  await context.close().catch(() => {});
  server.close();
  await cleanup(profile);
}
process.exit(failed() ? 1 : 0);
