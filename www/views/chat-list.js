// The chat list: stored chats filtered by the search box, the open one marked.
// `render(node, {chats, openId, openTitle, query})` draws it; `bind(node, {select})` opens a chat.
import { el } from '../view.js';

export function render(node, { chats, openId, openTitle, query }) {
  const wanted = query.trim().toLowerCase();
  // The open chat's title is the engine's, which is ahead of what IndexedDB has stored so far.
  const titled = chats.map((c) => (c.id === openId && openTitle ? { ...c, title: openTitle } : c));
  const shown = titled.filter((c) => !wanted || (c.title || 'Untitled chat').toLowerCase().includes(wanted));
  node.replaceChildren(...shown.map((chat) => el('button', {
    type: 'button', testid: 'chat-item', text: chat.title || 'Untitled chat', 'data-chat-id': chat.id,
    ariaCurrent: String(chat.id === openId),
  })));
}

export function bind(node, { select }) {
  node.addEventListener('click', (event) => {
    const id = event.target.closest('[data-chat-id]')?.dataset.chatId;
    if (id) select(id);
  });
}
