// Decoding + accumulating the same provider transcripts, side by side in one run:
//   - the engine natively (`palaver decode --bench N`),
//   - the engine as wasm under Node (`StreamAssembly` from a `--target nodejs` build),
//   - the official SDKs' own accumulators: openai's ChatCompletionStream
//     (`chat.completions.stream().finalChatCompletion()`) and @anthropic-ai/sdk's MessageStream
//     (`messages.stream().finalMessage()`), each fed by an in-memory `fetch`.
// Every implementation gets the bytes in 4 KiB chunks, is warmed up alike and timed in alternating
// turns; prints the median MiB/s of five (with min–max) and the ratios.
//
// node bench-sdk.mjs --pkg <nodejs pkg dir> --native <palaver binary> --wire <shared/wire> [--rounds N]
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith('--')) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const wireDir = resolve(args.wire ?? '../../../shared/wire');
const rounds = Number(args.rounds ?? 30);
const require = createRequire(import.meta.url);
const { StreamAssembly } = require(resolve(args.pkg, 'palaver.js'));
const CHUNK = 4096;

/** The transcripts of one provider that describe a whole message (error cases left out: the
 * SDKs throw on them, which would measure exception handling). */
function transcripts(provider) {
  const dir = join(wireDir, provider);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.sse') && !f.startsWith('error'))
    .filter((f) => !readFileSync(join(dir, f), 'utf8').includes('"error"'))
    .map((f) => ({ name: f, path: join(dir, f), bytes: new Uint8Array(readFileSync(join(dir, f))) }));
}

function chunksOf(bytes) {
  const chunks = [];
  for (let i = 0; i < bytes.length; i += CHUNK) chunks.push(bytes.subarray(i, i + CHUNK));
  return chunks;
}

function sseResponse(chunks) {
  const body = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

/** MiB/s of `rounds` passes over the cases. */
async function rate(cases, once) {
  const started = process.hrtime.bigint();
  let bytes = 0;
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      await once(c);
      bytes += c.bytes.length;
    }
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return bytes / seconds / 1048576;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Each implementation warmed up alike (a pass is too short for V8 to have compiled a JS
 * accumulator's hot paths, which made one run's SDK figure 2-3× another's), then timed in
 * REPEATS alternating turns, so both meet the same machine; the median of each. */
const REPEATS = 5;
async function measure(cases, implementations) {
  for (const once of implementations) {
    for (let r = 0; r < WARM_UP_ROUNDS; r++) for (const c of cases) await once(c);
  }
  const samples = implementations.map(() => []);
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const [i, once] of implementations.entries()) samples[i].push(await rate(cases, once));
  }
  return samples.map((s) => ({ median: median(s), min: Math.min(...s), max: Math.max(...s) }));
}
const WARM_UP_ROUNDS = 5;

function wasmOnce(kind) {
  return async (c) => {
    const decoder = new StreamAssembly(kind);
    for (const chunk of c.chunks) decoder.feed(chunk);
    const message = decoder.finish();
    decoder.free();
    if (!message || typeof message !== 'object') throw new Error(`${c.name}: no message`);
  };
}

function nativeRate(kind, cases) {
  let bytes = 0;
  let seconds = 0;
  for (const c of cases) {
    const out = execFileSync(args.native, ['decode', '--provider', kind, '--bench', String(rounds)], {
      input: readFileSync(c.path),
    });
    const result = JSON.parse(out.toString());
    bytes += result.bytes;
    seconds += result.seconds;
  }
  return bytes / seconds / 1048576;
}

const openai = (chunks) =>
  new OpenAI({ apiKey: 'bench', baseURL: 'http://bench.invalid/v1', maxRetries: 0, fetch: async () => sseResponse(chunks) });
const anthropic = (chunks) =>
  new Anthropic({ apiKey: 'bench', baseURL: 'http://bench.invalid', maxRetries: 0, fetch: async () => sseResponse(chunks) });

const sdkOnce = {
  'openai-chat': async (c) => {
    const stream = openai(c.chunks).chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
    await stream.finalChatCompletion();
  },
  anthropic: async (c) => {
    const stream = anthropic(c.chunks).messages.stream({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] });
    await stream.finalMessage();
  },
};

const sdkName = { 'openai-chat': 'openai ChatCompletionStream', anthropic: '@anthropic-ai/sdk MessageStream' };
const rows = [];
for (const kind of ['openai-chat', 'anthropic']) {
  const all = transcripts(kind).map((c) => ({ ...c, chunks: chunksOf(c.bytes) }));
  // Torture variants the SDK cannot read (INDEX.md) are left out for every implementation.
  const cases = [];
  for (const c of all) {
    try {
      await sdkOnce[kind](c);
      cases.push(c);
    } catch (e) {
      console.log(`  (left out: ${c.name}: the SDK fails on it: ${e.message})`);
    }
  }
  const total = cases.reduce((n, c) => n + c.bytes.length, 0);
  const [sdkRates, wasmRates] = await measure(cases, [sdkOnce[kind], wasmOnce(kind)]);
  const [sdk, wasm] = [sdkRates.median, wasmRates.median];
  const spread = (r) => `(${r.min.toFixed(1)}–${r.max.toFixed(1)})`;
  const native = nativeRate(kind, cases);
  rows.push({ kind, transcripts: cases.length, kib: Math.round(total / 1024), sdk, wasm, native });
  console.log(
    `${kind.padEnd(12)} ${cases.length} transcripts, ${Math.round(total / 1024)} KiB × ${rounds} rounds, median of ${REPEATS} (min–max)\n` +
      `  ${sdkName[kind].padEnd(34)} ${sdk.toFixed(1).padStart(7)} MiB/s ${spread(sdkRates)}\n` +
      `  ${'palaver wasm (Node)'.padEnd(34)} ${wasm.toFixed(1).padStart(7)} MiB/s ${spread(wasmRates)}  ${(wasm / sdk).toFixed(1)}× the SDK\n` +
      `  ${'palaver native'.padEnd(34)} ${native.toFixed(1).padStart(7)} MiB/s  ${(native / sdk).toFixed(1)}× the SDK`,
  );
}
console.log(JSON.stringify({ rounds, chunk_bytes: CHUNK, rows }));
