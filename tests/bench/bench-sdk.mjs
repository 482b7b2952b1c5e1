// Decoding + accumulating the same provider streams, side by side in one run (issue 41: fairly):
//   - the official SDKs' own accumulators: openai's ChatCompletionStream
//     (`chat.completions.stream().finalChatCompletion()`) and @anthropic-ai/sdk's MessageStream
//     (`messages.stream().finalMessage()`), ONE client per SDK reused for every stream (its
//     in-memory `fetch` serves the stream at hand), as an app keeps its client;
//   - the engine as wasm under Node as a chat runs it: `Engine.handle` — a user message, the
//     request built, every chunk through `streamBytes` with its events delivered to JS, the
//     stream's end, the message read from the chat's snapshot;
//   - the engine's bare decoder (`StreamAssembly`) and natively (`palaver decode --bench N`).
// Two sets: the short transcripts of ../shared/wire (the set earlier levers were tuned on), and
// long streams (≥ 1 MiB) made of one transcript's real frames, its content deltas repeated (not
// used for tuning). Every result is compared with the SDK's message (text, tool calls, thinking)
// for every stream, and any difference is printed. Bytes arrive in 4 KiB chunks; each
// implementation is warmed up alike and timed in alternating turns; the median MiB/s of five.
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
const { StreamAssembly, Engine } = require(resolve(args.pkg, 'palaver.js'));
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

/** MiB/s of `rounds` passes over the cases: each call timed from its start to its end, or for
 * as long as it says it decoded (`{ seconds }`: the engine's turn set-up is not decoding). */
async function rate(cases, once, rounds) {
  let seconds = 0;
  let bytes = 0;
  for (let r = 0; r < rounds; r++) {
    for (const c of cases) {
      const started = process.hrtime.bigint();
      const out = await once(c);
      seconds += out?.seconds ?? Number(process.hrtime.bigint() - started) / 1e9;
      bytes += c.bytes.length;
    }
  }
  return bytes / seconds / 1048576;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Each implementation warmed up alike (a pass is too short for V8 to have compiled a JS
 * accumulator's hot paths, which made one run's SDK figure 2-3× another's), then timed in
 * REPEATS alternating turns, so both meet the same machine; the median of each. */
const REPEATS = 5;
async function measure(cases, implementations, rounds) {
  for (const once of implementations) {
    for (let r = 0; r < WARM_UP_ROUNDS; r++) for (const c of cases) await once(c);
  }
  const samples = implementations.map(() => []);
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const [i, once] of implementations.entries()) samples[i].push(await rate(cases, once, rounds));
  }
  return samples.map((s) => ({ median: median(s), min: Math.min(...s), max: Math.max(...s) }));
}
const WARM_UP_ROUNDS = 5;

/** The engine as a chat runs it: one engine, a chat per stream. Timed: the stream — every
 * chunk through `streamBytes` with its events delivered to JS, then its end — as the page's
 * driver feeds it; the turn's start before it (the chat opened, the user's message, the request
 * built) and the message read back after it are the chat's, not the decoding's
 * (`setupSeconds` says what they took). */
let setupSeconds = 0;
/** Of the timed stream, its end (`stream_end`: the turn finished, `message_added` with the whole
 * message crossing to JS, SPEC §3.1). */
let endSeconds = 0;
function engineRunner(kind) {
  const engine = new Engine({ providers: [{ kind, base_url: 'http://bench.invalid/v1', model: 'm' }], active_provider: kind, compact_at: null });
  let n = 0;
  return async (c) => {
    const chat = `c${n++}`;
    const setup = process.hrtime.bigint();
    engine.handle(0, { input: 'open_chat', chat_id: chat });
    const step = engine.handle(0, { input: 'command', chat_id: chat, command: { type: 'user_message', client_request_id: 'u', content: 'x' } });
    const start = step.effects.find((e) => e.effect === 'start_request');
    if (!start) throw new Error(`${c.name}: no request started`);
    const streaming = process.hrtime.bigint();
    setupSeconds += Number(streaming - setup) / 1e9;
    let events = 0;
    for (const chunk of c.chunks) events += engine.streamBytes(0, start.request_id, chunk).events.length;
    const ending = process.hrtime.bigint();
    events += engine.handle(0, { input: 'stream_end', request_id: start.request_id }).events.length;
    const seconds = Number(process.hrtime.bigint() - streaming) / 1e9;
    endSeconds += Number(process.hrtime.bigint() - ending) / 1e9;
    const message = engine.snapshot(chat).messages.filter((m) => m.role === 'assistant').at(-1);
    engine.handle(0, { input: 'close_chat', chat_id: chat });
    if (events === 0) throw new Error(`${c.name}: no events reached JS`);
    return { message, seconds };
  };
}

/** What a message says, whoever assembled it: its text, tool calls and thinking. */
function said(kind, message) {
  if (message?.seconds !== undefined) return said(kind, message.message);
  if (!message) return null;
  if (message.choices) {
    const m = message.choices[0]?.message ?? {};
    // A refusal is what the model said: the engine keeps it as the answer's text.
    return { text: m.content ?? m.refusal ?? '', tools: (m.tool_calls ?? []).map((t) => [t.id, t.function.name, JSON.parse(t.function.arguments || '{}')]), thinking: '' };
  }
  if (message.type === 'message') {
    const blocks = message.content ?? [];
    return {
      text: blocks.filter((b) => b.type === 'text').map((b) => b.text).join(''),
      tools: blocks.filter((b) => b.type === 'tool_use').map((b) => [b.id, b.name, b.input]),
      thinking: blocks.filter((b) => b.type === 'thinking').map((b) => b.thinking).join(''),
    };
  }
  const text = typeof message.content === 'string' ? message.content : (message.content ?? []).filter((p) => p.type === 'text').map((p) => p.text).join('');
  return {
    text,
    tools: (message.tool_calls ?? []).map((t) => [t.id, t.function.name, JSON.parse(t.function.arguments || '{}')]),
    thinking: kind === 'anthropic' ? (message.thinking_blocks ?? []).map((b) => b.thinking ?? '').join('') : '',
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

// One client per SDK, made once and reused, as an app keeps it; its `fetch` serves the stream
// being measured.
let serving = null;
const openai = new OpenAI({ apiKey: 'bench', baseURL: 'http://bench.invalid/v1', maxRetries: 0, fetch: async () => sseResponse(serving.chunks) });
const anthropic = new Anthropic({ apiKey: 'bench', baseURL: 'http://bench.invalid', maxRetries: 0, fetch: async () => sseResponse(serving.chunks) });

const sdkOnce = {
  'openai-chat': async (c) => {
    serving = c;
    return openai.chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).finalChatCompletion();
  },
  anthropic: async (c) => {
    serving = c;
    return anthropic.messages.stream({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'x' }] }).finalMessage();
  },
};

/** A stream of at least `size` bytes made of `c`'s real frames: its content deltas repeated in
 * place (the SSE framing, the first and the last frames as they were). */
function longStream(kind, c, size = 1 << 20) {
  const text = new TextDecoder().decode(c.bytes);
  const frames = text.split(/\n\n/).filter((f) => f.trim());
  const isDelta = (f) => (kind === 'anthropic' ? f.includes('"text_delta"') : /"delta":\{[^}]*"content":"/.test(f) && !f.includes('"finish_reason":"'));
  // Only a stream whose deltas all go to one content block can be lengthened by repeating them.
  const blocks = new Set(frames.filter(isDelta).map((f) => f.match(/"index":(\d+)/)?.[1]));
  if (blocks.size !== 1) return null;
  const first = frames.findIndex(isDelta);
  let last = frames.length - 1;
  while (last >= 0 && !isDelta(frames[last])) last -= 1;
  if (first < 0) return null;
  const deltas = frames.slice(first, last + 1).filter(isDelta);
  const deltaBytes = deltas.join('\n\n').length + 2;
  const repeats = Math.max(1, Math.ceil(size / deltaBytes));
  const body = [...frames.slice(0, first), ...Array.from({ length: repeats }, () => deltas).flat(), ...frames.slice(last + 1)];
  const bytes = new TextEncoder().encode(`${body.join('\n\n')}\n\n`);
  return { name: `${c.name} ×${repeats} (long)`, path: null, bytes };
}

const sdkName = { 'openai-chat': 'openai ChatCompletionStream', anthropic: '@anthropic-ai/sdk MessageStream' };
const rows = [];

/** Every implementation's message equals the SDK's, stream by stream; the differences. */
async function differences(kind, cases, implementations) {
  const found = [];
  for (const c of cases) {
    const expected = JSON.stringify(said(kind, await sdkOnce[kind](c)));
    for (const [name, once] of implementations) {
      const got = JSON.stringify(said(kind, await once(c)));
      if (got !== expected) found.push(`${name} on ${c.name}: ${got.slice(0, 160)} ≠ SDK ${expected.slice(0, 160)}`);
    }
  }
  return found;
}

async function measureSet(kind, label, cases, setRounds) {
  const total = cases.reduce((n, c) => n + c.bytes.length, 0);
  const engine = engineRunner(kind);
  const decoder = async (c) => {
    const d = new StreamAssembly(kind);
    for (const chunk of c.chunks) d.feed(chunk);
    const message = d.finish();
    d.free();
    return message;
  };
  const unequal = await differences(kind, cases, [['engine', engine], ['decoder', decoder]]);
  setupSeconds = 0;
  for (const line of unequal) console.log(`  DIFFERENT ${line}`);
  const [sdkRates, engineRates, decoderRates] = await measure(cases, [sdkOnce[kind], engine, decoder], setRounds);
  const spread = (r) => `(${r.min.toFixed(1)}–${r.max.toFixed(1)})`;
  const sdk = sdkRates.median;
  const native = cases.every((c) => c.path) ? nativeRate(kind, cases) : null;
  rows.push({ kind, set: label, rounds: setRounds, streams: cases.length, kib: Math.round(total / 1024), sdk, engine: engineRates.median, decoder: decoderRates.median, native, equal: unequal.length === 0 });
  console.log(
    `${kind} · ${label}: ${cases.length} streams, ${Math.round(total / 1024)} KiB × ${setRounds} rounds, median of ${REPEATS} (min–max); results equal to the SDK's: ${unequal.length === 0 ? 'all' : `${unequal.length} differ`}\n` +
      `  ${sdkName[kind].padEnd(40)} ${sdk.toFixed(1).padStart(7)} MiB/s ${spread(sdkRates)}\n` +
      `  ${'palaver wasm, through Engine.handle'.padEnd(40)} ${engineRates.median.toFixed(1).padStart(7)} MiB/s ${spread(engineRates)}  ${(engineRates.median / sdk).toFixed(1)}× the SDK\n` +
      `  ${'palaver wasm, the bare decoder'.padEnd(40)} ${decoderRates.median.toFixed(1).padStart(7)} MiB/s ${spread(decoderRates)}  ${(decoderRates.median / sdk).toFixed(1)}× the SDK` +
      (native ? `\n  ${'palaver native (decoder)'.padEnd(40)} ${native.toFixed(1).padStart(7)} MiB/s  ${(native / sdk).toFixed(1)}× the SDK` : '') +
      `\n  (the engine's turn start — chat opened, message queued, request built — not timed: ${((1000 * setupSeconds) / ((WARM_UP_ROUNDS + REPEATS * setRounds) * cases.length)).toFixed(3)} ms a stream)`,
  );
}

/** Where a set's ratio comes from: each stream measured alone as `measure` measures a set (warmed
 * up, alternating turns, the median of five), as µs a stream with the SDK and through
 * `Engine.handle`, and the engine's stream end (its average over those runs). A set's MiB/s
 * weighs streams by their bytes, so its largest transcript decides most of it. */
async function perStream(kind, cases, passes) {
  const engine = engineRunner(kind);
  let runs = 0;
  const counted = async (c) => {
    runs += 1;
    return engine(c);
  };
  console.log(`  per stream (µs a stream; median of ${REPEATS} × ${passes}):`);
  for (const c of cases) {
    endSeconds = 0;
    runs = 0;
    const [sdkRate, engineRate] = await measure([c], [sdkOnce[kind], counted], passes);
    const perStreamUs = (rate) => (c.bytes.length / (rate.median * 1048576)) * 1e6;
    const [sdk, ours, end] = [perStreamUs(sdkRate), perStreamUs(engineRate), (endSeconds * 1e6) / runs];
    console.log(
      `    ${c.name.padEnd(42)} ${String(c.bytes.length).padStart(7)} B  SDK ${sdk.toFixed(0).padStart(6)}  engine ${ours.toFixed(0).padStart(6)} (its end ${end.toFixed(0)})  ${(sdk / ours).toFixed(1)}×`,
    );
  }
}

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
  await measureSet(kind, 'short transcripts (../shared/wire)', cases, rounds);
  await perStream(kind, cases, rounds);
  const source = [...cases].sort((a, b) => b.bytes.length - a.bytes.length).map((c) => longStream(kind, c)).find(Boolean);
  if (source) {
    const long = { ...source, chunks: chunksOf(source.bytes) };
    await measureSet(kind, `a long stream (${(long.bytes.length / 1048576).toFixed(1)} MiB: ${long.name})`, [long], Math.max(2, Math.round(rounds / 10)));
  }
}
console.log(JSON.stringify({ rounds, chunk_bytes: CHUNK, rows }));
