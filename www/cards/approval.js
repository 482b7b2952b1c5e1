// A paused round's approval (SPEC §8.4): the calls the engine paused on (`runtime.pause_reasons`),
// approved or rejected together.
import { el, button, summarizeArgs } from '../view.js';
import { PREVIEWED, preview } from '../write-preview.js';

const callIds = (chat) => (chat.runtime.pause_reasons ?? []).map((r) => r.tool_call_id);

export default {
  name: 'approval',
  select: (chat) => (chat.runtime.state === 'paused' && chat.runtime.pause_reasons?.length ? chat.runtime.pause_reasons : null),
  render(reasons, ctx) {
    // A tool of one of the user's MCP servers says which server would run it.
    const server = (name) => {
      const mcp = ctx?.toolServer?.(name);
      return mcp ? el('span', { class: 'mcp-server', testid: 'approval-server', text: ` — ${mcp.tool} of the MCP server ${mcp.server}` }) : null;
    };
    // A write or an edit shows what it would change in the file as it is now.
    const change = (r) => {
      if (!PREVIEWED.has(r.tool_name) || !ctx?.readFile) return null;
      const node = el('div', { class: 'write-preview', testid: 'approval-diff' });
      preview(node, { tool: r.tool_name, args: r.args, read: ctx.readFile, readHash: ctx.readHashOf?.(String(r.args?.path ?? '')), el });
      return node;
    };
    const list = el('ul', {}, ...reasons.map((r) => el('li', { 'data-tool': r.tool_name },
      el('code', { text: r.tool_name }), server(r.tool_name), ' ', el('span', { text: summarizeArgs(r.args) }),
      change(r),
      el('pre', { class: 'args', tabIndex: 0, 'aria-label': 'Arguments', text: JSON.stringify(r.args, null, 2).slice(0, 4000) }))));
    return el('section', { class: 'card approval', testid: 'tool-approval' },
      el('h3', { text: reasons.length === 1 ? 'Allow this tool call?' : `Allow these ${reasons.length} tool calls?` }), list,
      el('div', { class: 'actions' }, button('approve', 'Approve', 'approve'), button('reject', 'Reject', 'reject')));
  },
  actions: {
    approve: (chat, _target, send) => send({ type: 'approve_tools', tool_call_ids: callIds(chat) }),
    reject: (chat, _target, send) => send({ type: 'reject_tools', tool_call_ids: callIds(chat), reason: 'The user rejected this call.' }),
  },
};
