// axe-core (npm), a judge nobody here wrote, on the page as it is: no serious or critical
// violation, in the light and the dark theme. Every page test calls it on the states it reaches
// (issue 34: the model's download, Settings' sections, the subagent tree, an approval, a question,
// an error), not only on the first screen. PALAVER_SHOTS=dir keeps a picture of each.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { root, check } from './harness.mjs';

const axeSource = await readFile(join(root, 'tests/browser/node_modules/axe-core/axe.min.js'), 'utf8');

/**
 * Waits until what a person would see has settled: two frames (a resize or a theme moves the
 * pointer's hover), then every running transition (a message's actions fade in on hover).
 */
async function settle(page) {
  await page.evaluate(async () => {
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
    // Not an endless one (a spinner): it never finishes.
    const ending = document.getAnimations().filter((a) => a.effect?.getComputedTiming().endTime !== Infinity);
    await Promise.all(ending.map((a) => a.finished.catch(() => {})));
  });
}

/** The serious and critical violations of the page as it is, one line each; checked empty. */
export async function audit(page, what) {
  await settle(page);
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const result = await globalThis.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
  });
  check(violations.length === 0, `axe: no serious or critical violation — ${what}${violations.length ? `: ${violations.join('; ')}` : ''}`);
}

/** The widths every state is judged at: a phone, a laptop, a large screen. */
const WIDTHS = [[360, 740], [1280, 800], [1920, 1080]];

/**
 * `audit` at each of `WIDTHS` in both themes (then back to the user's theme and the page's size),
 * with a picture of each when asked (issue 38: every state at 360, 1 280 and 1 920 px).
 */
export async function inThemes(page, what, name) {
  const size = page.viewportSize();
  for (const [width, height] of WIDTHS) {
    await page.setViewportSize({ width, height });
    for (const theme of ['light', 'dark']) {
      await page.evaluate((t) => { document.documentElement.dataset.theme = t; }, theme);
      await audit(page, `${what}, ${theme}, ${width} px`);
      if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, `${name}-${theme}-${width}.png`) });
    }
  }
  if (size) await page.setViewportSize(size);
  await page.evaluate(() => delete document.documentElement.dataset.theme);
}
