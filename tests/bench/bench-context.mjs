// The context pipeline in wasm under Node, on ../shared/bench/history-5k.json.gz (issue 4's
// benchmark; the native numbers come from `cargo bench --bench context`). Prints ms per step.
// node bench-context.mjs --pkg <nodejs pkg dir> --history <history-5k.json.gz> [--rounds N]
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { resolve } from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith('--')) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, []),
);
const require = createRequire(import.meta.url);
const { ContextBench } = require(resolve(args.pkg, 'palaver.js'));
const text = gunzipSync(readFileSync(resolve(args.history))).toString('utf8');
const rounds = Number(args.rounds ?? 10);

function msPer(label, f) {
  let result = f();
  const started = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) result = f();
  const ms = Number(process.hrtime.bigint() - started) / 1e6 / rounds;
  console.log(`history-5k wasm ${label}: ${ms.toFixed(2)} ms (${result})`);
  return ms;
}

const bench = new ContextBench(text);
if (bench.messageCount() !== 5000) throw new Error(`expected 5000 messages, got ${bench.messageCount()}`);
const rows = {
  load: msPer('load (typed, as the engine opens a stored chat)', () => { const b = new ContextBench(text); const n = b.messageCount(); b.free(); return `${n} messages`; }),
  load_via_value: msPer('load via Value (the path before issue 20)', () => `${ContextBench.loadViaValue(text)} messages`),
  reference_value_parse: msPer('reference: serde_json::Value parse alone', () => `${ContextBench.parseValue(text)}`),
  reference_json_parse: msPer('reference: JSON.parse in V8', () => `${JSON.parse(text).messages.length} messages`),
  repair: msPer('repair (fix stage only)', () => `${bench.repair()} repairs`),
  compress_128k: msPer('compress (four stages, n_ctx 128000)', () => `${bench.compress(128000)} messages left`),
  compress_32k: msPer('compress (four stages, n_ctx 32000)', () => `${bench.compress(32000)} messages left`),
  request_openai_chat: msPer('request openai-chat (limit + linearize + body)', () => `${bench.request('openai-chat', 128000)} bytes`),
  request_anthropic: msPer('request anthropic (limit + linearize + body)', () => `${bench.request('anthropic', 128000)} bytes`),
};
console.log(JSON.stringify({ rounds, ms: rows }));
