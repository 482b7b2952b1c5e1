// The chat list: stored chats filtered by the search box, the open one marked; a subagent's chat
// sits under its parent, indented (issue 18), and search finds it on its own.
// `render(node, {chats, openId, openTitle, query})` draws it; `bind(node, {select})` opens a chat.
import { el } from '../view.js';

/** Roots in their order, each followed by its subagents' chats (depth first, oldest first). */
function grouped(chats) {
  const byParent = new Map();
  const ids = new Set(chats.map((c) => c.id));
  for (const chat of chats) {
    const parent = chat.link_type === 'subagent' && ids.has(chat.parent_id) ? chat.parent_id : null;
    if (!byParent.has(parent)) byParent.set(parent, []);
    byParent.get(parent).push(chat);
  }
  const out = [];
  const walk = (parent, depth) => {
    const children = byParent.get(parent) ?? [];
    if (parent !== null) children.sort((a, b) => String(a.id).localeCompare(String(b.id)));
    for (const chat of children) {
      out.push({ chat, depth });
      walk(chat.id, depth + 1);
    }
  };
  walk(null, 0);
  return out;
}

export function render(node, { chats, openId, openTitle, query }) {
  const wanted = query.trim().toLowerCase();
  // The open chat's title is the engine's, which is ahead of what IndexedDB has stored so far.
  const titled = chats.map((c) => (c.id === openId && openTitle ? { ...c, title: openTitle } : c));
  const rows = wanted ? titled.filter((c) => (c.title || 'Untitled chat').toLowerCase().includes(wanted)).map((chat) => ({ chat, depth: 0 })) : grouped(titled);
  node.replaceChildren(...rows.map(({ chat, depth }) => el('button', {
    type: 'button', testid: 'chat-item', text: chat.title || 'Untitled chat', 'data-chat-id': chat.id,
    ariaCurrent: String(chat.id === openId),
    ...(depth ? { class: `subagent-chat depth-${Math.min(depth, 3)}`, 'data-parent-id': chat.parent_id, title: 'A subagent\'s chat' } : {}),
  })));
}

export function bind(node, { select }) {
  node.addEventListener('click', (event) => {
    const id = event.target.closest('[data-chat-id]')?.dataset.chatId;
    if (id) select(id);
  });
}
