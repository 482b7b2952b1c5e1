// A system prompt that came with the chat from outside (an import, the workspace, another
// device): shown, never used until the user says so (SECURITY F2). Review opens the chat's
// prompt, where "Use for this chat" takes it.
import { el, button } from '../view.js';

export default {
  name: 'proposed-prompt',
  select: (chat) => chat.thread.proposed_system_prompt || null,
  render: (prompt) => el('div', { class: 'card notice', testid: 'proposed-prompt' },
    el('p', { text: 'This chat came with its own system prompt. It is not used unless you accept it:' }),
    el('pre', { class: 'proposed', text: prompt.length > 400 ? `${prompt.slice(0, 400)}…` : prompt }),
    button('review-prompt', 'Review…', 'review-prompt'),
    button('discard-prompt', 'Discard it', 'discard-prompt')),
  actions: {
    'review-prompt': (_chat, _target, _send, { review }) => review(),
    'discard-prompt': (_chat, _target, send) => send({ type: 'set_params', patch: { proposed_system_prompt: null } }),
  },
};
