// Memory over a long session (issue 41, goal 4): one tab, the real `palaver serve`, the provider
// double; TURNS turns, each a read_file call and an answer, typed and sent as a person does. Every
// EVERY turns, after a forced garbage collection: the JS heap, the engine's wasm memory, the DOM's
// element count and the chat's own stored size (its export), and palaver serve's RSS. Then
// palaver serve's RSS across CALLS direct tool calls, and a tab with the 5 000-message chat open
// against that chat's JSON size. Prints numbers; asserts nothing (a benchmark, not a test).
// node tests/browser/bench-memory.mjs [--turns 1000] [--every 100] [--calls 10000]
import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { join } from 'node:path';
import { root, startDouble, startServe, launch, tempDir, cleanup, openaiStream, importFile } from './harness.mjs';
import { person } from './person.mjs';

const arg = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? Number(process.argv[at + 1]) : fallback;
};
const TURNS = arg('turns', 1000);
const EVERY = arg('every', 100);
const CALLS = arg('calls', 10_000);
const MB = (bytes) => `${(bytes / 1048576).toFixed(1)} MB`;
const sse = (body) => ({ body, headers: { 'content-type': 'text/event-stream' } });

const workspace = await tempDir('palaver-mem-ws-');
const profile = await tempDir('palaver-mem-profile-');
await writeFile(join(workspace, 'notes.txt'), 'A line of notes the model reads on every turn.\n'.repeat(40));
const double = await startDouble();
const serve = await startServe(workspace, []);
const rss = async () => Number((await readFile(`/proc/${serve.child.pid}/status`, 'utf8')).match(/VmRSS:\s+(\d+)/)[1]) * 1024;
const bigProfile = await tempDir('palaver-mem-big-');
const context = await launch(profile, { args: ['--enable-precise-memory-info'] });
const contexts = [context];

try {
  const page = await context.newPage();
  await page.addInitScript(() => { Error.stackTraceLimit = 80; }); page.on("console", (m) => { const t = m.text(); if (t.startsWith("GROW")) { const ls = t.split("\n"); console.log(ls[0].split(" ").slice(0,3).join(" "), ls.slice(1).filter((l) => !/grow_watch|raw_vec|alloc::|__rust|Error::new|__wbg_new|wbg_log|<anonymous>|Vec<T|serde|Serialize|collect_seq|format_escaped|json::ser/.test(l)).map((l) => l.replace(/\(http.*$/, "").replace(/palaver.wasm./,"").replace(/::h[0-9a-f]{16}/,"").trim()).slice(0, 10).join(" | ")); } });
  await page.goto(serve.printed);
  const cdp = await context.newCDPSession(page);
  const me = person(page);
  const filler = 'The notes say what they say, and this answer repeats a little of them. '.repeat(3);
  const responses = [];
  for (let i = 1; i <= TURNS; i++) {
    responses.push(sse(openaiStream({ toolCalls: [{ id: `call_${i}`, name: 'read_file', args: { path: 'notes.txt' } }] })));
    responses.push(sse(openaiStream({ text: `Answer ${i}: ${filler}` })));
  }
  const url = await double.script('memory', responses);
  await me.setProvider({ baseUrl: url, key: 'sk-memory' });

  /** Heap after a full collection, wasm memory, DOM size, the chat's stored size, serve's RSS. */
  async function sample(chatId) {
    await cdp.send('HeapProfiler.collectGarbage');
    const { usedSize } = await cdp.send('Runtime.getHeapUsage');
    const seen = await page.evaluate(async (id) => {
      // The memory is read before the export that measures the chat, so it is the session's alone.
      const wasm = globalThis.palaverApp.wasmMemory();
      const engine = await globalThis.palaverApp.engine();
      const exported = id ? await engine.exportChat(id, 'refact') : '';
      return { wasm, elements: document.getElementsByTagName('*').length, stored: exported.length };
    }, chatId);
    return { heap: usedSize, ...seen, serve: await rss() };
  }

  const rows = [];
  let chatId = null;
  const started = Date.now();
  for (let i = 1; i <= TURNS; i++) {
    await me.send(`Turn ${i}: read the notes`);
    await page.waitForFunction((n) => {
      const last = [...document.querySelectorAll('[data-testid=message][data-role=assistant]:not([data-streaming])')].at(-1);
      return last?.textContent.includes(`Answer ${n}:`) && document.querySelector('[data-testid=stop]')?.hidden;
    }, i, { timeout: 30_000, polling: 20 });
    chatId ??= await page.evaluate(() => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId ?? null);
    if (i === 1 || i % EVERY === 0) {
      const s = await sample(chatId);
      rows.push({ turn: i, ...s });
      console.log(`turn ${String(i).padStart(5)}: JS heap ${MB(s.heap)}, wasm ${MB(s.wasm)}, ${s.elements} elements, chat stored ${MB(s.stored)}, palaver serve RSS ${MB(s.serve)} (${((Date.now() - started) / i).toFixed(0)} ms a turn)`);
    }
  }
  const [first, last] = [rows[0], rows.at(-1)];
  console.log(`\n${TURNS} turns (${TURNS * 2} requests, ${TURNS} tool calls): JS heap +${MB(last.heap - first.heap)}, wasm +${MB(last.wasm - first.wasm)}, together +${MB(last.heap + last.wasm - first.heap - first.wasm)} against the chat's own growth +${MB(last.stored - first.stored)} (${((last.heap + last.wasm - first.heap - first.wasm) / Math.max(1, last.stored - first.stored)).toFixed(2)}×); elements ${first.elements} → ${last.elements}; palaver serve RSS ${MB(first.serve)} → ${MB(last.serve)}`);

  // palaver serve alone: CALLS tool calls straight to its API.
  const before = await rss();
  const call = () => fetch(`${serve.origin}/api/tools/read_file`, {
    method: 'POST', headers: { authorization: `Bearer ${serve.token}`, 'content-type': 'application/json', origin: serve.origin }, body: JSON.stringify({ path: 'notes.txt' }),
  }).then((r) => r.arrayBuffer());
  const line = [];
  for (let i = 1; i <= CALLS; i++) {
    await call();
    if (i % Math.max(1, Math.floor(CALLS / 10)) === 0) line.push(MB(await rss()));
  }
  console.log(`palaver serve RSS over ${CALLS} read_file calls: ${MB(before)} → ${line.join(' → ')}`);

  // A tab with the 5 000-message chat open, against the chat's JSON size: a fresh profile that
  // holds it and a small chat; the tab starts on the small one and the long one is clicked.
  const history = gunzipSync(readFileSync(join(root, '../shared/bench/history-5k.json.gz'))).toString('utf8');
  await page.close();
  const other = await launch(bigProfile, { args: ['--enable-precise-memory-info'] });
  contexts.push(other);
  const big = await other.newPage();
  await big.goto(serve.printed);
  const longId = await importFile(big, history, 'history-5k.json');
  await importFile(big, JSON.stringify([{ role: 'user', content: 'A small chat' }, { role: 'assistant', content: 'Small.' }]), 'small.json');
  await big.reload();
  await big.locator('[data-testid=chat-item][aria-current=true]').waitFor();
  const bigCdp = await other.newCDPSession(big);
  await bigCdp.send('HeapProfiler.collectGarbage');
  const heapBefore = await bigCdp.send('Runtime.getHeapUsage');
  const wasmBefore = await big.evaluate(async () => {
    await globalThis.palaverApp.engine();
    return globalThis.palaverApp.wasmMemory();
  });
  await person(big).click(big.locator(`[data-testid=chat-item][data-chat-id="${longId}"]`));
  // Usable: the whole chat in the engine (the window's "Show earlier messages" is offered).
  await big.waitForFunction(() => document.querySelector('[data-testid=show-earlier]') && !document.querySelector('[data-testid=loading-earlier]'), null, { timeout: 60_000 });
  const inEngine = await big.evaluate(async (id) => (await (await globalThis.palaverApp.engine()).peekChat(id, 100000)).messages.length, longId);
  await bigCdp.send('HeapProfiler.collectGarbage');
  const { usedSize } = await bigCdp.send('Runtime.getHeapUsage');
  const wasm = await big.evaluate(() => globalThis.palaverApp.wasmMemory());
  const added = usedSize - heapBefore.usedSize + wasm - wasmBefore;
  console.log(`the 5 000-message chat opened (${inEngine} messages in the engine): JS heap ${MB(heapBefore.usedSize)} → ${MB(usedSize)}, wasm ${MB(wasmBefore)} → ${MB(wasm)}; the tab ${MB(usedSize + wasm)} in all, the chat's share ${MB(added)} against its JSON ${MB(history.length)} (${(added / history.length).toFixed(2)}×; the whole tab ${((usedSize + wasm) / history.length).toFixed(2)}×)`);
} finally {
  for (const c of contexts) await c.close().catch(() => {});
  double.child.kill();
  serve.child.kill();
  await cleanup(workspace, profile, bigProfile);
}
