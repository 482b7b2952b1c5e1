// pouchdb-server from npm (tests/couch, LevelDB in a temporary folder) as the page tests run it:
// started, killed (SIGKILL, as a crash would) and started again on the same port and data, with an
// admin and a database only that admin may use.
import http from 'node:http';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { root } from './harness.mjs';

export const freePort = () => new Promise((ok) => {
  const s = http.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => ok(port)); });
});

/** A pouchdb-server on a fixed port and folder; `start` and `stop` may be called again and again. */
export async function couchServer(dir) {
  const port = await freePort();
  let child = null;
  // Gone when the test ends, however it ends (a watchdog's exit included).
  process.on('exit', () => child?.kill('SIGKILL'));
  const server = {
    port,
    origin: `http://127.0.0.1:${port}`,
    async start() {
      const bin = join(root, 'tests/couch/node_modules/pouchdb-server/bin/pouchdb-server');
      child = spawn('node', [bin, '--host', '127.0.0.1', '--port', String(port), '--dir', dir, '--config', join(dir, 'config.json')],
        { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
      for (let i = 0; i < 100; i++) {
        const up = await fetch(`${server.origin}/`).then((r) => r.ok, () => false);
        if (up) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('pouchdb-server did not start');
    },
    /** Kills it outright (SIGKILL) and resolves once it is gone. */
    async stop() {
      if (!child || child.exitCode !== null) return;
      const gone = new Promise((ok) => child.once('exit', ok));
      child.kill('SIGKILL');
      await gone;
    },
    kill: () => child?.kill('SIGKILL'),
    /** A request as the admin (after `secure`) or anonymous: {status, body}. */
    async request(method, path, body, auth) {
      const response = await fetch(`${server.origin}/${path}`, {
        method, headers: { ...(auth ? { authorization: auth } : {}), 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined,
      });
      return { status: response.status, body: await response.json().catch(() => null) };
    },
    /** An admin, and a database only its member may use (so wrong credentials are refused). */
    async secure(admin, database) {
      await fetch(`${server.origin}/_config/admins/${admin.username}`, { method: 'PUT', body: JSON.stringify(admin.password) });
      const auth = `Basic ${Buffer.from(`${admin.username}:${admin.password}`).toString('base64')}`;
      const created = await server.request('PUT', database, null, auth);
      await server.request('PUT', `${database}/_security`, { admins: { names: [admin.username] }, members: { names: [admin.username] } }, auth);
      return { auth, created: created.status === 201 };
    },
  };
  return server;
}
