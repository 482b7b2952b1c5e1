// The chat on screen: opening one (its stored last screen first for a long chat, then the
// engine's snapshot and events in `seq` order), the render loop (at most once per animation
// frame), the header (title, the model that answered, the window) and the controls the engine's
// runtime offers (cards, queue, gauge, Send/Queue/Stop, status). Selections run one after another,
// so quick clicks never interleave; the page's lifecycle knows a chat is opening.
import { ChatMirror } from '../mirror.js';
import { TranscriptView, SIZE, STEP } from '../view.js';
import * as markdown from '../markdown.js';
import * as cards from '../cards/registry.js';
import * as queueView from '../views/queue.js';
import * as contextView from '../views/context.js';
import * as statusView from '../views/status.js';
import * as mcp from '../mcp.js';
import { $, html } from '../page/dom.js';
import { count } from '../format.js';

const OPEN_CHAT_KEY = 'palaver.open_chat';
const scrollKey = (chatId) => `palaver.scroll.${chatId}`;
/** The keys that scroll a pane. */
const SCROLL_KEYS = new Set(['ArrowUp', 'ArrowDown', 'PageUp', 'PageDown', 'Home', 'End', ' ']);
/** Messages drawn from storage before the engine has a chat: about two screens. */
const PREVIEW = 40;
/** A chat's last messages the page holds whole; earlier ones come light (without their texts)
 * and are made whole as they are drawn: a 5 000-message chat held whole was most of the JS heap. */
const WHOLE = 300;

export function install(ctx) {
  const view = new TranscriptView($('transcript'), html);
  const current = { mirror: null, subscription: null, selecting: Promise.resolve(), frame: 0, restoreScroll: NaN, atEnd: true, waitsForRenderer: false };
  markdown.onReady(() => {
    view.redrawText();
    for (const node of $('plan').children) node.cardKey = null; // drawn again, as Markdown
    if (current.mirror) Object.assign(current.mirror.dirty, { messages: true, draft: true, runtime: true });
    schedule();
  });

  const palaver = () => ctx.engine.palaver;

  /** Opens chat `id`; calls run one after another. */
  function open(id, mark = ctx.composer.mark(), fresh = false) {
    ctx.store.dispatch({ type: 'chat_opening' });
    const run = current.selecting.catch(() => {}).then(async () => {
      await ctx.engine.ensure();
      await show(id, mark, fresh);
    });
    current.selecting = run.finally(() => {
      if (current.mirror) ctx.store.dispatch({ type: 'chat_open' });
    });
    return run;
  }

  async function show(id, mark, fresh) {
    current.waitsForRenderer = !fresh; // a new chat has no model text to wait for
    const renderer = fresh ? markdown.preload() : markdown.load();
    if (current.mirror) ctx.say(''); // a sentence about the chat left is not about this one
    leave(mark);
    current.atEnd = true; // a chat opens at its end, unless it remembers where it was read
    // A long chat's last screen straight from storage, drawn while the engine loads the rest.
    const peeking = palaver().tabRole(id).role === 'closed' ? palaver().peekChat(id, PREVIEW).catch(() => null) : null;
    const [peek] = await Promise.all([peeking, renderer]);
    const previewed = peek !== null && peek.message_count > peek.messages.length;
    if (previewed) showPreview(id, peek);
    await palaver().loadChat(id);
    current.mirror = new ChatMirror(id);
    if (!previewed) view.reset();
    localStorage.setItem(OPEN_CHAT_KEY, id);
    current.restoreScroll = Number(localStorage.getItem(scrollKey(id)) ?? NaN); // 'end': NaN
    subscribe();
    ctx.composer.arrived(current.mirror, mark);
    $('chat-actions').hidden = false;
    ctx.workspace.showCopy(palaver().workspaceCopy(id));
    palaver().checkWorkspaceCopy(id).then((state) => current.mirror?.id === id && ctx.workspace.showCopy(state)).catch(() => {});
    ctx.chats.render();
    schedule();
    refreshChanges(id);
    openChildren(id);
  }

  /**
   * A parent's subagent chats are loaded into the engine after it: a child started with
   * `wait: false` that a reload cut is known only from its own chat, and shows in the parent's
   * tree (interrupted, with Resume and Cancel) once it is loaded.
   */
  async function openChildren(id) {
    for (const child of ctx.chats.subagentsOf(id).filter((c) => c.parent_id === id)) {
      if (current.mirror?.id !== id) return;
      await palaver().loadChat(child.id).catch(() => {});
    }
  }

  /** What `palaver serve` recorded of this chat's writes (issue 39), for the reports and rows. */
  async function refreshChanges(id = current.mirror?.id) {
    const found = id ? await ctx.workspace.changes(id).catch(() => null) : null;
    if (!found || current.mirror?.id !== id) return;
    const byCall = new Map();
    for (const change of found.changes ?? []) byCall.set(change.call_id, [...(byCall.get(change.call_id) ?? []), change]);
    // Most chats have no recorded writes: drawing the transcript again for none would be a second
    // full render of a chat just opened (issue 41: a long chat's first usable frame).
    if (byCall.size === 0 && view.changes.size === 0) return;
    view.changes = byCall;
    current.mirror.dirty.messages = true;
    schedule();
  }

  /** The chat left keeps what was typed in it (unless the words were meant for the next one). */
  function leave(mark) {
    if (current.subscription !== null) palaver()?.unsubscribe(current.subscription);
    current.subscription = null;
    if (current.mirror && !current.mirror.preview) ctx.composer.leaving(current.mirror, mark);
  }

  function showPreview(id, peek) {
    current.mirror = ChatMirror.preview(id, peek);
    view.reset();
    cancelAnimationFrame(current.frame);
    current.frame = 0;
    render();
    $('transcript').scrollTop = $('transcript').scrollHeight;
  }

  function subscribe() {
    const chat = current.mirror;
    chat.fetch = (from, to) => palaver()?.messages(chat.id, from, to);
    chat.keepWhole = WHOLE;
    current.subscription = palaver().subscribe(chat.id, (envelope) => {
      if (current.mirror !== chat) return;
      if (!chat.apply(envelope)) {
        // A gap in seq: start again from a snapshot.
        palaver().unsubscribe(current.subscription);
        chat.seq = -1;
        subscribe();
        return;
      }
      if (envelope.type === 'thread_updated' && 'title' in (envelope.patch ?? {})) ctx.chats.render();
      if (envelope.type === 'message_added' && envelope.message?.role === 'tool') refreshChanges(chat.id);
      // A provider refused a prompt and said its window: Settings keep it.
      const usage = chat.runtime?.context_usage;
      if (envelope.type === 'runtime_updated' && usage?.learned) ctx.limits.learned(chat.runtime.model, usage.n_ctx).catch(() => {});
      // Screen readers hear that an answer ended, not every streamed word.
      if (envelope.type === 'stream_finished') $('announce').textContent = envelope.finish_reason === 'abort' ? 'Answer stopped.' : 'Answer complete.';
      if (envelope.type === 'stream_finished') ctx.answerEnded?.(); // a first visit's offline cache waits for it
      schedule();
    }, undefined, WHOLE);
  }

  /** A new chat, opened in the same line as the selections (a send waits for it). */
  async function create() {
    const mark = ctx.composer.handOver();
    try {
      await ctx.engine.ensure();
      const id = await palaver().createChat('');
      await open(id, mark, true);
      return id;
    } catch (error) {
      ctx.composer.handBack();
      throw error;
    }
  }

  /** The open chat is gone (deleted here or on another device). */
  function close(sentence) {
    leave(null);
    current.mirror = null;
    view.reset();
    $('chat-title').textContent = '';
    $('chat-title').title = '';
    $('chat-model').textContent = '';
    $('chat-actions').hidden = true;
    $('to-latest').hidden = true;
    $('workspace-copy').hidden = true;
    for (const id of ['plan', 'queue']) $(id).hidden = true;
    $('cards').replaceChildren();
    contextView.render($('context-usage'), null);
    localStorage.removeItem(OPEN_CHAT_KEY);
    ctx.store.dispatch({ type: 'chat_closed' });
    ctx.empty.show();
    ctx.composer.buttons(null);
    if (sentence) ctx.say(sentence);
  }

  function schedule() {
    if (current.frame) return;
    current.frame = requestAnimationFrame(() => {
      current.frame = 0;
      render();
    });
  }

  function render() {
    const chat = current.mirror;
    if (!chat) return;
    if (current.waitsForRenderer && !markdown.settledLoad()) { // a stored chat: never plain text first
      markdown.load().then(schedule);
      return;
    }
    const transcript = $('transcript');
    // Whether to stay at the end is what the person last did, not the geometry now: a card or the
    // composer growing below shrinks the pane before this frame, which is no reason to stop following.
    const atEnd = current.atEnd && !Number.isFinite(current.restoreScroll);
    const title = chat.thread.title || 'Untitled chat';
    $('chat-title').textContent = title;
    $('chat-title').title = title;
    renderModelLine(chat);
    view.render(chat);
    if (chat.dirty.messages) watchContent();
    if (Number.isFinite(current.restoreScroll) && chat.messages.length) {
      transcript.scrollTop = current.restoreScroll;
      current.restoreScroll = NaN;
      current.atEnd = gapBelow(transcript) < 80;
    }
    if (chat.dirty.messages || chat.dirty.runtime) renderControls(chat);
    else if (chat.dirty.draft) contextView.render($('context-usage'), chat);
    if (chat.dirty.messages) scheduleHighlight();
    if (atEnd || current.follow) {
      transcript.scrollTop = transcript.scrollHeight;
      current.atEnd = true;
    }
    current.follow = false;
    showToLatest();
    chat.dirty = { messages: false, draft: false, runtime: false };
  }

  function renderControls(chat) {
    const runtime = chat.runtime;
    cards.render({ plan: $('plan'), cards: $('cards') }, chat, {
      html,
      toolServer: (name) => mcp.serverOf(ctx.workspace.tools(), name),
      readFile: (path) => ctx.workspace.tool('read_file', { path }),
      readHashOf: (path) => chat.lastReadHash(path),
    });
    queueView.render($('queue'), runtime);
    contextView.render($('context-usage'), chat);
    ctx.composer.buttons(chat);
    const follower = palaver()?.tabRole(chat.id)?.role === 'follower';
    statusView.render($('status'), runtime, follower ? 'This chat is live in another tab; this tab follows it.' : '');
  }

  /** The model the chat asks next and its window, as the engine says (each answer names its own). */
  function renderModelLine(chat) {
    const model = chat.runtime?.model?.model;
    const window = chat.runtime?.context_usage?.n_ctx;
    const name = String(model ?? '').split('/').pop();
    $('chat-model').textContent = name ? `${name}${window ? ` · ${count(window)} tokens` : ''}` : '';
    $('chat-model').title = model ?? '';
  }

  /** Code blocks get their colours when the page is idle (highlight.js loaded then). */
  function scheduleHighlight() {
    if (current.highlighting || !document.querySelector('#transcript pre > code[class^="language-"]:not([data-highlighted])')) return;
    current.highlighting = true;
    const run = () => import('../highlight.js')
      .then((highlight) => highlight.highlightIn($('transcript')))
      .catch(() => {})
      .finally(() => { current.highlighting = false; });
    if (globalThis.requestIdleCallback) requestIdleCallback(run, { timeout: 500 });
    else setTimeout(run, 50);
  }

  function bindScroll() {
    const transcript = $('transcript');
    // A scroll is the person's when they wheel, touch, drag or press a key just before it; the
    // browser scrolls the pane too (clamping, scroll anchoring, a reflow), and that must not read
    // as "they left the end".
    let touched = -Infinity;
    let pressing = false;
    const personActs = () => { touched = performance.now(); };
    for (const type of ['wheel', 'touchmove']) transcript.addEventListener(type, personActs, { passive: true });
    // A press counts while it lasts (dragging the scrollbar), not after: a click on a button
    // in a message is no scroll of the person's.
    transcript.addEventListener('pointerdown', () => { pressing = true; });
    addEventListener('pointerup', () => { pressing = false; });
    document.addEventListener('keydown', (event) => {
      if (SCROLL_KEYS.has(event.key) && !event.target.closest?.('textarea, input, select, [contenteditable]')) personActs();
    });
    transcript.addEventListener('scroll', () => {
      const gap = gapBelow(transcript);
      if (gap < 80) current.atEnd = true;
      else if (pressing || performance.now() - touched < 1000) current.atEnd = false;
      showToLatest();
      if (!current.mirror) return;
      clearTimeout(current.edgeCheck);
      current.edgeCheck = setTimeout(moveAtEdge, 150);
      clearTimeout(current.scrollSave);
      const [id, top] = [current.mirror.id, transcript.scrollTop];
      // A chat read at its end reopens at its end (its messages may draw taller or shorter then).
      current.place = [scrollKey(id), current.atEnd ? 'end' : String(Math.round(top))];
      current.scrollSave = setTimeout(savePlace, 150);
    }, { passive: true });
    // A reload right after a scroll keeps where it was read.
    addEventListener('pagehide', savePlace);
    // The transcript shrinks when something below it grows (a card, the composer), and what it
    // holds grows after it was drawn (a reflow at another width, code coloured late): one that was
    // at its end stays there.
    const stick = () => {
      if (current.atEnd && !Number.isFinite(current.restoreScroll)) transcript.scrollTop = transcript.scrollHeight;
    };
    new ResizeObserver(stick).observe(transcript);
    current.content = new ResizeObserver(stick);
  }

  function savePlace() {
    if (current.place) localStorage.setItem(...current.place);
    current.place = null;
  }

  /** What the transcript holds now is watched for growing (see `bindScroll`). */
  function watchContent() {
    current.content.disconnect();
    for (const node of $('transcript').children) current.content.observe(node);
  }
  bindScroll();

  /** "Latest message" floats over the transcript while the chat's end is out of sight. */
  function showToLatest() {
    const away = Boolean(current.mirror) && !(current.atEnd && view.atEnd);
    if ($('to-latest').hidden === away) $('to-latest').hidden = !away;
  }
  $('to-latest').addEventListener('click', () => ctx.chat.jump('last'));

  /** Scrolling stopped at an edge of the window with more beyond it: the window moves on. */
  function moveAtEdge() {
    const chat = current.mirror;
    const transcript = $('transcript');
    if (!chat || chat.offset > 0) return;
    const { from, to } = view.range(chat.messages.length);
    const gap = gapBelow(transcript);
    if (transcript.scrollTop < 40 && from > 0) view.shift(chat, -STEP);
    else if (gap < 40 && to < chat.messages.length) view.shift(chat, STEP);
    else return;
    current.atEnd = gapBelow(transcript) < 80;
  }

  ctx.chat = {
    get mirror() {
      return current.mirror;
    },
    get id() {
      return current.mirror?.id ?? null;
    },
    get title() {
      return current.mirror?.thread.title ?? '';
    },
    view,
    open,
    create,
    close,
    schedule,
    /** The chat that was open before a reload, a crash or reopening the app. */
    last: () => localStorage.getItem(OPEN_CHAT_KEY),
    /** Your own message was just sent: the view follows it to the end. */
    follow() {
      current.follow = true;
      if (current.mirror && !view.atEnd) {
        view.moveTo(null);
        current.mirror.dirty.messages = true;
      }
      schedule();
    },
    /** To the chat's first message or its last (`which`), drawn at once. */
    jump(which) {
      const chat = current.mirror;
      if (!chat) return;
      view.moveTo(which === 'first' ? 0 : null);
      chat.dirty.messages = true;
      current.restoreScroll = NaN;
      render();
      const transcript = $('transcript');
      transcript.scrollTop = which === 'first' ? 0 : transcript.scrollHeight;
      current.atEnd = which !== 'first';
    },
    /**
     * Shows message `messageId` of the open chat (a search hit): the transcript reaches back to
     * it, scrolls it to the middle and marks it a moment. False when the chat does not hold it.
     */
    reveal(messageId) {
      const chat = current.mirror;
      const index = chat?.messages.findIndex((m) => m.message_id === messageId) ?? -1;
      if (index < 0) return false;
      view.moveTo(index - Math.floor(SIZE / 2));
      chat.dirty.messages = true;
      current.restoreScroll = NaN;
      render();
      const node = [...$('transcript').querySelectorAll('[data-testid=message]')].find((n) => n.dataset.messageId === messageId);
      if (!node) return false;
      node.scrollIntoView({ block: 'center' });
      current.atEnd = gapBelow($('transcript')) < 80;
      node.classList.add('found');
      setTimeout(() => node.classList.remove('found'), 3000);
      return true;
    },
    refreshChanges,
    /** Opening settled (the line of selections is empty). */
    settled: () => current.selecting,
  };
}

/** How far the pane's end is below what it shows, in pixels. */
function gapBelow(pane) {
  return pane.scrollHeight - pane.scrollTop - pane.clientHeight;
}
