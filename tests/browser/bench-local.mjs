// The model in the page, measured (a benchmark: it prints numbers, asserts nothing; issue 16):
// model load cold (download + sha256 + first load) and warm (from OPFS, a new worker), time to
// first token and tokens/s for the same prompts multi-threaded (palaver serve: cross-origin
// isolated) and single-threaded (a plain static host: not isolated), the page's long tasks while an
// answer streams into the app, a chat's next turn with the prompt cache kept, and the same model
// and prompts natively on llama.cpp's own llama-server (PALAVER_LLAMA_SERVER) on 2 and 1 threads
// — and with llama-cpp-python where it is installed — side by side.
// bash scripts/bench-local.sh   (it builds and sets up what this needs)
import http from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { execFileSync, spawn } from 'node:child_process';
import { homedir } from 'node:os';
import { join, extname, normalize } from 'node:path';
import { startServe, launch, tempDir, cleanup, root, waitIdle } from './harness.mjs';

const MODEL_FILE = 'SmolLM2-135M-Instruct.Q4_1.gguf';
const MODELS = process.env.PALAVER_MODELS ?? join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'palaver', 'models');
const PROMPTS = [
  ['short (a question)', 'What is the capital of France?'],
  ['long (426 tokens with the chat template)', `${Array.from({ length: 25 }, (_, i) => `Line ${i}: the quick brown fox jumps over the lazy dog.`).join('\n')}\nHow many lines are there?`],
];
const MAX_TOKENS = 48;
const row = (name, value) => console.log(`${name.padEnd(58)} ${value}`);
const ms = (n) => `${Math.round(n).toLocaleString('en')} ms`;

/** A static host without COOP/COEP (the app is not isolated: one thread), models at /models/. */
async function startStaticHost() {
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm', '.svg': 'image/svg+xml', '.webmanifest': 'application/manifest+json' };
  const roots = [['/pkg/', join(root, 'pkg')], ['/models/', MODELS], ['/', join(root, 'www')]];
  const server = http.createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const [prefix, dir] = roots.find(([p]) => path.startsWith(p));
    const file = normalize(join(dir, path.slice(prefix.length) || 'index.html'));
    if (!file.startsWith(dir)) return res.writeHead(403).end();
    let size;
    try {
      size = statSync(file).size;
    } catch {
      return res.writeHead(404).end();
    }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream', 'content-length': size });
    createReadStream(file).pipe(res);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

/** One chat completion through the app's transport: wall time to the first token, and llama.cpp's own timings. */
async function complete(page, content, { cached = false } = {}) {
  return page.evaluate(async ({ content, max_tokens, model, cached }) => {
    // No prompt cache unless `cached`: every prompt is read whole, as a new chat's first turn is.
    const body = { model, messages: [{ role: 'user', content }], stream: true, stream_options: { include_usage: true }, temperature: 0, max_tokens, cache_prompt: cached };
    const started = performance.now();
    const response = await globalThis.palaverApp.localModel().transport('local://this-browser/chat/completions', { body: JSON.stringify(body) }, { n_ctx: 4096 });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    let first = null;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (first === null && /"content":"[^"]/.test(text)) first = performance.now() - started;
    }
    const chunks = text.split('\n\n').filter((c) => c.startsWith('data: {')).map((c) => JSON.parse(c.slice(6)));
    const timings = chunks.findLast((c) => c.timings)?.timings ?? {};
    return { ttft: first, total: performance.now() - started, prompt_n: timings.prompt_n, cache_n: timings.cache_n, pp: timings.prompt_per_second, gen_n: timings.predicted_n, tg: timings.predicted_per_second };
  }, { content, max_tokens: MAX_TOKENS, model: MODEL_FILE, cached });
}

async function measure(label, origin, url) {
  const profile = await tempDir('palaver-bench-local-');
  const context = await launch(profile);
  try {
    const page = await context.newPage();
    await page.goto(url);
    await page.getByTestId('try-local').waitFor();
    const isolated = await page.evaluate(() => crossOriginIsolated);
    const started = Date.now();
    await page.click('[data-testid=try-local]');
    await page.waitForFunction(() => document.querySelector('[data-testid=status]').textContent.includes('runs in this browser'), null, { timeout: 300_000 });
    const cold = Date.now() - started;
    const info = await page.evaluate(() => globalThis.palaverApp.localModel().info());
    row(`${label}: threads (cross-origin isolated: ${isolated})`, info.threads);
    row(`${label}: cold load (download 98 MB + sha256 + first load)`, `${ms(cold)} (of which llama.cpp load ${ms(info.loaded?.load_ms ?? NaN)})`);
    for (const [name, content] of PROMPTS) {
      await complete(page, content); // warm-up (wasm tier-up), then measured
      const r = await complete(page, content);
      row(`${label}: ${name}`, `TTFT ${ms(r.ttft)}, prompt ${r.prompt_n} tok at ${r.pp?.toFixed(1)} tok/s, ${r.gen_n} tok generated at ${r.tg?.toFixed(1)} tok/s`);
    }
    // A chat's next turn: the same prompt with a question added, the KV cache kept (as a chat's
    // requests are sent): only the new tokens are read.
    const [, longPrompt] = PROMPTS.at(-1);
    await complete(page, longPrompt, { cached: true });
    const next = await complete(page, `${longPrompt}\nAnd how many words are on each line?`, { cached: true });
    row(`${label}: the next turn (prompt cache kept)`, `TTFT ${ms(next.ttft)}, ${next.cache_n} tok reused, ${next.prompt_n} tok read`);
    // Warm: a new page (a new worker), the model from OPFS.
    await page.reload();
    await page.getByTestId('composer').waitFor();
    const warm = await page.evaluate(async (model) => {
      const started = performance.now();
      const loaded = await globalThis.palaverApp.localModel().call('load', { model, n_ctx: 4096 });
      return { wall: performance.now() - started, load_ms: loaded.load_ms };
    }, MODEL_FILE);
    row(`${label}: warm load (from OPFS, new worker)`, `${ms(warm.wall)} (llama.cpp load ${ms(warm.load_ms)})`);
    // Long tasks on the page's main thread while an answer streams into the app.
    await page.evaluate(() => {
      globalThis.__longTasks = [];
      new PerformanceObserver((list) => globalThis.__longTasks.push(...list.getEntries().map((e) => ({ start: e.startTime, duration: e.duration })))).observe({ type: 'longtask' });
      globalThis.__sent = performance.now();
    });
    await page.fill('[data-testid=composer]', 'Write a short poem about the sea.');
    await page.click('[data-testid=send]');
    await waitIdle(page, 1, 300_000);
    const { long, sent } = await page.evaluate(() => ({ long: globalThis.__longTasks, sent: globalThis.__sent }));
    const when = long.map((t) => `${ms(t.duration)} at +${ms(t.start - sent)}`).join(', ');
    row(`${label}: main-thread long tasks while answering in the app`, `${long.filter((t) => t.duration > 50).length} over 50 ms${when ? ` (${when})` : ''}`);
  } finally {
    await context.close();
    await cleanup(profile);
  }
}

/**
 * The same model and prompts on llama.cpp's own `llama-server` (`PALAVER_LLAMA_SERVER`), native, on
 * 1 and 2 threads: the same request body as the page's, its own timings.
 */
async function llamaServer() {
  const server = process.env.PALAVER_LLAMA_SERVER;
  if (!server) return row('llama-server', 'not run (set PALAVER_LLAMA_SERVER; bench-local.sh does)');
  for (const threads of [2, 1]) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const child = spawn(server, ['-m', join(MODELS, MODEL_FILE), '-c', '4096', '-np', '1', '-t', String(threads), '--host', '127.0.0.1', '--port', String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
    try {
      await new Promise((ok, fail) => {
        let log = '';
        child.stderr.on('data', (chunk) => { log += chunk; if (/listening on http/.test(log)) ok(); });
        child.on('exit', (code) => fail(new Error(`llama-server exited (${code})`)));
      });
      for (const [name, content] of PROMPTS) {
        const body = { messages: [{ role: 'user', content }], stream: false, temperature: 0, max_tokens: MAX_TOKENS, cache_prompt: false };
        const ask = () => fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json());
        await ask(); // warm-up, as in the page
        const { timings: t = {} } = await ask();
        row(`llama-server, ${threads} thread(s): ${name}`, `prompt ${t.prompt_n} tok at ${t.prompt_per_second?.toFixed(1)} tok/s, ${t.predicted_n} tok generated at ${t.predicted_per_second?.toFixed(1)} tok/s`);
      }
    } catch (error) {
      row(`llama-server, ${threads} thread(s)`, `failed: ${error.message}`);
    } finally {
      child.kill('SIGKILL');
    }
  }
}

/** The same model and prompts natively, with llama-cpp-python where it is installed. */
function native() {
  const python = process.env.PALAVER_LLAMA_PYTHON ?? 'python3';
  const script = `
import json, os, sys, time
from llama_cpp import Llama
model, prompts, max_tokens = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
for threads in (1, 2):
    started = time.time()
    llm = Llama(model_path=model, n_ctx=4096, n_threads=threads, n_threads_batch=threads, seed=42, verbose=False)
    load = (time.time() - started) * 1000
    for name, content in prompts:
        for attempt in (0, 1):
            llm.reset()  # no prompt cache: the whole prompt is read, as in the page
            t = time.time(); first = None; n = 0
            for chunk in llm.create_chat_completion(messages=[{"role": "user", "content": content}], stream=True, temperature=0, max_tokens=max_tokens):
                if first is None and chunk["choices"][0]["delta"].get("content"):
                    first = (time.time() - t) * 1000
                n += 1
            total = (time.time() - t) * 1000
        print(json.dumps({"threads": threads, "load": load, "name": name, "ttft": first, "total": total, "chunks": n}))
`;
  try {
    const out = execFileSync(python, ['-c', script, join(MODELS, MODEL_FILE), JSON.stringify(PROMPTS), String(MAX_TOKENS)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 600_000 });
    for (const line of out.trim().split('\n')) {
      const r = JSON.parse(line);
      row(`native llama.cpp, ${r.threads} thread(s): ${r.name}`, `TTFT ${ms(r.ttft)}, whole answer ${ms(r.total)} (load ${ms(r.load)})`);
    }
  } catch (error) {
    row('native llama.cpp', `not available here (${String(error.message).split('\n')[0].slice(0, 80)}); set PALAVER_LLAMA_PYTHON to a python with llama-cpp-python`);
  }
}

const workspace = await tempDir('palaver-bench-local-ws-');
const serve = await startServe(workspace, ['--models', MODELS]);
const host = await startStaticHost();
try {
  console.log(`machine: ${execFileSync('nproc', { encoding: 'utf8' }).trim()} cores; model ${MODEL_FILE}, ${MAX_TOKENS} tokens at most, temperature 0`);
  await measure('page, palaver serve', serve.origin, serve.printed);
  await measure('page, static host', host.origin, `${host.origin}/`);
  await llamaServer();
  native();
} finally {
  serve.child.kill('SIGTERM');
  host.close();
  await cleanup(workspace);
}
process.exit(0);
