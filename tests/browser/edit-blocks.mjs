// Edit blocks (issue 40), as a person uses them: a provider set to plain chat with edit blocks
// (Settings), the real `palaver serve` on a temporary workspace, the provider double answering
// with blocks a small model would write. Nothing is written before Apply; Apply writes the file;
// a SEARCH that is not in the file fails with the nearest lines; Skip writes nothing; a suggested
// command runs on Run and shows its output; the next request tells the model what became of each;
// a reload keeps the results.
// node tests/browser/edit-blocks.mjs   (after build_pkg and `cargo build`)
import { readFile, writeFile, access } from 'node:fs/promises';
import { join } from 'node:path';
import { check, failed, watchdog, startDouble, startServe, launch, tempDir, cleanup, openaiStream } from './harness.mjs';
import { person } from './person.mjs';
import { inThemes } from './axe.mjs';

watchdog(240, 'the edit-blocks test');
const GREET = 'def greet():\n    return "Hello, world!"\n\n\nprint(greet())\n';
const ANSWER = [
  'I will make `greet` take a name.',
  '',
  'greet.py',
  '```python',
  '<<<<<<< SEARCH',
  'def greet():',
  '    return "Hello, world!"',
  '=======',
  'def greet(name="world"):',
  '    return f"Hello, {name}!"',
  '>>>>>>> REPLACE',
  '```',
  '',
  'greet.py',
  '```python',
  '<<<<<<< SEARCH',
  'print(greet( ))',
  '=======',
  'print(greet("Ada"))',
  '>>>>>>> REPLACE',
  '```',
  '',
  'docs/HELLO.md',
  '<<<<<<< SEARCH',
  '=======',
  '# Hello',
  '>>>>>>> REPLACE',
  '',
  'Then check it:',
  '',
  '```sh',
  'python3 greet.py | tee greeting.txt',
  '```',
].join('\n');

const workspace = await tempDir('palaver-edit-blocks-ws-');
await writeFile(join(workspace, 'greet.py'), GREET);
const double = await startDouble();
const serve = await startServe(workspace, ['--allow-shell']);
const profile = await tempDir('palaver-edit-blocks-');
const context = await launch(profile);
const pageErrors = [];
const exists = (path) => access(join(workspace, path)).then(() => true, () => false);

try {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
  const you = person(page);
  await page.goto(serve.printed);
  const url = await double.script('edit-blocks', [
    { body: openaiStream({ text: ANSWER, pieces: 40 }), chunk_bytes: 64, delay_ms: 5 },
    // Slow enough to click Try again on a block while it streams.
    { body: openaiStream({ text: 'Glad it works. '.repeat(16), pieces: 16 }), chunk_bytes: 64, delay_ms: 80 },
  ]);
  await you.setProvider({ baseUrl: url, model: 'small-model' });
  await you.openSettings('provider');
  await you.check('provider-plain-chat');
  await you.check('provider-edit-blocks');
  await you.click('save-settings');
  await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });

  await you.ask('Make greet take a name', 1);
  const [first] = await double.log('edit-blocks');
  const system = first?.body?.messages?.find((m) => m.role === 'system')?.content ?? '';
  check(!first?.body?.tools && system.includes('<<<<<<< SEARCH') && system.includes('greet.py'),
    `edit blocks: no tools; the prompt teaches the blocks and lists the workspace (${first?.body?.tools?.length ?? 0} tools, ${system.length} characters)`);
  const blocks = page.getByTestId('edit-block');
  await blocks.first().waitFor();
  const statuses = await page.getByTestId('edit-block-status').allInnerTexts();
  check(await blocks.count() === 3 && statuses.every((s) => /nothing is written until you apply it/.test(s)),
    `the answer shows its 3 edit blocks as proposals (${statuses.join(' | ')})`);
  const diff = await blocks.first().locator('pre.diff').innerText();
  check(diff.includes('-    return "Hello, world!"') && diff.includes('+    return f"Hello, {name}!"'), `each block shows its change (${diff.replace(/\n/g, ' | ')})`);
  check(await readFile(join(workspace, 'greet.py'), 'utf8') === GREET, 'nothing is written before Apply');
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'edit-blocks-proposed.png'), fullPage: true });

  await you.click(blocks.nth(0).getByTestId('apply-edit-block'));
  await blocks.nth(0).getByTestId('edit-block-status').filter({ hasText: 'Applied' }).waitFor({ timeout: 10_000 });
  const after = await readFile(join(workspace, 'greet.py'), 'utf8');
  check(after.includes('def greet(name="world"):') && after.includes('print(greet())'), 'Apply writes the block into the file on disk');

  await you.click(blocks.nth(1).getByTestId('apply-edit-block'));
  await blocks.nth(1).getByTestId('edit-block-status').filter({ hasText: 'Not applied' }).waitFor({ timeout: 10_000 });
  const failedStatus = await blocks.nth(1).getByTestId('edit-block-status').innerText();
  check(/not found in greet\.py; the nearest match is at lines 5–5/.test(failedStatus) && failedStatus.includes('print(greet())'),
    `a SEARCH that is not in the file fails and names the nearest lines (${failedStatus.replace(/\n/g, ' | ')})`);
  check(await blocks.nth(1).getByTestId('apply-edit-block').innerText() === 'Try again', 'a failed block can be tried again');

  await you.click(blocks.nth(2).getByTestId('skip-edit-block'));
  await blocks.nth(2).getByTestId('edit-block-status').filter({ hasText: 'Skipped' }).waitFor({ timeout: 10_000 });
  check(!(await exists('docs/HELLO.md')), 'Skip writes nothing');

  const chip = page.getByTestId('suggested-command');
  check((await chip.locator('code').innerText()) === 'python3 greet.py | tee greeting.txt', 'the fenced shell command is offered as a chip');
  await you.click(chip.getByTestId('run-suggested-command'));
  await chip.getByTestId('command-output').waitFor({ timeout: 20_000 });
  const output = await chip.getByTestId('command-output').innerText();
  check(/Hello, world!/.test(output), `Run runs it in the workspace and shows what it printed (${output.replace(/\n/g, ' | ').slice(0, 160)})`);
  if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, 'edit-blocks-results.png'), fullPage: true });
  await inThemes(page, 'edit blocks with their results', 'proposals');

  // What the command changed was recorded around it: its chip turns it back.
  check(await exists('greeting.txt'), 'the command wrote greeting.txt');
  page.once('dialog', (dialog) => dialog.accept());
  await you.click(chip.getByTestId('restore-files'));
  await page.getByTestId('status').filter({ hasText: /greeting\.txt/ }).waitFor({ timeout: 10_000 }).catch(() => {});
  check(!(await exists('greeting.txt')) && /Restored to before this change: greeting\.txt/.test(await you.read('status')),
    `a command's "Restore files to before this" removes the file it created (${await you.read('status')})`);

  // The applied block is a recorded write: it can be turned back from its card.
  page.once('dialog', (dialog) => dialog.accept());
  await you.click(blocks.nth(0).getByTestId('restore-files'));
  await page.getByTestId('status').filter({ hasText: /Restored to before this change: greet\.py/ }).waitFor({ timeout: 10_000 }).catch(() => {});
  check(await readFile(join(workspace, 'greet.py'), 'utf8') === GREET && /Restored to before this change: greet\.py/.test(await you.read('status')),
    `an applied block's "Restore files to before this" puts the file back (${await you.read('status')})`);

  // A click while an answer streams is held, and the button says until when; then it is done.
  await you.send('Thanks');
  await page.locator('[data-testid=message][data-role=assistant][data-streaming]').waitFor({ timeout: 10_000 });
  const again = blocks.nth(1).getByTestId('apply-edit-block');
  await you.click(again);
  const held = await again.innerText();
  check(/Applies when the answer under way ends/.test(held) && await again.isDisabled(), `a block applied while an answer streams says it is held, and until when (${held})`);
  await you.waitAnswers(2, 20_000);
  await blocks.nth(1).getByTestId('apply-edit-block').filter({ hasText: 'Try again' }).waitFor({ timeout: 10_000 }).catch(() => {});
  check(await blocks.nth(1).getByTestId('apply-edit-block').innerText() === 'Try again', 'once the answer ends the held apply is done (it fails again: its SEARCH is still not in the file)');
  const [, second] = await double.log('edit-blocks');
  const sent = JSON.stringify(second?.body?.messages ?? []);
  check(/files_restored/.test(sent) && /edit_results/.test(sent) && /Edit block 1 \(greet\.py\): applied/.test(sent) && /Edit block 2 \(greet\.py\): failed/.test(sent)
    && /Edit block 3 \(docs\/HELLO\.md\): skipped by the user/.test(sent) && sent.includes('Command `python3 greet.py | tee greeting.txt`: ran'),
  `the next request tells the model what became of each block and command (${sent.match(/Edit block 1[^\\]*/)?.[0] ?? 'not in the request'})`);

  await page.reload();
  await page.getByTestId('edit-block').first().waitFor({ timeout: 20_000 });
  const kept = await page.getByTestId('edit-block-status').allInnerTexts();
  check(/Applied/.test(kept[0]) && /Not applied/.test(kept[1]) && /Skipped/.test(kept[2]), `after a reload the results are still shown (${kept.map((s) => s.split(':')[0]).join(', ')})`);
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ')})`);
} catch (error) {
  check(false, `edit blocks: ${error.message.split('\n')[0]}`);
} finally {
  await context.close().catch(() => {});
  serve.child.kill();
  double.child.kill();
  await cleanup(profile, workspace);
}
process.exit(failed() ? 1 : 0);
