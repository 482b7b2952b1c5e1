// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json)
// against `/mcp` of the real `palaver serve` (issue 17): Palaver's workspace tools for any MCP
// client. The suite's client cannot send a bearer token, so a small forwarding shim in front of
// the server adds `Authorization` (and maps the shim's own localhost Host/Origin to the server's
// port); anything else — an evil Host, an evil Origin — passes through unchanged, so the
// DNS-rebinding scenario still meets the server's guard.
//
// Scenarios that apply to a tools-only server must all pass, with no warning: a warning fails
// (issue 33), but for the checks listed in FIXTURE_CHECKS, which need a fixture tool of the suite's
// own (named there, with why). The others exercise the suite's own fixture tools
// (`test_simple_text`, `test_image_content`, …) or capabilities this server does not offer
// (logging, completions, resources, prompts, sampling, elicitation); they are listed, not run.
//
// `palaver serve` is an MCP client too (of the user's servers): the suite's client scenarios run
// against it through `conformance-client.mjs` (a real `palaver serve` with the suite's test
// server as its one Streamable HTTP server, called as a chat would). Same rule: no warning.
// node tests/mcp/conformance.mjs   (after `cargo build` and `npm ci` here)
import http from 'node:http';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const APPLICABLE = ['server-initialize', 'ping', 'tools-list', 'server-sse-polling', 'server-sse-multiple-streams', 'dns-rebinding-protection'];
/** Checks that warn because they need a fixture tool Palaver does not have: not a failure. */
const FIXTURE_CHECKS = {
  'server-sse-disconnect-resume': 'needs the fixture tool test_reconnection, which closes its stream mid-call (the resumption itself is rmcp\'s, tested by the client scenario sse-retry)',
};
const CLIENT_APPLICABLE = ['initialize', 'tools_call', 'sse-retry'];
const CLIENT_NOT_APPLICABLE = {
  'elicitation-sep1034-client-defaults': 'Palaver\'s MCP client offers no elicitation: a server cannot ask the user through it',
  auth: 'the auth/* scenarios (19) test OAuth, which Palaver\'s client does not do: a server\'s credentials are the headers of the user\'s config',
};
const NOT_APPLICABLE = {
  'logging-set-level': 'no logging capability (deprecated by SEP-2577)',
  'completion-complete': 'no completions: the tools take free arguments',
  'tools-call-simple-text': 'needs the suite\'s fixture tool test_simple_text',
  'tools-call-image': 'needs the fixture tool test_image_content',
  'tools-call-audio': 'needs the fixture tool test_audio_content',
  'tools-call-embedded-resource': 'needs the fixture tool test_embedded_resource',
  'tools-call-mixed-content': 'needs the fixture tool test_multiple_content_types',
  'tools-call-with-logging': 'needs the fixture tool test_tool_with_logging and logging',
  'tools-call-error': 'needs the fixture tool test_error_handling (a refused path is covered by the proxy tests)',
  'tools-call-with-progress': 'needs the fixture tool test_tool_with_progress',
  'tools-call-sampling': 'no sampling: the server never asks the client\'s model',
  'tools-call-elicitation': 'no elicitation: the server never asks the user',
  'elicitation-sep1034-defaults': 'no elicitation',
  'elicitation-sep1330-enums': 'no elicitation',
  'json-schema-2020-12': 'needs the fixture tool json_schema_2020_12_tool',
  'resources-list': 'no resources capability', 'resources-read-text': 'no resources capability',
  'resources-read-binary': 'no resources capability', 'resources-templates-read': 'no resources capability',
  'resources-subscribe': 'no resources capability', 'resources-unsubscribe': 'no resources capability',
  'prompts-list': 'no prompts capability', 'prompts-get-simple': 'no prompts capability',
  'prompts-get-with-args': 'no prompts capability', 'prompts-get-embedded-resource': 'no prompts capability',
  'prompts-get-with-image': 'no prompts capability',
};

function startServe(workspace) {
  const palaver = process.env.PALAVER_BIN ?? join(root, 'target/debug/palaver');
  const child = spawn(palaver, ['serve', '--port', '0', '--workspace', workspace, '--www', join(root, 'www'), '--pkg', join(root, 'pkg')], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((ok, fail) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = out.match(/http:\/\/127\.0\.0\.1:(\d+)\/#token=(\S+)/);
      if (match) ok({ child, port: Number(match[1]), token: match[2] });
    });
    child.on('exit', (code) => fail(new Error(`palaver serve exited (${code})`)));
  });
}

function startShim(target, token) {
  const local = /^(localhost|127\.0\.0\.1):\d+$/;
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    if (local.test(headers.host ?? '')) headers.host = `${headers.host.split(':')[0]}:${target}`;
    if (/^http:\/\/(localhost|127\.0\.0\.1):\d+$/.test(headers.origin ?? '')) headers.origin = headers.origin.replace(/:\d+$/, `:${target}`);
    const upstream = http.request({ host: '127.0.0.1', port: target, path: req.url, method: req.method, headers }, (reply) => {
      res.writeHead(reply.statusCode, reply.headers);
      reply.pipe(res);
    });
    upstream.on('error', () => res.writeHead(502).end());
    req.pipe(upstream);
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok({ server, port: server.address().port })));
}

function runSuite(args, cwd) {
  return new Promise((resolve) => {
    const child = spawn('node', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => { output += chunk; });
    child.stderr.on('data', (chunk) => { output += chunk; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, output });
    });
  });
}

/** The checks a run printed as warnings: `[check-id] WARNING …` (colours stripped). */
function warningsOf(output) {
  const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
  return [...plain.matchAll(/\[([\w-]+)\s*\]\s+WARNING/g)].map((m) => m[1]);
}

/** Judges one run: passed checks, no failure, and no warning but the fixture ones. */
function judge(mode, scenario, run) {
  const output = run.output;
  const passed = /Passed: (\d+)\/(\d+), 0 failed/.exec(output);
  const warnings = warningsOf(output);
  const excused = warnings.filter((id) => FIXTURE_CHECKS[id]);
  const unexcused = warnings.filter((id) => !FIXTURE_CHECKS[id]);
  const ok = run.status === 0 && passed && Number(passed[1]) > 0 && unexcused.length === 0;
  const note = excused.length ? `; warned, needs a fixture: ${excused.join(', ')}` : '';
  console.log(`${ok ? 'ok  ' : 'FAIL'} conformance ${mode} ${scenario}${passed ? ` (${passed[1]}/${passed[2]} checks${note})` : ''}${unexcused.length ? ` — warnings: ${unexcused.join(', ')}` : ''}`);
  if (!ok || process.env.CONFORMANCE_VERBOSE) console.log(output.split('\n').slice(-40).join('\n'));
  return ok;
}

const workspace = mkdtempSync(join(tmpdir(), 'palaver-conformance-ws-'));
const serve = await startServe(workspace);
const shim = await startShim(serve.port, serve.token);
const suite = join(here, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const results = mkdtempSync(join(tmpdir(), 'palaver-conformance-'));
let failed = 0;
try {
  for (const scenario of APPLICABLE) {
    // Not spawnSync: the shim runs in this process and must keep forwarding meanwhile.
    const run = await runSuite([suite, 'server', '--url', `http://localhost:${shim.port}/mcp`, '--scenario', scenario], results);
    if (!judge('server', scenario, run)) failed += 1;
  }
  for (const [scenario, why] of Object.entries(NOT_APPLICABLE)) console.log(`n/a  conformance server ${scenario}: ${why}`);
  const client = `node ${join(here, 'conformance-client.mjs')}`;
  for (const scenario of CLIENT_APPLICABLE) {
    const run = await runSuite([suite, 'client', '--command', client, '--scenario', scenario, '--timeout', '60000'], results);
    if (!judge('client', scenario, run)) failed += 1;
  }
  for (const [scenario, why] of Object.entries(CLIENT_NOT_APPLICABLE)) console.log(`n/a  conformance client ${scenario}: ${why}`);
} finally {
  shim.server.close();
  serve.child.kill('SIGTERM');
  rmSync(workspace, { recursive: true, force: true });
  rmSync(results, { recursive: true, force: true });
}
console.log(`conformance: server ${APPLICABLE.length} of ${APPLICABLE.length + Object.keys(NOT_APPLICABLE).length} scenarios run, client ${CLIENT_APPLICABLE.length} of ${CLIENT_APPLICABLE.length + 20} (the 19 auth scenarios and elicitation left out, above)`);
process.exit(failed ? 1 : 0);
