// A first visit on a slow network, as a person meets it (issue 41): a fresh profile, the network
// throttled through the DevTools protocol (default 200 KB/s each way, 150 ms latency), a provider
// set up, "Hello" typed and sent at once. Prints, for three runs: Send → the first answer's words,
// navigation → those words, and how long the words show as plain text before the Markdown
// renderer (fetched once they show) draws them. A benchmark: it prints numbers, it asserts nothing
// but that the answer comes and is drawn as Markdown.
// node tests/browser/bench-first-answer.mjs [--kbps N] [--runs N]   (after build_pkg and `cargo build`)
import { startDouble, startServe, launch, tempDir, cleanup, openaiStream } from './harness.mjs';
import { person } from './person.mjs';

const argv = process.argv.slice(2);
const option = (name, fallback) => Number(argv[argv.indexOf(name) + 1]) || fallback;
const kbps = argv.includes('--kbps') ? option('--kbps', 200) : 200;
const runs = argv.includes('--runs') ? option('--runs', 3) : 3;
const answered = '[data-testid=message][data-role=assistant] .markdown';

const workspace = await tempDir('palaver-first-answer-ws-');
const double = await startDouble();
const serve = await startServe(workspace);
const rows = [];
try {
  for (let run = 0; run < runs; run += 1) {
    const profile = await tempDir('palaver-first-answer-');
    const context = await launch(profile);
    try {
      const page = await context.newPage();
      const devtools = await context.newCDPSession(page);
      await devtools.send('Network.enable');
      await devtools.send('Network.emulateNetworkConditions', { offline: false, latency: 150, downloadThroughput: kbps * 1024, uploadThroughput: kbps * 1024 });
      const navigated = Date.now();
      await page.goto(serve.printed);
      const url = await double.script(`first-answer-${run}`, [{ body: openaiStream({ text: 'Here is **bold** text.' }) }]);
      const you = person(page);
      await you.setProvider({ baseUrl: url, key: 'sk-bench' });
      await you.type('composer', 'Hello');
      const clicked = Date.now();
      await you.click('send');
      await page.waitForFunction((sel) => [...document.querySelectorAll(sel)].some((n) => n.textContent.trim()), answered, { timeout: 120_000 });
      const words = Date.now();
      await page.waitForFunction((sel) => document.querySelector(`${sel} strong`), answered, { timeout: 120_000 });
      rows.push({ send: words - clicked, navigation: words - navigated, plain: Date.now() - words });
    } finally {
      await context.close();
      await cleanup(profile);
    }
  }
} finally {
  serve.child.kill();
  double.child.kill();
  await cleanup(workspace);
}
const list = (key) => rows.map((r) => `${r[key]}`).join(', ');
console.log(`a first visit at ${kbps} KB/s (150 ms latency), ${runs} runs`);
console.log(`  Send → the first answer's words       ${list('send')} ms`);
console.log(`  navigation → the first answer's words ${list('navigation')} ms`);
console.log(`  those words as plain text, then Markdown ${list('plain')} ms`);
process.exit(0);
