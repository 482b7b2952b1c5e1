// Issue 19: Lighthouse — a tool nobody here wrote — on the app as `palaver serve` serves it, with
// /usr/bin/chromium, on its first screen (axe-core in design.mjs covers the other states). Prints each score;
// fails below 95 in accessibility or best practices, naming the audits that lost points.
// node tests/lighthouse/run.mjs   (after build_pkg, `cargo build` and `npm ci` here)
import lighthouse from 'lighthouse';
import * as chromeLauncher from 'chrome-launcher';
import { check, failed, watchdog, startServe, tempDir, cleanup } from '../browser/harness.mjs';

watchdog(300, 'Lighthouse');
const MIN = 95;
const workspace = await tempDir('palaver-lh-ws-');
const serve = await startServe(workspace, []);
const chrome = await chromeLauncher.launch({
  chromePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  chromeFlags: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
});
try {
  for (const [what, url] of [['the app (first run)', serve.printed]]) {
    const result = await lighthouse(url, { port: chrome.port, onlyCategories: ['accessibility', 'best-practices'], logLevel: 'error', output: 'json' });
    const { categories, audits } = result.lhr;
    for (const [id, category] of Object.entries(categories)) {
      const score = Math.round(category.score * 100);
      const lost = category.auditRefs.filter((a) => a.weight > 0 && audits[a.id].score !== null && audits[a.id].score < 1).map((a) => a.id);
      console.log(`lighthouse ${what}: ${category.title} ${score}${lost.length ? ` (lost points: ${lost.join(', ')})` : ''}`);
      check(score >= MIN, `Lighthouse ${category.title} ≥ ${MIN} on ${what} (${score})`);
    }
  }
} finally {
  await chrome.kill();
  serve.child.kill();
  await cleanup(workspace);
}
process.exit(failed() ? 1 : 0);
