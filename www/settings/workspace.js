// Settings → Workspace: pairing with `palaver serve` (paste the address it printed; the token is
// taken from it) and how the user's MCP servers stand (palaver serve runs them from the user's own
// config; the page can list them, never add or start one).
import * as settingsStore from '../settings.js';
import * as mcp from '../mcp.js';
import { el } from '../view.js';

const q = (view, id) => view.querySelector(`[data-testid=${id}]`);

export default {
  id: 'workspace',
  label: 'Workspace',
  build() {
    return el('section', { class: 'settings-section' },
      el('label', {}, 'palaver serve\'s address (paste the URL it printed) ', el('input', { testid: 'proxy-url', placeholder: 'http://127.0.0.1:8787/#token=…' })),
      el('label', {}, 'Its token ', el('input', { testid: 'proxy-token', type: 'password', autocomplete: 'off' })),
      el('h3', { text: 'MCP servers' }),
      el('div', { testid: 'mcp-status' }));
  },
  fill(settings, view, ctx) {
    q(view, 'proxy-url').value = settings.proxy_url ? `${settings.proxy_url}/` : '';
    q(view, 'proxy-token').value = settings.proxy_token ?? '';
    this.refresh(view, ctx);
  },
  collect(settings, view) {
    const pasted = settingsStore.parseProxyUrl(q(view, 'proxy-url').value);
    return { ...settings, proxy_url: pasted?.url ?? '', proxy_token: q(view, 'proxy-token').value.trim() || pasted?.token || '' };
  },
  async refresh(view, ctx) {
    const proxy = ctx.workspace.proxy();
    const node = q(view, 'mcp-status');
    if (!proxy) {
      node.replaceChildren(el('p', { class: 'hint', text: 'Pair palaver serve to use your MCP servers.' }));
      return;
    }
    try {
      mcp.renderStatus(node, await mcp.status(proxy));
    } catch (error) {
      node.replaceChildren(el('p', { class: 'error', text: `palaver serve did not say how its MCP servers are: ${error.message}` }));
    }
  },
};
