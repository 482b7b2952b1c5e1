// Settings → Sync: chats replicate both ways with a CouchDB database (Apache CouchDB, Cloudant, or
// any server speaking its replication protocol). Keys and settings are never synced. The password
// is kept like an API key (memory, or the vault when "remember" is ticked), sent only to the
// origin it was given for.
import * as secrets from '../page/secrets.js';
import * as syncView from '../views/sync.js';
import { el, button } from '../view.js';

const q = (view, id) => view.querySelector(`[data-testid=${id}]`);

export default {
  id: 'sync',
  label: 'Sync',
  build(ctx) {
    return el('section', { class: 'settings-section' },
      el('p', { class: 'hint', text: 'Chats replicate both ways with a CouchDB database. Keys and settings are never synced. The server must allow this page\'s origin (CORS).' }),
      el('label', {}, 'Server URL ', el('input', { testid: 'sync-url', type: 'url', placeholder: 'https://couch.example.com:6984' })),
      el('label', {}, 'Database ', el('input', { testid: 'sync-database', placeholder: 'palaver-chats', autocomplete: 'off' })),
      el('label', {}, 'Name ', el('input', { testid: 'sync-username', autocomplete: 'off' })),
      el('label', {}, 'Password ', el('input', { testid: 'sync-password', type: 'password', autocomplete: 'off' })),
      el('label', { class: 'inline' }, el('input', { type: 'checkbox', testid: 'remember-sync' }), ' Remember the password on this device (encrypted like the API keys)'),
      el('p', { class: 'inline-actions' }, button('sync-now', 'Sync now', 'sync-now', { onclick: () => ctx.engine.palaver?.syncNow() }), ' ',
        el('span', { testid: 'sync-settings-status', class: 'sync-status', role: 'status' })));
  },
  fill(settings, view, ctx) {
    q(view, 'sync-url').value = settings.sync?.url ?? '';
    q(view, 'sync-database').value = settings.sync?.database ?? '';
    q(view, 'sync-username').value = settings.sync?.username ?? '';
    q(view, 'sync-password').value = '';
    q(view, 'sync-password').placeholder = secrets.keyFor('sync', settings.sync?.url ?? '') ? 'kept (type to change)' : '';
    q(view, 'remember-sync').checked = Boolean(settings.sync?.remember);
    syncView.render(q(view, 'sync-settings-status'), ctx.engine.palaver?.syncStatus());
  },
  collect(settings, view) {
    const sync = { url: q(view, 'sync-url').value.trim(), database: q(view, 'sync-database').value.trim(), username: q(view, 'sync-username').value.trim(), remember: q(view, 'remember-sync').checked };
    const password = q(view, 'sync-password').value;
    if (password) secrets.set('sync', password, sync.url);
    q(view, 'sync-password').value = '';
    return { ...settings, sync };
  },
  refresh(view, ctx) {
    syncView.render(q(view, 'sync-settings-status'), ctx.engine.palaver?.syncStatus());
  },
};
