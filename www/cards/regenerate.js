// Regenerate: offered when the chat is not busy, waits on no answer to the assistant's
// questions, and its last message is an answer, a tool result or an error.
import { button } from '../view.js';

export default {
  name: 'regenerate',
  select(chat) {
    const last = chat.messages.at(-1);
    return !chat.runtime.busy && !chat.runtime.questions && ['assistant', 'error', 'tool'].includes(last?.role) ? true : null;
  },
  render: () => button('regenerate', 'Regenerate', 'regenerate'),
  actions: {
    regenerate: (_chat, _target, send) => send({ type: 'regenerate' }),
  },
};
