// What an answer proposes (issue 40): a model without tools writes edit blocks (a file, then
// SEARCH / REPLACE) and fenced shell commands. Under the answer, each block is shown as the change
// it makes (the lines it removes and adds) with Apply and Skip, and each command as a chip with
// Run. The engine reads the blocks (`Engine.editBlocks`, the same reader it applies them with),
// performs what the person clicked through palaver serve and keeps the result on the answer
// (`proposal_results`), which is what is shown here.
import { el, button } from '../elements.js';

let reader = null;

/** The engine's reader of edit blocks, once its wasm is loaded. */
export function setReader(read) {
  reader = read;
}

/** Whether blocks can be read yet (a message drawn before the wasm is drawn again after). */
export const ready = () => reader !== null;

/** Cheap look before the reader runs: an answer without a marker or a shell fence has nothing. */
const MAYBE = /<{5,9} ?SEARCH|```(sh|bash|shell|zsh|console)\b|~~~(sh|bash|shell|zsh|console)\b/;

/** The proposals of an answer (`null`: none): blocks and commands with their results. */
export function proposalsNode(message, text) {
  if (!reader || !MAYBE.test(text)) return null;
  let found;
  try {
    found = reader(text);
  } catch {
    return null;
  }
  if (!found.blocks.length && !found.shell_commands.length) return null;
  const results = Array.isArray(message.proposal_results) ? message.proposal_results : [];
  const resultOf = (kind, index) => results.find((r) => r.kind === kind && r.index === index);
  return el('section', { class: 'proposals', testid: 'proposals', 'aria-label': 'Proposed changes' },
    ...found.blocks.map((block, i) => blockNode(block, i, resultOf('edit', i))),
    ...found.shell_commands.map((command, i) => commandNode(command, i, resultOf('shell', i))));
}

function blockNode(block, index, result) {
  const path = block.path || '(no file named)';
  const lines = [
    ...(block.search ? splitLines(block.search).map((l) => ['del', `-${l}`]) : []),
    ...splitLines(block.replace).map((l) => ['add', `+${l}`]),
  ];
  const applied = result?.status === 'passed';
  const data = { 'data-index': String(index) };
  const apply = button('apply-edit-block', result?.status === 'failed' ? 'Try again' : 'Apply', 'apply-edit-block', data);
  const skip = button('skip-edit-block', 'Skip', 'skip-edit-block', data);
  apply.disabled = applied || !block.complete;
  skip.disabled = applied || result?.status === 'skipped';
  return el('div', { class: `edit-block ${result?.status ?? 'proposed'}`, testid: 'edit-block', ...data },
    el('p', { class: 'edit-block-head' },
      el('strong', { text: `Edit ${index + 1} · ${path}` }),
      el('span', { class: 'edit-block-kind', text: block.search ? ' — replaces lines' : ' — a new file' })),
    el('pre', { class: 'diff', tabIndex: 0, 'aria-label': `Proposed change to ${path}` },
      ...lines.map(([kind, line]) => el('span', { class: kind, text: `${line}\n` }))),
    el('p', { class: 'edit-block-status', testid: 'edit-block-status', role: 'status', text: statusText(block, result) }),
    el('span', { class: 'edit-block-actions', role: 'group', 'aria-label': `Edit ${index + 1}` }, apply, skip, restoreButton(result)));
}

function commandNode(command, index, result) {
  const data = { 'data-index': String(index) };
  return el('div', { class: `suggested-command ${result?.status ?? 'proposed'}`, testid: 'suggested-command', ...data },
    el('code', { text: command }),
    button('run-suggested-command', result ? 'Run again' : 'Run', 'run-suggested-command', { ...data, title: `Run “${command}” in the workspace` }),
    restoreButton(result),
    result ? el('pre', { class: 'command-output', testid: 'command-output', text: `${result.status === 'passed' ? 'Ran' : 'Failed'}${result.detail ? `:\n${result.detail}` : '.'}` }) : '');
}

/** Turning back an applied block or a command that ran (palaver serve recorded what it changed under its call). */
function restoreButton(result) {
  if (result?.status !== 'passed' || !result.call_id) return '';
  return button('restore-files', 'Restore files to before this', 'restore-files', { 'data-call-id': result.call_id });
}

/** One sentence for a block: proposed, applied, skipped, or why it failed. */
export function statusText(block, result) {
  if (result?.status === 'passed') return `Applied to ${block.path}.`;
  if (result?.status === 'skipped') return 'Skipped: the model is told.';
  if (result?.status === 'failed') return `Not applied: ${result.detail || 'it failed'}`;
  if (!block.complete) return 'Cut off before its end: it cannot be applied.';
  return 'Proposed: nothing is written until you apply it.';
}

const splitLines = (text) => text.replace(/\n$/, '').split('\n');
