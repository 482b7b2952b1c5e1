// Settings → Sync as a person uses it, and the sync status as the sidebar shows it: shared by the
// sync test (sync.mjs) and the sync benchmark (bench-sync.mjs).

/** Settings → Sync, as a person fills it. */
export async function setSync(page, { url, database, username, password, remember = false }) {
  await page.click('[data-testid=settings]');
  await page.click('[data-testid=settings-tab-sync]');
  await page.fill('[data-testid=sync-url]', url);
  await page.fill('[data-testid=sync-database]', database);
  await page.fill('[data-testid=sync-username]', username);
  await page.fill('[data-testid=sync-password]', password);
  await page.setChecked('[data-testid=remember-sync]', remember);
  await page.click('[data-testid=save-settings]');
  await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
}

/** The sync status as the sidebar shows it: its state and the counts in its words. */
export const syncStatus = (page) => page.evaluate(() => {
  const node = document.querySelector('[data-testid=sync-status]');
  const text = node?.hidden ? '' : node?.textContent ?? '';
  const counts = text.match(/\((\d+) sent, (\d+) received/);
  return { state: node?.dataset.state ?? 'off', pushed: Number(counts?.[1] ?? 0), pulled: Number(counts?.[2] ?? 0), text };
});

/** The status once `predicate` holds of it, or the last one seen after `timeout` (said). */
export async function waitSync(page, predicate, what, timeout = 30_000) {
  const started = Date.now();
  let status = null;
  while (Date.now() - started < timeout) {
    status = await syncStatus(page);
    if (predicate(status)) return status;
    await new Promise((r) => setTimeout(r, 100));
  }
  console.log(`  (waited ${timeout} ms for ${what}; last status ${JSON.stringify(status)})`);
  return status;
}
