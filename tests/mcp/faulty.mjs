// MCP servers that misbehave on purpose, built with the official SDK, for the fault tests of
// issue 17: `node faulty.mjs MODE [MARKER_DIR]`. Every mode also has `ping` (answers "pong"), so a
// test can see the server still works — or that the others do.
//   crash    `work` exits the process in the middle of the call
//   hang     `work` never answers; it writes MARKER_DIR/cancelled when the client cancels it
//   garbage  writes lines that are not JSON-RPC to stdout, at start and during `work`
//   flood    writes 30 MB to stderr at start and during `work`, then answers
//   huge     `work` answers 10 MB of text
//   exit     exits at start with a message on stderr
//   spawner  `work` starts a detached `sleep` (its own session) that would outlive a naive kill
//   names    tools with names no provider takes, and a description with markup
//   changes  adds the tool `late` FAULTY_DELAY_MS (2 s) after the client connects (list_changed)
//   escaper  `work` starts a detached `sleep` (its own session), then SIGKILLs its own parent —
//            the reaper that holds it (SECURITY F3)
//   pages    tools/list and resources/list answer 500 items and a next cursor, for ever (F5)
//   progress `work` reports progress every 100 ms and never answers (F10: the hard deadline)
//   structured `work` answers 12 MB of structuredContent (F10: capped)
//   readonly a tool marked `readOnlyHint: true` by the server itself (F8: the server's word)
//   notify   sends 20 000 tools/list_changed notifications at once after connecting (F10)
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ListToolsRequestSchema, ListResourcesRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

const [mode = 'ping', markers = '.'] = process.argv.slice(2);
const text = (value) => ({ content: [{ type: 'text', text: value }] });
const flood = (bytes) => {
  const line = `${'x'.repeat(1023)}\n`;
  for (let written = 0; written < bytes; written += line.length) process.stderr.write(line);
};

if (mode === 'exit') {
  process.stderr.write('faulty: cannot start: the API key FAULTY_KEY is not set\n');
  process.exit(1);
}
if (mode === 'garbage') process.stdout.write('this is not JSON-RPC\n{"half": \n');
if (mode === 'flood') flood(30 * 1024 * 1024);

const server = new McpServer({ name: `faulty-${mode}`, version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
server.registerTool('ping', { description: 'Answers pong.', inputSchema: {} }, async () => text('pong'));

const work = {
  crash: async () => {
    setTimeout(() => process.exit(3), 200);
    await new Promise(() => {});
  },
  hang: async (_args, extra) => {
    extra.signal.addEventListener('abort', () => writeFileSync(join(markers, 'cancelled'), String(Date.now())));
    await new Promise(() => {});
  },
  garbage: async () => {
    process.stdout.write('more garbage on stdout\n');
    return text('ok despite the garbage');
  },
  flood: async () => {
    flood(10 * 1024 * 1024);
    return text('ok after the flood');
  },
  huge: async () => text('y'.repeat(10 * 1024 * 1024)),
  escaper: async () => {
    const child = spawn('sleep', ['1000'], { detached: true, stdio: 'ignore', env: { ...process.env, FAULTY_MARKER: markers } });
    child.unref();
    writeFileSync(join(markers, 'spawned'), String(child.pid));
    // The reaper above: in a PID namespace its init, which no process inside can kill.
    try {
      process.kill(process.ppid, 'SIGKILL');
    } catch {}
    return text(`started ${child.pid}, killed ${process.ppid}`);
  },
  progress: async (_args, extra) => {
    const token = extra._meta?.progressToken;
    let n = 0;
    const timer = setInterval(() => {
      n += 1;
      if (token !== undefined) extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: n } }).catch(() => {});
    }, 100);
    extra.signal.addEventListener('abort', () => {
      clearInterval(timer);
      writeFileSync(join(markers, 'cancelled'), String(Date.now()));
    });
    await new Promise(() => {});
  },
  structured: async () => ({ content: [{ type: 'text', text: 'big' }], structuredContent: { blob: 'z'.repeat(12 * 1024 * 1024) } }),
  spawner: async () => {
    // `detached`: its own session (setsid), out of the server's process group. It writes its own
    // pid as the machine numbers it (the server may run in a PID namespace, where `child.pid` is
    // the namespace's number): /proc is the host's mount.
    const file = join(markers, 'spawned');
    const child = spawn('sh', ['-c', `read -r p rest < /proc/self/stat; printf %s $p > ${file}.part; mv ${file}.part ${file}; exec sleep 1000`], { detached: true, stdio: 'ignore', env: { ...process.env, FAULTY_MARKER: markers } });
    child.unref();
    for (let i = 0; i < 100 && !existsSync(file); i += 1) await new Promise((resolve) => setTimeout(resolve, 20));
    return text(`started ${child.pid}`);
  },
};
if (work[mode]) server.registerTool('work', { description: `Does the ${mode} thing.`, inputSchema: {} }, work[mode]);

if (mode === 'readonly') {
  server.registerTool('peek', { description: 'Says it only reads.', inputSchema: {}, annotations: { readOnlyHint: true } }, async () => text('peeked'));
}

if (mode === 'pages') {
  // Below the high-level API: every page is full and names a next one.
  const page = (cursor, make) => {
    const n = Number(cursor ?? 0);
    return { items: Array.from({ length: 500 }, (_, i) => make(n * 500 + i)), nextCursor: String(n + 1) };
  };
  server.server.registerCapabilities({ resources: {} });
  server.server.removeRequestHandler('tools/list');
  server.server.setRequestHandler(ListToolsRequestSchema, async (request) => {
    const { items, nextCursor } = page(request.params?.cursor, (i) => ({ name: `t${i}`, description: 'x'.repeat(2000), inputSchema: { type: 'object', properties: {} } }));
    return { tools: items, nextCursor };
  });
  server.server.setRequestHandler(ListResourcesRequestSchema, async (request) => {
    const { items, nextCursor } = page(request.params?.cursor, (i) => ({ uri: `mem://r${i}`, name: `r${i}` }));
    return { resources: items, nextCursor };
  });
}

if (mode === 'names') {
  server.registerTool('ok_tool', { description: '<img src=x onerror="alert(1)"> <b>bold</b> — a description is data', inputSchema: { q: z.string() } }, async ({ q }) => text(`ok ${q}`));
  server.registerTool('has space', { description: 'refused: a space', inputSchema: {} }, async () => text('no'));
  server.registerTool(`long_${'n'.repeat(70)}`, { description: 'refused: too long', inputSchema: {} }, async () => text('no'));
}

await server.connect(new StdioServerTransport());

if (mode === 'notify') {
  // Counts the listings the client asks for after the flood.
  let listings = 0;
  server.server.removeRequestHandler('tools/list');
  server.server.setRequestHandler(ListToolsRequestSchema, async () => {
    listings += 1;
    writeFileSync(join(markers, 'listings'), String(listings));
    return { tools: [{ name: 'ping', description: 'Answers pong.', inputSchema: { type: 'object', properties: {} } }] };
  });
  setTimeout(() => {
    for (let i = 0; i < 20000; i += 1) server.server.notification({ method: 'notifications/tools/list_changed' }).catch(() => {});
  }, 500);
}

if (mode === 'changes') {
  setTimeout(() => {
    server.registerTool('late', { description: 'Added after the start.', inputSchema: {} }, async () => text('late tool'));
  }, Number(process.env.FAULTY_DELAY_MS ?? 2000));
}
