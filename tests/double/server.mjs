// The LLM provider double: an HTTP server on 127.0.0.1 that answers with the bytes of real
// provider transcripts (../shared/wire) in each provider's exact wire format, or with scripted
// responses (error statuses, headers, stalls, cut connections), and records every request so a
// test can check what the engine sent and whether it hung up. The only test double we use: it
// stands in for the provider, nothing else.
//
//   node tests/double/server.mjs [--port N]   → prints {"url":"http://127.0.0.1:PORT"} on stdout
//
//   ANY  /wire/{provider}/{case}/<rest>   replay ../shared/wire/{provider}/{case}.sse
//   POST /__script/{id}                   body {"responses":[Response, …]}; replaces the script
//   ANY  /s/{id}/<rest>                   pops the next scripted Response (the last one repeats)
//   GET  /__log/{id}                      the requests of that id (replays log under "wire")
//   POST /decide/{id}/<rest>              a model that decides from the request (decide.mjs):
//        offered `read_file` and no tool result yet → calls it on the first `.txt` file of the
//        system prompt's file tree; after a result → answers with it; offered no tool → says so.
//        openai-chat by default; /decide/{id}/{kind}/<rest> answers in that kind's wire shape
//   ANY  /m/{kind}/{mode}/<rest>          a provider of that kind: GET …/models lists models in the
//        kind's own shape (mode ok; nocors: the same without CORS headers), or fails (401, 404,
//        bad = not JSON); GET …/props answers as
//        llama.cpp; POST replays the kind's text transcript; requests are logged under "m"
//
// Response = {status?: 200, headers?: {}, wire?: "provider/case", body?: string,
//             chunk_bytes?: N, delay_ms?: N, stall_after_bytes?: N, close_after_bytes?: N}
//   wire/body      what to send (wire wins; neither = empty body)
//   chunk_bytes    send in pieces of N bytes (default: all at once), delay_ms between pieces
//   stall_after_bytes  send N bytes, then keep the connection open and silent until the client goes
//   close_after_bytes  send N bytes, then destroy the socket (a network reset mid-stream)
//   for_user       answers only a request whose first user message (seed 002's tier blocks —
//                  the map, the file list, the date — not counted) starts with this text (a
//                  subagent's task): taken before the others, whatever the order requests arrive
//                  in; the responses without it are taken in order (the last one repeats)
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { decide } from './decide.mjs';

const KINDS = ['openai-chat', 'anthropic', 'gemini', 'openai-responses'];

const here = path.dirname(fileURLToPath(import.meta.url));
const WIRE = path.resolve(here, '..', '..', '..', 'shared', 'wire');

const scripts = new Map(); // id → {responses, next}
const logs = new Map(); // id → [entry]

function cors(res) {
  res.setHeader('Access-Control-Allow-Origin', '*');
  res.setHeader('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
  res.setHeader('Access-Control-Allow-Headers', '*');
  res.setHeader('Access-Control-Expose-Headers', '*');
  res.setHeader('Access-Control-Allow-Private-Network', 'true');
}

function json(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

function wireBytes(name) {
  // name is "provider/case"; refuse anything that could leave the wire folder.
  if (!/^[a-z0-9-]+\/[A-Za-z0-9_.-]+$/.test(name) || name.includes('..')) {
    throw new Error(`bad wire name ${name}`);
  }
  return fs.readFileSync(path.join(WIRE, `${name}.sse`));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    req.on('data', (c) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

function logEntry(id, req, body) {
  const entry = {
    method: req.method,
    path: req.url,
    headers: req.headers,
    body: parseMaybe(body),
    bytes_sent: 0,
    closed_by_client: false,
    reset_by_double: false,
    finished: false,
  };
  if (!logs.has(id)) logs.set(id, []);
  logs.get(id).push(entry);
  return entry;
}

function parseMaybe(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function respond(req, res, spec, entry) {
  const bytes = spec.wire ? wireBytes(spec.wire) : Buffer.from(spec.body ?? '', 'utf8');
  const status = spec.status ?? 200;
  const headers = {
    'content-type': spec.wire ? 'text/event-stream' : 'application/json',
    'cache-control': 'no-cache',
    ...(spec.headers ?? {}),
  };
  res.on('close', () => {
    if (!res.writableFinished && !entry.reset_by_double) entry.closed_by_client = true;
  });
  res.writeHead(status, headers);
  res.flushHeaders();
  let limit = bytes.length;
  if (spec.stall_after_bytes != null) limit = Math.min(limit, spec.stall_after_bytes);
  if (spec.close_after_bytes != null) limit = Math.min(limit, spec.close_after_bytes);
  const chunk = spec.chunk_bytes ?? limit;
  for (let at = 0; at < limit && !res.destroyed; at += Math.max(chunk, 1)) {
    const piece = bytes.subarray(at, Math.min(at + Math.max(chunk, 1), limit));
    res.write(piece);
    entry.bytes_sent += piece.length;
    if (spec.delay_ms) await sleep(spec.delay_ms);
  }
  if (spec.close_after_bytes != null) {
    // A reset, not a clean end: the client must not read this as a complete response.
    await sleep(20);
    entry.reset_by_double = true;
    res.socket?.destroy();
    return;
  }
  if (spec.stall_after_bytes != null) return; // stay silent until the client gives up
  res.end(() => {
    entry.finished = true;
  });
}

const SSE = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

let decided = 0; // numbers the deciding model's answers (unique tool call ids)

/** A request for model information (`GET …/models`, `GET …/props`, Ollama's `POST …/api/show`). */
function isModelQuestion(req, parts) {
  const last = parts.at(-1);
  return (req.method === 'GET' && (last === 'models' || last === 'props')) || (parts.at(-2) === 'api' && last === 'show');
}

const TEXT_WIRE = { 'openai-chat': 'openai-chat/text_gpt4o', anthropic: 'anthropic/text_basic', gemini: 'gemini/text', 'openai-responses': 'openai-responses/text' };

/** A model list in each provider's own shape. */
function modelList(kind) {
  if (kind === 'gemini') {
    return { models: [
      { name: 'models/gemini-test', inputTokenLimit: 1048576, supportedGenerationMethods: ['generateContent'] },
      { name: 'models/embedding-test', inputTokenLimit: 2048, supportedGenerationMethods: ['embedContent'] },
    ] };
  }
  if (kind === 'anthropic') return { data: [{ id: 'claude-test', type: 'model' }, { id: 'claude-other', type: 'model' }], has_more: false };
  if (kind === 'llama') return { object: 'list', data: [{ id: 'smollm2', object: 'model' }] };
  return { object: 'list', data: [{ id: 'small-model', context_length: 4096 }, { id: 'big-model', context_length: 200000 }] };
}

async function provider(req, res, parts, body) {
  const [, kind, mode] = parts;
  const rest = parts.slice(3).join('/');
  const entry = logEntry('m', req, body);
  if (req.method === 'GET' && rest.endsWith('models')) {
    if (mode === '401') return json(res, 401, { error: { type: 'authentication_error', message: 'invalid x-api-key' } });
    if (mode === '404') return json(res, 404, { error: { type: 'not_found', message: 'no such route' } });
    if (mode === 'bad') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end('<html>a login page</html>');
    }
    return json(res, 200, modelList(kind));
  }
  if (req.method === 'GET' && rest.endsWith('props')) return json(res, 200, { default_generation_settings: { n_ctx: 4096 } });
  await respond(req, res, { wire: TEXT_WIRE[kind === 'llama' ? 'openai-chat' : kind] ?? TEXT_WIRE['openai-chat'] }, entry);
}

async function handle(req, res) {
  // `/m/{kind}/nocors/…` is a provider that does not allow other origins: a browser may not read it.
  if (!req.url.includes('/nocors/')) cors(res);
  if (req.method === 'OPTIONS') {
    res.writeHead(204);
    res.end();
    return;
  }
  const url = new URL(req.url, 'http://127.0.0.1');
  const parts = url.pathname.split('/').filter(Boolean);
  const body = req.method === 'GET' ? '' : await readBody(req);
  if (parts[0] === '__script' && parts[1] && req.method === 'POST') {
    const script = JSON.parse(body);
    if (!Array.isArray(script.responses) || script.responses.length === 0) {
      json(res, 400, { error: 'responses must be a non-empty array' });
      return;
    }
    scripts.set(parts[1], { responses: script.responses, used: new Set() });
    logs.set(parts[1], []);
    json(res, 200, { ok: true });
    return;
  }
  if (parts[0] === '__log' && parts[1]) {
    json(res, 200, logs.get(parts[1]) ?? []);
    return;
  }
  if (parts[0] === 'decide' && parts[1] && isModelQuestion(req, parts)) {
    json(res, 404, { error: { type: 'not_found', message: 'no model information here' } });
    return;
  }
  if (parts[0] === 'decide' && parts[1] && req.method === 'POST') {
    const entry = logEntry(parts[1], req, body);
    const kind = KINDS.includes(parts[2]) ? parts[2] : 'openai-chat';
    decided += 1;
    res.writeHead(200, SSE);
    res.end(decide(kind, parseMaybe(body), decided), () => {
      entry.finished = true;
    });
    return;
  }
  if (parts[0] === 'm' && parts.length >= 3) {
    await provider(req, res, parts, body);
    return;
  }
  if (parts[0] === 'wire' && parts.length >= 3) {
    const entry = logEntry('wire', req, body);
    await respond(req, res, { wire: `${parts[1]}/${parts[2]}` }, entry);
    return;
  }
  if (parts[0] === 's' && parts[1] && isModelQuestion(req, parts)) {
    // What the page asks a provider about its models is not a turn: it never takes a scripted
    // response (a server without these answers 404, as many do).
    json(res, 404, { error: { type: 'not_found', message: 'no model information here' } });
    return;
  }
  if (parts[0] === 's' && parts[1]) {
    const script = scripts.get(parts[1]);
    if (!script) {
      json(res, 404, { error: { type: 'not_found', message: `no script ${parts[1]}` } });
      return;
    }
    const spec = script.responses[pick(script, body)];
    const entry = logEntry(parts[1], req, body);
    await respond(req, res, spec, entry);
    return;
  }
  json(res, 404, { error: { type: 'not_found', message: req.url } });
}

/** The scripted response for this request: one meant for its first user message, else the next. */
function pick(script, body) {
  let asked = '';
  try {
    const text = (content) => (typeof content === 'string' ? content : (content ?? []).map((p) => p?.text ?? '').join(''));
    const tierBlock = /^(# Repository |Today's date: )/;
    asked = (JSON.parse(body)?.messages ?? []).filter((m) => m.role === 'user').map((m) => text(m.content)).find((t) => !tierBlock.test(t)) ?? '';
  } catch { /* not JSON: no user message */ }
  const free = (r, i) => !script.used.has(i);
  let index = script.responses.findIndex((r, i) => free(r, i) && r.for_user && asked.startsWith(r.for_user));
  if (index < 0) index = script.responses.findIndex((r, i) => free(r, i) && !r.for_user);
  if (index < 0) index = script.responses.length - 1;
  script.used.add(index);
  return index;
}

const portArg = process.argv.indexOf('--port');
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 0;
const server = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    if (!res.headersSent) json(res, 500, { error: { type: 'double_error', message: String(err) } });
    else res.destroy();
  });
});
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` })}\n`);
});
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
