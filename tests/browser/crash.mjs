// SECURITY B2/B3 in a real Chromium: the browser is killed (SIGKILL) in the middle of a large save
// transaction (10 000 messages in one IndexedDB transaction); reopening shows every
// acknowledged save and, of the interrupted one, all of it or nothing — and loads without error.
// node tests/browser/crash.mjs   (after scripts/lib.sh build_pkg; uses /usr/bin/chromium)
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '../../..');
// Never hang CI: the whole test gets two minutes.
setTimeout(() => {
  console.log('FAIL the crash test did not finish in 120 s');
  process.exit(1);
}, 120_000).unref();
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
const profile = await mkdtemp(join(tmpdir(), 'palaver-crash-'));
const launch = () => chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
let context = await launch();
let failed = false;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  failed ||= !ok;
};
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
  const big = await page.evaluate(async () => {
    const messages = Array.from({ length: 10000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} `.padEnd(200, 'x') }));
    const id = await window.palaver.importChat(JSON.stringify(messages));
    return id;
  });
  // Kill the browser outright (SIGKILL, as a crash or an OOM kill would), mid-transaction.
  await new Promise((r) => setTimeout(r, 40));
  const killed = await killProfileProcesses(profile);
  check(killed > 0, `the browser was killed mid-save (${killed} processes)`);
  await context.close().catch(() => {});
  context = await launch();
  const fresh = await context.newPage();
  fresh.on('pageerror', (e) => console.log(`page error: ${e.message}`));
  await fresh.goto(url);
  await fresh.waitForFunction(() => window.ready === true);
  const after = await fresh.evaluate(async ([smallId, bigId]) => {
    const chats = await window.palaver.listChats();
    const count = async (id) => {
      if (!chats.some((c) => c.id === id)) return 0;
      const snap = await window.palaver.openChat(id);
      return snap.messages.length;
    };
    return { small: await count(smallId), big: await count(bigId), chats: chats.length };
  }, [small.id, big]);
  check(after.small === 1, `the acknowledged chat survived the crash (${after.small} message)`);
  check(after.big === 0 || after.big === 10000, `the interrupted save is all or nothing (${after.big} of 10000 messages)`);
  console.log(`B2: after the crash the big chat has ${after.big} messages (${after.big ? 'committed before the crash' : 'rolled back'})`);
} finally {
  await context.close().catch(() => {});
  server.close();
  await rm(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
