// The user's MCP servers as the page meets them (issue 17): `palaver serve` runs them (the page can
// never add, change or start one); this module asks it. The live view of their changes (a tool
// list that changed → the engine gets the new tools), their status for Settings, their resources
// to attach to a message, and their prompts in a `/` menu of the composer. Everything a server
// sends is shown as text.
import { el, button } from './view.js';

async function call(proxy, path, init = {}) {
  const response = await fetch(`${proxy.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${proxy.token}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body?.error?.message ?? `HTTP ${response.status}`);
  return body;
}

export const status = (proxy) => call(proxy, '/api/mcp');
export const resources = async (proxy) => (await call(proxy, '/api/mcp/resources')).resources ?? [];
export const prompts = async (proxy) => (await call(proxy, '/api/mcp/prompts')).prompts ?? [];
export const readResource = (proxy, server, uri) => call(proxy, '/api/mcp/resources/read', { method: 'POST', body: JSON.stringify({ server, uri }) });
export const getPrompt = (proxy, server, name, args) => call(proxy, '/api/mcp/prompts/get', { method: 'POST', body: JSON.stringify({ server, name, arguments: args }) });

/**
 * Follows `GET /api/mcp/events` (NDJSON) and calls `onChange(event)` for each change
 * (`tools_changed`, `status`, …); reconnects after a break with backoff (3 s, doubling to a
 * minute), and while the browser is offline waits for it to be online instead of retrying
 * (issue 38: no stream of failed requests). Stops when `signal` aborts.
 */
export async function watch(proxy, onChange, signal) {
  let wait = 3000;
  let connected = false;
  while (!signal.aborted) {
    try {
      const response = await fetch(`${proxy.url}/api/mcp/events`, { headers: { authorization: `Bearer ${proxy.token}` }, signal });
      if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
      wait = 3000;
      // Connected again (palaver serve restarted, or the network came back): its tools may have
      // changed while nothing could be heard, and a restarted server counts its versions anew.
      if (connected) onChange({ type: 'reconnected' });
      connected = true;
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let pending = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        pending += value;
        let end;
        while ((end = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, end);
          pending = pending.slice(end + 1);
          const event = JSON.parse(line || '{}');
          if (event.type && event.type !== 'ping') onChange(event);
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    await pause(wait, signal);
    wait = Math.min(60_000, wait * 2);
  }
}

/** Waits `ms`, or until the browser is online again when it is offline now; ends early on abort. */
function pause(ms, signal) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      removeEventListener('online', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = navigator.onLine === false ? 0 : setTimeout(done, ms);
    if (navigator.onLine === false) addEventListener('online', done);
    signal.addEventListener('abort', done);
  });
}

/** The MCP servers in Settings: state, tools, protocol; the error and stderr tail when failed. */
export function renderStatus(node, current) {
  const servers = current?.servers ?? [];
  if (!servers.length) {
    const where = current?.config ? ` (${current.config})` : '';
    node.replaceChildren(el('p', { class: 'hint', text: `No MCP servers${where}. They come from a file on your machine only: \`palaver serve --mcp FILE\`, or ~/.config/palaver/mcp.json.` }));
    return;
  }
  node.replaceChildren(
    el('p', { class: 'hint', text: `From ${current.config}. Their tools ask before they run; a server's own read-only marks count only when its entry says "trust_annotations": true.` }),
    el('ul', { class: 'mcp-servers' }, ...servers.map((server) => el('li', { 'data-server': server.name, 'data-state': server.state, testid: 'mcp-server' },
      el('strong', { text: server.name }), ' ',
      el('span', { class: `state ${server.state}`, testid: 'mcp-state', text: server.state }), ' ',
      el('span', { text: `${server.tools ?? 0} tools${server.protocol_version ? ` · MCP ${server.protocol_version}` : ''}${server.restarts ? ` · restarted ${server.restarts}×` : ''}` }),
      server.error ? el('p', { class: 'error', testid: 'mcp-error', text: server.error }) : null,
      server.stderr_tail ? el('details', {}, el('summary', { text: 'Its output' }), el('pre', { class: 'stderr', text: server.stderr_tail })) : null))),
  );
}

/** The server of an offered tool name (`mcp__{server}__{tool}`), from the specs. */
export function serverOf(tools, name) {
  return tools?.find((t) => t.name === name)?.mcp ?? null;
}

/**
 * The composer's `/` menu: typing `/` at the start lists the servers' prompts; picking one asks
 * for its arguments (when it has some), then puts its text in the composer.
 */
export class PromptMenu {
  constructor({ menu, composer, proxy, say }) {
    Object.assign(this, { menu, composer, proxy, say });
    this.list = null;
  }

  get open() {
    return !this.menu.hidden;
  }

  async onInput() {
    const match = /^\/([^\s]*)$/.exec(this.composer.value);
    const proxy = this.proxy();
    if (!match || !proxy) return this.close();
    this.list ??= await prompts(proxy).catch(() => []);
    const query = match[1].toLowerCase();
    const found = this.list.filter((p) => `${p.server}:${p.name}`.toLowerCase().includes(query)).slice(0, 10);
    if (!found.length) return this.close();
    this.menu.replaceChildren(...found.map((prompt) => el('li', {}, Object.assign(
      button('prompt-option', `/${prompt.server}:${prompt.name}`, 'prompt-option', { 'data-server': prompt.server, 'data-name': prompt.name }),
      { onclick: () => this.pick(prompt) },
    ), el('small', { text: ` ${prompt.description ?? ''}` }))));
    this.menu.hidden = false;
    return undefined;
  }

  close() {
    this.menu.hidden = true;
    this.menu.replaceChildren();
  }

  /** Its arguments first, when it takes some; then its messages' text into the composer. */
  pick(prompt) {
    const args = prompt.arguments ?? [];
    if (!args.length) return this.insert(prompt, {});
    const inputs = args.map((arg) => el('input', { 'data-arg': arg.name, placeholder: arg.description ?? '', required: Boolean(arg.required), testid: `prompt-arg-${arg.name}` }));
    const form = el('li', { class: 'prompt-args', testid: 'prompt-args' },
      el('strong', { text: `/${prompt.server}:${prompt.name}` }),
      ...args.map((arg, i) => el('label', {}, `${arg.name}${arg.required ? ' (required)' : ''} `, inputs[i])),
      Object.assign(button('prompt-insert', 'Insert', 'prompt-insert'), {
        onclick: () => {
          const missing = args.find((arg, i) => arg.required && !inputs[i].value.trim());
          if (missing) return this.say(`The prompt needs ${missing.name}.`, true);
          return this.insert(prompt, Object.fromEntries(args.map((arg, i) => [arg.name, inputs[i].value]).filter(([, v]) => v !== '')));
        },
      }));
    this.menu.replaceChildren(form);
    inputs[0]?.focus();
    return undefined;
  }

  async insert(prompt, args) {
    try {
      const got = await getPrompt(this.proxy(), prompt.server, prompt.name, args);
      this.composer.value = (got.messages ?? []).map((m) => m.text).filter(Boolean).join('\n\n');
      this.close();
      this.composer.focus();
      this.composer.dispatchEvent(new Event('input'));
    } catch (error) {
      this.say(`The prompt ${prompt.name} could not be had from ${prompt.server}: ${error.message}`, true);
    }
  }
}

/** The resources picker: a list of every server's resources; a click attaches one. */
export async function pickResource(menu, proxy, onPick, say) {
  let list;
  try {
    list = await resources(proxy);
  } catch (error) {
    say(`The MCP servers' resources could not be listed: ${error.message}`, true);
    return;
  }
  if (!list.length) {
    say('No MCP server offers resources.', true);
    return;
  }
  menu.replaceChildren(...list.slice(0, 50).map((r) => el('li', {}, Object.assign(
    button('resource-option', `${r.server}: ${r.name ?? r.uri}`, 'resource-option', { 'data-uri': r.uri, 'data-server': r.server, title: r.uri }),
    { onclick: () => { menu.hidden = true; onPick(r); } },
  ))));
  menu.hidden = false;
}
