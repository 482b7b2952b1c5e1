// Sync between devices through a CouchDB database (issue 21): the replication's status as the
// engine's host reports it (`Palaver.onSync`), in Settings and in the sidebar. Nothing here
// decides anything; the words say what the state means and what to do about an error.
import { el } from '../view.js';

const STATES = {
  off: 'Sync is off.',
  connecting: 'Connecting to the sync database…',
  pushing: 'Sending this browser\'s changes…',
  pulling: 'Receiving changes from other devices…',
  live: 'In sync; listening for changes.',
  retrying: 'Sync failed; trying again',
  offline: 'Offline: changes are kept here and sent when the connection is back.',
  stopped: 'Sync stopped',
};

const REMEDY = {
  unauthorized: 'Check the name and password in Settings → Sync.',
  forbidden: 'This user may not use that database: ask its admin, or pick another database.',
  not_couch_db: 'Check the URL: it should be the CouchDB server (e.g. https://host:6984), not a web page.',
  no_database: 'Create the database on the server, or give a user allowed to create it.',
};

/** The status line: state, counts, the error and its remedy. */
export function describe(status) {
  if (!status) return STATES.off;
  let text = STATES[status.state] ?? status.state;
  if (status.state === 'retrying' && status.retry_at) {
    const seconds = Math.max(0, Math.round((status.retry_at - Date.now()) / 1000));
    text += ` in ${seconds} s`;
  }
  if (status.error) text += `: ${status.error.message}.`;
  const remedy = status.error && REMEDY[status.error.code];
  if (remedy) text += ` ${remedy}`;
  if (status.state !== 'off' && (status.pushed || status.pulled)) text += ` (${status.pushed} sent, ${status.pulled} received this session)`;
  return text;
}

export function render(node, status) {
  node.dataset.state = status?.state ?? 'off';
  node.replaceChildren(el('span', { text: describe(status) }));
  node.hidden = false;
}
