// The workspace copies of chats (issue 21): `palaver serve` keeps each chat in
// `.palaver/chats/{id}.json`. This shows where the open chat's copy stands, offers the choice when
// the copy changed elsewhere (never overwritten silently), and offers to restore the chats the
// workspace holds that this browser does not (a cleared browser, a new profile, the extension).
import { el, button } from '../view.js';

const SAID = {
  pending: 'Saving to the workspace…',
  current: 'Saved in the workspace (.palaver/chats)',
  conflict: 'The workspace copy of this chat changed elsewhere (another browser?). It was not overwritten.',
};

/** Draws `state` (from `workspaceCopy`) into `node`; `actions` answer a conflict. */
export function renderCopy(node, state, actions) {
  node.hidden = !state || state.state === 'off';
  if (node.hidden) return node.replaceChildren();
  node.dataset.state = state.state;
  const text = state.state === 'failed' ? `Not saved in the workspace: ${state.error}` : SAID[state.state];
  const children = [el('span', { text })];
  if (state.state === 'conflict') {
    children.push(
      button('keep-browser-copy', 'Keep this browser\'s', 'keep-browser-copy', { onclick: actions.keep }),
      button('open-workspace-copy', 'Open the workspace\'s as a new chat', 'open-workspace-copy', { onclick: actions.openTheirs }));
  }
  node.replaceChildren(...children);
}

/** The workspace's chats that are not in this browser (`known`: the ids listed here). */
export async function missingChats(palaver, known) {
  const listing = await palaver.workspaceChats();
  if (!listing.enabled) return [];
  const here = new Set(known);
  return listing.chats.filter((c) => !here.has(c.id));
}

/** Shows the restore offer in `node` for `missing`; `restore()` takes them in. */
export function renderRestoreOffer(node, missing, restore) {
  node.hidden = missing.length === 0;
  if (node.hidden) return node.replaceChildren();
  const n = missing.length;
  node.replaceChildren(
    el('p', { text: `${n} chat${n === 1 ? '' : 's'} saved in this workspace ${n === 1 ? 'is' : 'are'} not in this browser.` }),
    button('restore-workspace-chats', n === 1 ? 'Restore it' : `Restore them`, 'restore-workspace-chats', { onclick: restore }));
}

/** Takes each chat of `missing` into this browser under its own id; a chat already here (another
 *  tab restored it) is skipped, never duplicated. Returns how many came in, and what failed. */
export async function restoreChats(palaver, missing) {
  let restored = 0;
  const failed = [];
  for (const chat of missing) {
    try {
      await palaver.restoreFromWorkspace(chat.id, false);
      restored += 1;
    } catch (error) {
      if (error?.name !== 'AlreadyHere') failed.push(`${chat.id}: ${error?.message ?? error}`);
    }
  }
  return { restored, failed };
}
