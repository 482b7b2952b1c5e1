// The page's DOM helpers: `$` by id, the one Trusted Types policy (the only HTML the page writes
// is the safe Markdown renderer's, SECURITY C5/C19), the scripts the page may start, and the
// status line.
import * as markdown from '../markdown.js';
import * as statusView from '../views/status.js';

export const $ = (id) => document.getElementById(id);

/** The only scripts the page starts: the offline cache and the model worker. */
const SCRIPTS = ['sw.js', 'local/worker.js'];
const policy = globalThis.trustedTypes?.createPolicy('palaver', {
  createHTML: (text) => markdown.html(text),
  createScriptURL: (url) => {
    if (!SCRIPTS.includes(url)) throw new TypeError(`no script URL but ${SCRIPTS.join(' and ')}: ${url}`);
    return url;
  },
});

/** Model text as safe HTML (through the policy). */
export const html = (text) => (policy ? policy.createHTML(text) : markdown.html(text));
/** One of `SCRIPTS` as a script URL. */
export const scriptUrl = (url) => (policy ? policy.createScriptURL(url) : url);

/**
 * A one-off sentence of the page's own in the status line: it stays (a chat's re-render does not
 * wipe it) until the chat has something to say, the user sends, or another chat opens.
 */
export function say(text, error = false, { leadsError = false } = {}) {
  statusView.say($('status'), text, error);
  $('status').dataset.page = text ? 'true' : '';
  statusView.lead($('status'), leadsError ? text : '');
}
