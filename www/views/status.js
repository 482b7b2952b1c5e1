// The status line: a sentence about the open chat's runtime (a failed turn with its remedy, a
// retry under way, a save not done yet, compaction), or any one-off message of the page.
// `render(node, runtime, note)` draws the chat's status; `say(node, text, error)` any other.

/** What each error class means for the user, and what fixes it (SECURITY D24's taxonomy). */
const ERROR_SENTENCES = {
  auth: 'The provider refused the API key. Check the key (and the base URL) in Settings.',
  quota: 'The provider says the account is out of credit or over its limit. Check billing with the provider.',
  rate_limited: 'The provider is limiting how fast requests may come. Wait a minute, then Retry.',
  overloaded: 'The provider is overloaded right now. Retry in a moment, or pick another model.',
  network: 'The provider could not be reached. Check the connection and the base URL, then Retry.',
  request_too_large: 'The conversation is too long for this model\'s context window. Start a new chat, remove long messages, or pick a model with a larger window.',
  bad_request: 'The provider refused the request as invalid. The model name or a setting may be wrong; check Settings.',
  server_error: 'The provider failed on its side. Retry in a moment.',
  malformed: 'The provider sent a stream Palaver could not read. Retry; if it happens again, the server is not compatible.',
  truncated: 'The answer stopped before the provider finished it. Retry to get it whole.',
  idle_timeout: 'The provider stopped sending in the middle of the answer. Retry.',
  first_byte_timeout: 'The provider did not start answering in time. Retry, or check the server.',
};
const RETRY_CAUSE = {
  overloaded: 'The provider is overloaded', rate_limited: 'The provider is rate-limiting', server_error: 'The provider failed',
  network: 'The provider could not be reached', truncated: 'The answer was cut off', idle_timeout: 'The provider went silent',
  first_byte_timeout: 'The provider did not answer in time',
};

/** A failed turn: what happened and what to do, then the provider's words. */
export function errorSentence(error) {
  const sentence = ERROR_SENTENCES[error.class] ?? 'The turn failed.';
  return error.message ? `${sentence} (The provider said: ${error.message})` : sentence;
}

export function say(node, text, error = false) {
  node.textContent = text;
  node.className = error ? 'error' : '';
}

/** The chat's status from its runtime; `note` is said when nothing else is (e.g. a follower tab). */
export function render(node, runtime, note = '') {
  if (runtime.error) say(node, errorSentence(runtime.error), true);
  else if (runtime.retry) say(node, `${RETRY_CAUSE[runtime.retry.class] ?? 'The request failed'}; trying again (attempt ${runtime.retry.attempt} of ${runtime.retry.max_attempts})…`);
  else if (runtime.storage_error) say(node, `Not saved yet: ${runtime.storage_error}`, true);
  else if (runtime.is_compressing) say(node, 'Compressing the context…');
  else say(node, note);
}

/** The status line has no controls. */
export function bind() {}
