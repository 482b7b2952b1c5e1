// The transcript, built from a ChatMirror. Model text goes through `html(markdown)` (the engine's
// safe renderer behind the page's one Trusted Types policy); everything else — user text, tool
// arguments and results (SECURITY C9), errors — is set as text. Message nodes are cached by id and
// version, so a frame during streaming touches only the draft. A long chat is drawn a window at a
// time (`SIZE` messages in the DOM at most, see `range`): at its end unless a person
// went back, with earlier and later messages and a jump to the first and the last at its edges.

import * as notes from './views/notes.js';
import * as changeReport from './views/change-report.js';
import * as proposals from './views/proposals.js';
import { el, button, textOf, placeInOrder } from './elements.js';
import { count, moment } from './format.js';

/** Messages in the DOM at most, and how far one step at an edge moves the window. */
export const SIZE = 60;
/** Messages made whole beyond the drawn ones, either side. */
const MARGIN = 60;
export const STEP = 30;

export { el, button, textOf } from './elements.js';

export class TranscriptView {
  constructor(root, html) {
    this.root = root;
    /** What `palaver serve` recorded of the open chat's writes: call id → its changes. */
    this.changes = new Map();
    /** The tools blocks a person opened (by their first call's id). */
    this.openTurns = new Set();
    this.html = html;
    this.cache = new Map(); // key → node
    this.turns = new Map(); // a turn's first call id → its tools block and report
    /** The first message drawn, or null: the window follows the chat's end. */
    this.from = null;
    this.draftNode = null;
    this.phaseNode = el('div', { class: 'phase', testid: 'turn-phase' });
    this.tail = el('div', { class: 'tail' });
  }

  reset() {
    this.cache.clear();
    this.turns.clear();
    this.changes = new Map();
    this.openTurns = new Set();
    this.from = null;
    this.draftNode = null;
    this.stream = null;
    this.tail.replaceChildren(this.phaseNode); // the last chat's draft must not show in the next
    this.root.replaceChildren();
  }

  /** The renderer arrived: model text drawn as plain text is drawn again, the draft's too. */
  redrawText() {
    this.cache.clear();
    if (!this.draftNode) return;
    this.draftNode.querySelector('.settled').replaceChildren();
    Object.assign(this.stream, { rendered: 0, length: -1 });
  }

  /** Draws what changed; where the pane is scrolled is the caller's (it knows what the person did). */
  render(chat) {
    // The tool rows read the subagents' statuses too (an interrupted spawn_agent call).
    const subagents = JSON.stringify(chat.runtime.subagents?.map((s) => s.status) ?? []);
    if (chat.dirty.messages || (chat.dirty.runtime && subagents !== this.subagentsSeen)) this.renderMessages(chat);
    this.subagentsSeen = subagents;
    if (chat.dirty.draft || chat.dirty.messages || chat.dirty.runtime) this.renderLive(chat);
  }

  /** The messages drawn: `[from, to)` of the chat's, `SIZE` at most. */
  range(count) {
    const last = Math.max(0, count - SIZE);
    if (this.from !== null && this.from >= last) this.from = null; // back at the end: follow it
    const from = this.from === null ? last : Math.max(0, this.from);
    return { from, to: Math.min(count, from + SIZE) };
  }

  /** Moves the window: `from` a message index, or null for the end. */
  moveTo(from) {
    this.from = from === null ? null : Math.max(0, from);
  }

  get atEnd() {
    return this.from === null;
  }

  /** Moves the window by `by` messages, keeping the message a person looks at where it was. */
  shift(chat, by) {
    const anchor = this.anchor();
    this.moveTo(this.range(chat.messages.length).from + by);
    this.renderMessages(chat);
    this.restore(anchor);
  }

  /** The first message in sight and how far below the pane's top it is. */
  anchor() {
    const top = this.root.getBoundingClientRect().top;
    const node = [...this.root.querySelectorAll('[data-testid=message]')].find((n) => n.getBoundingClientRect().bottom > top);
    return node ? { id: node.dataset.messageId, offset: node.getBoundingClientRect().top - top } : null;
  }

  restore(anchor) {
    const node = anchor && [...this.root.querySelectorAll('[data-testid=message]')].find((n) => n.dataset.messageId === anchor.id);
    if (node) this.root.scrollTop += node.getBoundingClientRect().top - this.root.getBoundingClientRect().top - anchor.offset;
  }

  renderMessages(chat) {
    this.chat = chat;
    const messages = chat.messages;
    const { from, to } = this.range(messages.length);
    // Those drawn whole, and a margin either side (a call's results, a question's files).
    chat.fill?.(from - MARGIN, Math.min(messages.length, to + MARGIN));
    const nodes = [];
    if (chat.offset > 0) nodes.push(el('p', { class: 'loading-earlier', testid: 'loading-earlier', text: `Loading ${chat.offset} earlier messages…` }));
    else if (from > 0) {
      nodes.push(el('div', { class: 'window-edge' }, button('show-earlier', `Show earlier messages (${from} more)`, 'show-earlier'),
        button('jump-first', 'Jump to the first message', 'jump-first')));
    }
    const results = new Map();
    for (const m of messages) if (m.role === 'tool' && m.tool_call_id) results.set(m.tool_call_id, m);
    const keep = new Map();
    const turnsKept = new Map();
    let turn = null;
    for (let i = from; i < to; i += 1) {
      const message = messages[i];
      if (message.role === 'user') turn = null;
      const node = this.messageNode(chat, message, chat.offset + i, keep);
      if (node) nodes.push(node);
      // Calls a Stop left without a result are not sent again, but a person still sees them.
      const calls = message.role === 'assistant' ? [...(message.tool_calls ?? []), ...(message.incomplete_tool_calls ?? [])] : [];
      if (calls.length) {
        if (!turn) {
          turn = { calls: [], ...this.turnNodes(calls[0].id, turnsKept) };
          nodes.push(turn.node, turn.report);
        }
        turn.calls.push(...calls);
        fillToolActivity(turn.node, turn.calls, results, statusesOf(chat), chat.progress, chat.decisions, this.changes);
        turn.report.replaceChildren(...[changeReport.reportNode(turn.calls, this.changes)].filter(Boolean));
      }
    }
    this.cache = keep;
    this.turns = turnsKept;
    if (to < messages.length) {
      nodes.push(el('div', { class: 'window-edge' }, button('show-later', `Show later messages (${messages.length - to} more)`, 'show-later'),
        button('jump-last', 'Jump to the last message', 'jump-last')));
    } else nodes.push(this.tail);
    // Only what changed moves: the rest keeps its layout, and a person's selection in it.
    placeInOrder(this.root, nodes);
  }

  /** A turn's tools block and the report below it, the same nodes while the turn is drawn. */
  turnNodes(key, kept) {
    const nodes = this.turns.get(key) ?? { node: this.activityNode(key), report: el('div') };
    kept.set(key, nodes);
    return nodes;
  }

  /** A turn's tools block; one a person opened stays open when the transcript is drawn again. */
  activityNode(key) {
    const node = el('details', { class: 'tool-activity', testid: 'tool-activity' });
    node.open = this.openTurns.has(key);
    node.addEventListener('toggle', () => (node.open ? this.openTurns.add(key) : this.openTurns.delete(key)));
    return node;
  }

  /** A message's node, from the cache when its id and version are unchanged. */
  messageNode(chat, message, index, keep) {
    const key = `${message.message_id}#${chat.versions.get(message.message_id) ?? 0}#${index}#${proposals.ready()}`;
    let node = this.cache.get(key);
    if (node === undefined) node = this.buildMessage(message, index);
    keep.set(key, node);
    return node;
  }

  buildMessage(message, index) {
    const role = message.role;
    const base = { class: `message ${role}`, testid: 'message', 'data-role': role, 'data-message-id': message.message_id, 'data-index': String(index) };
    // The role label (and the model of an answer) and the time on hover, beside the text.
    const label = { user: 'You', assistant: message.model ? `Assistant · ${message.model.split('/').pop()}` : 'Assistant', error: 'Error' }[role];
    if (label) base['data-label'] = label;
    if (message.created_at_ms) base.title = moment(message.created_at_ms);
    if (role === 'user' && message.subagent_answers) {
      // The answers of the subagents a wait_agents waited for: the engine's, not the user's words.
      return el('details', { ...base, class: 'message subagent-answers', testid: 'subagent-answers' },
        el('summary', { text: 'Answers of the subagents it waited for' }), el('pre', { text: textOf(message.content) }));
    }
    if (role === 'user') {
      return el('article', base, el('div', { class: 'text', text: textOf(message.content) }),
        notes.attachmentsOf(message, this.filesBefore(index)),
        el('div', { class: 'actions' }, button('copy-message', 'Copy', 'copy-message'), button('edit', 'Edit', 'edit'), button('branch', 'Branch', 'branch'), button('delete-message', 'Delete', 'delete-message')));
    }
    if (role === 'assistant') {
      const text = textOf(message.content);
      if (!text && !message.reasoning_content && !message.stopped) return null;
      const node = this.adoptDraft(message, text, base) ?? el('article', base, reasoningNode(message.reasoning_content), this.markdown(text));
      if (message.model) node.dataset.model = `${message.provider ?? ''}/${message.model}`;
      node.append(...notes.answerMarkers(message));
      const proposed = proposals.proposalsNode(message, text);
      if (proposed) node.append(proposed);
      node.append(el('div', { class: 'actions' }, button('copy-message', 'Copy', 'copy-message'), button('branch', 'Branch', 'branch'), button('delete-message', 'Delete', 'delete-message')));
      return node;
    }
    if (role === 'error') return notes.errorNode(message, base);
    // system, tool (shown in its turn's tool activity), plan (the plan block) show nothing here.
    return notes.noteNode(message, (id) => this.chat?.whole?.(id) ?? this.chat?.messages.find((m) => m.message_id === id));
  }

  /** The workspace files sent with the user message at `index` (its `context_file` messages). */
  filesBefore(index) {
    const messages = this.chat?.messages ?? [];
    const names = [];
    for (let i = index - (this.chat?.offset ?? 0) - 1; i >= 0 && messages[i]?.role === 'context_file'; i -= 1) {
      try {
        for (const file of JSON.parse(textOf(messages[i].content))) names.unshift(file.file_name);
      } catch {
        // not a list of files: nothing to name
      }
    }
    return names;
  }

  /**
   * The finished message takes over the streamed draft's nodes when its text is what streamed:
   * rendering a long answer whole again at its end would be one long task.
   */
  adoptDraft(message, text, base) {
    const node = this.draftNode;
    if (!node || node.dataset.messageId !== message.message_id || this.stream?.length !== text.length) return null;
    this.draftNode = null;
    node.className = base.class;
    delete node.dataset.streaming;
    if (base['data-label']) node.dataset.label = base['data-label'];
    if (base.title) node.title = base.title;
    node.dataset.index = base['data-index'];
    const reasoning = node.querySelector('details.reasoning');
    if (message.reasoning_content) reasoning.dataset.testid = 'reasoning';
    else reasoning.remove();
    return node;
  }

  markdown(text) {
    const node = el('div', { class: 'markdown' });
    node.innerHTML = this.html(text);
    return node;
  }

  /**
   * The streaming draft and the last turn's phase: the only work a streaming frame does. The draft
   * is rendered in two parts: blocks before its last blank line outside a code fence are final and
   * rendered once; only the tail after it is rendered again each frame, so a frame's cost does not
   * grow with the length of the answer. (The finished message is then rendered whole.)
   */
  renderLive(chat) {
    const draft = chat.draft;
    if (draft && (draft.content || draft.reasoning_content)) {
      if (!this.draftNode || this.draftNode.dataset.messageId !== draft.message_id) this.startDraft(draft.message_id);
      const [reasoning, body] = this.draftNode.children;
      reasoning.hidden = !draft.reasoning_content;
      if (reasoning.lastChild.textContent.length !== draft.reasoning_content.length) reasoning.lastChild.textContent = draft.reasoning_content;
      this.renderDraftText(body, draft.content);
      if (this.draftNode.parentNode !== this.tail) this.tail.replaceChildren(this.draftNode, this.phaseNode);
    } else if (this.draftNode) {
      this.draftNode = null;
      this.tail.replaceChildren(this.phaseNode);
    } else if (this.phaseNode.parentNode !== this.tail) {
      this.tail.append(this.phaseNode);
    }
    // The engine's phase (seed 004): thinking → streaming → working (tools) → done.
    const phase = chat.runtime.phase ?? 'done';
    this.phaseNode.dataset.phase = phase;
    this.phaseNode.textContent = phaseText(phase, chat.runtime.prompt_progress);
  }

  startDraft(messageId) {
    this.draftNode = el('article', { class: 'message assistant streaming', testid: 'message', 'data-role': 'assistant', 'data-label': 'Assistant', 'data-streaming': 'true', 'data-message-id': messageId },
      el('details', { class: 'reasoning', hidden: true }, el('summary', { text: 'Reasoning' }), el('div', { class: 'text' })),
      el('div', { class: 'markdown' }, el('div', { class: 'settled' }), el('div', { class: 'live' })));
    this.stream = { scanned: 0, fence: '', cut: 0, rendered: 0, length: -1 };
  }

  renderDraftText(body, text) {
    const stream = this.stream;
    if (text.length === stream.length) return;
    stream.length = text.length;
    advanceCut(stream, text);
    const [settled, tail] = body.children;
    if (stream.cut > stream.rendered) {
      const block = el('div');
      block.innerHTML = this.html(text.slice(stream.rendered, stream.cut));
      settled.append(block);
      stream.rendered = stream.cut;
    }
    tail.innerHTML = this.html(text.slice(stream.rendered));
  }
}

/**
 * The phase in words. A server that says how far it has read the prompt (llama.cpp; a long prompt
 * takes a minute on a slow machine) is shown doing that, not a bare "thinking…".
 */
export function phaseText(phase, progress) {
  if (phase === 'done') return '';
  if (phase === 'thinking' && progress?.total) {
    const percent = Math.floor((progress.processed / progress.total) * 100);
    return `reading the prompt… ${count(progress.processed)} of ${count(progress.total)} tokens (${percent} %)`;
  }
  return `${phase}…`;
}

/** Moves `stream.cut` past the last blank line outside a code fence, scanning only new lines. */
function advanceCut(stream, text) {
  let at = stream.scanned;
  for (let nl = text.indexOf('\n', at); nl >= 0; nl = text.indexOf('\n', at)) {
    const line = text.slice(at, nl);
    const fence = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (!stream.fence) stream.fence = fence[1];
      else if (fence[1][0] === stream.fence[0] && fence[1].length >= stream.fence.length && line.trim() === fence[1]) stream.fence = '';
    } else if (!stream.fence && line.trim() === '') {
      stream.cut = nl + 1;
    }
    at = nl + 1;
  }
  stream.scanned = at;
}

function reasoningNode(reasoning) {
  if (!reasoning) return null;
  return el('details', { class: 'reasoning', testid: 'reasoning' }, el('summary', { text: 'Reasoning' }), el('div', { class: 'text', text: reasoning }));
}

/** The engine's status of each call of the current turn (`runtime.tool_calls`). */
function statusesOf(chat) {
  // A spawn_agent call a reload cut is the engine's `interrupted` subagent (Resume or Cancel).
  const cut = (chat.runtime.subagents ?? []).filter((s) => s.status === 'interrupted').map((s) => [s.tool_call_id, 'interrupted']);
  return new Map([...(chat.runtime.tool_calls ?? []).map((c) => [c.id, c.status]), ...cut]);
}

/** The agent's writes `palaver serve` records, so they can be turned back (issue 39). */
const WRITES = ['write_file', 'edit_file'];

const STATUS_WORDS = {
  pending: 'being written', queued: 'queued', running: 'running', awaiting_approval: 'awaiting approval',
  waiting_host: 'waiting for the page', done: 'done', failed: 'failed', denied: 'denied by your rule',
  rejected: 'rejected', skipped: 'skipped', stopped: 'stopped', interrupted: 'interrupted when the page closed',
};

function fillToolActivity(node, calls, results, statuses, progress = new Map(), decisions = new Map(), changes = new Map()) {
  let live = false;
  const items = calls.map((call) => {
    const result = results.get(call.id);
    // The engine says where a call of the current turn stands; an earlier turn's call has its
    // stored result (or none: it was stopped).
    const engine = statuses.get(call.id);
    const status = engine ?? (result ? (result.tool_failed ? 'failed' : 'done') : 'stopped');
    // A running tool's output, line by line as it comes (run_command); its result replaces it.
    const lines = !result && progress.get(call.id);
    live ||= Boolean(lines?.length);
    return el('li', { testid: 'tool-call', 'data-tool': call.function?.name ?? '', 'data-status': status },
      el('code', { text: call.function?.name ?? '?' }), ' ', el('span', { class: 'args', text: summarizeArgs(call.function?.arguments) }),
      el('span', { class: `status ${status}`, text: ` — ${STATUS_WORDS[status] ?? status}` }),
      decisions.get(call.id)?.source === 'policy' ? el('small', { class: 'decision', testid: 'tool-decision', text: ' (allowed by your tool rule)' }) : null,
      lines?.length ? el('pre', { class: 'progress', testid: 'tool-progress', text: lines.join('\n') }) : null,
      changeReport.statNode(changes.get(call.id)),
      (changes.get(call.id)?.length || (WRITES.includes(call.function?.name) && status === 'done')) ? button('restore-files', 'Restore files to before this', 'restore-files', { 'data-call-id': call.id }) : null,
      result ? resultNode(textOf(result.content)) : null,
      result ? resultImages(result.content) : null);
  });
  if (live) node.open = true;
  const done = items.filter((i) => !['pending', 'queued', 'running', 'awaiting_approval', 'waiting_host', 'interrupted'].includes(i.dataset.status)).length;
  node.replaceChildren(el('summary', { text: `Tools: ${calls.length} call${calls.length === 1 ? '' : 's'} (${done} finished)` }), el('ol', {}, ...items));
}

/** The images a tool returned (an MCP tool's), shown small; a click opens one at full size. */
function resultImages(content) {
  const images = Array.isArray(content) ? content.filter((p) => p?.type === 'image_url' && /^data:image\/(png|jpeg|gif|webp);/.test(p.image_url?.url ?? '')) : [];
  if (!images.length) return null;
  return el('div', { class: 'tool-images' }, ...images.map((p, i) => el('img', {
    src: p.image_url.url, alt: `image ${i + 1} the tool returned`, class: 'tool-image', testid: 'tool-image', tabIndex: 0,
    onclick: (event) => event.currentTarget.classList.toggle('enlarged'),
  })));
}

/** One line for a call's arguments (a JSON text as streamed, or the parsed object). */
/** A tool's output; a long one is folded, its size in the summary. */
function resultNode(text) {
  const pre = el('pre', { class: 'result', testid: 'tool-result', text });
  const lines = text.split('\n').length;
  if (lines <= LONG_RESULT_LINES) return pre;
  return el('details', { class: 'long-result' }, el('summary', { text: `Output: ${count(lines)} lines, ${count(text.length)} characters` }), pre);
}
const LONG_RESULT_LINES = 12;

export function summarizeArgs(raw) {
  try {
    const args = typeof raw === 'string' ? JSON.parse(raw || '{}') : raw ?? {};
    const first = args.path ?? args.command ?? args.query ?? args.url ?? Object.values(args)[0];
    return typeof first === 'string' ? first.slice(0, 120) : JSON.stringify(args).slice(0, 120);
  } catch {
    return String(raw ?? '').slice(0, 120);
  }
}
