// Issue 18 in the page, through the real `palaver serve`: the model (the provider double) calls
// spawn_agent; the child chat runs its own turn; its answer reaches the parent's next request; the
// subagent tree shows it (status, model, tokens) and one click opens the child, listed under its
// parent. A write asked inside a child is approved from the parent's tree and runs in the
// workspace. A model that stays overloaded after its retries hands the turn to the fallback model
// of Settings, and the turn says so.
// node tests/browser/subagents.mjs   (after build_pkg and `cargo build`)
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  check, failed, watchdog, startDouble, startServe, launch, tempDir, cleanup, openaiStream, setProvider, waitIdle, openChatId, chatMenu, importFile,
} from './harness.mjs';
import { person } from './person.mjs';
import { inThemes } from './axe.mjs';

/** A user message of the conversation, not one of seed 002's tier blocks (the map, the file
 * list and the date, sent before the exchange under way). */
const askedByUser = (m) => m.role === 'user' && !/^(# Repository |Today's date: )/.test(String(m.content));

watchdog(400, 'the subagents page test');
const workspace = await tempDir('palaver-sub-ws-');
const double = await startDouble();
const serve = await startServe(workspace, []);
const profile = await tempDir('palaver-sub-profile-');
const context = await launch(profile);
const pageErrors = [];
const sse = (body) => ({ body, headers: { 'content-type': 'text/event-stream' } });
const posts = async (id) => (await double.log(id)).filter((e) => e.method === 'POST');
const toolText = (body, id) => body?.messages?.find((m) => m.role === 'tool' && m.tool_call_id === id)?.content ?? '';

/** Reloads the page with a child at work: the same parent opens, its child shown interrupted. */
async function reloadShowsInterrupted(page, which) {
  const parent = await openChatId(page);
  await page.reload();
  const interrupted = page.getByTestId('subagent-interrupted');
  await interrupted.waitFor({ timeout: 15_000 }).catch(() => {});
  const shown = await interrupted.innerText().catch(() => '');
  check(/Interrupted/.test(shown) && await openChatId(page) === parent, `after a reload the parent shows ${which} as interrupted, with Resume and Cancel (${shown.replace(/\n/g, ' ')})`);
  return parent;
}

/**
 * 5. A reload while a subagent works (issue 37): the parent shows the child as interrupted with
 * Resume and Cancel; Resume sends the child on, its answer reaches the parent's call and the
 * parent answers — one child, never spawned twice.
 */
async function reloadDuringASubagent(page) {
  const you = person(page);
  const task = 'Count the legs of every spider you know.';
  const url = await double.script('reload', [
    sse(openaiStream({ toolCalls: [{ id: 'call_rl', name: 'spawn_agent', args: { task, title: 'Spider census' } }] })),
    { ...sse(openaiStream({ text: 'Counting: the garden spider has eight, the wolf spider has' })), stall_after_bytes: 120 },
    sse(openaiStream({ text: 'Every spider I know has eight legs.' })),
    sse(openaiStream({ text: 'My helper counted: eight legs each.' })),
  ]);
  await setProvider(page, { baseUrl: url, key: 'sk-sub-test', model: 'gpt-4o' });
  await you.click('new-chat');
  await you.send('Ask a helper to count spider legs.');
  await page.locator('[data-testid=subagent][data-status=running]').waitFor({ timeout: 15_000 });
  for (let i = 0; i < 100 && (await posts('reload')).length < 2; i += 1) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 500));
  const parent = await reloadShowsInterrupted(page, 'its subagent');
  const summary = await page.locator('[data-testid=tool-activity] summary, details summary').filter({ hasText: /Tools:/ }).last().innerText().catch(() => '');
  check(/0 finished/.test(summary), `and the parent's tool call is not counted as finished (${summary})`);
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'subagent-interrupted.png'), fullPage: true });
  await you.click('subagent-resume');
  await page.locator('[data-testid=subagent][data-status=done]').waitFor({ timeout: 20_000 }).catch(() => {});
  await you.waitAnswers(2, 20_000).catch(() => {});
  const asked = await posts('reload');
  const last = asked.at(-1)?.body;
  check(asked.length === 4 && toolText(last, 'call_rl').includes('Every spider I know has eight legs.'), `Resume: the child goes on and its answer is the parent's tool result (${asked.length} requests)`);
  const spawned = asked.filter((r) => String(r.body.messages?.find(askedByUser)?.content ?? '').startsWith(task)).length;
  const children = await page.locator(`[data-testid=chat-item][data-parent-id="${parent}"]`).count();
  check(spawned === 2 && children === 1, `the same child went on: one subagent chat, never spawned twice (${children} child chat; its two requests both began with the task: ${spawned})`);
  const answers = await you.answers();
  check(/eight legs each/.test(answers.at(-1) ?? ''), `the parent answers with it (${(answers.at(-1) ?? '').slice(0, 60)})`);
}

/**
 * 6. The same with a child started with `wait: false` (it works while the parent goes on): after a
 * reload the parent's tree shows it interrupted; Resume sends it on in its own chat — one child.
 */
async function reloadDuringABackgroundSubagent(page) {
  const you = person(page);
  const task = 'Watch the garden spiders.';
  const url = await double.script('background', [
    sse(openaiStream({ toolCalls: [{ id: 'call_bg', name: 'spawn_agent', args: { task, title: 'Spider watch', wait: false } }] })),
    { ...sse(openaiStream({ text: 'Watching: the first web is' })), stall_after_bytes: 120, for_user: task },
    sse(openaiStream({ text: 'A helper watches the spiders meanwhile.' })),
    { ...sse(openaiStream({ text: 'The garden spiders spun three webs.' })), for_user: task },
  ]);
  await setProvider(page, { baseUrl: url, key: 'sk-sub-test', model: 'gpt-4o' });
  await you.click('new-chat');
  await you.send('Have a helper watch the spiders while we talk.');
  await you.waitAnswers(1, 20_000).catch(() => {});
  for (let i = 0; i < 100 && (await posts('background')).length < 3; i += 1) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 500));
  const parent = await reloadShowsInterrupted(page, 'its background subagent');
  await you.click('subagent-resume');
  await page.locator('[data-testid=subagent][data-status=done]').waitFor({ timeout: 20_000 }).catch(() => {});
  const status = await page.getByTestId('subagent').first().getAttribute('data-status').catch(() => null);
  const asked = await posts('background');
  const childAsked = asked.filter((r) => String(r.body.messages?.find(askedByUser)?.content ?? '').startsWith(task)).length;
  const children = await page.locator(`[data-testid=chat-item][data-parent-id="${parent}"]`).count();
  check(status === 'done' && childAsked === 2 && children === 1, `Resume: the background child goes on in its own chat and ends done — one child chat, never spawned twice (${status}; ${children} child chat; ${childAsked} requests with its task)`);
}

try {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.goto(serve.printed);

  // 1. A subagent answers its parent.
  const url = await double.script('sub', [
    sse(openaiStream({ toolCalls: [{ id: 'call_sa', name: 'spawn_agent', args: { task: 'Say how many legs a spider has.', title: 'Spider legs' } }] })),
    sse(openaiStream({ text: 'A spider has eight legs.' })),
    sse(openaiStream({ text: 'My helper says: eight.' })),
  ]);
  await setProvider(page, { baseUrl: url, key: 'sk-sub-test', model: 'gpt-4o' });
  await page.fill('[data-testid=composer]', 'Ask a helper about spiders.');
  await page.click('[data-testid=send]');
  await waitIdle(page, 1, 30_000);
  const requests = await posts('sub');
  check(requests.length === 3, `parent, child, parent: three requests (${requests.length})`);
  check(requests[0]?.body.tools?.some((t) => t.function.name === 'spawn_agent'), 'the model is offered spawn_agent');
  const childAsked = requests[1]?.body.messages?.find(askedByUser)?.content;
  check(childAsked === 'Say how many legs a spider has.', `the child's request carries the task as its user message (${JSON.stringify(childAsked)})`);
  check(toolText(requests[2]?.body, 'call_sa').includes('A spider has eight legs.'), 'the child\'s answer is the parent\'s tool result');
  await page.waitForSelector('[data-testid=subagent-tree] [data-testid=subagent][data-status=done]');
  const row = await page.textContent('[data-testid=subagent]');
  check(/Spider legs/.test(row) && /gpt-4o/.test(row) && /140 tokens/.test(row), `the tree shows the child: title, model, tokens (${row.replace(/\s+/g, ' ').slice(0, 120)})`);
  await inThemes(page, 'the subagent tree', 'subagent-tree');
  const parentId = await openChatId(page);
  const child = await page.waitForSelector(`[data-testid=chat-item].subagent-chat[data-parent-id="${parentId}"]`, { timeout: 10_000 }).then(() => true, () => false);
  check(child, `the chat list shows the child under its parent${child ? '' : ` (${(await page.locator('[data-testid=chat-item]').allTextContents()).join(' | ')})`}`);
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'subagent-tree.png'), fullPage: true });
  await page.click('[data-testid=open-subagent]');
  await page.waitForFunction((id) => {
    const open = document.querySelector('[data-testid=chat-item][aria-current=true]');
    return open && open.dataset.chatId !== id;
  }, parentId);
  const opened = await page.locator('[data-testid=chat-item][aria-current=true]').evaluate((item) => ({ id: item.dataset.chatId, parent: item.dataset.parentId, subagent: item.classList.contains('subagent-chat') }));
  check(opened.parent === parentId && opened.subagent, `one click opens the child chat, listed under its parent (${JSON.stringify(opened)})`);
  await page.waitForSelector('[data-testid=message][data-role=assistant]');
  check((await page.textContent('[data-testid=transcript]')).includes('A spider has eight legs.'), 'the child chat shows its own conversation');

  // 2. A write asked inside a child is approved from the parent's tree.
  await double.script('sub', [
    sse(openaiStream({ toolCalls: [{ id: 'call_sb', name: 'spawn_agent', args: { task: 'Write hello into hello.txt.', title: 'Writer' } }] })),
    sse(openaiStream({ toolCalls: [{ id: 'call_w', name: 'write_file', args: { path: 'hello.txt', content: 'hello from a subagent\n' } }] })),
    sse(openaiStream({ text: 'Written.' })),
    sse(openaiStream({ text: 'The writer wrote it.' })),
  ]);
  await page.click('[data-testid=new-chat]');
  await page.fill('[data-testid=composer]', 'Have a helper write a file.');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=subagent-approval]', { timeout: 15_000 }).catch(async (error) => {
    console.log(await page.textContent('[data-testid=transcript]'), JSON.stringify((await posts('sub')).slice(-3).map((r) => r.body.messages)));
    throw error;
  });
  check((await page.textContent('[data-testid=subagent-approval]')).includes('write_file'), 'the child\'s approval shows in the parent\'s tree');
  await inThemes(page, 'a subagent\'s approval in the tree', 'subagent-approval');
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'subagent-approval.png'), fullPage: true });
  await page.click('[data-testid=subagent-approve]');
  await waitIdle(page, 1, 30_000);
  const written = await readFile(join(workspace, 'hello.txt'), 'utf8').catch(() => '');
  check(written === 'hello from a subagent\n', 'approved there, the child\'s write ran in the workspace');

  // 3. Overloaded after its retries: the turn goes on with the fallback model of Settings.
  await double.script('sub', [
    { status: 529, body: JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }), headers: { 'content-type': 'application/json' } },
    { status: 529, body: JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }), headers: { 'content-type': 'application/json' } },
    { status: 529, body: JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }), headers: { 'content-type': 'application/json' } },
    { status: 529, body: JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }), headers: { 'content-type': 'application/json' } },
    sse(openaiStream({ text: 'The backup model answers.', model: 'gpt-4o-mini' })),
  ]);
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-provider]');
  // Fallbacks that cannot work are refused on Save in one sentence; the dialog stays open.
  for (const [line, words] of [['gpt-4o-mini', /is not a fallback model/], ['gemini gemini-2.0-flash', /no gemini provider is configured/]]) {
    await page.fill('[data-testid=fallback-models]', line);
    await page.click('[data-testid=save-settings]');
    const said = await page.getByTestId('settings-dialog').locator('#settings-said').innerText().catch(() => '');
    check(words.test(said) && await page.getByTestId('settings-dialog').isVisible(), `a fallback "${line}" is refused on Save, in a sentence (${said})`);
  }
  await page.fill('[data-testid=fallback-models]', 'openai-chat gpt-4o-mini');
  await page.click('[data-testid=save-settings]');
  await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
  await page.click('[data-testid=new-chat]');
  const before = (await posts('sub')).length;
  await page.fill('[data-testid=composer]', 'Hello?');
  await page.click('[data-testid=send]');
  await waitIdle(page, 1, 45_000);
  const tries = (await posts('sub')).slice(before).map((r) => r.body.model);
  check(tries.length === 5 && tries.slice(0, 4).every((m) => m === 'gpt-4o') && tries[4] === 'gpt-4o-mini', `four attempts on the preferred model, then the fallback (${tries.join(', ')})`);
  const note = await page.textContent('[data-testid=model-fallback]').catch(() => '');
  check(/gpt-4o failed \(overloaded\).*gpt-4o-mini/.test(note), `the turn says the model fell back (${note})`);
  const answeredBy = await page.getAttribute('[data-testid=message][data-role=assistant]', 'data-model');
  check(answeredBy === 'openai-chat/gpt-4o-mini', `the answer records the model that produced it (${answeredBy})`);
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'model-fallback.png'), fullPage: true });

  // 4. Deleting a parent asks about its subagents' chats; yes deletes them too.
  const spiderRoot = await page.locator('[data-testid=chat-item]', { hasText: 'Ask a helper about spiders.' }).getAttribute('data-chat-id');
  await page.click(`[data-testid=chat-item][data-chat-id="${spiderRoot}"]`);
  await page.waitForFunction((id) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === id, spiderRoot);
  // Its export carries its subagent's chat; importing it brings the tree back, linked anew.
  const [download] = await Promise.all([page.waitForEvent('download'), chatMenu(page, 'export-chat')]);
  const exported = await readFile(await download.path(), 'utf8');
  const imported = await importFile(page, exported, 'spiders.json');
  const importedChild = page.locator(`[data-testid=chat-item][data-parent-id="${imported}"]`);
  await importedChild.first().waitFor({ timeout: 10_000 }).catch(() => {});
  const childCount = await importedChild.count();
  check(JSON.parse(exported).subagents?.length === 1 && childCount === 1, `an export with its subagent, imported, lists the child under the new chat (${childCount} child${childCount === 1 ? '' : 'ren'})`);
  if (childCount) {
    await importedChild.first().click();
    await page.getByTestId('transcript').filter({ hasText: 'A spider has eight legs.' }).waitFor({ timeout: 10_000 }).catch(() => {});
    check((await page.textContent('[data-testid=transcript]')).includes('A spider has eight legs.'), 'the imported child holds its own conversation');
  }
  await page.click(`[data-testid=chat-item][data-chat-id="${spiderRoot}"]`);
  await page.waitForFunction((id) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId === id, spiderRoot);
  let asked = '';
  page.once('dialog', (dialog) => { asked = dialog.message(); dialog.accept(); });
  await chatMenu(page, 'delete-chat');
  const family = (id) => `[data-testid=chat-item][data-chat-id="${id}"], [data-testid=chat-item][data-parent-id="${id}"]`;
  await page.waitForFunction((selector) => !document.querySelector(selector), family(spiderRoot), { timeout: 10_000 }).catch(() => {});
  const left = await page.locator(family(spiderRoot)).count();
  check(/Delete its 1 subagent chat too/.test(asked) && left === 0, `deleting a parent asks about its subagents' chats (${asked}; ${left} left)`);
  await reloadDuringASubagent(page);
  await reloadDuringABackgroundSubagent(page);
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
} finally {
  await context.close();
  serve.child.kill();
  double.child.kill();
  await cleanup(workspace, profile);
}
process.exit(failed() ? 1 : 0);
