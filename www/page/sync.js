// Sync between devices (issue 21) as the page drives it: started when Settings name a server and
// a database (the password sent only to the origin it was given for), its status in the sidebar
// and in Settings. What is pulled reaches the chat list through `onChatsChanged`.
import * as settingsStore from '../settings.js';
import * as secrets from './secrets.js';
import * as syncView from '../views/sync.js';
import { $ } from './dom.js';

export function install(ctx) {
  let applied = '';

  function show(status) {
    syncView.render($('sync-status'), status);
    $('sync-status').hidden = !status || status.state === 'off';
    ctx.settings?.refresh('sync');
  }

  /** (Re)starts sync when its settings changed. */
  async function apply() {
    const palaver = ctx.engine.palaver;
    if (!palaver) return;
    const sync = settingsStore.loadSettings().sync ?? {};
    const password = secrets.keyFor('sync', sync.url ?? '');
    const key = JSON.stringify([sync.url, sync.database, sync.username, password]);
    if (key === applied) return;
    applied = key;
    if (!sync.url || !sync.database) return show(null);
    if (!password && sync.username) {
      // Nothing is sent without the password: the status says what is missing, not that a
      // password was wrong (issue 37).
      const why = sync.remember
        ? 'the remembered password stays locked until palaver serve runs (or type it in Settings → Sync)'
        : 'it waits for the password: type it in Settings → Sync (it was not remembered on this device)';
      return show({ state: 'stopped', error: { code: 'config', message: why }, pushed: 0, pulled: 0 });
    }
    try {
      await palaver.setSync({ url: sync.url, database: sync.database, username: sync.username ?? '', password });
    } catch (error) {
      show({ state: 'stopped', error: { code: 'config', message: String(error?.message ?? error) }, pushed: 0, pulled: 0 });
    }
    return undefined;
  }

  function start(palaver) {
    palaver.onSync((event) => {
      if (event.type === 'status') show(event.status);
      // A chat deleted on another device while this one added to it is kept (nothing is lost).
      if (event.type === 'changed' && event.kept?.length) {
        const title = (id) => document.querySelector(`[data-testid=chat-item][data-chat-id="${CSS.escape(id)}"]`)?.textContent.trim();
        const titles = event.kept.map((id) => `“${title(id) || id}”`);
        ctx.say(`${titles.join(', ')} was deleted on another device, but this one added to it: kept, on every device.`);
      }
    });
    return apply();
  }

  ctx.sync = { apply, start };
}
