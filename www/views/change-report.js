// What a turn changed in the workspace (issue 39), as `palaver serve` recorded it: under the turn's
// tools, each file with the lines added and removed (new, deleted and binary files marked), the
// rest counted past a cap, with Restore files / Restore conversation / Both, and "Revert one file"
// for a turn that changed several; each file's diff a click away (Show the changes); and each
// write's own numbers in its row, a button that opens that call's diff.
import { el, button } from '../elements.js';

/** Files named in a report before the rest is counted. */
const SHOWN = 12;

/** `+3 −1`, `new, +3`, `deleted`, `binary`. */
export function stat(change) {
  if (change.added === null || change.added === undefined) return 'binary';
  if (!change.before) return `new, +${change.added}`;
  if (!change.after) return 'deleted';
  return `+${change.added} −${change.removed}`;
}

/** A write's numbers for its row (the last change the call made to its file), opening its diff. */
export function statNode(changes) {
  if (!changes?.length) return null;
  const last = changes.at(-1);
  return diffButton('change-stat', `${stat(last)}`, { ...last, before: changes[0].before }, `Show the diff of ${last.path}`);
}

/** A button that opens (and closes) the diff of `change` below it (`chat/change-diff.js`). */
function diffButton(testid, label, change, title) {
  return button(testid, label, 'show-diff', {
    class: 'change-stat', title, 'aria-expanded': 'false',
    'data-path': change.path, 'data-before': change.before ?? '', 'data-after': change.after ?? '',
  });
}

/**
 * The report under a turn: every file its calls changed, once, with the lines from before the
 * turn's first change of it to after its last. `byCall`: call id → that call's changes.
 */
export function reportNode(calls, byCall) {
  const files = new Map();
  for (const call of calls) {
    for (const change of byCall?.get(call.id) ?? []) {
      const seen = files.get(change.path);
      // The turn's first call that changed the file: reverting it goes back to before that.
      files.set(change.path, seen ? { ...change, before: seen.before, added: sum(seen.added, change.added), removed: sum(seen.removed, change.removed), first: seen.first } : { ...change, first: call.id });
    }
  }
  if (!files.size) return null;
  const list = [...files.values()];
  const named = list.slice(0, SHOWN).map((c) => `${c.path} ${stat(c)}`).join(', ');
  const rest = list.length > SHOWN ? ` and ${list.length - SHOWN} more` : '';
  // Turning back to before this turn: its files, its conversation, or both.
  const first = calls.find((call) => byCall?.get(call.id)?.length)?.id;
  const data = { 'data-call-id': first };
  return el('div', { class: 'change-report-row' },
    el('p', { class: 'change-report', testid: 'change-report', text: `Changed ${list.length} file${list.length === 1 ? '' : 's'}: ${named}${rest}.` }),
    el('span', { class: 'turn-back', role: 'group', 'aria-label': 'Turn back to before this turn' },
      button('restore-turn-files', 'Restore files', 'restore-turn-files', data),
      button('restore-turn-chat', 'Restore conversation', 'restore-turn-chat', data),
      button('restore-turn-both', 'Both', 'restore-turn-both', data)),
    el('details', { class: 'change-diffs', testid: 'change-diffs' }, el('summary', { text: 'Show the changes' }),
      el('ul', {}, ...list.map((c) => el('li', {}, diffButton('show-diff', `${c.path} ${stat(c)}`, c, `Show the diff of ${c.path}`))))),
    list.length > 1 ? el('details', { class: 'revert-files', testid: 'revert-files' }, el('summary', { text: 'Revert one file' }),
      ...list.map((c) => button('revert-file', `Revert ${c.path}`, 'revert-file', { 'data-call-id': c.first, 'data-path': c.path }))) : '');
}

const sum = (a, b) => (a === null || a === undefined || b === null || b === undefined ? null : a + b);
