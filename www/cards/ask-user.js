// The assistant's questions (`ask_questions`): the engine reports them in `runtime.questions`
// while the turn waits for the answer, which goes back as the next user message.
import { el, button } from '../view.js';

export default {
  name: 'ask-user',
  select: (chat) => chat.runtime.questions ?? null,
  render(questions) {
    return el('section', { class: 'card ask-user', testid: 'ask-user' },
      el('h3', { text: 'The assistant asks' }), el('ol', {}, ...questions.map((q) => el('li', { text: String(q) }))),
      el('textarea', { testid: 'ask-user-answer', rows: 3, 'aria-label': 'Your answer' }),
      el('div', { class: 'actions' }, button('ask-user-send', 'Answer', 'answer')));
  },
  actions: {
    answer(_chat, target, send) {
      const answer = target.closest('section').querySelector('textarea').value.trim();
      if (answer) send({ type: 'user_message', content: answer });
    },
  },
};
