// Issue 19: Lighthouse — a tool nobody here wrote — on the app as `palaver serve` serves it, with
// /usr/bin/chromium: its first screen (a navigation), then, as a person reaches them (issue 38), a
// chat with an answer and Settings (snapshots of a user flow; axe-core in the page tests covers every
// state). Prints each score; fails below 95 in accessibility or best practices, naming the audits
// that lost points.
// node tests/lighthouse/run.mjs   (after build_pkg, `cargo build` and `npm ci` here)
import lighthouse, { startFlow } from 'lighthouse';
import puppeteer from 'puppeteer-core';
import * as chromeLauncher from 'chrome-launcher';
import { check, failed, watchdog, startServe, startDouble, openaiStream, tempDir, cleanup } from '../browser/harness.mjs';

watchdog(420, 'Lighthouse');
const MIN = 95;
const workspace = await tempDir('palaver-lh-ws-');
const serve = await startServe(workspace, []);
const double = await startDouble();
const chrome = await chromeLauncher.launch({
  chromePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  chromeFlags: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run'],
});
try {
  for (const [what, url] of [['the app (first run)', serve.printed]]) {
    const result = await lighthouse(url, { port: chrome.port, onlyCategories: ['accessibility', 'best-practices'], logLevel: 'error', output: 'json' });
    judge(what, result.lhr);
  }
  await statesAsAPersonReachesThem();
} finally {
  double.child.kill();
  await chrome.kill();
  serve.child.kill();
  await cleanup(workspace);
}
process.exit(failed() ? 1 : 0);

/** Each category's score of one report, checked against `MIN`, with the audits that lost points. */
function judge(what, lhr) {
  const { categories, audits } = lhr;
  for (const category of Object.values(categories)) {
    const score = Math.round(category.score * 100);
    const lost = category.auditRefs.filter((a) => a.weight > 0 && audits[a.id].score !== null && audits[a.id].score < 1).map((a) => a.id);
    console.log(`lighthouse ${what}: ${category.title} ${score}${lost.length ? ` (lost points: ${lost.join(', ')})` : ''}`);
    check(score >= MIN, `Lighthouse ${category.title} ≥ ${MIN} on ${what} (${score})`);
  }
}

/** A provider set up, a question answered, Settings opened — each state judged as it is. */
async function statesAsAPersonReachesThem() {
  const browser = await puppeteer.connect({ browserURL: `http://127.0.0.1:${chrome.port}` });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  const flow = await startFlow(page, { config: { extends: 'lighthouse:default', settings: { onlyCategories: ['accessibility', 'best-practices'] } } });
  await flow.navigate(serve.printed);
  const click = async (id) => { await page.waitForSelector(`[data-testid=${id}]`, { visible: true }); await page.click(`[data-testid=${id}]`); };
  const baseUrl = await double.script('lighthouse', [{ body: openaiStream({ text: 'A short answer, with a list:\n\n- one\n- two\n\n```js\nconsole.log(1);\n```' }) }]);
  await click('settings');
  await click('settings-tab-provider');
  await page.select('[data-testid=provider-kind]', 'openai-chat');
  await page.$eval('[data-testid=provider-base-url]', (el, v) => { el.value = v; el.dispatchEvent(new Event('input', { bubbles: true })); }, baseUrl);
  await page.type('[data-testid=provider-key]', 'sk-test');
  await page.$eval('[data-testid=provider-model]', (el) => { el.value = 'gpt-4o'; el.dispatchEvent(new Event('input', { bubbles: true })); });
  await flow.snapshot({ name: 'Settings, the provider section' });
  await click('save-settings');
  await page.waitForSelector('[data-testid=settings-dialog]', { hidden: true });
  await page.type('[data-testid=composer]', 'Say something short.');
  await click('send');
  await page.waitForSelector('[data-testid=message][data-role=assistant]:not([data-streaming])', { timeout: 30_000 });
  await flow.snapshot({ name: 'a chat with an answer' });
  const result = await flow.createFlowResult();
  for (const step of result.steps.slice(1)) judge(step.name, step.lhr);
  await browser.disconnect();
}
