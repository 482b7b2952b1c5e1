// Regenerate: offered exactly when the engine offers it (`runtime.offers`: not busy, no question
// waiting, the last turn answered or failed).
import { button } from '../view.js';

export default {
  name: 'regenerate',
  select: (chat) => (chat.runtime.offers?.includes('regenerate') ? true : null),
  render: () => button('regenerate', 'Regenerate', 'regenerate'),
  actions: {
    regenerate: (_chat, _target, send) => send({ type: 'regenerate' }),
  },
};
