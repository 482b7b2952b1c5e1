// The page's copy of one open chat, kept by applying the engine's events (SPEC §3) in order:
// a snapshot replaces everything, message events edit the list, stream deltas grow the draft.
// It is a mirror, never a second source of truth: a gap in `seq` means "ask for a snapshot".

export class ChatMirror {
  constructor(id) {
    this.id = id;
    this.seq = -1;
    this.thread = {};
    this.runtime = { state: 'idle', phase: 'done', offers: ['send'], queued_items: [], pause_reasons: [], tool_calls: [] };
    this.messages = [];
    this.draft = null;
    this.versions = new Map(); // message_id → how often it changed (keys the view's cache)
    this.progress = new Map(); // tool_call_id → output lines of a running tool (never stored)
    this.decisions = new Map(); // tool_call_id → {decision, source} of calls decided by a rule
    this.dirty = { messages: true, draft: true, runtime: true };
    this.preview = false; // see `preview`
    this.offset = 0; // messages before `messages[0]` not held (only in a preview)
    this.fetch = null; // (from, to) → whole messages, for those a snapshot sent light
    this.keepWhole = Infinity; // how many last messages are held whole (with `fetch`)
  }

  /** Applies one event envelope; returns false when a gap in `seq` makes a fresh snapshot necessary. */
  apply(envelope) {
    if (envelope.type === 'snapshot') {
      this.fromSnapshot(envelope);
      return true;
    }
    if (this.seq >= 0 && envelope.seq !== this.seq + 1) return false;
    this.seq = envelope.seq;
    const handler = HANDLERS[envelope.type];
    if (handler) handler(this, envelope);
    return true;
  }

  /** The last stored messages of a chat (`peekChat`), shown while its engine loads it: no
   *  commands, `offset` messages before them not read yet. */
  static preview(id, peek) {
    const chat = new ChatMirror(id);
    chat.preview = true;
    chat.thread = { title: peek.title ?? '' };
    chat.messages = peek.messages;
    chat.offset = Math.max(0, (peek.message_count ?? 0) - peek.messages.length);
    return chat;
  }

  fromSnapshot(snapshot) {
    this.seq = snapshot.seq;
    this.thread = snapshot.thread ?? {};
    this.runtime = snapshot.runtime ?? this.runtime;
    this.messages = snapshot.messages ?? [];
    this.draft = snapshot.draft ?? null;
    this.versions.clear();
    this.dirty = { messages: true, draft: true, runtime: true };
  }

  /**
   * Makes messages `[from, to)` whole where the snapshot sent them light (`light: true`: a long
   * chat's early messages come without their texts, so the page holds its end, not all of it);
   * `fetch(from, to)` is the engine's `messages`.
   */
  fill(from, to) {
    if (!this.fetch) return;
    for (let a = Math.max(0, from); a < to;) {
      while (a < to && !this.messages[a]?.light) a += 1;
      let b = a;
      while (b < to && this.messages[b]?.light) b += 1;
      if (a < b) {
        (this.fetch(a, b) ?? []).forEach((message, k) => {
          if (this.messages[a + k]?.message_id === message.message_id) this.messages[a + k] = message;
        });
      }
      a = b;
    }
  }

  /** The message with `id`, whole. */
  whole(id) {
    const index = this.messages.findIndex((m) => m.message_id === id);
    this.fill(index, index + 1);
    return this.messages[index];
  }

  /** The message an added one pushed out of the last `keepWhole` goes light, as a snapshot
   *  sends it (`fill` makes it whole again when it is drawn): a long session's page held every
   *  text the engine holds, most of its JS heap's growth (issue 41). */
  lightenPast() {
    const at = this.messages.length - this.keepWhole - 1;
    const message = this.messages[at];
    if (this.fetch && message && !message.light) this.messages[at] = light(message);
  }

  bump(messageId) {
    this.versions.set(messageId, (this.versions.get(messageId) ?? 0) + 1);
    this.dirty.messages = true;
  }

  /** A turn is under way: the engine says so (`runtime.busy`); Send, Stop and the rest are `runtime.offers`. */
  get busy() {
    return Boolean(this.runtime.busy);
  }

  /** The hash of `path` when the model last read it whole in this chat (read_file's result). */
  lastReadHash(path) {
    for (let i = this.messages.length - 1; i >= 0; i -= 1) {
      const data = this.messages[i].data;
      if (this.messages[i].role === 'tool' && data?.path === path && data.hash && data.line_start === 1) return data.hash;
    }
    return null;
  }
}

/** A message without its texts, as the engine's snapshot writes one (`LightMessage`): what
 *  finds and places it. */
function light(m) {
  const out = { message_id: m.message_id, role: m.role };
  if (m.tool_calls) out.tool_calls = m.tool_calls.map((c) => ({ id: c.id, function: { name: c.function?.name } }));
  if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if (m.usage !== undefined) out.usage = m.usage;
  if (m.created_at_ms !== undefined) out.created_at_ms = m.created_at_ms;
  out.light = true;
  return out;
}

const DELTA_OPS = {
  append_content: (draft, op) => { draft.content += op.text; },
  append_reasoning: (draft, op) => { draft.reasoning_content += op.text; },
  set_tool_calls: (draft, op) => { draft.tool_calls = op.tool_calls; },
  set_thinking_blocks: (draft, op) => { draft.thinking_blocks = op.blocks; },
  add_citation: (draft, op) => { draft.citations.push(op.citation); },
  add_server_content_block: () => {},
  set_usage: (draft, op) => { draft.usage = op.usage; },
  merge_extra: () => {},
};

/** What a stream event says of the runtime: the phase and the streaming answer's tokens. */
function live(chat, phase, draftTokens) {
  chat.runtime = { ...chat.runtime, phase, context_usage: { ...chat.runtime.context_usage, draft_tokens: draftTokens } };
  chat.dirty.draft = true;
}

function newDraft(messageId) {
  return { message_id: messageId, content: '', reasoning_content: '', tool_calls: [], thinking_blocks: [], citations: [], usage: null };
}

/** Lines of a running tool's output kept for the activity block (its result has them all). */
const PROGRESS_LINES = 200;

const HANDLERS = {
  stream_started(chat, e) {
    chat.draft = newDraft(e.message_id);
    live(chat, 'thinking', 0);
  },
  stream_delta(chat, e) {
    if (!chat.draft || chat.draft.message_id !== e.message_id) chat.draft = newDraft(e.message_id);
    for (const op of e.ops) DELTA_OPS[op.op]?.(chat.draft, op);
    live(chat, e.phase, e.draft_tokens);
  },
  stream_finished(chat) {
    chat.draft = null;
    // Still generating (a retry, the next round) until a `runtime_updated` says otherwise.
    live(chat, 'thinking', 0);
  },
  message_added(chat, e) {
    chat.messages.splice(Math.min(e.index, chat.messages.length), 0, e.message);
    chat.bump(e.message.message_id);
    chat.lightenPast();
  },
  message_updated(chat, e) {
    const index = chat.messages.findIndex((m) => m.message_id === e.message_id);
    if (index >= 0) chat.messages[index] = e.message;
    chat.bump(e.message_id);
  },
  message_removed(chat, e) {
    chat.messages = chat.messages.filter((m) => m.message_id !== e.message_id);
    chat.dirty.messages = true;
  },
  messages_truncated(chat, e) {
    chat.messages.length = Math.min(chat.messages.length, e.from_index);
    chat.dirty.messages = true;
  },
  thread_updated(chat, e) {
    // A null in the patch unsets that key (the engine's ChatMirror does the same).
    const thread = { ...chat.thread, ...e.patch };
    for (const [key, value] of Object.entries(e.patch ?? {})) if (value === null) delete thread[key];
    chat.thread = thread;
    chat.dirty.runtime = true;
  },
  queue_updated(chat, e) {
    chat.runtime = { ...chat.runtime, queue_size: e.queue_size, queued_items: e.queued_items };
    chat.dirty.runtime = true;
  },
  runtime_updated(chat, e) {
    const { type: _t, chat_id: _c, seq: _s, ...runtime } = e;
    // The tools block shows each call's status: drawn again when one changes (approved → running).
    const statuses = (r) => JSON.stringify((r?.tool_calls ?? []).map((c) => [c.id, c.status]));
    if (statuses(runtime) !== statuses(chat.runtime)) chat.dirty.messages = true;
    chat.runtime = { ...runtime, queue_size: chat.runtime.queue_size, queued_items: chat.runtime.queued_items };
    chat.dirty.runtime = true;
    chat.dirty.draft = true; // the turn's phase depends on the state
  },
  pause_required(chat, e) {
    chat.runtime = { ...chat.runtime, pause_reasons: e.reasons };
    chat.dirty.runtime = true;
  },
  tool_decision(chat, e) {
    chat.decisions.set(e.tool_call_id, { decision: e.decision, source: e.source });
    chat.dirty.messages = true;
  },
  tool_progress(chat, e) {
    const lines = chat.progress.get(e.tool_call_id) ?? [];
    lines.push(e.stream === 'stderr' ? `[stderr] ${e.text}` : e.text);
    if (lines.length > PROGRESS_LINES) lines.splice(0, lines.length - PROGRESS_LINES);
    chat.progress.set(e.tool_call_id, lines);
    chat.dirty.messages = true;
  },
  pause_cleared(chat) {
    chat.runtime = { ...chat.runtime, pause_reasons: [] };
    chat.dirty.runtime = true;
  },
};
