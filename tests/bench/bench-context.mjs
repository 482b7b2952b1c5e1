// The context pipeline in wasm under Node, on ../shared/bench/history-5k.json.gz (issue 4's
// benchmark; the native numbers come from `cargo bench --bench context`). Prints ms per step.
// node bench-context.mjs --pkg <nodejs pkg dir> --history <history-5k.json.gz> [--rounds N]
import { execSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { gunzipSync } from 'node:zlib';
import { join, resolve } from 'node:path';

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
if (args.serve) Object.assign(rows, await withRealPrompt(resolve(args.serve)));
console.log(JSON.stringify({ rounds, ms: rows }));

/**
 * Issue 41, goal 6: the whole request as a chat in a workspace sends it — `palaver serve` (the
 * binary given) on this repository with two real MCP servers from npm (tests/mcp), its tools as
 * `GET /api/tools` lists them (the workspace's and the servers'), and the system prompt with the
 * workspace context the page reads (the repository map, the flat file list, the README, the
 * date) — for a 1 M-token window (the whole 5,000 messages in the body) and a 128 k one.
 */
async function withRealPrompt(palaver) {
  process.env.PALAVER_BIN = palaver;
  const { startServe, root } = await import('../browser/harness.mjs');
  const servers = join(root, 'tests/mcp/node_modules/@modelcontextprotocol');
  const home = mkdtempSync(join(tmpdir(), 'palaver-bench-context-'));
  const config = join(home, 'mcp.json');
  writeFileSync(config, JSON.stringify({ mcpServers: {
    everything: { command: 'node', args: [join(servers, 'server-everything/dist/index.js'), 'stdio'] },
    memory: { command: 'node', args: [join(servers, 'server-memory/dist/index.js')], env: { MEMORY_FILE_PATH: join(home, 'memory.jsonl') } },
  } }));
  // The workspace: this repository's files as committed (the app it serves cannot be inside it).
  const workspace = mkdtempSync(join(tmpdir(), 'palaver-bench-workspace-'));
  execSync(`git -C ${JSON.stringify(root)} archive HEAD | tar -x -C ${JSON.stringify(workspace)}`);
  const serve = await startServe(workspace, ['--mcp', config]);
  try {
    const api = async (path, init = {}) => (await fetch(`${serve.origin}${path}`, { ...init, headers: { authorization: `Bearer ${serve.token}`, 'content-type': 'application/json' } })).json();
    for (let i = 0; i < 300; i++) {
      const status = await api('/api/mcp');
      if ((status.servers ?? []).filter((server) => server.state === 'ready').length === 2) break;
      await new Promise((ok) => setTimeout(ok, 100));
    }
    const tools = await api('/api/tools');
    const tool = (name, args) => api(`/api/tools/${name}`, { method: 'POST', body: JSON.stringify(args) });
    const map = await tool('repo_map', { budget: 1024 });
    const tree = await tool('file_tree', { flat: true });
    const readme = await tool('read_file', { path: 'README.md' });
    const context = {
      instructions: [{ path: 'README.md', text: readme.content }],
      files: tree.content.split('\n').filter((line) => line && !line.startsWith('[')),
      files_truncated: Boolean(tree.data?.truncated),
      date: new Date().toISOString().slice(0, 10),
      repo_map: map.content,
    };
    const mcpTools = tools.filter((t) => t.name.startsWith('mcp__')).length;
    console.log(`the real prompt: ${tools.length} workspace tools (${mcpTools} of two MCP servers), ${context.files.length} files listed, a ${context.repo_map.length}-character repository map, the README (${readme.content.length} characters)`);
    const toolsJson = JSON.stringify(tools);
    const contextJson = JSON.stringify(context);
    const rows = {};
    for (const nCtx of [1_000_000, 128_000]) {
      for (const kind of ['openai-chat', 'anthropic']) {
        rows[`real_prompt_${kind}_${nCtx}`] = msPer(`request ${kind} with the real prompt, n_ctx ${nCtx}`, () => {
          const [body, prompt, offered] = bench.requestWithPrompt(kind, nCtx, toolsJson, contextJson);
          return `${body} bytes: a ${prompt}-character system prompt, ${offered} tools`;
        });
      }
    }
    return rows;
  } finally {
    serve.child.kill();
  }
}
