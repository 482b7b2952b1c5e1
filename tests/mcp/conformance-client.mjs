// The client under test for the conformance suite's client scenarios: Palaver's own MCP client,
// inside a real `palaver serve`. The suite starts its test server and runs
// `node conformance-client.mjs <server-url>` with MCP_CONFORMANCE_SCENARIO set; this starts
// `palaver serve` with that URL as the user's one MCP server (Streamable HTTP), waits for it to
// connect, and does what a person's chat would for the scenario: nothing more (`initialize`), or
// call the server's tool through `POST /api/tools/mcp__conformance__{tool}` (`tools_call`,
// `sse-retry`). It exits 0 once done; the suite judges the traffic it saw.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
/** What a chat sends for each scenario's tool (the suite's servers name them). */
const CALLS = {
  tools_call: { tool: 'add_numbers', args: { a: 5, b: 3 } },
  'sse-retry': { tool: 'test_reconnection', args: {} },
};

const dir = mkdtempSync(join(tmpdir(), 'palaver-conformance-client-'));
const config = join(dir, 'mcp.json');
writeFileSync(config, JSON.stringify({ mcpServers: { conformance: { url, timeout: 20000 } } }));
const workspace = join(dir, 'ws');
const palaver = process.env.PALAVER_BIN ?? join(root, 'target/debug/palaver');
const serve = spawn(palaver, ['serve', '--port', '0', '--workspace', dir, '--www', join(root, 'www'), '--pkg', join(root, 'pkg'), '--mcp', config], {
  stdio: ['ignore', 'pipe', 'inherit'],
  env: { ...process.env, XDG_CONFIG_HOME: join(dir, 'config') },
});
void workspace;

function started() {
  return new Promise((ok, fail) => {
    let out = '';
    serve.stdout.on('data', (chunk) => {
      out += chunk;
      const match = out.match(/http:\/\/127\.0\.0\.1:(\d+)\/#token=(\S+)/);
      if (match) ok({ base: `http://127.0.0.1:${match[1]}`, token: match[2] });
    });
    serve.on('exit', (code) => fail(new Error(`palaver serve exited (${code})`)));
  });
}

async function api(server, path, body) {
  const response = await fetch(`${server.base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return response.json();
}

async function ready(server) {
  for (let i = 0; i < 200; i += 1) {
    const status = await api(server, '/api/mcp');
    const state = status.servers?.find((s) => s.name === 'conformance');
    if (state?.state === 'ready') return state;
    if (state?.state === 'failed') throw new Error(`the server failed: ${state.error}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the server did not become ready');
}

let code = 0;
try {
  const server = await started();
  await ready(server);
  const call = CALLS[scenario];
  if (call) {
    const reply = await api(server, `/api/tools/mcp__conformance__${call.tool}`, call.args);
    console.log(`${call.tool}: ${JSON.stringify(reply).slice(0, 300)}`);
    if (reply.is_error) code = 1;
  }
} catch (error) {
  console.error(String(error?.message ?? error));
  code = 1;
} finally {
  serve.kill('SIGTERM');
  await new Promise((r) => serve.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);
