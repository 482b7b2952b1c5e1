// Issue 37's fault run: two browsers (each with its own `palaver serve` and workspace) keep one chat
// in sync through pouchdb-server while, in turn, the tab dies mid-stream, `palaver serve` is killed
// mid-tool, the MCP server is killed mid-call, the provider resets the connection mid-stream and
// pouchdb-server is killed mid-pull. Every message a person saw acknowledged (a sent message shown
// in the transcript, a finished answer) must end up on both devices, in both workspace copies and
// in both exports, in one order. The faults survived and the messages checked are printed.
// node tests/browser/faults.mjs   (after build_pkg, `cargo build`, tests/couch and tests/mcp installed)
import http from 'node:http';
import { readdir, readFile, writeFile, chmod, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  root, check, failed, watchdog, startDouble, startServe, launch, tempDir, cleanup, openaiStream, openChatId, chatMenu,
} from './harness.mjs';
import { person } from './person.mjs';
import { couchServer, freePort } from './couch.mjs';

watchdog(Number(process.env.FAULTS_WATCHDOG ?? 420), 'the fault run');
const ADMIN = { username: 'carol', password: 'faults-and-all' };
const DB = 'palaver-faults';
const couchDir = await tempDir('palaver-faults-couch-');
const home = await tempDir('palaver-faults-home-');
const workspaces = [await tempDir('palaver-faults-ws-a-'), await tempDir('palaver-faults-ws-b-')];
const profiles = [await tempDir('palaver-faults-a-'), await tempDir('palaver-faults-b-')];
const pageErrors = [];
const sse = (body) => ({ body, headers: { 'content-type': 'text/event-stream' } });
const faults = [];
/** What a person saw acknowledged: `role: text`, in the order it happened. */
const acknowledged = [];
const ack = (role, text) => acknowledged.push(`${role}: ${text}`);
const step = (what) => console.log(`  [${new Date().toISOString().slice(11, 19)}] ${what}`);

// --- pouchdb-server, behind a proxy that can kill it the moment a pull asks for documents ---
step('starting pouchdb-server, two palaver serve, the provider double');
const couch = await couchServer(couchDir);
await couch.start();
const { auth } = await couch.secure(ADMIN, DB);
let killOnPull = null; // set to a function: the next _bulk_get kills the server first
const proxy = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    if (killOnPull && req.url.includes('/_bulk_get')) {
      const kill = killOnPull;
      killOnPull = null;
      await kill();
    }
    const upstream = http.request({ host: '127.0.0.1', port: couch.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    upstream.end(Buffer.concat(chunks));
  });
});
await new Promise((ok) => proxy.listen(0, '127.0.0.1', ok));
const COUCH = `http://127.0.0.1:${proxy.address().port}`;

// --- device A's palaver serve: shell allowed, server-everything as its MCP server, a token file
// and a fixed port so that after a kill it comes back where the page knows it ---
const servers = join(root, 'tests/mcp/node_modules/@modelcontextprotocol');
const mcpConfig = join(home, 'mcp.json');
await writeFile(mcpConfig, JSON.stringify({
  mcpServers: { everything: { command: 'node', args: [join(servers, 'server-everything/dist/index.js'), 'stdio'], trust_annotations: true } },
}));
const tokenFile = join(home, 'token');
await writeFile(tokenFile, `${'fa17'.repeat(16)}\n`);
await chmod(tokenFile, 0o600);
const portA = await freePort();
const serveArgsA = ['--allow-shell', '--mcp', mcpConfig, '--token-file', tokenFile];
let serveA = await startServe(workspaces[0], serveArgsA, { port: portA });
const serveB = await startServe(workspaces[1], []);
const double = await startDouble();

/** Every process whose command line holds `marker`, killed outright; how many. */
async function killProcesses(marker) {
  let killed = 0;
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).replaceAll('\0', ' ');
    if (!cmdline.includes(marker)) continue;
    try {
      process.kill(Number(pid), 'SIGKILL');
      killed += 1;
    } catch {
      // already gone
    }
  }
  return killed;
}

async function device(profile, serve) {
  const context = await launch(profile);
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(serve.printed);
  return { context, page, serve };
}

async function setSync(page) {
  const me = person(page);
  await me.openSettings('sync');
  await me.type('sync-url', COUCH);
  await me.type('sync-database', DB);
  await me.type('sync-username', ADMIN.username);
  await me.type('sync-password', ADMIN.password);
  await me.check('remember-sync', true);
  await me.click('save-settings');
  await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
}

/** A chat's messages as stored in this browser (an assertion on storage, never a wait to act). */
const stored = (page, id) => page.evaluate(async (chat) => {
  const peek = await (await globalThis.palaverApp.engine()).peekChat(chat, 100000).catch(() => ({ messages: [] }));
  return peek.messages.map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`);
}, id);
const holdsAll = (messages) => acknowledged.every((m) => messages.includes(m));
const missing = (messages) => acknowledged.filter((m) => !messages.includes(m));
/** The acknowledged messages in `messages` keep the order they happened in. */
const inOrder = (messages) => {
  const at = acknowledged.map((m) => messages.indexOf(m));
  return at.every((i, k) => k === 0 || i > at[k - 1]);
};
async function until(what, probe, ok, timeout = 30_000) {
  const started = Date.now();
  let last;
  while (Date.now() - started < timeout) {
    last = await probe().catch((e) => `(${e.message})`);
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 250));
  }
  console.log(`  (waited ${timeout} ms for ${what}; last: ${JSON.stringify(last).slice(0, 400)})`);
  return last;
}
const userShown = (page, text) => page.locator('[data-testid=message][data-role=user]').filter({ hasText: text }).last().waitFor({ timeout: 15_000 });
/** Waits until a finished answer holding `text` shows and Send (not Stop) is back. */
async function answered(page, text, timeout = 30_000) {
  await page.locator('[data-testid=message][data-role=assistant]:not([data-streaming])').filter({ hasText: text }).last().waitFor({ timeout });
  await page.waitForFunction(() => document.querySelector('[data-testid=stop]')?.hidden, null, { timeout });
}

let a = null;
let b = null;
try {
  step('device A: a provider, a first turn, sync');
  a = await device(profiles[0], serveA);
  const me = person(a.page);
  const text = (n) => `Answer ${n}.`;
  const url = await double.script('faults', [
    sse(openaiStream({ text: text(1) })),
    // 1. the tab dies while this streams (slowly)
    { ...sse(openaiStream({ text: 'This answer streams slowly and the tab dies before it ends. '.repeat(4), pieces: 40 })), chunk_bytes: 200, delay_ms: 250 },
    sse(openaiStream({ text: text(3) })),
    // 2. palaver serve is killed while this command runs
    sse(openaiStream({ toolCalls: [{ id: 'call_sleep', name: 'run_command', args: { argv: ['sh', '-c', 'sleep 6; echo slept > slept.txt'] } }] })),
    sse(openaiStream({ text: text(4) })),
    // 3. the MCP server is killed mid-call; then it answers again
    sse(openaiStream({ toolCalls: [{ id: 'call_long', name: 'mcp__everything__trigger-long-running-operation', args: { duration: 20, steps: 20 } }] })),
    sse(openaiStream({ text: text(5) })),
    sse(openaiStream({ toolCalls: [{ id: 'call_echo', name: 'mcp__everything__echo', args: { message: 'the server is back' } }] })),
    sse(openaiStream({ text: text(6) })),
    // 4. the provider resets the connection mid-stream; the retry gets the whole answer
    { ...sse(openaiStream({ text: 'Cut off in the middle of this sentence, never finished. '.repeat(6), pieces: 30 })), close_after_bytes: 900 },
    sse(openaiStream({ text: text(7) })),
    // 6. device B's turn
    sse(openaiStream({ text: text(8) })),
  ]);
  await me.setProvider({ baseUrl: url, key: 'sk-faults', remember: true });
  await me.ask('Turn 1', 1);
  ack('user', 'Turn 1');
  ack('assistant', text(1));
  const id = await openChatId(a.page);
  await setSync(a.page);

  step('fault 1: the tab');
  // Fault 1: the tab's renderer dies mid-stream; a new tab opens the chat and goes on.
  await me.send('Turn 2: the tab dies');
  await userShown(a.page, 'Turn 2: the tab dies');
  ack('user', 'Turn 2: the tab dies');
  await a.page.locator('[data-testid=message][data-role=assistant][data-streaming]').filter({ hasText: 'streams slowly' }).waitFor({ timeout: 15_000 });
  // Long enough for the streamed reply's checkpoint (every 2 s) to be stored.
  await new Promise((r) => setTimeout(r, 2500));
  const cdp = await a.context.newCDPSession(a.page);
  // The renderer dies (the call never answers: nothing is left to answer it).
  const crashed = new Promise((ok) => a.page.once('crash', () => ok(true)));
  cdp.send('Page.crash').catch(() => {});
  check(await Promise.race([crashed, new Promise((r) => setTimeout(() => r(false), 10_000))]), 'the tab crashed mid-stream');
  faults.push('the tab killed mid-stream');
  a.page = await a.context.newPage();
  a.page.on('pageerror', (e) => pageErrors.push(e.message));
  await a.page.goto(serveA.printed);
  const again = person(a.page);
  await again.click(a.page.locator(`[data-testid=chat-item][data-chat-id="${id}"]`));
  await userShown(a.page, 'Turn 2: the tab dies');
  check(true, 'after the crash the new tab shows the message sent before it');
  const partial = await a.page.locator('[data-testid=message][data-role=assistant]').filter({ hasText: 'streams slowly' }).first().textContent({ timeout: 10_000 }).catch(() => '');
  check(/streams slowly/.test(partial), `the answer cut by the crash is kept as far as it was checkpointed (${partial.replace(/\s+/g, ' ').slice(0, 120)})`);
  await again.send('Turn 3 after the crash');
  await answered(a.page, text(3)).catch((e) => check(false, `a turn after the crash (${e.message})`));
  ack('user', 'Turn 3 after the crash');
  ack('assistant', text(3));

  step('fault 2: palaver serve');
  // Fault 2: palaver serve killed while run_command runs; started again on its port and token.
  await again.send('Turn 4: run the slow command');
  ack('user', 'Turn 4: run the slow command');
  await again.click('approve');
  await a.page.getByTestId('tool-approval').waitFor({ state: 'hidden', timeout: 15_000 });
  // Under way (the tools block may be folded: its row is read, not seen).
  // Under way: its row says so (the tools block may be folded: the row is read, not seen).
  await a.page.locator('[data-testid=tool-call][data-tool=run_command][data-status=running]').waitFor({ state: 'attached', timeout: 10_000 }).catch(() => {});
  await new Promise((r) => setTimeout(r, 1000));
  const midTool = await a.page.locator('[data-testid=tool-call][data-tool=run_command]').last().getAttribute('data-status');
  check(midTool === 'running', `the command is under way when palaver serve dies (${midTool})`);
  serveA.child.kill('SIGKILL');
  faults.push('palaver serve killed mid-tool');
  await new Promise((r) => setTimeout(r, 1500));
  serveA = await startServe(workspaces[0], serveArgsA, { port: portA });
  a.serve = serveA;
  await answered(a.page, text(4)).catch((e) => check(false, `the turn ends after palaver serve died (${e.message})`));
  const killedCall = await a.page.locator('[data-testid=tool-call][data-tool=run_command]').last().textContent().catch(() => '');
  check(/stopped|cannot|fail|error|reach/i.test(killedCall), `the interrupted command says it did not finish (${killedCall.replace(/\s+/g, ' ').slice(0, 160)})`);
  ack('assistant', text(4));
  // The command died with palaver serve (its process group is reaped): nothing it would have done
  // reaches the workspace later, unrecorded.
  await new Promise((r) => setTimeout(r, 6000));
  check(!(await stat(join(workspaces[0], 'slept.txt')).then(() => true, () => false)), 'the command killed with palaver serve did not go on writing to the workspace');

  step('fault 3: the MCP server');
  // Fault 3: the MCP server killed mid-call (palaver serve's supervisor starts it again).
  await again.send('Turn 5: the long MCP operation');
  ack('user', 'Turn 5: the long MCP operation');
  const progress = '[data-tool="mcp__everything__trigger-long-running-operation"] [data-testid=tool-progress]';
  await a.page.waitForFunction((sel) => /progress [1-9]/.test(document.querySelector(sel)?.textContent ?? ''), progress, { timeout: 20_000 }).catch(() => {});
  const killedMcp = await killProcesses('server-everything/dist/index.js');
  check(killedMcp > 0, `the MCP server was killed mid-call (${killedMcp} process)`);
  faults.push('the MCP server killed mid-call');
  await answered(a.page, text(5)).catch((e) => check(false, `the turn ends after the MCP server died (${e.message})`));
  ack('assistant', text(5));
  const mcpRow = await a.page.locator('[data-testid=tool-call][data-tool="mcp__everything__trigger-long-running-operation"]').last().textContent().catch(() => '');
  check(/stopped|fail|error/i.test(mcpRow), `the call the server died in says so (${mcpRow.replace(/\s+/g, ' ').slice(0, 160)})`);
  await again.send('Turn 6: is the MCP server back?');
  await answered(a.page, text(6), 60_000).catch((e) => check(false, `a turn after the MCP server died (${e.message})`));
  ack('user', 'Turn 6: is the MCP server back?');
  ack('assistant', text(6));
  const echoed = (await double.log('faults')).filter((e) => e.method === 'POST').at(-1)?.body.messages.find((m) => m.role === 'tool' && m.tool_call_id === 'call_echo');
  check(/the server is back/.test(echoed?.content ?? ''), `the restarted MCP server answers the next call (${String(echoed?.content).slice(0, 80)})`);

  step('fault 4: the provider');
  // Fault 4: the provider resets the connection mid-stream.
  await again.send('Turn 7: the provider cuts off');
  ack('user', 'Turn 7: the provider cuts off');
  faults.push('the provider reset mid-stream');
  const cut = await until('the answer after the reset', async () => {
    const retry = a.page.getByTestId('retry');
    if (await retry.isVisible().catch(() => false)) await again.click('retry');
    return a.page.locator('[data-testid=message][data-role=assistant]:not([data-streaming])').allInnerTexts();
  }, (texts) => texts.some((t) => t.includes(text(7))), 40_000);
  check(cut.some((t) => t.includes(text(7))), 'after the reset the answer comes whole (by itself or on Retry)');
  ack('assistant', text(7));

  step('fault 5: pouchdb-server');
  // Fault 5: device B joins; pouchdb-server is killed the moment B's pull asks for documents.
  b = await device(profiles[1], serveB);
  let killedAt = null;
  killOnPull = async () => {
    killedAt = Date.now();
    await couch.stop();
    setTimeout(() => couch.start().catch((e) => console.log(`  pouchdb-server did not start again: ${e.message}`)), 2000);
  };
  await setSync(b.page);
  const inB = await until('B to hold the chat', () => stored(b.page, id), holdsAll, 90_000);
  check(killedAt !== null, 'pouchdb-server was killed mid-pull');
  faults.push('pouchdb-server killed mid-pull');
  check(holdsAll(inB), `B holds every acknowledged message after the server came back (missing: ${JSON.stringify(missing(inB))})`);

  // B answers in the chat; A sees it.
  const bob = person(b.page);
  await bob.setProvider({ baseUrl: url, key: 'sk-faults' });
  await bob.click(b.page.locator(`[data-testid=chat-item][data-chat-id="${id}"]`));
  await userShown(b.page, 'Turn 7: the provider cuts off');
  await bob.send('Turn 8 from B');
  await answered(b.page, text(8)).catch((e) => check(false, `B's turn (${e.message})`));
  ack('user', 'Turn 8 from B');
  ack('assistant', text(8));

  step('the end: every acknowledged message everywhere');
  // The end: every acknowledged message, everywhere, in one order.
  const endA = await until('A to hold everything', () => stored(a.page, id), holdsAll, 60_000);
  const endB = await stored(b.page, id);
  check(holdsAll(endA) && holdsAll(endB), `both devices hold all ${acknowledged.length} acknowledged messages (A misses ${JSON.stringify(missing(endA))}, B misses ${JSON.stringify(missing(endB))})`);
  check(inOrder(endA) && inOrder(endB), 'in the order they were acknowledged, on both');
  check(JSON.stringify(endA) === JSON.stringify(endB), `the two devices hold the same chat (${endA.length} / ${endB.length} messages)`);
  for (const [k, workspace] of workspaces.entries()) {
    const copy = await until(`workspace copy ${k}`, async () => JSON.parse(await readFile(join(workspace, '.palaver', 'chats', `${id}.json`), 'utf8')).messages
      .map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`), holdsAll, 30_000);
    check(Array.isArray(copy) && holdsAll(copy), `device ${'AB'[k]}'s workspace copy holds them all (misses ${JSON.stringify(Array.isArray(copy) ? missing(copy) : copy)})`);
  }
  for (const [k, { page }] of [a, b].entries()) {
    await person(page).click(page.locator(`[data-testid=chat-item][data-chat-id="${id}"]`));
    const [download] = await Promise.all([page.waitForEvent('download'), chatMenu(page, 'export-chat')]);
    const exported = await readFile(await download.path(), 'utf8');
    const messages = (JSON.parse(exported).messages ?? JSON.parse(exported)).map((m) => `${m.role}: ${typeof m.content === 'string' ? m.content : JSON.stringify(m.content)}`);
    check(holdsAll(messages) && inOrder(messages), `device ${'AB'[k]}'s export holds them all, in order (misses ${JSON.stringify(missing(messages))})`);
  }
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
  console.log(`faults survived: ${faults.length} (${faults.join('; ')}); acknowledged messages checked: ${acknowledged.length}, each in 6 places (2 devices, 2 workspace copies, 2 exports)`);
  await a.page.screenshot({ path: join(process.env.PALAVER_SHOTS ?? home, 'faults-a.png') }).catch(() => {});
  await b.page.screenshot({ path: join(process.env.PALAVER_SHOTS ?? home, 'faults-b.png') }).catch(() => {});
} catch (error) {
  check(false, `the fault run ran to its end (${error.stack ?? error})`);
  for (const d of [a, b].filter(Boolean)) {
    const seen = await d.page.locator('[data-testid=message]').allInnerTexts().catch(() => []);
    console.log(`  the page showed: ${JSON.stringify(seen.map((t) => t.replace(/\s+/g, ' ').slice(0, 120)))}`);
    await d.page.screenshot({ path: join(process.env.PALAVER_SHOTS ?? home, `faults-failed-${d.serve === serveB ? 'b' : 'a'}.png`) }).catch(() => {});
  }
} finally {
  for (const d of [a, b]) await d?.context.close().catch(() => {});
  double.child.kill();
  serveA.child.kill();
  serveB.child.kill();
  proxy.close();
  couch.kill();
  await cleanup(couchDir, home, ...workspaces, ...profiles);
}
process.exit(failed() ? 1 : 0);
