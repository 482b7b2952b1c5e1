// The page's lifecycle as one state machine (issue 34; GUIDE §17): `transition(state, event)`
// returns the next state and the effects to perform — nothing here awaits or touches the DOM.
// The async parts (`page/driver.js`) perform the effects and feed results back as events.
//
// The state, part by part:
//   engine   absent | loading | open | failed       the engine's wasm and its storage
//   provider none | configured                      Settings name something that can answer
//   local    absent | downloading | loading | ready | failed   the model in this browser
//   chat     none | opening | open                   the chat on screen
//   held     null | {message, reason}                a message that waits, shown with Cancel
//   said     null | {text, error}                    the page's one status sentence of its own
//
// Every user action is answered in every state: done now, held and shown as waiting (with
// Cancel), or refused with one sentence and nothing lost. A held message goes out the moment
// what it waits for is there; the sentence saying it waits goes with it.

export const initial = Object.freeze({
  engine: 'absent',
  provider: 'none',
  local: 'absent',
  localProgress: null,
  localError: null,
  usesLocal: false,
  chat: 'none',
  held: null,
  said: null,
});

/** Why a message cannot go now, or null when it can. */
export function blocker(state) {
  if (state.engine === 'failed') return { refuse: 'The app could not start, so nothing can be sent. Reload the page; if it happens again, your browser may block WebAssembly.' };
  if (state.provider === 'none' && !state.usesLocal) {
    return { refuse: 'Nothing can answer yet: connect a provider, or try the small model in this browser (the buttons above). Your message stays here.' };
  }
  if (state.usesLocal && state.local === 'failed') {
    return { refuse: `The model in this browser could not start${state.localError ? ` (${state.localError})` : ''}. Try it again, or connect a provider; your message stays here.` };
  }
  if (state.engine !== 'open') return { hold: 'engine' };
  if (state.usesLocal && state.local !== 'ready') return { hold: 'local' };
  if (state.chat === 'opening') return { hold: 'chat' };
  return null;
}

/** The sentence a held message shows, from what it waits for. */
export function heldSentence(state) {
  if (!state.held) return '';
  switch (blocker(state)?.hold) {
    case 'engine': return 'Your message waits for the app to finish loading; it sends by itself.';
    case 'local': {
      const p = state.localProgress;
      const done = p?.total ? ` (${Math.floor((100 * p.loaded) / p.total)}%)` : '';
      return state.local === 'loading'
        ? 'Your message sends when the model in this browser has loaded.'
        : `Your message sends when the model in this browser is ready: downloading${done}.`;
    }
    case 'chat': return 'Your message sends once the chat has opened.';
    default: return '';
  }
}

const handlers = {
  /** Settings as stored at start or after Save: what can answer. */
  settings(state, { configured, usesLocal }) {
    return { state: { ...state, provider: configured ? 'configured' : 'none', usesLocal }, effects: release(state, { provider: configured ? 'configured' : 'none', usesLocal }) };
  },
  engine_loading: (state) => ({ state: { ...state, engine: 'loading' }, effects: [] }),
  engine_open: (state) => ({ state: { ...state, engine: 'open' }, effects: release(state, { engine: 'open' }) }),
  engine_failed(state, { error }) {
    const next = { ...state, engine: 'failed' };
    return { state: { ...next, held: null, said: state.held ? { text: blocker(next).refuse, error: true } : { text: `The app could not start: ${error}`, error: true } }, effects: state.held ? [{ effect: 'restore_held', message: state.held.message }] : [] };
  },
  local_download: (state, { progress }) => ({ state: { ...state, local: 'downloading', localProgress: progress ?? state.localProgress, localError: null }, effects: [] }),
  local_loading: (state) => ({ state: { ...state, local: 'loading' }, effects: [] }),
  local_ready: (state) => ({ state: { ...state, local: 'ready', localProgress: null, localError: null }, effects: release(state, { local: 'ready' }) }),
  local_failed(state, { error }) {
    const next = { ...state, local: 'failed', localError: error, localProgress: null };
    if (!state.held || !state.usesLocal) return { state: next, effects: [] };
    return { state: { ...next, held: null, said: { text: blocker(next).refuse, error: true } }, effects: [{ effect: 'restore_held', message: state.held.message }] };
  },
  local_absent: (state) => ({ state: { ...state, local: 'absent', localProgress: null }, effects: [] }),
  chat_opening: (state) => ({ state: { ...state, chat: 'opening' }, effects: [] }),
  chat_open: (state) => ({ state: { ...state, chat: 'open' }, effects: release(state, { chat: 'open' }) }),
  chat_closed: (state) => ({ state: { ...state, chat: 'none' }, effects: [] }),

  /** The user pressed Send with `message` ({text, attachments, context_files, priority}). */
  send(state, { message }) {
    const why = blocker(state);
    if (why?.refuse) return { state: { ...state, said: { text: why.refuse, error: true } }, effects: [{ effect: 'restore_held', message }] };
    if (state.held) {
      // One message waits at a time: the new words join it (nothing is lost or reordered).
      const joined = { ...state.held.message, text: `${state.held.message.text}\n\n${message.text}`.trim(), attachments: [...(state.held.message.attachments ?? []), ...(message.attachments ?? [])] };
      return { state: { ...state, held: { ...state.held, message: joined } }, effects: why?.hold === 'engine' ? [{ effect: 'load_engine' }] : [] };
    }
    if (why?.hold) {
      const effects = why.hold === 'engine' ? [{ effect: 'load_engine' }] : [];
      return { state: { ...state, said: null, held: { message } }, effects };
    }
    return { state: { ...state, said: null }, effects: [{ effect: 'send_message', message }] };
  },
  /** Cancel on a held message: it goes back to the composer, unsent. */
  cancel_held(state) {
    if (!state.held) return { state, effects: [] };
    return { state: { ...state, held: null }, effects: [{ effect: 'restore_held', message: state.held.message }] };
  },
  say: (state, { text, error = false }) => ({ state: { ...state, said: text ? { text, error } : null }, effects: [] }),
};

/** A held message goes when nothing blocks it any more (after `change` is applied). */
function release(state, change) {
  if (!state.held) return [];
  const next = { ...state, ...change };
  return blocker(next) ? [] : [{ effect: 'send_message', message: state.held.message, released: true }];
}

/** The one transition function: state × event → {state, effects}. An unknown event changes nothing. */
export function transition(state, event) {
  const handler = handlers[event.type];
  if (!handler) return { state, effects: [] };
  const result = handler(state, event);
  // A released message has gone: it is no longer held.
  if (result.effects.some((e) => e.effect === 'send_message' && e.released)) result.state = { ...result.state, held: null };
  return result;
}
