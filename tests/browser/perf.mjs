// The web app's performance, printed (a benchmark, not a timed test; issue 7): a cold load's first
// paint and time to interactive, streaming N tokens (default 20 000) at 200 tokens/s while a
// PerformanceObserver records long tasks, opening the 5 000-message chat of ../shared/bench, and the
// app's transfer size (as served, and gzipped). It acts through `person.mjs`, as the page tests do;
// performance marks are read after an action, never waited on before one.
// node tests/browser/perf.mjs [--tokens N]   (after build_pkg and `cargo build`)
import { existsSync, readFileSync, statSync } from 'node:fs';
import { gzipSync, gunzipSync, brotliCompressSync, constants as zlib } from 'node:zlib';
import { join } from 'node:path';
import { person } from './person.mjs';
import { shellFiles } from '../../scripts/shell-files.mjs';
import { startDouble, startServe, launch, tempDir, cleanup, root, openaiStream, setProvider, waitIdle, importFile } from './harness.mjs';

// Requests a service worker makes are reported too (Playwright's Chromium-only switch): what a
// person's first answer costs includes what the worker fetches for the offline cache.
process.env.PW_EXPERIMENTAL_SERVICE_WORKER_NETWORK_EVENTS = '1';
const argv = process.argv.slice(2);
const tokens = Number(argv[argv.indexOf('--tokens') + 1] || 20_000) || 20_000;
const RATE = 200; // tokens per second
const workspace = await tempDir('palaver-perf-ws-');
const profile = await tempDir('palaver-perf-');
const double = await startDouble();
const serve = await startServe(workspace);
let context = await launch(profile);
const row = (name, value) => console.log(`${name.padEnd(52)} ${value}`);
/** Everything fetched from the app's origin (by the page and its service worker), as received. */
const wire = [];
const reading = new Set(); // the sizes still being read (`wireNow` waits for them)
/** The totals of the requests that started before `before` (epoch ms): all of them by default. */
const wireNow = async (before = Infinity) => {
  await Promise.all([...reading]);
  const sum = { page: 0, worker: 0, requests: 0, wasm: [] };
  for (const r of wire.filter((r) => r.start < before)) {
    sum.requests += 1;
    sum[r.worker ? 'worker' : 'page'] += r.bytes;
    if (r.url.includes('.wasm')) sum.wasm.push(r.url.replace(serve.origin, ''));
  }
  return { ...sum, wasm: [...new Set(sum.wasm)] };
};
/** When the provider's first answer began to arrive (epoch ms): nothing started after it came before its words. */
let answerArrived = Infinity;
context.on('requestfinished', async (request) => {
  if (!request.url().startsWith(serve.origin)) return; // the provider's own traffic is not ours
  const read = request.sizes().catch(() => null);
  reading.add(read);
  const sizes = await read;
  reading.delete(read);
  const bytes = sizes ? sizes.responseBodySize + sizes.responseHeadersSize : 0;
  wire.push({ start: request.timing().startTime, bytes, worker: Boolean(request.serviceWorker()), url: request.url() });
});
try {
  let page = await context.newPage();
  await page.goto(serve.printed);
  await page.getByTestId('connect-provider').waitFor();
  const transferred = () => page.evaluate(() => performance.getEntriesByType('resource').reduce((sum, r) => sum + r.transferSize, 0) + performance.getEntriesByType('navigation')[0].transferSize);
  // The number is read once the page says it is interactive (a measurement, not a wait to act).
  await page.waitForFunction(() => performance.getEntriesByName('palaver-interactive').length > 0, null, { timeout: 15_000 }).catch(() => {});
  const load = await page.evaluate(() => ({
    fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
    fp: performance.getEntriesByName('first-paint')[0]?.startTime,
    interactive: performance.getEntriesByName('palaver-interactive')[0]?.startTime,
    engine: performance.getEntriesByType('resource').some((r) => r.name.endsWith('palaver_bg.wasm')),
  }));
  const firstLoad = await transferred();
  const firstVisit = await wireNow();
  row('first visit: first paint', `${load.fp?.toFixed(0)} ms (first contentful paint ${load.fcp?.toFixed(0)} ms)`);
  row('first visit: interactive (drawn, chats listed)', `${load.interactive?.toFixed(0)} ms (engine ${load.engine ? 'loaded' : 'not loaded: nothing stored yet'})`);
  // As received (headers and bodies, the service worker's requests too); the page's resource
  // timing counts every answer's headers as 300 bytes, whatever they are.
  row('first visit: bytes from the app\'s origin (as palaver serve sends them: brotli, built for pkg/, made on the fly for www/)', `${(firstVisit.page + firstVisit.worker).toLocaleString('en')} B (page ${firstVisit.page.toLocaleString('en')} B, service worker ${firstVisit.worker.toLocaleString('en')} B; ${firstVisit.requests} requests; the page's resource timing says ${firstLoad.toLocaleString('en')} B)`);
  // The first use: Settings opened (its defaults come from the engine's module), then saved.
  const used = Date.now();
  await person(page).click('settings');
  await person(page).click('settings-tab-agent');
  await page.waitForFunction(() => document.querySelector('[data-testid=tool-policy] select'));
  const settingsMs = Date.now() - used;
  await person(page).click('cancel-settings');
  // The app's files: the service worker's shell list (the page's HTML, style and bundle, the
  // engine, the renderer, the model's worker; the service worker itself too).
  const shell = [join(root, 'www/sw.js'), ...shellFiles(root).filter((f) => f !== './').map((f) => join(root, 'www', f))];
  const gz = shell.reduce((sum, f) => sum + gzipSync(readFileSync(f), { level: 9 }).length, 0);
  const wasmGz = gzipSync(readFileSync(join(root, 'pkg/palaver_bg.wasm')), { level: 9 }).length;
  row('app transfer size, gzipped (the offline shell: page, bundle, engine, renderer, worker)', `${gz.toLocaleString('en')} B (wasm ${wasmGz.toLocaleString('en')} B)`);
  // What palaver serve sends a browser that takes brotli: pkg/'s files as the build wrote them,
  // www/'s made on the fly at quality 6.
  const onTheFly = (f) => brotliCompressSync(readFileSync(f), { params: { [zlib.BROTLI_PARAM_QUALITY]: 6 } }).length;
  const served = shell.reduce((sum, f) => sum + (existsSync(`${f}.br`) ? statSync(`${f}.br`).size : onTheFly(f)), 0);
  row('app transfer size as served (brotli: pkg/ built, www/ on the fly)', `${served.toLocaleString('en')} B (wasm ${statSync(join(root, 'pkg/palaver_bg.wasm.br')).size.toLocaleString('en')} B)`);

  // Streaming: N one-token chunks, 10 every 50 ms.
  const text = Array.from({ length: tokens }, (_, i) => (i % 40 === 39 ? ` w${i}.\n\n` : ` w${i}`)).join('');
  const body = openaiStream({ text, pieces: tokens });
  const perChunk = Math.ceil(body.length / tokens);
  const url = await double.script('perf', [{ body, chunk_bytes: perChunk * 10, delay_ms: Math.round(10_000 / RATE) }, { body: openaiStream({ text: 'A short answer.' }) }, { body: openaiStream({ text: 'One more answer.' }) }]);
  await setProvider(page, { baseUrl: url, key: 'sk-perf' });
  context.on('response', (response) => {
    const timing = response.request().timing();
    if (response.url().startsWith(url) && response.request().method() === 'POST' && answerArrived === Infinity) answerArrived = timing.startTime + timing.responseStart;
  });
  row('first use: Settings opened → its engine defaults drawn', `${settingsMs} ms (the engine's wasm fetched and compiled)`);
  const firstUse = await wireNow();
  row('first use: bytes from the app\'s origin since the first visit\'s load', `${(firstUse.page + firstUse.worker - firstVisit.page - firstVisit.worker).toLocaleString('en')} B (the engine, the settings' requests)`);
  await page.evaluate(() => {
    globalThis.__longTasks = [];
    new PerformanceObserver((list) => globalThis.__longTasks.push(...list.getEntries().map((e) => e.duration))).observe({ type: 'longtask' });
    globalThis.__frames = 0;
    const count = () => {
      globalThis.__frames += 1;
      requestAnimationFrame(count);
    };
    requestAnimationFrame(count);
  });
  const started = Date.now();
  await person(page).send('Stream a lot');
  await page.locator('[data-testid=message][data-role=assistant]').filter({ hasText: 'w1' }).first().waitFor({ timeout: 30_000 });
  const wordsSeen = Date.now();
  // What started before the answer arrived: the renderer's wasm is fetched once its words are drawn.
  const atFirstAnswer = await wireNow(answerArrived);
  await page.waitForFunction(() => !document.querySelector('[data-testid=message][data-role=assistant] .plain'), null, { timeout: 30_000 });
  const plainMs = Date.now() - wordsSeen;
  row('first visit → first answer\'s words: bytes from the app\'s origin', `${(atFirstAnswer.page + atFirstAnswer.worker).toLocaleString('en')} B (page ${atFirstAnswer.page.toLocaleString('en')} B, service worker ${atFirstAnswer.worker.toLocaleString('en')} B; ${atFirstAnswer.requests} requests; wasm: ${atFirstAnswer.wasm.join(', ')})`);
  row('first visit: the first answer\'s words → drawn as Markdown', `${plainMs} ms (plain text until the renderer's wasm, fetched once the words showed, is there)`);
  await waitIdle(page, 1, (tokens / RATE) * 1000 * 3 + 30_000);
  const seconds = (Date.now() - started) / 1000;
  const stream = await page.evaluate(() => ({ long: globalThis.__longTasks, frames: globalThis.__frames }));
  const over = stream.long.filter((d) => d > 50);
  row(`streaming ${tokens.toLocaleString('en')} tokens at ${RATE}/s`, `${seconds.toFixed(1)} s, ${(stream.frames / seconds).toFixed(0)} frames/s`);
  row('streaming: long tasks over 50 ms', `${over.length} (longest ${Math.max(0, ...stream.long).toFixed(0)} ms; all long tasks: ${stream.long.length})`);

  // Send → the request leaving, after a reload: a question typed and sent at once, as a person
  // does (if the engine is still loading, the page holds the message and sends it when it can).
  await page.reload();
  await page.evaluate(() => {
    globalThis.__sent = 0;
    addEventListener('pointerdown', (e) => { if (e.target.closest?.('[data-testid=send]')) globalThis.__sent = performance.now(); }, { capture: true });
  });
  await person(page).send('A quick question');
  await waitIdle(page, 2, 30_000);
  const leaving = await page.evaluate((provider) => {
    const request = performance.getEntriesByType('resource').find((r) => r.name.startsWith(provider));
    return { ms: request ? request.startTime - globalThis.__sent : null, engine: performance.getEntriesByType('resource').some((r) => r.name.endsWith('palaver_bg.wasm')) };
  }, url);
  if (leaving.ms === null) throw new Error('the answer came, but no request to the provider was seen in the page\'s resource timing');
  row('after a reload: click on Send → the request leaving', `${leaving.ms.toFixed(0)} ms (the engine ${leaving.engine ? 'fetched since the reload' : 'not fetched'})`);

  // Opening the 5 000-message chat.
  const history = gunzipSync(readFileSync(join(root, '../shared/bench/history-5k.json.gz'))).toString('utf8');
  const id = await importFile(page, history, 'history-5k.json');
  await person(page).click('new-chat');
  await page.waitForFunction((long) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId !== long, id);
  await page.reload();
  const item = page.locator(`[data-testid=chat-item][data-chat-id="${id}"]`);
  await item.waitFor();
  // Click → the first frame with messages, and click → usable (the whole chat drawn, "show
  // earlier" offered, nothing loading): what a person waits for.
  await page.evaluate(watchOpening);
  await item.click();
  await page.waitForFunction(() => globalThis.__open.usable > 0, null, { timeout: 60_000 });
  const open = await page.evaluate(() => ({ ...globalThis.__open, nodes: document.querySelectorAll('[data-testid=message]').length, more: document.querySelector('[data-testid=show-earlier]')?.textContent ?? '' }));
  row('open the 5 000-message chat: click → first frame with messages', `${open.first?.toFixed(0)} ms (its last screen, read from storage)`);
  row('open the 5 000-message chat: click → usable (whole chat in the engine, drawn)', `${open.usable.toFixed(0)} ms (the engine running, the chat not loaded yet; ${open.nodes} messages drawn; ${open.more})`);
  // Warm: back to it after another chat (it stays loaded in this tab's engine).
  await person(page).click('new-chat');
  await page.waitForFunction((long) => document.querySelector('[data-testid=chat-item][aria-current=true]')?.dataset.chatId !== long, id);
  await page.evaluate(watchOpening);
  await item.click();
  await page.waitForFunction(() => globalThis.__open.usable > 0, null, { timeout: 60_000 });
  row('open the 5 000-message chat again: click → usable (warm)', `${(await page.evaluate(() => globalThis.__open.usable)).toFixed(0)} ms (loaded in this tab before)`);
  // To its first message, as a person gets there: "Jump to the first message", then back at the
  // end, 120 steps of the wheel up. The long tasks over both are counted.
  const watchLong = () => page.evaluate(() => {
    globalThis.__long = [];
    new PerformanceObserver((list) => globalThis.__long.push(...list.getEntries().map((e) => e.duration))).observe({ type: 'longtask' });
  });
  const longTasks = async () => {
    const all = await page.evaluate(() => globalThis.__long);
    return `${all.filter((d) => d > 50).length} long tasks over 50 ms (longest ${Math.max(0, ...all).toFixed(0)} ms)`;
  };
  await watchLong();
  await page.evaluate(() => {
    globalThis.__jump = { clicked: 0, shown: 0 };
    addEventListener('pointerdown', () => { globalThis.__jump.clicked = performance.now(); }, { capture: true, once: true });
    const watch = new MutationObserver(() => {
      // The chat's start: messages drawn, none earlier left to show (its first, a system prompt, is not drawn).
      const atStart = document.querySelector('#transcript [data-testid=message]') && !document.querySelector('[data-testid=show-earlier]') && !document.querySelector('[data-testid=loading-earlier]');
      if (globalThis.__jump.shown || !atStart) return;
      watch.disconnect();
      requestAnimationFrame(() => requestAnimationFrame(() => { globalThis.__jump.shown = performance.now(); }));
    });
    watch.observe(document.getElementById('transcript'), { childList: true, subtree: true });
  });
  await person(page).click('jump-first');
  await page.waitForFunction(() => globalThis.__jump.shown > 0, null, { timeout: 30_000 });
  const jumped = await page.evaluate(() => globalThis.__jump.shown - globalThis.__jump.clicked);
  const firstDrawn = await page.evaluate(() => document.querySelector('#transcript [data-testid=message]').dataset.index);
  row('the 5 000-message chat: "Jump to the first message" → shown', `${jumped.toFixed(0)} ms (message ${firstDrawn} at the top), ${await longTasks()}`);
  await person(page).click('jump-last');
  await page.locator('#transcript').hover();
  await watchLong();
  const scrolled = Date.now();
  for (let tick = 0; tick < 120; tick += 1) {
    await page.mouse.wheel(0, -400);
    await page.waitForTimeout(50);
  }
  const topIndex = await page.evaluate(() => Number(document.querySelector('[data-testid=message]')?.dataset.index ?? -1));
  row('the 5 000-message chat: scrolling up, 120 wheel steps', `${await longTasks()}; ${((Date.now() - scrolled) / 1000).toFixed(1)} s, from message 4 999 up to ${topIndex.toLocaleString('en')} drawn`);
  // Back at the end, where the reloads below find it.
  await person(page).click('to-latest');
  // A reload with that chat open — navigation → the whole chat usable. The tab keeps its memory
  // cache across a reload: most files come from it. `reloaded` is read at the end of each.
  await context.addInitScript(watchReload);
  await page.reload();
  row('a reload with the 5 000-message chat open: navigation → usable', await reloaded(page, 'the tab\'s memory cache warm'));
  // The same after a new turn in it (what a person reloads after): its saves are on top of the
  // copy the last opening packed.
  await person(page).send('One more turn');
  await page.getByText('One more answer.').first().waitFor({ timeout: 30_000 });
  await page.waitForTimeout(1000); // the turn's saves
  await page.reload();
  const afterTurn = await reloaded(page, 'its stored copy and the records the turn wrote');
  const lastShown = await page.locator('[data-testid=message][data-role=assistant]').last().textContent();
  if (!lastShown.includes('One more answer.')) throw new Error(`after the reload the new turn is not shown (${lastShown.slice(0, 80)})`);
  row('a reload after a new turn in the 5 000-message chat: navigation → usable', afterTurn);

  // Search inside messages over every stored chat (the 5 000-message one among them): the last
  // keystroke → the hits shown, which includes the 250 ms pause the box waits for typing to stop.
  await page.evaluate(() => {
    globalThis.__search = { typed: 0, shown: 0 };
    document.getElementById('chat-search').addEventListener('input', () => { globalThis.__search.typed = performance.now(); });
    new MutationObserver(() => {
      if (document.querySelector('[data-testid=message-hit]') && !globalThis.__search.shown) globalThis.__search.shown = performance.now();
    }).observe(document.getElementById('message-hits'), { childList: true, subtree: true });
  });
  await person(page).type('chat-search', 'history-entry');
  await page.waitForFunction(() => globalThis.__search.shown > 0, null, { timeout: 30_000 })
    .catch(async (error) => { throw new Error(`no hits: ${await page.getByTestId('message-hits').innerText().catch(() => '?')} (${error.message})`); });
  const search = await page.evaluate(() => ({ ms: globalThis.__search.shown - globalThis.__search.typed, hits: document.querySelectorAll('[data-testid=message-hit]').length }));
  row('search inside messages: last keystroke → hits shown', `${search.ms.toFixed(0)} ms (${search.hits} hits; 250 ms of it is the pause for typing to stop)`);

  // Cold, as a person meets it: the chat open in a new tab (no memory cache: every file from the
  // offline cache, the wasm compiled again), then in a browser started again on the same profile.
  await page.close();
  page = await context.newPage();
  await page.goto(serve.printed);
  row('a new tab with the 5 000-message chat open: navigation → usable (cold)', await reloaded(page, 'the tab\'s caches empty'));
  await context.close();
  context = await launch(profile);
  await context.addInitScript(watchReload);
  page = await context.newPage();
  await page.goto(serve.printed);
  row('the browser started again with that chat open: navigation → usable (cold)', await reloaded(page, 'a new browser, its offline cache on disk'));
} finally {
  await context.close().catch(() => {});
  serve.child.kill();
  double.child.kill();
  await cleanup(profile, workspace);
}

/** Records, from navigation, the first frame with messages and the chat usable (the whole chat
 * drawn, "show earlier" offered, nothing loading) in `globalThis.__reload`; runs in the page. */
function watchReload() {
  const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  globalThis.__reload = { first: null, usable: null };
  const check = () => {
    const o = globalThis.__reload;
    if (o.first === null && document.querySelector('#transcript [data-testid=message]')) {
      o.first = 0;
      frame().then(() => { o.first = performance.now(); });
    }
    if (o.usable !== null || !document.querySelector('[data-testid=show-earlier]') || document.querySelector('[data-testid=loading-earlier]')) return;
    o.usable = 0;
    frame().then(() => { o.usable = performance.now(); });
  };
  addEventListener('DOMContentLoaded', () => new MutationObserver(check).observe(document.body, { childList: true, subtree: true }));
}

/** The row of a reload `watchReload` watched: usable, and when the first messages were drawn. */
async function reloaded(page, what) {
  await page.waitForFunction(() => globalThis.__reload?.usable > 0 && globalThis.__reload.first > 0, null, { timeout: 60_000 });
  const { first, usable } = await page.evaluate(() => globalThis.__reload);
  return `${usable.toFixed(0)} ms (${what}; the first messages drawn at ${first.toFixed(0)} ms)`;
}

/** Records click → first frame with messages and click → usable (the whole chat drawn, "show
 * earlier" offered, nothing loading) in `globalThis.__open`; runs in the page. */
function watchOpening() {
  const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  globalThis.__open = { clicked: 0, first: null, usable: null };
  addEventListener('pointerdown', () => { globalThis.__open.clicked = performance.now(); }, { capture: true, once: true });
  const watch = new MutationObserver(() => {
    const o = globalThis.__open;
    if (!o.clicked) return;
    if (o.first === null && document.querySelector('#transcript [data-testid=message]')) {
      o.first = 0;
      frame().then(() => { o.first = performance.now() - o.clicked; });
    }
    if (o.usable === null && document.querySelector('[data-testid=show-earlier]') && !document.querySelector('[data-testid=loading-earlier]')) {
      o.usable = 0;
      watch.disconnect();
      frame().then(() => { o.usable = performance.now() - o.clicked; });
    }
  });
  watch.observe(document.getElementById('transcript'), { childList: true, subtree: true });
}
