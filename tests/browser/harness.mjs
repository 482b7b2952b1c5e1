// What the page-level tests share: the real `palaver serve` on a temporary workspace, the provider
// double (replaying ../shared/wire or scripted SSE in a provider's exact wire format), an
// "attacker" server that logs every request it gets (attacker.test resolves to it, SECURITY C.5),
// and headless Chromium through playwright-core.
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { person } from './person.mjs';

export const root = resolve(fileURLToPath(import.meta.url), '../../..');
export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let failures = 0;
export function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures += 1;
  return ok;
}
export const failed = () => failures > 0;

export function watchdog(seconds, name) {
  setTimeout(() => {
    console.log(`FAIL ${name} did not finish in ${seconds} s`);
    process.exit(1);
  }, seconds * 1000).unref();
}

// Whatever a test started goes when it ends, however it ends (a watchdog's exit included).
const started = new Set();
process.on('exit', () => started.forEach((child) => child.kill('SIGKILL')));

/** Starts a process and resolves with its first stdout match of `pattern`. */
export function start(command, args, pattern, env = process.env) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
  started.add(child);
  child.on('exit', () => started.delete(child));
  return new Promise((ok, fail) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = out.match(pattern);
      if (match) ok({ child, match });
    });
    child.on('exit', (code) => fail(new Error(`${command} exited (${code}) before it was ready`)));
  });
}

export const tempDir = (prefix) => mkdtemp(join(tmpdir(), prefix));

/** The page runs pkg/app.js, bundled from www/ by the build: a test of www/ edited since would
 * test the old page. */
function refuseStaleBundle() {
  const bundle = join(root, 'pkg/app.js');
  if (!existsSync(bundle)) throw new Error('pkg/app.js is missing: build first (scripts/dev.sh, or build_pkg in scripts/lib.sh)');
  const built = statSync(bundle).mtimeMs;
  const newer = readdirSync(join(root, 'www'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.js'))
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name))
    .filter((file) => statSync(file).mtimeMs > built);
  if (newer.length) throw new Error(`pkg/app.js is older than ${newer[0]}: build again (node scripts/bundle.mjs . && node scripts/shell-list.mjs . && node scripts/precompress.mjs pkg)`);
}

export async function startDouble() {
  const { child, match } = await start('node', [join(root, 'tests/double/server.mjs')], /"url":"([^"]+)"/);
  const url = match[1];
  return {
    url,
    child,
    /** Scripts the next responses of `/s/{id}`; each is {body | wire, chunk_bytes?, delay_ms?}. */
    async script(id, responses) {
      const response = await fetch(`${url}/__script/${id}`, { method: 'POST', body: JSON.stringify({ responses }) });
      if (!response.ok) throw new Error(`scripting the double failed: ${response.status}`);
      return `${url}/s/${id}`;
    },
    async log(id) {
      return (await fetch(`${url}/__log/${id}`)).json();
    },
  };
}

/** `palaver serve` on `workspace` (any free port unless `port` is given: a restart keeps its own). */
export async function startServe(workspace, extra = [], { port = 0 } = {}) {
  refuseStaleBundle();
  const palaver = process.env.PALAVER_BIN ?? join(root, 'target/debug/palaver');
  const { child, match } = await start(palaver, ['serve', '--port', String(port), '--workspace', workspace,
    '--www', join(root, 'www'), '--pkg', join(root, 'pkg'), ...extra], /(http:\/\/127\.0\.0\.1:(\d+)\/#token=(\S+))/,
    // The earlier contents of files it records (issue 39) go to a test folder, not the home's.
    { ...process.env, XDG_DATA_HOME: join(tmpdir(), 'palaver-test-data') });
  return { child, printed: match[1], origin: `http://127.0.0.1:${match[2]}`, token: match[3] };
}

/** A server that records every request: anything reaching it is a leak. */
export async function startAttacker() {
  const hits = [];
  const server = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.headers.host}${req.url}`);
    res.writeHead(200, { 'content-type': 'image/png', 'access-control-allow-origin': '*' });
    res.end();
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { hits, port: server.address().port, close: () => server.close() };
}

export async function launch(profile, { attackerPort, args = [], ignoreDefaultArgs } = {}) {
  const rules = attackerPort ? [`--host-resolver-rules=MAP attacker.test 127.0.0.1:${attackerPort}`] : [];
  return chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [...CHROMIUM_FLAGS, ...rules, ...args],
    ...(ignoreDefaultArgs ? { ignoreDefaultArgs } : {}),
  });
}

/** An OpenAI chat-completions SSE body, chunk by chunk, as the API sends it. */
export function openaiStream({ text = '', toolCalls = [], finish = null, pieces = 1, model = 'gpt-4o-double' }) {
  const chunk = (delta, finishReason = null) => `data: ${JSON.stringify({
    id: 'chatcmpl-double', object: 'chat.completion.chunk', created: 1_700_000_000, model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  })}\n\n`;
  let body = chunk({ role: 'assistant', content: '' });
  const size = Math.max(1, Math.ceil(text.length / pieces));
  for (let at = 0; at < text.length; at += size) body += chunk({ content: text.slice(at, at + size) });
  toolCalls.forEach((call, index) => {
    body += chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] });
    body += chunk({ tool_calls: [{ index, function: { arguments: JSON.stringify(call.args) } }] });
  });
  body += chunk({}, finish ?? (toolCalls.length ? 'tool_calls' : 'stop'));
  body += `data: ${JSON.stringify({ id: 'chatcmpl-double', object: 'chat.completion.chunk', created: 1_700_000_000, model, choices: [], usage: { prompt_tokens: 120, completion_tokens: 20, total_tokens: 140, prompt_tokens_details: { cached_tokens: 96 } } })}\n\n`;
  return `${body}data: [DONE]\n\n`;
}

export async function cleanup(...dirs) {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true }).catch(() => {});
}

/** Sets the provider through the Settings dialog, as a person does (see `person.mjs`). */
export async function setProvider(page, options) {
  await person(page).setProvider(options);
}

/** Types and sends a message; waits until `replies` finished answers show and the chat is idle. */
export async function sendAndWait(page, text, replies, timeout) {
  await person(page).ask(text, replies, timeout);
}

/** Waits until `replies` finished answers show and Send (not Stop) is back: what a person sees. */
export async function waitIdle(page, replies, timeout = 15_000) {
  await person(page).waitAnswers(replies, timeout);
}

/** The chat a person sees open: the one marked in the chat list (null when none is). */
export async function openChatId(page) {
  return page.evaluate(() => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId ?? null);
}

/** Opens a chat from the list, as a person clicks it, and waits until its messages show. */
export async function openChat(page, id) {
  await page.click(`[data-testid=chat-item][data-chat-id="${id}"]`);
  await page.waitForFunction((chat) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === chat, id);
}

/** Imports a chat from a file, as a person picks it in the Import dialog; resolves to its id. */
export async function importFile(page, text, name = 'chat.json') {
  const before = await openChatId(page);
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.click('[data-testid=import-chat]')]);
  await chooser.setFiles({ name, mimeType: 'application/json', buffer: Buffer.from(text) });
  await page.waitForFunction((old) => {
    const id = document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId;
    return id && id !== old;
  }, before, { timeout: 60_000 });
  return openChatId(page);
}

/** Picks an item of the open chat's ⋯ menu. */
export async function chatMenu(page, item) {
  await page.click('[data-testid=chat-menu]');
  await page.click(`[data-testid=${item}]`);
}
