// The status line: a sentence about the open chat's runtime (a failed turn with its remedy, a
// retry under way, a save not done yet, compaction), or any one-off message of the page.
// `render(node, runtime, note)` draws the chat's status; `say(node, text, error)` any other.

/** What each error class means for the user, and what fixes it (SECURITY D24's taxonomy). */
const ERROR_SENTENCES = {
  auth: 'The provider refused the API key. Check the key (and the base URL) in Settings.',
  quota: 'The provider says the account is out of credit or over its limit. Check billing with the provider.',
  rate_limited: 'The provider is limiting how fast requests may come. Wait a minute, then Regenerate.',
  overloaded: 'The provider is overloaded right now. Regenerate in a moment, or pick another model.',
  network: 'Palaver could not reach the provider. Check the connection and the base URL, then Regenerate.',
  request_too_large: 'The provider says the conversation is too long for the model\'s window. Remove long messages, or pick a model with a larger window.',
  bad_request: 'The provider refused the request as invalid. The model name or a setting may be wrong; check Settings.',
  server_error: 'The provider failed on its side. Regenerate in a moment.',
  malformed: 'The provider sent a stream Palaver could not read. Regenerate; if it happens again, the server is not compatible.',
  truncated: 'The answer stopped before the provider finished it. Regenerate to get it whole.',
  idle_timeout: 'The provider stopped sending in the middle of the answer. Regenerate.',
  first_byte_timeout: 'The provider did not start answering in time. Regenerate, or check the server.',
  unsupported: 'The model cannot read what was sent (images to a model that reads text only). Remove them, or pick a model that reads images.',
};

/** A short name of what went wrong, for the error's bubble (the code stays in its details). */
export const ERROR_LABELS = {
  auth: 'key refused', quota: 'out of credit', rate_limited: 'rate limited', overloaded: 'overloaded',
  network: 'could not connect', request_too_large: 'too long for the window', bad_request: 'request refused',
  server_error: 'provider failed', malformed: 'unreadable stream', truncated: 'answer cut off',
  idle_timeout: 'provider went silent', first_byte_timeout: 'no answer in time', unsupported: 'not readable by this model',
  other: 'failed',
};
const RETRY_CAUSE = {
  overloaded: 'The provider is overloaded', rate_limited: 'The provider is rate-limiting', server_error: 'The provider failed',
  network: 'The provider could not be reached', truncated: 'The answer was cut off', idle_timeout: 'The provider went silent',
  first_byte_timeout: 'The provider did not answer in time',
};

/**
 * A failed turn: what happened and what to do, and whose words the details are — the app's own
 * checks speak for themselves, the browser's failure to connect is named as the browser's, and
 * only the provider's own words are quoted as the provider's.
 */
export function errorSentence(error) {
  if (error.source === 'app') return error.message || ERROR_SENTENCES[error.class] || 'The turn failed.';
  const sentence = ERROR_SENTENCES[error.class] ?? 'The turn failed.';
  if (!error.message) return sentence;
  if (error.source === 'connection') return `${sentence} (The browser said: ${error.message})`;
  return `${sentence} (The provider said: ${error.message})`;
}

export function say(node, text, error = false) {
  node.textContent = text;
  node.className = error ? 'error' : '';
  delete node.dataset.page;
}

/**
 * A page sentence that explains the error about to show (the window a refusal taught): kept in
 * front of that error's sentence, and gone once the chat has no error any more.
 */
export function lead(node, text) {
  node.dataset.lead = text;
  node.dataset.leadShown = '';
}

/** The chat's status from its runtime; `note` is said when nothing else is (e.g. a follower tab). */
export function render(node, runtime, note = '') {
  const leading = node.dataset.lead ?? '';
  if (!runtime.error && leading && node.dataset.leadShown === 'true') lead(node, '');
  if (runtime.error) {
    say(node, leading ? `${leading} ${errorSentence(runtime.error)}` : errorSentence(runtime.error), true);
    node.dataset.leadShown = leading ? 'true' : '';
  } else if (runtime.retry) say(node, `${RETRY_CAUSE[runtime.retry.class] ?? 'The request failed'}; trying again (attempt ${runtime.retry.attempt} of ${runtime.retry.max_attempts})…`);
  else if (runtime.storage_error) say(node, `Not saved yet: ${runtime.storage_error}`, true);
  else if (runtime.is_compressing) say(node, 'Compressing the context…');
  else if (node.dataset.page !== 'true') say(node, note); // a sentence of the page's stays
}

/** The status line has no controls. */
export function bind() {}
