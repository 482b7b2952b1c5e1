// The subagents this chat started (issue 18): `runtime.subagents`, as the engine reports them —
// each one's task, status, model, tokens and time, one click to open its chat, and the tool calls
// it waits on approving, answered here or in its own chat (the same command to the child).
import { el, button, summarizeArgs } from '../view.js';
import { count } from '../format.js';

const seconds = (child, now) => Math.max(0, Math.round(((child.ended_at_ms ?? now) - child.started_at_ms) / 1000));

function childNode(child, now) {
  const facts = [child.model, child.tokens ? `${count(child.tokens)} tokens` : null, `${seconds(child, now)} s`].filter(Boolean).join(' · ');
  const approvals = (child.pause_reasons ?? []).length
    ? el('div', { class: 'child-approval', testid: 'subagent-approval' },
      el('span', { text: `Asks to run ${child.pause_reasons.map((r) => `${r.tool_name} ${summarizeArgs(r.args)}`).join(', ')}` }), ' ',
      button('subagent-approve', 'Approve', 'approve', { 'data-chat-id': child.chat_id }),
      button('subagent-reject', 'Reject', 'reject', { 'data-chat-id': child.chat_id }))
    : null;
  return el('li', { testid: 'subagent', 'data-chat-id': child.chat_id, 'data-status': child.status },
    el('span', { class: `state ${child.status}`, testid: 'subagent-status', text: child.status }), ' ',
    el('strong', { text: child.title }), ' ',
    el('span', { class: 'hint', text: facts }), ' ',
    button('open-subagent', 'Open', 'open', { 'data-chat-id': child.chat_id }),
    child.status === 'interrupted' ? interruptedNode(child) : null,
    el('p', { class: 'task', text: child.task }),
    approvals);
}

/** A child the page's closing cut (the engine found it again): go on, or give it up. */
function interruptedNode(child) {
  return el('div', { class: 'child-interrupted', testid: 'subagent-interrupted' },
    el('span', { text: 'Interrupted when the page closed. ' }),
    button('subagent-resume', 'Resume', 'resume', { 'data-chat-id': child.chat_id }), ' ',
    button('subagent-cancel', 'Cancel', 'cancel', { 'data-chat-id': child.chat_id }));
}

const reasonsOf = (chat, id) => chat.runtime.subagents?.find((c) => c.chat_id === id)?.pause_reasons ?? [];

export default {
  name: 'subagents',
  select: (chat) => (chat.runtime.subagents?.length ? chat.runtime.subagents : null),
  render(children) {
    const now = Date.now();
    const running = children.filter((c) => !['done', 'failed', 'stopped', 'interrupted'].includes(c.status)).length;
    const interrupted = children.filter((c) => c.status === 'interrupted').length;
    const counts = [running ? `${running} working` : '', interrupted ? `${interrupted} interrupted` : ''].filter(Boolean).join(', ');
    return el('section', { class: 'card subagents', testid: 'subagent-tree', 'aria-label': 'Subagents' },
      el('h3', { text: counts ? `Subagents (${counts})` : 'Subagents' }),
      el('ul', {}, ...children.map((c) => childNode(c, now))));
  },
  actions: {
    open: (_chat, target, _send, hooks) => hooks?.open?.(target.dataset.chatId),
    approve: (chat, target, send) => {
      const id = target.dataset.chatId;
      send({ type: 'approve_tools', tool_call_ids: reasonsOf(chat, id).map((r) => r.tool_call_id) }, id);
    },
    // The child's chat is loaded into the engine first: it goes on there.
    resume: async (_chat, target, send, hooks) => {
      const id = target.dataset.chatId;
      target.disabled = true;
      try {
        await hooks?.load?.(id);
        send({ type: 'resume_subagent', child_id: id });
      } catch (error) {
        hooks?.say?.(`The subagent could not be resumed: ${error?.message ?? error}`);
        target.disabled = false;
      }
    },
    cancel: (_chat, target, send) => send({ type: 'cancel_subagent', child_id: target.dataset.chatId }),
    reject: (chat, target, send) => {
      const id = target.dataset.chatId;
      send({ type: 'reject_tools', tool_call_ids: reasonsOf(chat, id).map((r) => r.tool_call_id), reason: 'The user rejected this call.' }, id);
    },
  },
};
