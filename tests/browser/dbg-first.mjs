import { startServe, launch, tempDir } from './harness.mjs';
import { homedir } from 'node:os';
import { join } from 'node:path';
const MODELS = join(homedir(), '.cache', 'palaver', 'models');
const ws = await tempDir('dbg-ws-');
const serve = await startServe(ws, ['--models', MODELS]);
const ctx = await launch(await tempDir('dbg-prof-'));
const page = await ctx.newPage();
page.on('console', (m) => console.log('console:', m.text()));
page.on('pageerror', (e) => console.log('pageerror:', e.message));
await page.goto(serve.printed);
await page.click('[data-testid=try-local]');
for (let i = 0; i < 6; i++) {
  await page.waitForTimeout(5000);
  await page.screenshot({ path: `/tmp/dbg/first-${i}.png` });
  console.log(i, JSON.stringify(await page.evaluate(() => ({ status: document.getElementById('status').textContent, empty: document.querySelector('#transcript')?.innerText.slice(0, 300) }))));
}
await ctx.close(); serve.child.kill(); process.exit(0);
