// The web app as a newcomer meets it (issue 7, first path): the real `palaver serve` on a
// temporary workspace serves www/ and pkg/; the provider double replays a real transcript. Open
// the page (paired with the proxy by the printed URL), set a provider, send a message, see the
// reply stream in, reload, see it again; hostile model output renders inert.
// node tests/browser/app.mjs --palaver <binary>   (after build_pkg; uses /usr/bin/chromium)
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '../../..');
const argv = process.argv.slice(2);
const palaverBin = argv[argv.indexOf('--palaver') + 1] ?? join(root, 'target/debug/palaver');
setTimeout(() => {
  console.log('FAIL the app test did not finish in 120 s');
  process.exit(1);
}, 120_000).unref();

let failed = false;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  failed ||= !ok;
};

/** Starts a process and resolves with its first stdout line that matches `pattern`. */
function start(command, args, pattern) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
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

const workspace = await mkdtemp(join(tmpdir(), 'palaver-ws-'));
const double = await start('node', [join(root, 'tests/double/server.mjs')], /"url":"([^"]+)"/);
const serve = await start(palaverBin, ['serve', '--port', '0', '--workspace', workspace, '--www', join(root, 'www'), '--pkg', join(root, 'pkg')], /(http:\/\/127\.0\.0\.1:\d+\/#token=\S+)/);
const appUrl = serve.match[1];
const doubleUrl = double.match[1];
const profile = await mkdtemp(join(tmpdir(), 'palaver-app-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const remote = [];
context.on('request', (request) => {
  const url = request.url();
  if (!url.startsWith('http://127.0.0.1') && !url.startsWith('data:') && !url.startsWith('blob:')) remote.push(url);
});
try {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(appUrl);
  await page.waitForSelector('body[data-ready="true"]');
  check(!page.url().includes('token='), 'the pairing token left the address bar');
  // Settings: a provider (the double replaying a real OpenAI stream).
  await page.click('[data-testid=open-settings]');
  await page.fill('[data-testid=provider-url]', `${doubleUrl}/wire/openai-chat/text_gpt4o`);
  await page.fill('[data-testid=provider-model]', 'gpt-4o');
  await page.fill('[data-testid=provider-key]', 'sk-test-CANARY');
  await page.click('[data-testid=save-settings]');
  await page.fill('[data-testid=prompt]', 'Hello there');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=message-assistant]', { timeout: 10_000 });
  await page.waitForFunction(() => document.querySelector('[data-testid=status]').textContent === '' &&
    document.querySelectorAll('[data-testid=message-assistant]').length === 1, null, { timeout: 10_000 });
  const reply = await page.textContent('[data-testid=message-assistant]');
  check(reply.trim().length > 10, `the reply streamed in (${JSON.stringify(reply.slice(0, 60))}…)`);
  const stored = await page.evaluate(() => JSON.stringify(localStorage));
  check(!stored.includes('CANARY'), 'the API key is not in localStorage');
  await page.waitForTimeout(300);
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await page.click('[data-testid=chat-item]');
  await page.waitForSelector('[data-testid=message-assistant]');
  const again = await page.textContent('[data-testid=message-assistant]');
  check(again === reply, 'after a reload the chat is there, byte for byte');
  check((await page.textContent('[data-testid=message-user]')) === 'Hello there', 'the user message too');
  check(errors.length === 0, `no page errors (${errors.join('; ')})`);
  check(remote.length === 0, `nothing was requested off this machine (${remote.join(', ')})`);
} finally {
  await context.close().catch(() => {});
  serve.child.kill();
  double.child.kill();
  await rm(profile, { recursive: true, force: true });
  await rm(workspace, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
