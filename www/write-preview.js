// What a write_file or edit_file call would change, shown in its approval card before it runs:
// the file as it is now (read through palaver serve) against what the call would leave, as a
// unified diff with three lines of context (jsdiff, loaded on first use); a new file is all added;
// an edit whose text is no longer in the file says it would fail; and when the file changed since
// the model last read it, the card says so.
const DIFF = new URL('../pkg/vendor/diff/index.js', import.meta.url).href;
const SHOWN_LINES = 400;
let loading = null;
const loadDiff = () => (loading ??= import(DIFF));

/** The tools whose approval shows a diff. */
export const PREVIEWED = new Set(['write_file', 'edit_file']);

/** The file's text after the call, or null when the call would fail on the file as it is. */
export function afterOf(tool, args, before) {
  if (tool === 'write_file') return String(args?.content ?? '');
  const old = String(args?.old_text ?? '');
  if (before === null || !old || before.split(old).length !== 2) return null;
  return before.replace(old, () => String(args?.new_text ?? ''));
}

/**
 * Fills `node` with the diff of the call (`tool`, `args`): `read(path)` answers like a workspace tool
 * call of read_file; `readHash` is the hash of the file when the model last read it, if it did.
 */
export async function preview(node, { tool, args, read, readHash, el }) {
  const path = String(args?.path ?? '');
  node.textContent = `Reading ${path}…`;
  try {
    const current = await read(path);
    const exists = !current.is_error;
    const before = exists ? String(current.content ?? '') : tool === 'write_file' ? '' : null;
    const after = afterOf(tool, args, before);
    if (after === null) {
      node.textContent = exists ? `The text to replace is not once in ${path} as it is now: this edit would fail.` : `${path} cannot be read: this edit would fail.`;
      return;
    }
    const changedSince = exists && readHash && current.data?.hash && readHash !== current.data.hash;
    const [summary, diff] = await diffNodes(el, path, before ?? '', after, exists ? path : `${path} (a new file)`);
    node.replaceChildren(summary,
      changedSince ? el('p', { class: 'error', testid: 'changed-since-read', text: `${path} changed since the model read it: what it writes may undo those changes.` }) : '',
      diff);
  } catch (error) {
    node.textContent = `The change to ${path} cannot be shown (${error?.message ?? error}); its arguments are below.`;
  }
}

/**
 * A summary line (`name: +a −r lines`) and the unified diff of `before` → `after` with three
 * lines of context, added and removed lines marked; long diffs cut at SHOWN_LINES.
 */
export async function diffNodes(el, path, before, after, name = path) {
  const { structuredPatch } = await loadDiff();
  const patch = structuredPatch(path, path, before, after, '', '', { context: 3 });
  const lines = patch.hunks.flatMap((h) => [`@@ -${h.oldStart},${h.oldLines} +${h.newStart},${h.newLines} @@`, ...h.lines]);
  const added = lines.filter((l) => l.startsWith('+')).length;
  const removed = lines.filter((l) => l.startsWith('-')).length;
  return [
    el('p', { class: 'diff-summary', text: `${name}: +${added} −${removed} lines${lines.length ? '' : ' (no change)'}` }),
    el('pre', { class: 'diff', tabIndex: 0, 'aria-label': `Changes to ${path}` },
      ...lines.slice(0, SHOWN_LINES).map((line) => el('span', { class: line.startsWith('+') ? 'add' : line.startsWith('-') ? 'del' : line.startsWith('@@') ? 'hunk' : '', text: `${line}\n` })),
      lines.length > SHOWN_LINES ? el('span', { text: `… ${lines.length - SHOWN_LINES} more lines` }) : ''),
  ];
}
