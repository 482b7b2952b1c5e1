// The composer: what the user writes and Send. A Send goes to the page's lifecycle, which sends
// it now, holds it visibly (with Cancel) until what it needs is there, or refuses it in one
// sentence with the words put back — a click is never lost (issue 34). The unsent text of a chat
// is the engine's (`set_draft`); Send, Queue and Stop are what the engine's runtime offers.
import { Attachments } from '../attachments.js';
import * as mcp from '../mcp.js';
import * as markdown from '../markdown.js';
import { heldSentence } from '../page/lifecycle.js';
import { el, button } from '../view.js';
import { $ } from '../page/dom.js';

/** The composer's text when no chat is open (a new chat's words), kept across a reload. */
const NEW_COMPOSER_DRAFT_KEY = 'palaver.draft.new';
/** How long typing settles before the composer draft is given to the engine. */
const COMPOSER_DRAFT_SETTLE_MS = 400;
/**
 * Composer drafts typed but perhaps not yet stored by the engine (chat id → text): written at each key, so
 * a reload the moment after typing loses nothing; dropped once the engine's copy equals it.
 */
const PENDING_COMPOSER_DRAFTS_KEY = 'palaver.drafts.pending';

function pendingComposerDrafts() {
  try {
    const composerDrafts = JSON.parse(localStorage.getItem(PENDING_COMPOSER_DRAFTS_KEY) ?? '{}');
    return composerDrafts && typeof composerDrafts === 'object' && !Array.isArray(composerDrafts) ? composerDrafts : {};
  } catch {
    return {};
  }
}

function keepPending(chatId, text) {
  const composerDrafts = pendingComposerDrafts();
  if (text) composerDrafts[chatId] = text;
  else delete composerDrafts[chatId];
  try {
    if (Object.keys(composerDrafts).length) localStorage.setItem(PENDING_COMPOSER_DRAFTS_KEY, JSON.stringify(composerDrafts));
    else localStorage.removeItem(PENDING_COMPOSER_DRAFTS_KEY);
  } catch {
    // Storage full: the engine's copy is still made when typing settles.
  }
}

/** A chat's kept draft, then the words typed for it while it opened (each once). */
function joinedWords(kept, typed) {
  if (!kept || typed.startsWith(kept)) return typed;
  if (!typed.trim()) return kept;
  return `${kept}\n\n${typed}`;
}

export function install(ctx) {
  const composer = $('composer');
  const sent = new Map(); // client_request_id → text, so a queued message can become "steer now"
  let edits = 0; // input events: tell typing from a switch's own writes
  let counter = 0;
  let composerDraftTimer = 0;
  let handing = false; // New chat clicked, not open yet: what is typed now is the new chat's

  const attachments = new Attachments({
    tray: $('attachments'),
    menu: $('mention-list'),
    say: (text, error) => ctx.say(text, error),
    proxy: () => (ctx.workspace.proxy() ? { tool: (name, args) => ctx.workspace.tool(name, args) } : null),
    files: () => ctx.workspace.files(),
    readResource: (server, uri) => mcp.readResource(ctx.workspace.proxy(), server, uri),
  });
  const prompts = new mcp.PromptMenu({ menu: $('prompt-list'), composer, proxy: () => ctx.workspace.proxy(), say: (text, error) => ctx.say(text, error) });

  /** Sends the composer's message through the lifecycle (now, held, or refused). */
  async function send(priority = false) {
    const text = composer.value.trim();
    if (!text && attachments.empty) {
      composer.focus();
      return;
    }
    let extra;
    try {
      extra = await attachments.collect(text);
    } catch (error) {
      ctx.say(error.message, true);
      return; // nothing sent, everything typed kept
    }
    if ($('status').dataset.page === 'true') ctx.say(''); // its cause was before this message
    const message = { text, priority, ...extra, taken: attachments.take() };
    attachments.clear();
    composer.value = '';
    saveComposerDraft();
    ctx.store.dispatch({ type: 'send', message });
  }

  /** The lifecycle's `send_message`: into the open chat, or a new one. */
  async function deliver({ message }) {
    try {
      if (!ctx.chat.id) await ctx.chat.create();
      await ctx.chat.settled();
      await ctx.limits.ready(); // the model's window and answer limit, as its provider says
      const body = { type: 'user_message', content: message.text, priority: Boolean(message.priority) };
      if (message.attachments?.length) body.attachments = message.attachments;
      if (message.context_files?.length) body.context_files = message.context_files;
      const id = command(body);
      if (id) sent.set(id, message.text);
      else restore({ message });
      ctx.chat.follow();
    } catch (error) {
      ctx.say(`Not sent: ${error?.message ?? error}`, true);
      restore({ message });
    }
  }

  /** A message that was not sent goes back where it was typed, before what was typed since. */
  function restore({ message }) {
    composer.value = [message.text, composer.value].filter(Boolean).join('\n\n');
    attachments.restore(message.taken);
    saveComposerDraft();
    buttons(ctx.chat.mirror);
  }

  /** Sends a command to the open chat (or `chatId`); returns its id, or null when refused. */
  function command(body, chatId = ctx.chat.id) {
    const palaver = ctx.engine.palaver;
    if (!palaver || !chatId || (chatId === ctx.chat.id && ctx.chat.mirror?.preview)) return null;
    const id = body.client_request_id ?? `ui-${Date.now()}-${(counter += 1)}`;
    try {
      const events = palaver.send(chatId, { ...body, client_request_id: id });
      const refused = events?.find?.((e) => e.type === 'ack' && e.accepted === false);
      if (refused) {
        ctx.say(`Palaver could not do that: ${refused.reason?.message ?? refused.reason?.kind ?? 'it was refused'}`, true);
        return null;
      }
    } catch (error) {
      ctx.say(String(error?.message ?? error), true);
      return null;
    }
    return id;
  }

  /** The held message and its Cancel, from the page's state. The row is built once and its words
   *  changed in place: the sentence moves with every step of a download, and a Cancel drawn anew
   *  between a person's press and release lost their click. */
  function showHeld(state) {
    const node = $('held');
    node.hidden = !state.held;
    if (!state.held) return node.replaceChildren();
    if (!node.querySelector('[data-testid=cancel-held]')) {
      node.replaceChildren(el('span', { class: 'preview' }), el('span', { testid: 'held-sentence' }),
        button('cancel-held', 'Cancel', 'cancel-held', { onclick: () => ctx.store.dispatch({ type: 'cancel_held' }) }));
    }
    const words = [['.preview', state.held.message.text || '(attachments)'], ['[data-testid=held-sentence]', ` — ${heldSentence(state)} `]];
    for (const [selector, text] of words) {
      const part = node.querySelector(selector);
      if (part.textContent !== text) part.textContent = text;
    }
    return undefined;
  }

  /** Send, Queue and Stop as the open chat's runtime offers them. */
  function buttons(chat) {
    const offers = chat?.runtime?.offers ?? ['send'];
    const busy = offers.includes('stop');
    $('stop').hidden = !busy;
    $('send').hidden = busy && composer.value.trim() === '';
    $('send').textContent = offers.includes('queue') ? 'Queue' : 'Send';
  }

  // --- composer drafts: the engine's, per chat ---

  function saveComposerDraft() {
    clearTimeout(composerDraftTimer);
    const chat = ctx.chat.mirror;
    const text = composer.value;
    if (!chat) {
      if (text) localStorage.setItem(NEW_COMPOSER_DRAFT_KEY, text);
      else localStorage.removeItem(NEW_COMPOSER_DRAFT_KEY);
      return;
    }
    if (chat.preview || handing) return;
    keepPending(chat.id, text);
    composerDraftTimer = setTimeout(() => setComposerDraft(chat.id, text), COMPOSER_DRAFT_SETTLE_MS);
  }

  function setComposerDraft(chatId, text) {
    keepPending(chatId, text);
    const thread = ctx.engine.palaver?.thread(chatId);
    if (!thread || (thread.composer_draft ?? '') === text) return;
    command(text ? { type: 'set_draft', text } : { type: 'clear_draft' }, chatId);
  }

  /** A chat's composer draft: the engine's, or the words typed just before a reload it has not stored. */
  function composerDraftOf(chatId) {
    const stored = ctx.engine.palaver?.thread(chatId)?.composer_draft ?? '';
    const typed = pendingComposerDrafts()[chatId];
    if (typed === undefined) return stored;
    if (typed === stored) keepPending(chatId, ''); // the engine has it now
    else setComposerDraft(chatId, typed);
    return typed;
  }

  ctx.composer = {
    send,
    command,
    buttons,
    attachments,
    sentText: (id) => sent.get(id),
    remember: (id, text) => sent.set(id, text),
    /** What the composer held when a switch of chats began. */
    mark: () => ({ chatId: ctx.chat.id, text: composer.value, edits }),
    /**
     * New chat, at the click: the open chat keeps its words and the composer is emptied at once,
     * so what is typed from here on is for the new chat however long it takes to open.
     */
    handOver() {
      const chat = ctx.chat.mirror;
      clearTimeout(composerDraftTimer);
      if (chat && !chat.preview) setComposerDraft(chat.id, composer.value);
      composer.value = '';
      handing = true;
      buttons(chat);
      return { chatId: ctx.chat.id, text: '', edits, handed: true };
    },
    /** The new chat could not be made: the words typed stay where they are. */
    handBack: () => { handing = false; },
    /** The chat left keeps its words (or the words typed during the switch go to the next). */
    leaving(chat, mark) {
      if (mark?.handed) return;
      clearTimeout(composerDraftTimer);
      const typedMeanwhile = mark && edits !== mark.edits;
      setComposerDraft(chat.id, typedMeanwhile ? mark.text : composer.value);
    },
    /**
     * The chat on screen now: its words, unless the composer's are for it — typed while it
     * opened, or written with no chat open (they have nowhere else to go; after a reload that
     * is every word typed before the chat that was open arrives). Those stay, after the draft
     * it kept: neither is lost.
     */
    arrived(chat, mark) {
      handing = false;
      const typed = composer.value;
      const forThisChat = mark && (mark.handed || edits !== mark.edits || (mark.chatId === null && typed.trim() !== ''));
      const kept = composerDraftOf(chat.id);
      localStorage.removeItem(NEW_COMPOSER_DRAFT_KEY); // its words, if any, are this chat's now
      if (!forThisChat) {
        composer.value = kept;
        return;
      }
      composer.value = joinedWords(kept, typed);
      saveComposerDraft();
    },
    fresh() {
      composer.value = localStorage.getItem(NEW_COMPOSER_DRAFT_KEY) ?? '';
    },
  };

  ctx.store.perform('send_message', deliver);
  ctx.store.perform('restore_held', restore);
  ctx.store.watch(showHeld);

  $('composer-form').addEventListener('submit', (event) => {
    event.preventDefault();
    send();
  });
  composer.addEventListener('keydown', (event) => {
    if (prompts.open && event.key === 'Escape') return prompts.close();
    if (prompts.open && event.key === 'Enter') {
      event.preventDefault();
      return $('prompt-list').querySelector('button')?.click();
    }
    if (attachments.onKeydown(event, composer)) return undefined;
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
    return undefined;
  });
  composer.addEventListener('input', () => {
    markdown.preload(); // an answer will need it (on a first visit, not before its words)
    ctx.engine.loadModule().catch(() => {});
    edits += 1;
    attachments.onInput(composer);
    prompts.onInput();
    saveComposerDraft();
    buttons(ctx.chat.mirror);
  });
  composer.addEventListener('paste', (event) => {
    const images = [...(event.clipboardData?.files ?? [])].filter((f) => f.type.startsWith('image/'));
    if (!images.length) return;
    event.preventDefault();
    attachments.addFiles(images);
  });
  $('composer-form').addEventListener('dragover', (event) => event.preventDefault());
  $('composer-form').addEventListener('drop', (event) => {
    event.preventDefault();
    attachments.addFiles([...(event.dataTransfer?.files ?? [])]);
  });
  $('attach-image').addEventListener('click', () => $('image-file').click());
  $('image-file').addEventListener('change', () => {
    attachments.addFiles([...$('image-file').files]);
    $('image-file').value = '';
  });
  $('attach-resource').addEventListener('click', () => {
    const proxy = ctx.workspace.proxy();
    if (!$('resource-list').hidden) $('resource-list').hidden = true;
    else if (proxy) mcp.pickResource($('resource-list'), proxy, (resource) => attachments.addResource(resource), (t, e) => ctx.say(t, e));
  });
  $('stop').addEventListener('click', () => command({ type: 'abort' }));
  addEventListener('pagehide', () => {
    const chat = ctx.chat.mirror;
    if (chat && !chat.preview) setComposerDraft(chat.id, composer.value);
  });
}
