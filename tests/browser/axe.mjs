// axe-core (npm), a judge nobody here wrote, on the page as it is: no serious or critical
// violation, in the light and the dark theme. Every page test calls it on the states it reaches
// (issue 34: the model's download, Settings' sections, the subagent tree, an approval, a question,
// an error), not only on the first screen. PALAVER_SHOTS=dir keeps a picture of each.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { root, check } from './harness.mjs';

const axeSource = await readFile(join(root, 'tests/browser/node_modules/axe-core/axe.min.js'), 'utf8');

/** The serious and critical violations of the page as it is, one line each; checked empty. */
export async function audit(page, what) {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const result = await globalThis.axe.run(document, { resultTypes: ['violations'] });
    return result.violations.filter((v) => ['serious', 'critical'].includes(v.impact))
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
  });
  check(violations.length === 0, `axe: no serious or critical violation — ${what}${violations.length ? `: ${violations.join('; ')}` : ''}`);
}

/** `audit` in both themes (then back to the user's), with a picture of each when asked. */
export async function inThemes(page, what, name) {
  for (const theme of ['light', 'dark']) {
    await page.evaluate((t) => { document.documentElement.dataset.theme = t; }, theme);
    await audit(page, `${what}, ${theme}`);
    if (process.env.PALAVER_SHOTS) await page.screenshot({ path: join(process.env.PALAVER_SHOTS, `${name}-${theme}-${page.viewportSize()?.width ?? 0}.png`) });
  }
  await page.evaluate(() => delete document.documentElement.dataset.theme);
}
