// Search inside messages (issue 38): the sidebar's search box also looks through every stored
// chat's messages (the engine's host reads them from IndexedDB: `searchMessages`), a moment after
// typing stops. Each hit shows its chat and the line that matched; a click opens the chat at
// that message. Titles still filter the list below as before.
import { $ } from '../page/dom.js';
import { el } from '../elements.js';

/** How long typing must pause before the messages are searched. */
const PAUSE_MS = 250;
const LIMIT = 30;
const ROLE_WORDS = { user: 'you', assistant: 'assistant', tool: 'a tool\'s result' };

export function install(ctx) {
  let timer = 0;
  let asked = 0;

  async function search(query) {
    const mine = ++asked;
    if (query.trim().length < 2) return show(null);
    // Called from a timer: a failure is shown as the search's, never left unhandled.
    const found = await ctx.engine.ensure()
      .then(() => ctx.engine.palaver.searchMessages(query, LIMIT))
      .catch((error) => ({ error }));
    if (mine === asked) show(found, query);
  }

  function show(found, query = '') {
    const node = $('message-hits');
    node.hidden = !found;
    if (!found) return node.replaceChildren();
    if (found.error) return node.replaceChildren(el('p', { class: 'hint', text: `Search failed: ${found.error?.message ?? found.error}` }));
    const titles = new Map(ctx.chats.all().map((c) => [c.id, c.title || 'Untitled chat']));
    const head = found.hits.length
      ? `In messages: ${found.hits.length}${found.more ? '+' : ''} found`
      : `No message holds “${query.trim()}”.`;
    node.replaceChildren(el('h2', { text: head }), ...found.hits.map((hit) => el('button', {
      type: 'button',
      class: 'message-hit',
      testid: 'message-hit',
      'data-chat-id': hit.chat_id,
      'data-message-id': hit.message_id,
    }, el('strong', { text: titles.get(hit.chat_id) ?? 'A chat' }), el('span', { class: 'hint', text: ` · ${ROLE_WORDS[hit.role] ?? hit.role}` }), el('span', { class: 'line', text: hit.line }))));
  }

  async function openHit(target) {
    const { chatId, messageId } = target.dataset;
    try {
      await ctx.chat.open(chatId);
      if (!ctx.chat.reveal(messageId)) ctx.say('That message is no longer in the chat.');
    } catch (error) {
      ctx.say(String(error?.message ?? error), true);
    }
  }

  $('chat-search').addEventListener('input', () => {
    clearTimeout(timer);
    const query = $('chat-search').value;
    timer = setTimeout(() => search(query), PAUSE_MS);
  });
  $('message-hits').addEventListener('click', (event) => {
    const target = event.target.closest('[data-testid=message-hit]');
    if (target) openHit(target);
  });
}
