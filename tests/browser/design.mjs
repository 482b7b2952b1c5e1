// Issue 19 (a first part): the page judged by a tool nobody here wrote — axe-core (npm) in
// Chromium on the empty state, a chat with code, Settings, an approval card and the shortcuts
// sheet, in the light and the dark theme, at 1 280 and 360 px: no serious or critical violation.
// Then every keyboard shortcut does what its click does. Screenshots of each state when
// PALAVER_SHOTS is set.
// node tests/browser/design.mjs   (after build_pkg and `cargo build`)
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  root, check, failed, watchdog, startDouble, startServe, launch, tempDir, cleanup, openaiStream, setProvider, waitIdle, openChatId,
} from './harness.mjs';
import { inThemes } from './axe.mjs';

watchdog(420, 'the design test');
const workspace = await tempDir('palaver-design-ws-');
await writeFile(join(workspace, 'long.txt'), Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n'));
const double = await startDouble();
const serve = await startServe(workspace, []);
const profile = await tempDir('palaver-design-profile-');
const context = await launch(profile);
const pageErrors = [];
const sse = (body) => ({ body, headers: { 'content-type': 'text/event-stream' } });
const shots = process.env.PALAVER_SHOTS;

try {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(serve.printed);
  await page.getByTestId('connect-provider').waitFor();
  await inThemes(page, 'the empty state', 'empty');
  await page.setViewportSize({ width: 360, height: 740 });
  await inThemes(page, 'the empty state at 360 px', 'empty');
  await page.setViewportSize({ width: 1280, height: 800 });

  const url = await double.script('design', [
    sse(openaiStream({ text: 'Here is code:\n\n```rust\nfn main() {\n    println!("hi");\n}\n```\n\nDone.' })),
    sse(openaiStream({ toolCalls: [{ id: 'call_w', name: 'write_file', args: { path: 'a.txt', content: 'x' } }] })),
    sse(openaiStream({ toolCalls: [{ id: 'call_r', name: 'read_file', args: { path: 'long.txt' } }] })),
    sse(openaiStream({ text: 'It has thirty lines.' })),
  ]);
  await setProvider(page, { baseUrl: url, key: 'sk-design', model: 'gpt-4o' });
  await page.fill('[data-testid=composer]', 'Show me some code.');
  await page.click('[data-testid=send]');
  await waitIdle(page, 1, 15_000);
  const label = await page.getAttribute('[data-testid=message][data-role=assistant]', 'data-label');
  // The model named is the one the provider says answered (the double's stream says gpt-4o-double).
  check(label === 'Assistant · gpt-4o-double', `an answer carries its role and model (${label})`);
  check(await page.getAttribute('[data-testid=message][data-role=user]', 'data-label') === 'You', 'a message of the user is labelled');
  check(Boolean(await page.getAttribute('[data-testid=message][data-role=user]', 'title')), 'a message shows its time on hover');
  check(await page.textContent('[data-testid=announce]') === 'Answer complete.', 'the live region says the answer ended (the transcript itself is not live)');
  check(await page.getAttribute('[data-testid=transcript]', 'aria-live') === null, 'the streaming transcript does not flood screen readers');
  const highlighted = await page.waitForSelector('[data-testid=message][data-role=assistant] code.hljs .hljs-keyword', { timeout: 10_000 }).then(() => true, () => false);
  const codeText = await page.textContent('[data-testid=message][data-role=assistant] pre code');
  check(highlighted && codeText === 'fn main() {\n    println!("hi");\n}\n', `the rust block is highlighted after the first paint, its text unchanged (${JSON.stringify(codeText)})`);
  await inThemes(page, 'a chat with code', 'chat');
  await page.click('[data-testid=message][data-role=assistant] .insert-code');
  const inserted = await page.inputValue('[data-testid=composer]');
  check(inserted.includes('fn main() {') && inserted.includes('```'), 'Insert puts the code block into the composer, fenced');
  await page.fill('[data-testid=composer]', '');
  await page.click('[data-testid=message][data-role=assistant] .wrap-code');
  check(await page.getAttribute('[data-testid=message][data-role=assistant] .wrap-code', 'aria-pressed') === 'true'
    && await page.evaluate(() => getComputedStyle(document.querySelector('.code pre')).whiteSpace) === 'pre-wrap', 'Wrap wraps the block\'s long lines');

  await page.fill('[data-testid=composer]', 'Write a file.');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=tool-approval]');
  await inThemes(page, 'an approval card', 'approval');
  await page.setViewportSize({ width: 360, height: 740 });
  await inThemes(page, 'an approval card at 360 px', 'approval');
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.click('[data-testid=reject]');
  await waitIdle(page, 1, 15_000).catch(() => {});
  await page.fill('[data-testid=composer]', 'Read long.txt.');
  await page.click('[data-testid=send]');
  await waitIdle(page, 2, 15_000);
  const folded = await page.locator('details.long-result > summary').first().textContent().catch(() => '');
  const foldedOpen = await page.locator('details.long-result').first().evaluate((d) => d.open).catch(() => true);
  check(/^Output: 30 lines/.test(folded) && !foldedOpen, `a long tool output is folded with its size (${folded})`);

  // Every section of Settings.
  await page.click('[data-testid=settings]');
  for (const section of ['provider', 'local', 'agent', 'workspace', 'sync', 'appearance']) {
    await page.click(`[data-testid=settings-tab-${section}]`);
    await inThemes(page, `Settings → ${section}`, `settings-${section}`);
  }
  await page.click('[data-testid=cancel-settings]');

  // The keyboard.
  await page.locator('body').click({ position: { x: 5, y: 5 } }).catch(() => {});
  await page.keyboard.press('Shift+Escape');
  check(await page.evaluate(() => document.activeElement?.id) === 'composer', 'Shift+Esc focuses the composer');
  await page.keyboard.press('ArrowUp');
  check(await page.locator('[data-testid=message][data-role=user] textarea, .edit textarea').count() > 0, '↑ in the empty composer edits the last message');
  await page.keyboard.press('Escape').catch(() => {});
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.press('Shift+Slash');
  check(await page.evaluate(() => document.getElementById('shortcuts').open), '? opens the list of shortcuts');
  await inThemes(page, 'the shortcuts sheet', 'shortcuts');
  await page.keyboard.press('Escape');
  check(!(await page.evaluate(() => document.getElementById('shortcuts').open)), 'Esc closes it');
  const before = await openChatId(page);
  await page.keyboard.press('Alt+KeyN');
  await page.waitForFunction((id) => {
    const open = document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId;
    return open && open !== id;
  }, before, { timeout: 5000 }).catch(() => {});
  const created = await openChatId(page);
  check(created && created !== before, 'Alt+N starts a new chat');
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.press('Alt+ArrowDown');
  await page.waitForFunction((id) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId !== id, created, { timeout: 5000 }).catch(() => {});
  check(await openChatId(page) === before, 'Alt+↓ moves to the next chat');
  await page.keyboard.press('Alt+Comma');
  check(await page.getByTestId('settings-dialog').isVisible(), 'Alt+, opens Settings');
  await page.click('[data-testid=cancel-settings]');

  // Esc stops an answer that is streaming.
  await double.script('design', [{ body: openaiStream({ text: 'word '.repeat(400), pieces: 200 }), headers: { 'content-type': 'text/event-stream' }, chunk_bytes: 200, delay_ms: 60 }]);
  await page.fill('[data-testid=composer]', 'Talk for a while.');
  await page.click('[data-testid=send]');
  await page.waitForSelector('[data-testid=message][data-streaming]');
  const gauge = await page.waitForFunction(() => Number(document.querySelector('[data-testid=context-usage]').dataset.streaming) > 20, null, { timeout: 5000 }).then(() => true, () => false);
  check(gauge, 'the context gauge counts the answer while it streams');
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.press('Escape');
  const stopped = await page.getByTestId('send').waitFor({ timeout: 5000 }).then(() => true, () => false);
  check(stopped && await page.locator('[data-testid=message][data-role=assistant] .marker').last().textContent().then((t) => /stopped/.test(t), () => false), 'Esc stops the streaming answer (kept, marked stopped)');

  // A message's own actions: Copy puts its text on the clipboard, Delete removes it.
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: serve.origin }).catch(() => {});
  const lastUser = page.locator('[data-testid=message][data-role=user]').last();
  const userId = await lastUser.getAttribute('data-message-id');
  await lastUser.locator('[data-testid=copy-message]').click();
  const copied = await page.evaluate(() => navigator.clipboard.readText()).catch(() => null);
  check(copied === 'Talk for a while.', `Copy on a message copies its text (${JSON.stringify(copied)})`);
  await lastUser.locator('[data-testid=delete-message]').click();
  const gone = await page.waitForFunction((id) => !document.querySelector(`[data-message-id="${id}"]`), userId, { timeout: 5000 }).then(() => true, () => false);
  check(gone, 'Delete on a message removes it');

  // The theme switch cycles auto → light → dark and is remembered.
  const themes = [];
  for (let i = 0; i < 3; i += 1) {
    await page.click('[data-testid=theme]');
    themes.push(await page.evaluate(() => document.documentElement.dataset.theme ?? 'auto'));
  }
  await page.click('[data-testid=theme]');
  await page.reload();
  await page.locator('[data-testid=message]').first().waitFor(); // the chat that was open, back
  const kept = await page.evaluate(() => document.documentElement.dataset.theme);
  check(themes.join(',') === 'light,dark,auto' && kept === 'light', `the theme switch cycles and is remembered (${themes.join(',')}; after reload ${kept})`);

  // A wide screen: the transcript keeps its reading width, nothing overflows.
  await page.setViewportSize({ width: 1920, height: 1080 });
  const wide = await page.evaluate(() => ({
    over: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    message: document.querySelector('[data-testid=message]')?.getBoundingClientRect().width ?? 0,
  }));
  check(wide.over <= 0 && wide.message > 300 && wide.message <= 800, `at 1 920 px nothing overflows and messages keep a reading width (${Math.round(wide.message)} px)`);
  if (shots) await page.screenshot({ path: join(shots, 'chat-1920.png') });

  // A narrow window (the extension's side panel): the chat list behind a button.
  await page.setViewportSize({ width: 360, height: 740 });
  await inThemes(page, 'the chat at 360 px', 'narrow');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  check(overflow <= 0, `nothing is wider than 360 px (${overflow} px over)`);
  await page.click('[data-testid=show-chats]');
  check(await page.isVisible('[data-testid=chat-list]'), 'at 360 px the chat list opens from the header');
  if (shots) await page.screenshot({ path: join(shots, 'narrow-chats.png') });
  await page.click('[data-testid=settings]');
  await inThemes(page, 'Settings at 360 px', 'settings');
  await page.click('[data-testid=cancel-settings]');
  await page.keyboard.press('Escape');
  check(!(await page.isVisible('[data-testid=chat-list]')), 'Esc closes the chat drawer');
  await page.evaluate(() => document.getElementById('shortcuts').showModal());
  await inThemes(page, 'the shortcuts sheet at 360 px', 'shortcuts');
  await page.keyboard.press('Escape');
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
} finally {
  await context.close();
  serve.child.kill();
  double.child.kill();
  await cleanup(workspace, profile);
}
process.exit(failed() ? 1 : 0);
