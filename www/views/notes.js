// What the transcript says beside the conversation itself, each from the engine's own record:
// a failed turn (its words, who said them, a short label, the code in its details), an answer cut
// by a limit (which one: the answer's, or the window), a fallback to another model, what was
// summarised or left out to fit the model's window (with counts, expandable to the messages), and
// the images and files a message of the user carried.
import { el, button, textOf } from '../elements.js';
import { ERROR_LABELS, errorSentence } from './status.js';
import { count } from '../format.js';

const marker = (name, label) => el('span', { class: `marker ${name}`, testid: `marker-${name}`, text: label });

/** A failed turn's bubble: the sentence the status line says, a label, and Regenerate. */
export function errorNode(message, base) {
  const error = { class: message.class ?? 'other', source: message.source ?? 'provider', message: textOf(message.content) };
  return el('article', { ...base, class: 'message error' },
    el('div', { class: 'text', text: errorSentence(error) }),
    el('span', { class: 'marker error', testid: 'marker-error', text: ERROR_LABELS[error.class] ?? ERROR_LABELS.other, title: `code: ${message.code ?? '?'}` }),
    el('div', { class: 'actions' }, button('retry', 'Regenerate', 'regenerate')));
}

/** The markers of a finished answer: stopped, cut (by what), interrupted, a failed stream. */
export function answerMarkers(message) {
  const marks = [];
  if (message.stopped) marks.push(marker('stopped', 'stopped'));
  if (message.finish_reason === 'length' || message.cut_by) {
    marks.push(message.cut_by === 'window'
      ? marker('length', 'cut: the model\'s window ran out before the answer did — remove earlier messages or raise the window in Settings')
      : marker('length', 'cut at the answer\'s limit — raise "Max output tokens" in Settings, or ask it to continue'));
  }
  if (message.finish_reason === 'interrupted') marks.push(marker('interrupted', 'interrupted — the page closed while this streamed'));
  if (message.stream_error || message.finish_reason === 'stream_error') marks.push(marker('error', 'the stream failed'));
  return marks;
}

/** A note of the engine's (an `event` or a compression report); null when it shows nothing. */
export function noteNode(message, lookup) {
  const subkind = message.event?.subkind;
  if (subkind === 'model_fallback') {
    const { preferred, actual, reason } = message.event.payload ?? {};
    const text = `${preferred?.model || preferred?.provider} failed (${String(reason ?? '').replace(/_/g, ' ')}); answered by ${actual?.model || actual?.provider} (${actual?.provider}) instead.`;
    return el('div', { class: 'note fallback', testid: 'model-fallback', text });
  }
  if (subkind === 'history_limited') {
    const { dropped = [], shortened = [], dropped_count: d = dropped.length, shortened_count: s = shortened.length } = message.event.payload ?? {};
    return details('history-limited', textOf(message.content), [...dropped, ...shortened], lookup, d + s);
  }
  if (message.role === 'compression_report') {
    const summary = lookup(message.compression_report?.summary_message_id ?? message.extra?.compression_report?.summary_message_id);
    const node = el('details', { class: 'note compression', testid: 'compression' },
      el('summary', { text: `${textOf(message.content) || 'Earlier messages were summarised to fit the model\'s window.'} Show the summary` }));
    if (summary) node.append(el('pre', { class: 'summary', text: textOf(summary.content) }));
    return node;
  }
  if (message.role === 'event' && subkind !== 'plan_delta') {
    const text = textOf(message.content);
    return text ? el('div', { class: 'note', testid: 'event', text }) : null;
  }
  return null;
}

/** A note that unfolds to the first words of the messages it names. */
function details(testid, text, ids, lookup, total = ids.length) {
  const items = ids.slice(0, 50).map((id) => lookup(id)).filter(Boolean)
    .map((m) => el('li', { text: `${m.role}: ${textOf(m.content).slice(0, 100) || '(no text)'}` }));
  const more = total - items.length;
  return el('details', { class: 'note', testid },
    el('summary', { text: `${text} Show which` }),
    el('ul', {}, ...items, more > 0 ? el('li', { text: `… and ${count(more)} more` }) : null));
}

/** The images and workspace files a message of the user carried, under its text. */
export function attachmentsOf(message, files) {
  const images = Array.isArray(message.content)
    ? message.content.filter((p) => p?.type === 'image_url' && /^data:image\//.test(p.image_url?.url ?? ''))
    : [];
  if (!images.length && !files.length) return null;
  return el('div', { class: 'sent-attachments', testid: 'sent-attachments' },
    ...images.map((p, i) => el('img', { src: p.image_url.url, alt: `image ${i + 1} sent`, class: 'sent-image', testid: 'sent-image' })),
    ...files.map((name) => el('span', { class: 'chip file', testid: 'sent-file', text: `@${name}` })));
}
