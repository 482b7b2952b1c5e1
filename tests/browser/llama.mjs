// A real local server, as a person meets it: llama.cpp's own `llama-server` (built from the PyPI
// sdist, `scripts/lib.sh ensure_llama_server`) running SmolLM2-135M with a 4,096-token window,
// set up in Settings as an OpenAI-compatible provider through the real `palaver serve`.
// Checks what a person sees and what the server was asked:
// - the window comes from the server (`/props`), not a name table: Settings show 4,096 as what
//   the server says, and every request carries an answer limit (no more 55 s of junk);
// - an answer comes, labelled with the model the server says answered;
// - a plain-chat provider ("chat only") gets no tools and answers a factual question;
// - with edit blocks (issue 40) the small model is taught the blocks and asked to change a
//   function: whatever it manages is shown as proposals, and nothing is written without Apply;
// - a window typed too large is corrected by the server's refusal: the page says so once, keeps
//   4,096 in Settings, and a message that cannot fit even alone is refused with how much to remove.
// node tests/browser/llama.mjs   (after build_pkg, ensure_default_model, ensure_llama_server, cargo build)
import { homedir } from 'node:os';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createServer, request as httpRequest } from 'node:http';
import { spawn } from 'node:child_process';
import { check, failed, watchdog, startServe, launch, tempDir, cleanup } from './harness.mjs';
import { person, promptReadings } from './person.mjs';

watchdog(600, 'the llama.cpp server test');
/** Ten factual questions and what a right answer contains. */
const QUESTIONS = [
  ['What is the capital of France?', /paris/i],
  ['What is the capital of Italy?', /rome/i],
  ['What is the capital of Japan?', /tokyo/i],
  ['What is the largest planet in the solar system?', /jupiter/i],
  ['What colour is the sky on a clear day?', /blue/i],
  ['How many days are there in a week?', /seven|\b7\b/i],
  ['What is the chemical symbol for water?', /h2o|h₂o/i],
  ['Which animal is known as the king of the jungle?', /lion/i],
  ['What is the boiling point of water in degrees Celsius?', /\b100\b/i],
  ['Who wrote Romeo and Juliet?', /shakespeare/i],
];
const cache = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
const MODELS = process.env.PALAVER_MODELS ?? join(cache, 'palaver', 'models');
const SERVER = process.env.PALAVER_LLAMA_SERVER;
if (!SERVER) throw new Error('PALAVER_LLAMA_SERVER names the llama-server binary (scripts/test.sh sets it)');

/** A free port on 127.0.0.1 (llama-server takes a port, not 0). */
async function freePort() {
  const probe = createServer();
  await new Promise((ok) => probe.listen(0, '127.0.0.1', ok));
  const { port } = probe.address();
  await new Promise((ok) => probe.close(ok));
  return port;
}
const llamaPort = await freePort();
// llama-server logs on stderr; it is ready when it says it listens. One slot: the whole window.
const llama = spawn(SERVER, ['-m', join(MODELS, 'SmolLM2-135M-Instruct.Q4_1.gguf'), '-c', '4096', '-np', '1', '--host', '127.0.0.1', '--port', String(llamaPort), '-t', '2'],
  { stdio: ['ignore', 'ignore', 'pipe'] });
process.on('exit', () => llama.kill('SIGKILL'));
await new Promise((ok, fail) => {
  let log = '';
  llama.stderr.on('data', (chunk) => {
    log += chunk;
    if (/listening on http/.test(log)) ok();
  });
  llama.on('exit', (code) => fail(new Error(`llama-server exited (${code}): ${log.slice(-400)}`)));
});

// A recording front of llama-server: what the page asked is kept (a person cannot see request
// bodies; the server's log is where an operator would look), everything passes through unchanged.
const asked = [];
const reported = [];
const front = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    if (req.method === 'POST') asked.push({ path: req.url, body: JSON.parse(body.toString() || 'null') });
    const upstream = httpRequest({ host: '127.0.0.1', port: llamaPort, path: req.url, method: req.method, headers: { ...req.headers, host: `127.0.0.1:${llamaPort}` } }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      // The model the server says answered (the first `"model"` of its stream).
      answer.on('data', (chunk) => {
        const named = /"model":"([^"]+)"/.exec(chunk.toString());
        if (named && !reported.length) reported.push(named[1]);
      });
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    upstream.end(body);
  });
});
await new Promise((ok) => front.listen(0, '127.0.0.1', ok));
const baseUrl = `http://127.0.0.1:${front.address().port}/v1`;

const workspace = await tempDir('palaver-llama-ws-');
const GREET = 'def greet():\n    return "Hello, world!"\n';
await writeFile(join(workspace, 'greet.py'), GREET);
const profile = await tempDir('palaver-llama-');
const serve = await startServe(workspace);
const context = await launch(profile);
const page = await context.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(e.message));
const you = person(page);

try {
  await page.goto(serve.printed);
  await you.setProvider({ baseUrl, model: 'smollm2', key: '' });

  // The window as the server says it: Settings show 4,096 from the server, nothing typed.
  await you.openSettings('provider');
  const windowField = page.getByTestId('provider-n-ctx');
  await page.waitForFunction(() => /4,096/.test(document.querySelector('[data-testid=provider-n-ctx]')?.placeholder ?? ''), null, { timeout: 10_000 }).catch(() => {});
  const placeholder = await windowField.getAttribute('placeholder');
  check(/4,096/.test(placeholder ?? '') && (await windowField.inputValue()) === '', `Settings show the server's window, 4,096, not a name table's (${placeholder})`);
  const limitPlaceholder = await page.getByTestId('provider-max-tokens').getAttribute('placeholder');
  check(/\d/.test(limitPlaceholder ?? ''), `the answer limit used by default is shown (${limitPlaceholder})`);
  await you.click('cancel-settings');

  // An answer comes, within an answer limit; labelled with what the server says answered.
  const sent = Date.now();
  const phases = await you.watch('turn-phase');
  await you.ask('What is the capital of France? Answer in one word.', 1, 120_000);
  const seconds = (Date.now() - sent) / 1000;
  const first = asked.find((r) => r.path.endsWith('/chat/completions'));
  const limit = first?.body?.max_tokens ?? first?.body?.max_completion_tokens;
  check(Number.isInteger(limit) && limit > 0 && limit <= 2048, `the request carries an answer limit within the window (max_tokens ${limit})`);
  console.log(`llama-server answered in ${seconds.toFixed(1)} s`);
  // The server's /props answered, so it is asked how far it has read the prompt, and the page
  // shows that while it reads (the agent prompt: a second or two here, far longer on a big model).
  const shown = await phases();
  const readings = promptReadings(shown);
  check(first?.body?.return_progress === true && readings.length >= 1 && readings.every(([read, total]) => total > 100 && read <= total),
    `a llama.cpp server is asked for its prompt progress, and the page shows it while it reads (return_progress ${first?.body?.return_progress}; ${shown.slice(0, 3).join(' | ')})`);
  // The header names the model the chat asks next; each answer names the one that answered.
  // (the label is drawn beside the text from the message's `data-label`)
  const label = (await page.locator('[data-testid=message][data-role=assistant]').last().getAttribute('data-label')) ?? '';
  const named = reported[0] ?? '';
  check(named.length > 0 && label.includes(`Assistant · ${named.split('/').pop()}`), `the answer is labelled with the model the server named (${label}; the server said ${named})`);

  // Chat only: no tools, a short prompt; the small model answers the question.
  await you.openSettings('provider');
  await you.check('provider-plain-chat');
  await you.type('provider-temperature', '0');
  await you.click('save-settings');
  await you.click('new-chat');
  const before = asked.length;
  await you.ask('What is the capital of France?', 1, 120_000);
  const plain = asked.slice(before).find((r) => r.path.endsWith('/chat/completions'))?.body;
  check(plain && !plain.tools && (plain.messages?.[0]?.content ?? '').length < 600, `chat only: no tools, a short prompt (${plain?.tools?.length ?? 0} tools, ${(plain?.messages?.[0]?.content ?? '').length} prompt characters)`);
  const answer = (await you.answers()).at(-1) ?? '';
  check(/paris/i.test(answer), `and the small model answers it (${answer.slice(0, 80).replace(/\n/g, ' ')})`);

  // The measurement of the two prompt profiles: the same 10 factual questions, temperature 0,
  // sent with the agent profile's prompt and tools (the first request) and with chat only's.
  const profiles = { agent: first?.body, 'chat only': plain };
  const scores = {};
  for (const [name, body] of Object.entries(profiles)) {
    scores[name] = 0;
    for (const [question, answerPattern] of QUESTIONS) {
      const messages = [...body.messages.filter((m) => m.role === 'system'), { role: 'user', content: question }];
      const reply = await fetch(`http://127.0.0.1:${llamaPort}/v1/chat/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...body, messages, stream: false, temperature: 0, max_tokens: 48 }),
      }).then((r) => r.json()).catch(() => null);
      if (answerPattern.test(reply?.choices?.[0]?.message?.content ?? '')) scores[name] += 1;
    }
  }
  console.log(`SmolLM2-135M on llama-server, 10 factual questions at temperature 0: agent profile ${scores.agent}/10, chat only ${scores['chat only']}/10`);
  check(scores['chat only'] >= scores.agent, `chat only answers at least as well as the agent profile (${scores['chat only']} vs ${scores.agent} of 10)`);

  // Edit blocks: the same small model asked to change a function. What it writes is its own; the
  // flow is checked — the prompt, the proposals shown, nothing written before Apply, the result.
  await you.openSettings('provider');
  await you.check('provider-edit-blocks');
  await you.click('save-settings');
  await you.click('new-chat');
  const sentBefore = asked.length;
  await you.ask('In greet.py, change the function greet so that it takes a name and greets that name. Answer with an edit block.', 1, 180_000);
  const taught = asked.slice(sentBefore).find((r) => r.path.endsWith('/chat/completions'))?.body;
  const taughtPrompt = taught?.messages?.[0]?.content ?? '';
  check(taught && !taught.tools && taughtPrompt.includes('<<<<<<< SEARCH') && taughtPrompt.includes('greet.py'),
    `edit blocks: no tools, the prompt teaches the blocks and lists greet.py (${taughtPrompt.length} prompt characters)`);
  const blocks = page.getByTestId('edit-block');
  const proposed = await blocks.count();
  check(await readFile(join(workspace, 'greet.py'), 'utf8') === GREET, `nothing is written before Apply (the model proposed ${proposed} block${proposed === 1 ? '' : 's'})`);
  const applicable = blocks.filter({ has: page.locator('[data-testid=apply-edit-block]:enabled') });
  if (await applicable.count()) {
    await you.click(applicable.first().getByTestId('apply-edit-block'));
    await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=edit-block-status]')].some((s) => /^(Applied|Not applied)/.test(s.textContent)), null, { timeout: 30_000 }).catch(() => {});
    const said = await page.getByTestId('edit-block-status').allInnerTexts();
    const now = await readFile(join(workspace, 'greet.py'), 'utf8');
    const applied = said.some((s) => s.startsWith('Applied'));
    check(said.some((s) => /^(Applied|Not applied)/.test(s)) && applied === (now !== GREET), `Apply gives a result a person reads, and the file changed only if it says applied (${said.join(' | ').slice(0, 200)})`);
  }
  console.log(`SmolLM2-135M in edit-block mode proposed ${proposed} block(s): ${((await you.answers()).at(-1) ?? '').slice(0, 200).replace(/\n/g, ' ⏎ ')}`);
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'llama-edit-blocks.png'), fullPage: true });
  await you.openSettings('provider');
  await you.check('provider-edit-blocks', false);
  await you.click('save-settings');

  // A window typed too large: the server's refusal corrects it, once, and the page says so.
  await you.openSettings('provider');
  await you.type('provider-n-ctx', '32768');
  await you.click('save-settings');
  await you.click('new-chat');
  const long = Array.from({ length: 1400 }, (_, i) => `note ${i} about the garden`).join('. ');
  await you.send(long);
  await page.getByTestId('status').filter({ hasText: /32,768/ }).waitFor({ timeout: 60_000 }).catch(() => {});
  const said = await you.read('status');
  check(/4,096/.test(said) && /32,768/.test(said), `the page says the server's window replaced the typed one (${said.slice(0, 160)})`);
  const refused = await page.locator('[data-testid=message][data-role=error], [data-testid=error-notice]').allInnerTexts().catch(() => []);
  const sentences = [said, ...refused].join(' ');
  check(/remove|shorten/i.test(sentences) && !/The provider said/i.test(sentences), `a message that cannot fit even alone is refused in the app's own words, with how much to remove (${sentences.slice(0, 200)})`);
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'llama-window-learned.png') });
  await you.openSettings('provider');
  check(await page.getByTestId('provider-n-ctx').inputValue() === '4096', 'Settings now keep the server\'s window');
  await you.click('cancel-settings');
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
} catch (error) {
  check(false, `the llama.cpp journey went through (${error.message.split('\n')[0]})`);
  await page.screenshot({ path: join(process.env.PALAVER_SHOTS ?? workspace, 'llama-failed.png') }).catch(() => {});
} finally {
  await context.close().catch(() => {});
  front.close();
  llama.kill('SIGKILL');
  serve.child?.kill('SIGKILL');
  await cleanup(workspace, profile);
}
process.exit(failed() ? 1 : 0);
