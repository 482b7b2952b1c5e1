// The page's wiring: plain ES modules, no framework (the build bundles them into pkg/app.js, the
// file the page runs). Each concern is a module that
// installs itself on one shared context (`ctx`) — the page's lifecycle (`page/lifecycle.js`, one
// transition function, through `page/store.js`), the engine, the workspace, the model in this
// browser, sync, the chat list and the open chat, the composer, what is done in the transcript
// and with a chat, Settings — and calls the others through it. The page renders the engine's events
// and sends it commands; what it shows about a chat comes from the engine.
import * as keys from './keys.js';
import * as settingsStore from './settings.js';
import * as markdown from './markdown.js';
import { createStore } from './page/store.js';
import { $, say, scriptUrl } from './page/dom.js';
import * as engine from './page/engine.js';
import * as limits from './page/limits.js';
import * as workspace from './page/workspace.js';
import * as local from './page/local.js';
import * as sync from './page/sync.js';
import * as list from './chat/list.js';
import * as messageSearch from './chat/message-search.js';
import * as open from './chat/open.js';
import * as empty from './chat/empty.js';
import * as composer from './chat/composer.js';
import * as transcript from './chat/transcript.js';
import * as actions from './chat/actions.js';
import * as restoreFiles from './chat/restore-files.js';
import * as changeDiff from './chat/change-diff.js';
import * as settingsDialog from './settings/dialog.js';

const ctx = { store: createStore(), say: (text, error, how) => say(text, error, how) };
for (const module of [workspace, engine, limits, local, sync, list, messageSearch, open, empty, composer, transcript, actions, restoreFiles, changeDiff, settingsDialog]) module.install(ctx);

// The lifecycle's own sentence (a refusal, why a message waits) in the status line; gone with its cause.
let said = null;
ctx.store.watch((state) => {
  if (state.said === said) return;
  const left = said;
  said = state.said;
  if (said) say(said.text, said.error);
  else if (left && $('status').textContent.startsWith(left.text)) say('');
});

/** Once the engine is open: the list, sync, the workspace's copies, the chat that was open. */
ctx.afterEngineOpen = async (palaver) => {
  palaver.onChatsChanged((change) => ctx.chats.changed(change));
  palaver.onWorkspaceCopy((chatId, state) => {
    if (chatId === ctx.chat.id) ctx.workspace.showCopy(state);
  });
  await ctx.chats.load();
  await ctx.sync.start(palaver);
  const last = ctx.chat.last();
  if (last && ctx.chats.ids().includes(last) && !ctx.chat.id) ctx.chat.open(last).catch(() => {});
  else ctx.empty.show();
  ctx.workspace.offerRestore().catch(() => {});
  checkStorage(palaver);
  offerOffline();
};

/** B17/B18: storage nearly full, or the browser dropped our data since the last visit. */
async function checkStorage(palaver) {
  const storage = await palaver.storageStatus().catch(() => null);
  if (storage?.data_lost) say('The browser deleted this site\'s stored chats since your last visit. Import an export file to restore them.', true);
  else if (storage?.near_quota) say(`Storage is ${Math.round((100 * storage.usage) / storage.quota)}% full: export chats you want to keep, then delete them here.`, true);
  else if (storage?.tabs_note) say(storage.tabs_note);
}

/**
 * The offline cache. A page no worker serves yet stores it after an answer ends in this tab (or a
 * minute after the engine opened): the worker's ~70 requests stay out of the way while a person
 * waits for the first words (issue 41). A page a worker serves checks for an update at once.
 */
function offerOffline() {
  if (navigator.serviceWorker?.controller) return registerServiceWorker();
  let registered = false;
  const register = () => {
    if (registered) return;
    registered = true;
    clearTimeout(timer);
    registerServiceWorker();
  };
  const timer = setTimeout(register, 60_000);
  ctx.answerEnded = register;
}

function registerServiceWorker() {
  if (!('serviceWorker' in navigator) || location.protocol === 'chrome-extension:') return;
  // The list of files is checked on every update (pkg/shell.js), never from the HTTP cache.
  navigator.serviceWorker.register(scriptUrl('sw.js'), { updateViaCache: 'none' }).catch((error) => console.warn('offline cache unavailable:', error.message));
  // Said once the worker holds the app's files (it is active only after they are all stored).
  navigator.serviceWorker.ready.then(() => { $('offline-ready').hidden = false; });
}

/**
 * `#token=T` from `palaver serve`'s printed address pairs the page; a provider fragment from a
 * link is only a proposal for Settings (SECURITY E1). Returns whether the pairing changed.
 */
function applyFragment() {
  const { provider, token } = settingsStore.takeFragment(location, history);
  if (provider && Object.keys(provider).length) {
    ctx.settings.propose(provider);
    say('A link proposes provider settings: open Settings to review them. Nothing changes until you save.');
  }
  if (!token) return false;
  const settings = settingsStore.loadSettings();
  settingsStore.saveSettings({ ...settings, proxy_url: location.origin, proxy_token: token });
  return true;
}

/** What the keyboard shortcuts do, through the page's own controls. */
const shortcutActions = {
  stop: () => !$('stop').hidden && ($('stop').click(), true),
  focusComposer: () => ($('composer').focus(), true),
  editLast: () => {
    const edit = [...document.querySelectorAll('[data-testid=message][data-role=user] [data-action=edit]')].pop();
    return Boolean(edit) && (edit.click(), true);
  },
  newChat: () => (ctx.chat.create().then(() => $('composer').focus()).catch(() => {}), true),
  moveChat: (step) => {
    const items = [...document.querySelectorAll('[data-testid=chat-item]')];
    if (!items.length) return false;
    const at = items.findIndex((b) => b.getAttribute('aria-current') === 'true');
    const next = items[Math.min(items.length - 1, Math.max(0, (at < 0 ? (step > 0 ? -1 : items.length) : at) + step))];
    if (!next || next.dataset.chatId === ctx.chat.id) return false;
    ctx.chat.open(next.dataset.chatId).then(() => document.querySelector(`[data-testid=chat-item][data-chat-id="${CSS.escape(next.dataset.chatId)}"]`)?.focus());
    return true;
  },
  openSettings: () => (ctx.settings.open(), true),
  closeDrawer: () => {
    if (!document.body.classList.contains('show-chats')) return false;
    document.body.classList.remove('show-chats');
    $('show-chats').setAttribute('aria-expanded', 'false');
    return true;
  },
};

function wire() {
  keys.bindTheme($('theme'));
  keys.bindShortcuts(shortcutActions, $('shortcuts'));
  $('show-shortcuts').addEventListener('click', () => $('shortcuts').showModal());
  $('close-shortcuts').addEventListener('click', () => $('shortcuts').close());
  $('show-chats').addEventListener('click', () => {
    const shown = document.body.classList.toggle('show-chats');
    $('show-chats').setAttribute('aria-expanded', String(shown));
  });
  // The narrow layout's chat drawer closes on a pick, a click beside it, or Esc.
  $('chat-list').addEventListener('click', shortcutActions.closeDrawer);
  $('chat').addEventListener('click', (event) => { if (!event.target.closest('#show-chats')) shortcutActions.closeDrawer(); });
  $('settings').addEventListener('click', shortcutActions.closeDrawer);
  $('new-chat').addEventListener('click', () => ctx.chat.create().then(() => $('composer').focus()).catch((error) => say(String(error?.message ?? error), true)));
  // A settings link opened in a tab that already shows the app arrives as a hash change.
  addEventListener('hashchange', () => {
    if (applyFragment()) ctx.engine.configure().catch((error) => say(String(error?.message ?? error), true));
  });
}

async function main() {
  wire();
  applyFragment();
  const settings = settingsStore.loadSettings();
  ctx.store.dispatch({ type: 'settings', configured: settingsStore.isConfigured(settings), usesLocal: settingsStore.activeProvider(settings).kind === 'local' });
  ctx.composer.fresh();
  ctx.local.check();
  if (await ctx.engine.neededAtStart()) {
    // The chat that was open is drawn as soon as the engine is: its renderer loads meanwhile.
    if (ctx.chat.last()) markdown.load();
    await ctx.engine.ensure();
  } else {
    // A first visit: nothing stored, nothing to sync. Drawn without the engine, whose wasm is
    // fetched at the first key or pointer press and opened on first use; the renderer's is
    // fetched once the first answer's words are drawn.
    markdown.defer();
    ctx.chats.render();
    ctx.empty.show();
    await ctx.workspace.read([]);
    for (const type of ['pointerdown', 'keydown']) {
      addEventListener(type, () => ctx.engine.loadModule().catch(() => {}), { once: true, capture: true });
    }
    // Another tab stored the first chat: this one opens its engine and lists it.
    addEventListener('storage', (event) => {
      if (event.key === engine.HAS_DATA_KEY && !ctx.engine.palaver) ctx.engine.ensure().catch(() => {});
    });
  }
  performance.mark('palaver-interactive');
}

// For the bench page and the storage assertions of the security tests (never to wait on).
globalThis.palaverApp = { engine: () => ctx.engine.ensure(), localModel: () => ctx.local.model(), wasmMemory: () => ctx.engine.memoryBytes() };
main().catch((error) => say(String(error?.message ?? error), true));
