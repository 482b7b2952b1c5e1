// The queued messages (`runtime.queued_items`). After a Stop they are held: shown as paused,
// with "Send now" (runs them as they would have run) and "Discard" each; otherwise Cancel and
// Steer now. `render(node, runtime)` draws it; `bind(node, handlers)` answers its buttons.
import { el, button } from '../view.js';

export function render(node, runtime) {
  const held = Boolean(runtime.queue_held);
  const messages = (runtime.queued_items ?? []).filter((i) => i.type === 'user_message');
  node.hidden = messages.length === 0;
  node.dataset.held = String(held);
  const header = held && messages.length
    ? el('li', { class: 'held', testid: 'queue-held' },
      el('span', { text: `Paused after Stop: ${messages.length} message${messages.length === 1 ? '' : 's'} not sent yet. ` }),
      button('send-held', 'Send now', 'send-held'))
    : null;
  node.replaceChildren(...[header, ...messages.map((item) => el('li', { testid: 'queued', 'data-id': item.client_request_id, 'data-priority': String(item.priority) },
    el('span', { class: 'preview', text: item.preview ?? '(message)' }), item.priority ? el('small', { text: ' (steering)' }) : null,
    button('cancel-queued', held ? 'Discard' : 'Cancel', 'cancel-queued'),
    item.priority || held ? null : button('steer-now', 'Steer now', 'steer-now')))].filter(Boolean));
}

/** `handlers`: `items()` (the current queued items), `cancel(item)`, `steer(item)`, `resume()`. */
export function bind(node, handlers) {
  node.addEventListener('click', (event) => {
    const target = event.target.closest('[data-action]');
    if (!target) return;
    if (target.dataset.action === 'send-held') return handlers.resume();
    const id = target.closest('[data-id]')?.dataset.id;
    const item = handlers.items().find((i) => i.client_request_id === id);
    if (!item) return;
    if (target.dataset.action === 'cancel-queued') handlers.cancel(item);
    if (target.dataset.action === 'steer-now') handlers.steer(item);
  });
}
