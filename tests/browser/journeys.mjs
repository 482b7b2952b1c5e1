// Issue 34: a person's first message always goes. Each first-run journey in a fresh browser
// profile, through the real `palaver serve`, acted as a person acts (`person.mjs`: a control is
// used the moment it is visible and enabled; nothing waits on the app's internals): a provider set
// up then Send at once (OpenAI-compatible and Anthropic); the small model in the page then Send at
// once, while it downloads (the message is held and shown, Cancel gives the words back); a chat
// imported then Send; a chat picked in the list then Send; words typed while a reload reopens the
// chat, sent once it shows. Then all of it again with the engine's
// wasm and the model's download slowed (each such request answered late). Each asserts the first
// message is answered, in the chat it was written in, and that no status line outlives its cause.
// Prints, per journey: the clicks a person needed and the time from the Send click to the first
// token on screen.
// node tests/browser/journeys.mjs   (after build_pkg, ensure_default_model and `cargo build`)
import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { check, failed, watchdog, startDouble, startServe, launch, tempDir, cleanup, openaiStream, openChatId } from './harness.mjs';
import { person } from './person.mjs';
import { audit } from './axe.mjs';

watchdog(900, 'the first-run journeys');
const MODELS = process.env.PALAVER_MODELS ?? join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'palaver', 'models');
const SLOW_MS = 2500; // how late a slowed request is answered
const workspace = await tempDir('palaver-journeys-ws-');
const double = await startDouble();
const serve = await startServe(workspace, ['--models', MODELS]);
const dirs = [workspace];
const rows = [];
const pageErrors = [];

/** A fresh profile; `slow`: the engine's wasm and the model's download are answered late. */
let current = null; // the journey's browser: a picture when it fails, then closed

async function freshBrowser(slow) {
  const profile = await tempDir('palaver-journey-');
  dirs.push(profile);
  const context = await launch(profile);
  if (slow) {
    await context.route(/(\.wasm|\/models\/[^/]+\.gguf)(\?.*)?$/, async (route) => {
      await new Promise((resolve) => setTimeout(resolve, SLOW_MS));
      await route.continue().catch(() => {});
    });
  }
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  current = { page, context };
  await page.goto(serve.printed);
  return { context, page, you: person(page) };
}

/** Clicks Send and resolves with the ms until the answer's first words show. */
async function sendAndTime(you, text, timeout = 30_000) {
  await you.type('composer', text);
  const clicked = Date.now();
  await you.click('send');
  await you.page.waitForFunction(() => [...document.querySelectorAll('[data-testid=message][data-role=assistant] .markdown, [data-testid=message][data-role=assistant] .text')]
    .some((n) => n.textContent.trim().length > 0), null, { timeout });
  return Date.now() - clicked;
}

/** Notes in the page when the first answer's words are first drawn (read afterwards, never waited on). */
async function noteFirstWords(page) {
  await page.evaluate(() => {
    const seen = new MutationObserver(() => {
      if (!document.querySelector('[data-testid=message][data-role=assistant] .markdown')?.textContent.trim()) return;
      globalThis.firstWordsAt = performance.now();
      seen.disconnect();
    });
    seen.observe(document.body, { childList: true, subtree: true, characterData: true });
  });
}

/**
 * The first answer ends drawn as Markdown. Issue 41: on a first visit the renderer's wasm is not
 * fetched before the answer's words (its bytes would delay them), and the answer is drawn again.
 */
async function drawnAsMarkdown(page, what, firstVisit) {
  const markdown = await page.waitForFunction(() => document.querySelector('[data-testid=message][data-role=assistant] .markdown')
    && !document.querySelector('[data-testid=message][data-role=assistant] .plain'), null, { timeout: 15_000 }).then(() => true, () => false);
  const when = await page.evaluate(() => ({
    words: globalThis.firstWordsAt ?? null,
    wasm: performance.getEntriesByType('resource').filter((e) => e.name.includes('.wasm')).map((e) => [e.name.split('/').pop(), Math.round(e.startTime)]),
    renderer: performance.getEntriesByType('resource').find((e) => e.name.includes('palaver_render_bg.wasm'))?.startTime ?? null,
  }));
  const order = firstVisit ? when.words !== null && when.renderer > when.words : true;
  check(markdown && when.renderer !== null && order,
    `${what}: the first answer is drawn as Markdown${firstVisit ? ', its renderer fetched after the words showed (a first visit)' : ''} (${markdown ? 'Markdown' : 'still plain text'}; ${JSON.stringify(when)})`);
}

/** After an answer: one answer, no error in the chat, and no status line left over. */
async function answeredOnce(you, what) {
  await you.waitAnswers(1, 240_000);
  const page = you.page;
  const seen = await page.evaluate(() => ({
    errors: document.querySelectorAll('[data-testid=message][data-role=error]').length,
    held: document.querySelector('[data-testid=held]')?.hidden === false ? document.querySelector('[data-testid=held]').textContent : '',
    status: document.querySelector('[data-testid=status]')?.textContent ?? '',
    composer: document.querySelector('[data-testid=composer]').value,
    answers: [...document.querySelectorAll('[data-testid=message][data-role=assistant]')].map((m) => m.textContent.slice(0, 60)),
  }));
  check(seen.answers.length === 1 && seen.errors === 0 && !seen.held && !/One moment|waits|sends when/.test(seen.status) && seen.composer === '',
    `${what}: the first message is answered, nothing is left waiting or said (${JSON.stringify(seen)})`);
}

function report(journey, speed, you, ms) {
  rows.push([`${journey} (${speed})`, `${you.clicks} clicks, Send → first words ${ms} ms`]);
}

async function providerThenSend(speed, kind) {
  // Chats in the workspace (earlier journeys') make this no first visit: the page opens its engine
  // to list them, and its renderer may be fetched ahead.
  const copies = join(workspace, '.palaver', 'chats');
  const firstVisit = !existsSync(copies) || !readdirSync(copies).some((f) => f.endsWith('.json'));
  const { page, you } = await freshBrowser(speed === 'slowed');
  const wire = { 'openai-chat': 'openai-chat/text_gpt4o', anthropic: 'anthropic/text_basic' }[kind];
  await you.click('connect-provider');
  await you.choose('provider-kind', kind);
  await you.type('provider-base-url', `${double.url}/wire/${wire}`);
  await you.type('provider-key', 'sk-journey');
  await you.type('provider-model', kind === 'anthropic' ? 'claude-test' : 'gpt-4o');
  await you.click('save-settings');
  await noteFirstWords(page);
  const ms = await sendAndTime(you, 'Hello');
  await answeredOnce(you, `${kind} set up, then Send at once`);
  await drawnAsMarkdown(page, `${kind} (${speed})`, firstVisit);
  report(`provider (${kind}) set up, then Send`, speed, you, ms);
}

async function keylessThenSend(speed) {
  const { page, you } = await freshBrowser(speed === 'slowed');
  await you.click('try-local');
  // Written and sent at once, while the model downloads: held, shown, and Cancel gives it back.
  await you.type('composer', 'What is the capital of France?');
  await you.click('send');
  await you.seeText('held', 'sends when');
  const held = await you.read('held');
  if (speed === 'slowed') await audit(page, 'a message held while the model downloads');
  // Pressed and released as a person does, ~150 ms apart, while the download moves on.
  await you.click('cancel-held', { delay: 150 });
  await page.waitForFunction(() => document.querySelector('[data-testid=composer]').value !== '', null, { timeout: 5_000 }).catch(() => {});
  const back = await page.inputValue('[data-testid=composer]');
  check(/downloading|loaded/.test(held) && back === 'What is the capital of France?', `keyless: a message sent during the download is held and says why (${JSON.stringify(held)}); Cancel gives the words back`);
  const ms = await sendAndTime(you, 'What is the capital of France?', 240_000);
  await answeredOnce(you, 'keyless, then Send at once');
  const gauge = await page.textContent('[data-testid=context-usage]');
  check(/4,096/.test(gauge), `keyless: the gauge uses the model's window (${gauge.trim()})`);
  // The message went by itself once the model loaded: the page does not ask for one.
  const said = await page.textContent('[data-testid=status]');
  check(/runs in this browser/.test(said) && !/Write below/.test(said), `keyless: once the held message went, the page says the model is ready without asking for a message (${JSON.stringify(said)})`);
  report('keyless model, then Send (held while it downloads)', speed, you, ms);
}

async function importThenSend(speed) {
  const { page, you } = await freshBrowser(speed === 'slowed');
  const url = await double.script(`import-${speed}`, [{ body: openaiStream({ text: 'Your earlier question was about tides.' }) }]);
  const exported = JSON.stringify([{ role: 'user', content: 'Why are there two tides a day?' }, { role: 'assistant', content: 'Because of the Moon and the Earth turning.' }]);
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), you.click('import-chat')]);
  await chooser.setFiles({ name: 'tides.json', mimeType: 'application/json', buffer: Buffer.from(exported) });
  // Sent before any provider: refused in one sentence, the words kept.
  await page.locator('[data-testid=message][data-role=user]').first().waitFor();
  await you.type('composer', 'What did I ask?');
  await you.click('send');
  await you.seeText('status', 'Nothing can answer yet');
  check(await page.inputValue('[data-testid=composer]') === 'What did I ask?', 'import: a message with nothing to answer it is refused in one sentence, its words kept');
  await you.setProvider({ baseUrl: url, key: 'sk-journey' });
  const ms = await sendAndTime(you, 'What did I ask?');
  await you.waitAnswers(2, 30_000);
  const [request] = (await double.log(`import-${speed}`)).filter((e) => e.method === 'POST');
  const history = (request?.body?.messages ?? []).map((m) => m.content);
  check(history.includes('Why are there two tides a day?') && history.at(-1) === 'What did I ask?', `import, then Send: sent with the imported history (${history.length} messages)`);
  report('chat imported, then Send', speed, you, ms);
}

async function pickedThenSend(speed) {
  const { page, you } = await freshBrowser(speed === 'slowed');
  const url = await double.script(`picked-${speed}`, [
    { body: openaiStream({ text: 'First chat answer.' }) },
    { body: openaiStream({ text: 'Second chat answer.' }) },
    { body: openaiStream({ text: 'Answer in the picked chat.' }) },
  ]);
  await you.setProvider({ baseUrl: url, key: 'sk-journey' });
  await you.ask('About apples', 1);
  const first = await openChatId(page);
  await you.click('new-chat');
  await you.ask('About pears', 1);
  // A reload (the chat about pears reopens), then the other chat picked and written in at once.
  await page.reload();
  await you.click(page.locator('[data-testid=chat-item]', { hasText: 'About apples' }));
  const ms = await sendAndTime(you, 'And in this chat?');
  await you.waitAnswers(2, 30_000);
  const request = (await double.log(`picked-${speed}`)).filter((e) => e.method === 'POST').at(-1);
  const history = (request?.body?.messages ?? []).map((m) => m.content);
  check(history.includes('About apples') && !history.includes('About pears') && await openChatId(page) === first,
    `a chat picked, then Send at once: the message goes to the picked chat (${JSON.stringify(history.slice(1))})`);
  report('a chat picked after a reload, then Send', speed, you, ms);
}

/**
 * Words typed the moment the page is back after a reload, while the chat that was open is still
 * loading, then sent once that chat shows: the words must still be there and go to that chat.
 */
async function typedDuringReload(speed) {
  const { page, you } = await freshBrowser(speed === 'slowed');
  const url = await double.script(`reload-${speed}`, [
    { body: openaiStream({ text: 'Plums are stone fruit.' }) },
    { body: openaiStream({ text: 'Yes, the same chat.' }) },
  ]);
  await you.setProvider({ baseUrl: url, key: 'sk-journey' });
  await you.ask('About plums', 1);
  const chatId = await openChatId(page);
  await page.reload();
  await you.type('composer', 'Typed while it loads');
  await you.seeText('transcript', 'Plums are stone fruit.');
  const kept = await page.inputValue('[data-testid=composer]');
  check(kept === 'Typed while it loads', `a reload: words typed while the chat loads are still in the composer when it shows (${JSON.stringify(kept)})`);
  const clicked = Date.now();
  await you.click('send');
  await you.seeText('transcript', 'Yes, the same chat.', 30_000);
  const ms = Date.now() - clicked;
  await you.waitAnswers(2, 30_000);
  const request = (await double.log(`reload-${speed}`)).filter((e) => e.method === 'POST').at(-1);
  const history = (request?.body?.messages ?? []).map((m) => m.content);
  check(history.at(-1) === 'Typed while it loads' && history.includes('About plums') && await openChatId(page) === chatId,
    `a reload: the words typed while it loaded are sent in the chat that was open (${JSON.stringify(history.slice(1))})`);
  report('words typed during a reload, then Send', speed, you, ms);
}

try {
  for (const speed of ['full speed', 'slowed']) {
    for (const [name, run] of [
      ['provider (OpenAI-compatible) then send', () => providerThenSend(speed, 'openai-chat')],
      ['provider (Anthropic) then send', () => providerThenSend(speed, 'anthropic')],
      ['keyless then send', () => keylessThenSend(speed)],
      ['import then send', () => importThenSend(speed)],
      ['a chat picked then send', () => pickedThenSend(speed)],
      ['typed during a reload then send', () => typedDuringReload(speed)],
    ]) {
      // PALAVER_JOURNEYS='a;b' runs only those (while developing).
      if (process.env.PALAVER_JOURNEYS && !process.env.PALAVER_JOURNEYS.split(';').some((j) => name.includes(j))) continue;
      console.log(`-- ${name}, ${speed}`);
      try {
        current = null;
        await run();
      } catch (error) {
        check(false, `${name} (${speed}): ${error.message.split('\n')[0]}`);
        if (process.env.PALAVER_SHOTS) await current?.page.screenshot({ path: join(process.env.PALAVER_SHOTS, `journey-${name.replace(/\W+/g, '-')}-${speed.replace(/\W+/g, '-')}.png`) }).catch(() => {});
      }
      await current?.context.close();
    }
  }
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
  console.log('\njourney'.padEnd(62), 'what a person did and waited for');
  for (const [name, value] of rows) console.log(name.padEnd(61), value);
} finally {
  serve.child.kill();
  double.child.kill();
  await cleanup(...dirs);
}
process.exit(failed() ? 1 : 0);
