import { startServe, launch, tempDir, ready, root } from '/work/main/tests/browser/harness.mjs';
import { readFileSync } from 'node:fs'; import { gunzipSync } from 'node:zlib'; import { join } from 'node:path';
const ws = await tempDir('w-'); const prof = await tempDir('p-');
const serve = await startServe(ws); const ctx = await launch(prof);
const page = await ctx.newPage();
page.on('console', (m) => { if (!m.text().includes('DOM')) console.log('console:', m.text()); });
await page.goto(serve.printed); await ready(page);
const history = gunzipSync(readFileSync(join(root, '../shared/bench/history-5k.json.gz'))).toString('utf8');
const id = await page.evaluate((t) => globalThis.palaverApp.palaver.importChat(t), history);
await page.evaluate(() => globalThis.palaverApp.palaver.close());
await page.reload(); await ready(page);
const r = await page.evaluate(async (id) => {
  const p = globalThis.palaverApp.palaver;
  const t = performance.now();
  const x = await p.peekChat(id, 40).catch((e) => ({ err: String(e?.message ?? e) }));
  return { ms: performance.now() - t, n: x.messages?.length, count: x.message_count, err: x.err };
}, id);
console.log(JSON.stringify(r));
await ctx.close(); serve.child.kill();
