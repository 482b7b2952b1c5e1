// The chat list: the stored chats' summaries, kept current by the engine's host (`onChatsChanged`:
// a save, a new or deleted chat, a pull — no timers), filtered by the search box, the open chat
// marked, a subagent's chat under its parent. A click opens the chat.
import * as chatListView from '../views/chat-list.js';
import { $ } from '../page/dom.js';

export function install(ctx) {
  let chats = [];

  function render() {
    chatListView.render($('chat-list'), { chats, openId: ctx.chat.id, openTitle: ctx.chat.title, query: $('chat-search').value });
  }

  /** The whole list, read once when the engine opens. */
  async function load() {
    chats = await ctx.engine.palaver.listChats();
    render();
  }

  /** `{changed, deleted}` from the host: the list follows; a chat deleted elsewhere closes here. */
  function changed({ changed: updated = [], deleted = [] }) {
    const gone = new Set(deleted);
    const byId = new Map(chats.filter((c) => !gone.has(c.id)).map((c) => [c.id, c]));
    for (const chat of updated) byId.set(chat.id, { ...byId.get(chat.id), ...chat });
    chats = [...byId.values()].sort((a, b) => (b.updated_at ?? 0) - (a.updated_at ?? 0));
    render();
    if (ctx.chat.id && gone.has(ctx.chat.id) && !ctx.chats.deleting) ctx.chat.close('This chat was deleted on another device.');
    if (!ctx.chat.id) ctx.empty.show();
  }

  $('chat-search').addEventListener('input', render);
  chatListView.bind($('chat-list'), { select: (id) => ctx.chat.open(id).catch((error) => ctx.say(String(error?.message ?? error), true)) });

  ctx.chats = {
    load,
    render,
    changed,
    deleting: false,
    ids: () => chats.map((c) => c.id),
    all: () => chats,
    /** The stored chats of a chat's subagents (its children and theirs). */
    subagentsOf: (id) => chats.filter((c) => c.id !== id && c.link_type === 'subagent' && (c.root_chat_id === id || c.parent_id === id)),
  };
}
