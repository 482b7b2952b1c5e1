// The chat a person uses: plain ES modules, no framework, no bundler. The page only renders the
// engine's events and sends it commands; streams, storage, retries and tools are the engine's and
// its browser host's (`Palaver`, from pkg/). The only HTML the page ever writes is the engine's safe
// Markdown renderer's output, through the one Trusted Types policy below (SECURITY C5, C19).
import * as keys from './keys.js';
import init, { Palaver, Engine } from '../pkg/palaver.js';
import * as markdown from './markdown.js';
import { ChatMirror } from './mirror.js';
import { el, button, TranscriptView, PAGE, textOf as textOfContent } from './view.js';
import * as queueView from './views/queue.js';
import * as contextView from './views/context.js';
import * as statusView from './views/status.js';
import * as chatListView from './views/chat-list.js';
import * as cards from './cards/registry.js';
import * as settingsStore from './settings.js';
import * as agent from './agent.js';
import { Attachments } from './attachments.js';
import { LocalModel } from './local/client.js';
import { DEFAULT_MODEL, SMALL_MODEL_NOTE, DEFAULT_LOCAL_N_CTX } from './local/catalog.js';
import * as localView from './views/local-model.js';
import * as mcp from './mcp.js';
import * as workspaceChats from './views/workspace-chats.js';
import * as syncView from './views/sync.js';

const $ = (id) => document.getElementById(id);

/** The only scripts the page starts: the offline cache and the model worker. */
const SCRIPTS = ['sw.js', 'local/worker.js'];
const policy = globalThis.trustedTypes?.createPolicy('palaver', {
  createHTML: (text) => markdown.html(text),
  createScriptURL: (url) => {
    if (!SCRIPTS.includes(url)) throw new TypeError(`no script URL but ${SCRIPTS.join(' and ')}: ${url}`);
    return url;
  },
});
const html = (text) => (policy ? policy.createHTML(text) : markdown.html(text));

const app = {
  palaver: null,
  chats: [],
  chat: null, // ChatMirror of the open chat
  subscription: null,
  keys: {}, // provider kind → API key, in memory
  keyOrigins: {}, // provider kind → the origin its key was given for (sent nowhere else)
  proposal: null, // provider settings a link proposed, shown in the form until Save or Cancel
  sent: new Map(), // client_request_id → text, so a queued message can be re-sent as "steer now"
  frame: 0,
  counter: 0,
  composerEdits: 0, // input events in the composer: tells typing from a switch's own writes
  selectionsQueued: 0, // chat selections waiting or running (an engine reopen does not restore another chat over them)
  reopening: null, // the engine reopen under way (Save in Settings): selections wait for it
  firstOpen: null, // the engine's first opening under way (on first use, on a first visit)
  atEnd: false, // the transcript is scrolled to its end (it stays there as things below it grow)
  view: null,
};

// --- engine ---

/** The engine's IndexedDB database (its host's `palaver.has_data.{name}` marker says data was saved). */
const DB_NAME = 'palaver';

/**
 * The engine's wasm: three quarters of the app's bytes (issue 20). Fetched and compiled once, when
 * the page first needs it: at the start when there is work for the engine, on a first visit at the
 * first action that needs it (a first key or pointer press fetches it ahead).
 */
const engineModule = { loaded: false, loading: null };
function loadEngineModule() {
  engineModule.loading ??= init().then(() => {
    engineModule.loaded = true;
    $('engine-version').textContent = Engine.version();
  }, (error) => {
    engineModule.loading = null;
    throw error;
  });
  return engineModule.loading;
}

/**
 * Whether this start has work for the engine: chats stored here (or lost since: B18), sync, or
 * chats in the paired workspace to offer. A first visit with none of these is drawn without it.
 */
async function engineNeededAtStart() {
  const settings = settingsStore.loadSettings();
  if (localStorage.getItem(`palaver.has_data.${DB_NAME}`) || settings.sync?.url) return true;
  const databases = await indexedDB.databases?.().catch(() => null);
  if (!databases || databases.some((d) => d.name === DB_NAME)) return true;
  const proxy = agent.proxyOf(settings);
  return proxy ? agent.workspaceHasChats(proxy) : false;
}

/** The open engine; opened now if it is not yet (a first visit opens it on first use). */
async function ensureEngine() {
  if (!app.palaver) await (app.firstOpen ??= openEngine().finally(() => { app.firstOpen = null; }));
  return app.palaver;
}

/** Once per page, when the engine first opens: storage warnings, the offline cache. */
async function engineOpened() {
  await checkStorage();
  await registerServiceWorker();
  // A model in the page in use: its runtime is kept for offline use (an update cleared it).
  if (settingsStore.activeProvider(settingsStore.loadSettings()).kind === 'local') cacheModelRuntime();
}

function engineConfig(settings) {
  const providers = Object.entries(settings.providers)
    .filter(([kind, p]) => settingsStore.PROVIDER_KINDS.includes(kind) && p?.base_url)
    .map(([kind, p]) => ({ kind, base_url: p.base_url, model: p.model ?? '', ...localDefaults(kind), ...settingsStore.modelSettings(p) }));
  return providers.length ? { providers } : {};
}

/** The model in the page gets its window (for the gauge and the history limit) unless one is set. */
function localDefaults(kind) {
  return kind === 'local' ? { n_ctx: DEFAULT_LOCAL_N_CTX } : {};
}

/**
 * What makes the engine an agent: the workspace tools of the paired `palaver serve` and the
 * system prompt (the user's agent prompt, then the workspace's instructions, file list and the
 * date, assembled by the engine). Without a proxy the model gets no workspace tools, and the
 * page says why in one line.
 */
async function agentConfig(settings) {
  const { tools, context } = await readWorkspace(agent.proxyOf(settings), Engine.instructionFiles());
  const prompt = Engine.assembleSystemPrompt(settings.system_prompt?.trim() || null, tools.length ? context : { date: context.date });
  return { workspace_tools: tools, system_prompt: prompt };
}

/**
 * The paired workspace as the page shows it: its tools (or the one line that says why there are
 * none, and how to pair), its files for @-mentions, the instruction files among `instructionFiles`.
 */
async function readWorkspace(proxy, instructionFiles) {
  const [{ tools, problem }, context] = await Promise.all([
    agent.workspaceTools(proxy),
    agent.workspaceContext(proxy, instructionFiles).catch(() => ({ date: new Date().toISOString().slice(0, 10) })),
  ]);
  app.toolsProblem = problem;
  app.tools = tools;
  app.workspaceFiles = context.files ?? [];
  $('tools-status').textContent = problem ?? '';
  $('tools-status').hidden = !problem;
  return { tools, context };
}

async function openEngine() {
  // A chat being opened (New chat, a click in the list) is opened first: the engine reopens
  // on it, not on the chat that was open before (a Save right after New chat lost the new one).
  await app.selecting?.catch(() => {});
  let reopened;
  app.reopening = new Promise((resolve) => { reopened = resolve; });
  try {
    await reopenEngine();
  } finally {
    app.reopening = null;
    reopened();
  }
}

async function reopenEngine() {
  await loadEngineModule();
  const settings = settingsStore.loadSettings();
  const first = !app.palaver;
  if (app.palaver) {
    // Every save acknowledged first: closing drops what arrives later.
    await app.palaver.flush().catch(() => {});
    app.palaver.close();
  }
  const config = { ...engineConfig(settings), ...(await agentConfig(settings)) };
  app.palaver = await Palaver.open(config, DB_NAME, (message) => status(message, true));
  // `local` requests go to the model worker (started on the first one), with the window chosen.
  app.palaver.setLocalTransport((url, init) => localModel().transport(url, init, { n_ctx: localWindow() }));
  for (const [kind, config] of Object.entries(settings.providers)) {
    const origin = settingsStore.originOf(config?.base_url ?? '');
    if (!app.keys[kind] && settings.remember_key) {
      const remembered = await settingsStore.recallKey(kind, origin);
      app.keys[kind] = remembered.key;
      app.keyOrigins[kind] = remembered.origin;
    }
    // A key goes only to the origin it was given for (E1).
    if (keyFor(kind, config?.base_url ?? '')) app.palaver.setProviderKey(kind, app.keys[kind]);
  }
  const proxy = agent.proxyOf(settings);
  if (proxy) app.palaver.setProxy(proxy.url, proxy.token);
  watchMcp(proxy);
  await startSync(settings);
  app.palaver.onWorkspaceCopy((chatId, state) => {
    if (chatId === app.chat?.id) showWorkspaceCopy(state);
  });
  // The chat that was open, also after a reload, a crash or reopening the app.
  const open = app.chat?.id ?? localStorage.getItem(OPEN_CHAT_KEY);
  app.chat = null;
  app.subscription = null;
  await showChats();
  // Not when the user chose a chat meanwhile: that selection runs next, after this reopen.
  if (open && app.chats.some((c) => c.id === open) && app.selectionsQueued === 0) await openChatView(open);
  if (proxy) offerWorkspaceChats().catch(() => {});
  if (first) await engineOpened();
}

/**
 * Sync through CouchDB (issue 21) when Settings → Sync names a server and a database. The
 * password is sent only to the origin it was given for, like an API key.
 */
async function startSync(settings) {
  const sync = settings.sync ?? {};
  app.palaver.onSync((event) => {
    if (event.type === 'status') showSyncStatus(event.status);
    if (event.type === 'changed') syncedChats(event);
  });
  if (!sync.url || !sync.database) return showSyncStatus(null);
  if (!app.keys.sync && sync.remember) {
    const remembered = await settingsStore.recallKey('sync', settingsStore.originOf(sync.url));
    app.keys.sync = remembered.key;
    app.keyOrigins.sync = remembered.origin;
  }
  try {
    await app.palaver.setSync({ url: sync.url, database: sync.database, username: sync.username ?? '', password: keyFor('sync', sync.url) });
  } catch (error) {
    showSyncStatus({ state: 'stopped', error: { code: 'config', message: String(error?.message ?? error) }, pushed: 0, pulled: 0 });
  }
}

function showSyncStatus(status) {
  syncView.render($('sync-settings-status'), status);
  syncView.render($('sync-status'), status);
  $('sync-status').hidden = !status || status.state === 'off';
}

/** Pulled changes arrived: the list shows them; a chat removed elsewhere closes here. */
let syncRefresh = null;
function syncedChats(event) {
  if (app.chat && event.deleted?.includes(app.chat.id)) {
    status('This chat was deleted on another device.');
    if (app.subscription !== null) app.palaver.unsubscribe(app.subscription);
    app.subscription = null;
    app.chat = null;
    app.view.reset();
    $('chat-title').textContent = '';
    $('chat-actions').hidden = true;
  }
  clearTimeout(syncRefresh);
  syncRefresh = setTimeout(() => showChats().catch(() => {}), 100);
}

/** The open chat's workspace copy, and the choice when it changed elsewhere. */
function showWorkspaceCopy(state) {
  const chatId = app.chat?.id;
  workspaceChats.renderCopy($('workspace-copy'), state, {
    keep: async () => showWorkspaceCopy(await app.palaver.keepBrowserCopy(chatId)),
    openTheirs: async () => {
      const id = await app.palaver.restoreFromWorkspace(chatId, true);
      await showChats();
      await selectChat(id);
    },
  });
}

/** Chats the workspace keeps that this browser does not: offered for restoring. */
async function offerWorkspaceChats() {
  const missing = await workspaceChats.missingChats(app.palaver, app.chats.map((c) => c.id));
  workspaceChats.renderRestoreOffer($('workspace-restore'), missing, async () => {
    const { restored, failed } = await workspaceChats.restoreChats(app.palaver, missing);
    $('workspace-restore').hidden = true;
    await showChats();
    status(`Restored ${restored} chat${restored === 1 ? '' : 's'} from the workspace.${failed.length ? ` Not restored: ${failed.join('; ')}` : ''}`, failed.length > 0);
  });
}

const OPEN_CHAT_KEY = 'palaver.open_chat';
const scrollKey = (chatId) => `palaver.scroll.${chatId}`;

/** Sends a command to the open chat, or to `chatId` (a subagent's, from its parent's tree). */
function command(body, chatId = app.chat?.id) {
  // The last screen drawn from storage while the chat loads takes no commands: its engine is
  // not there yet (a command would open the chat empty).
  if (!app.chat || app.chat.preview) return null;
  const id = body.client_request_id ?? `ui-${Date.now()}-${(app.counter += 1)}`;
  try {
    const events = app.palaver.send(chatId, { ...body, client_request_id: id });
    const refused = events?.find?.((e) => e.type === 'ack' && e.accepted === false);
    if (refused) status(`refused: ${refused.reason?.message ?? refused.reason?.kind ?? 'the engine refused this'}`, true);
  } catch (error) {
    status(String(error?.message ?? error), true);
  }
  return id;
}

// --- chat list ---

async function showChats() {
  app.chats = await app.palaver.listChats();
  renderChatList();
  if (!app.chat) showEmptyState();
}

/**
 * With no chat open: how to start. When nothing can answer yet (no provider, no model in the
 * page), the ways to get an answer come first; then how to import chats from elsewhere.
 */
function showEmptyState() {
  const importButton = button('empty-import', 'Import an export file…', 'import', { onclick: () => $('import-file').click() });
  if (!settingsStore.isConfigured(settingsStore.loadSettings())) {
    $('transcript').replaceChildren(firstRunOffer(importButton));
    return;
  }
  const text = app.chats.length
    ? 'Pick a chat on the left, or write below to start a new one.'
    : 'No chats here yet. Write below to start one, or import chats exported from another browser or from the Palaver site (each keeps its own storage).';
  $('transcript').replaceChildren(el('div', { class: 'empty', testid: 'empty-state' }, el('p', { text }), importButton));
}

/** Nothing can answer yet: a small model in this browser, or a provider. */
function firstRunOffer(importButton) {
  const progress = el('div', { class: 'progress', testid: 'first-run-progress', hidden: true });
  const said = el('p', { testid: 'first-run-status', role: 'status' });
  localView.bind(progress, { cancel: () => app.download?.abort() });
  const unavailable = localUnavailable();
  const tryLocal = unavailable ? null : button('try-local', 'Try a small model in this browser (98 MB, offline after the first load)', 'try-local', { onclick: () => tryLocalModel(progress, said) });
  return el('div', { class: 'empty first-run', testid: 'empty-state' },
    el('p', { text: 'Nothing can answer yet. Choose how:' }),
    el('div', { class: 'choices' },
      tryLocal,
      button('connect-provider', 'Connect a provider', 'connect-provider', { onclick: () => openSettingsPanel() })),
    el('p', { class: 'note', testid: 'small-model-note', text: unavailable ?? SMALL_MODEL_NOTE }),
    progress, said,
    agent.proxyOf(settingsStore.loadSettings()) ? null : el('p', { class: 'hint', testid: 'pair-hint',
      text: 'To let it read and change your files: run `palaver serve` in your project and open the address it prints (or paste that address in Settings → Workspace tools).' }),
    el('p', { text: 'Chats from another browser or the extension? Each keeps its own storage: import their export.' }),
    importButton);
}

/** B17/B18: storage nearly full, or the browser dropped our data since the last visit. */
async function checkStorage() {
  const storage = await app.palaver.storageStatus().catch(() => null);
  if (storage?.data_lost) status('The browser deleted this site\'s stored chats since your last visit. Import an export file to restore them.', true);
  else if (storage?.near_quota) status(`Storage is ${Math.round((100 * storage.usage) / storage.quota)}% full: export chats you want to keep, then delete them here.`, true);
  else if (storage?.tabs_note) status(storage.tabs_note);
}

function renderChatList() {
  const openTitle = app.chat?.thread.title;
  chatListView.render($('chat-list'), { chats: app.chats, openId: app.chat?.id, openTitle, query: $('chat-search').value });
}

/** Opens a chat; calls run one after another, so quick clicks never interleave. */
async function selectChat(id) {
  const mark = markComposer();
  // Only when it is not open yet: an open engine keeps the selection in line at once.
  if (!app.palaver) await ensureEngine();
  return queueSelection(() => openChatView(id, mark));
}

/**
 * Runs `open` after the selections before it and after an engine reopen under way (Save in
 * Settings): a chat chosen meanwhile is the one that stays open, not the one the reopen restores.
 */
function queueSelection(open) {
  app.selectionsQueued += 1;
  const before = (app.selecting ?? Promise.resolve()).catch(() => {});
  app.selecting = Promise.all([before, app.reopening]).then(open).finally(() => {
    app.selectionsQueued -= 1;
  });
  return app.selecting;
}

/** What the composer held when a switch of chats began, so text typed during the switch is kept. */
function markComposer() {
  return { chatId: app.chat?.id, text: $('composer').value, edits: app.composerEdits };
}

async function openChatView(id, mark = markComposer()) {
  // The renderer loads beside the reads below (the first time only): the first frame needs it.
  const renderer = markdown.load();
  if (app.subscription !== null) app.palaver.unsubscribe(app.subscription);
  if (app.composerEdits !== mark.edits) {
    // Typed after New chat or a click in the list: the words are meant for the chat being
    // opened; the one left keeps the draft it had.
    saveDraft(mark.chatId, mark.text);
  } else {
    saveComposerDraft();
    $('composer').value = localStorage.getItem(draftKey(id)) ?? '';
  }
  // A long chat's last screen straight from storage (a few records), drawn while the engine
  // loads the rest (issue 20: a first frame that does not wait for the whole chat). Read first:
  // IndexedDB serves requests in order, so a peek behind the whole chat's read would wait for it.
  const peeking = app.palaver.tabRole(id).role === 'closed' ? app.palaver.peekChat(id, PREVIEW).catch(() => null) : null;
  const [peek] = await Promise.all([peeking, renderer]);
  const previewed = peek !== null && peek.message_count > peek.messages.length && showPreview(id, peek);
  await app.palaver.openChat(id);
  app.chat = new ChatMirror(id);
  // The preview's nodes are keyed like the snapshot's: kept, only the earlier ones are built.
  if (!previewed) app.view.reset();
  localStorage.setItem(OPEN_CHAT_KEY, id);
  // The transcript returns to where it was scrolled, once its first frame is drawn.
  app.restoreScroll = Number(localStorage.getItem(scrollKey(id)) ?? NaN);
  $('model-view').open = false;
  $('chat-prompt').open = false;
  subscribe();
  $('chat-actions').hidden = false;
  showWorkspaceCopy(app.palaver.workspaceCopy(id));
  app.palaver.checkWorkspaceCopy(id).then((state) => app.chat?.id === id && showWorkspaceCopy(state)).catch(() => {});
  renderChatList();
  scheduleRender();
}

/** Messages drawn from storage before the engine has a chat: about two screens. */
const PREVIEW = 40;

/** Draws the stored last screen of chat `id`; returns whether it did. */
function showPreview(id, peek) {
  app.chat = ChatMirror.preview(id, peek);
  app.view.reset();
  if (app.frame) cancelAnimationFrame(app.frame);
  app.frame = 0;
  render();
  $('transcript').scrollTop = $('transcript').scrollHeight;
  return true;
}

function subscribe() {
  const chat = app.chat;
  app.subscription = app.palaver.subscribe(chat.id, (envelope) => {
    if (app.chat !== chat) return;
    if (!chat.apply(envelope)) {
      // A gap in seq: start again from a snapshot.
      app.palaver.unsubscribe(app.subscription);
      chat.seq = -1;
      subscribe();
      return;
    }
    if (envelope.type === 'thread_updated' && 'title' in (envelope.patch ?? {})) renderChatList();
    if (envelope.type === 'message_added' && envelope.message?.role === 'user') showChats();
    // Screen readers hear that an answer ended, not every streamed word.
    if (envelope.type === 'stream_finished') $('announce').textContent = envelope.finish_reason === 'abort' ? 'Answer stopped.' : 'Answer complete.';
    // A subagent's chat is stored by its first save: the list shows it once that landed.
    if (envelope.type === 'subagent_spawned' || envelope.type === 'subagent_result') setTimeout(() => showChats().catch(() => {}), 300);
    scheduleRender();
  });
}

/** Creates a chat and opens it, in the same line as `selectChat`, so a send waits for it. */
async function newChat() {
  let id;
  const mark = markComposer();
  // Before the selection line: opening the engine waits for the selections under way.
  if (!app.palaver) await ensureEngine();
  await queueSelection(async () => {
    id = await app.palaver.createChat('');
    await showChats();
    await openChatView(id, mark);
  });
  return id;
}

// --- rendering ---

/** Renders at most once per animation frame, however fast the stream is. */
function scheduleRender() {
  if (app.frame) return;
  app.frame = requestAnimationFrame(() => {
    app.frame = 0;
    render();
  });
}

function render() {
  const chat = app.chat;
  if (!chat) return;
  if (!markdown.settledLoad()) {
    // The renderer comes with the first chat drawn (issue 20): its first frame waits for it.
    markdown.load().then(scheduleRender);
    return;
  }
  // Cards appearing under the transcript make it shorter: one that was at its end stays there.
  const transcript = $('transcript');
  const atEnd = distanceFromEnd(transcript) < 80 && !Number.isFinite(app.restoreScroll);
  $('chat-title').textContent = chat.thread.title || 'Untitled chat';
  renderModelLine(chat);
  app.view.render(chat);
  if (Number.isFinite(app.restoreScroll) && chat.messages.length) {
    $('transcript').scrollTop = app.restoreScroll;
    app.restoreScroll = NaN;
  }
  if (chat.dirty.messages || chat.dirty.runtime) renderControls(chat);
  else if (chat.dirty.draft) contextView.render($('context-usage'), chat);
  if (chat.dirty.messages) scheduleHighlight();
  if (atEnd) transcript.scrollTop = transcript.scrollHeight;
  app.atEnd = distanceFromEnd(transcript) < 80;
  chat.dirty = { messages: false, draft: false, runtime: false };
}

const distanceFromEnd = (node) => node.scrollHeight - node.scrollTop - node.clientHeight;

/** Where cards go: the plan above, the others under the transcript. */
const cardSlots = () => ({ plan: $('plan'), cards: $('cards') });

/**
 * Code blocks get their colours when the page is idle: highlight.js and the grammars a block
 * names are loaded then (never for the first paint, never for a chat without code).
 */
function scheduleHighlight() {
  if (app.highlightPending || !document.querySelector('#transcript pre > code[class^="language-"]:not([data-highlighted])')) return;
  app.highlightPending = true;
  const run = () => import('./highlight.js')
    .then((highlight) => highlight.highlightIn($('transcript')))
    .catch(() => {})
    .finally(() => { app.highlightPending = false; });
  if (globalThis.requestIdleCallback) requestIdleCallback(run, { timeout: 500 });
  else setTimeout(run, 50);
}

function renderControls(chat) {
  const runtime = chat.runtime;
  cards.render(cardSlots(), chat, { html, toolServer: (name) => mcp.serverOf(app.tools, name) });
  queueView.render($('queue'), runtime);
  contextView.render($('context-usage'), chat);
  updateComposerButtons();
  const follower = app.palaver.tabRole(chat.id)?.role === 'follower';
  statusView.render($('status'), runtime, follower ? 'This chat is live in another tab; this tab follows it.' : '');
}

/** The chat header's model line: the model answering this chat and its context window. */
function renderModelLine(chat) {
  const settings = settingsStore.loadSettings();
  const kind = chat.thread.provider || settings.kind;
  const model = chat.thread.model || settings.providers?.[kind]?.model || '';
  const window = chat.runtime?.context_usage?.n_ctx;
  // A local server's model id can be a file path: its last part names it.
  const name = model.split('/').pop();
  $('chat-model').textContent = name ? `${name}${window ? ` · ${window.toLocaleString('en')} tokens of context` : ''}` : '';
  $('chat-model').title = model;
}

/** Send turns into Stop while the chat is busy; with text typed, Send stays to queue it. */
function updateComposerButtons() {
  const busy = app.chat?.busy ?? false;
  $('stop').hidden = !busy;
  $('send').hidden = busy && $('composer').value.trim() === '';
  $('send').textContent = busy ? 'Queue' : 'Send';
}

function status(text, error = false) {
  statusView.say($('status'), text, error);
}

// --- composer ---

const draftKey = (chatId) => `palaver.draft.${chatId ?? 'new'}`;

function saveComposerDraft() {
  saveDraft(app.chat?.id, $('composer').value);
}

function saveDraft(chatId, text) {
  if (text) localStorage.setItem(draftKey(chatId), text);
  else localStorage.removeItem(draftKey(chatId));
}

/** While the engine is (re)opened nothing can be sent to it: it would go to the one closing. */
function engineReady() {
  if (document.body.dataset.ready === 'true') return true;
  status('One moment: the settings are being applied.');
  return false;
}

async function send(event, priority = false) {
  event?.preventDefault();
  try {
    await ensureEngine();
  } catch (error) {
    status(String(error?.message ?? error), true);
    return;
  }
  if (!engineReady()) return;
  // A chat being opened (New chat, a click in the list) is where this message goes.
  await app.selecting?.catch(() => {});
  const text = $('composer').value.trim();
  if (!text && app.attachments.empty) return;
  // Files named with @ are read now; a refusal sends nothing and keeps what was typed.
  let extra;
  try {
    extra = await app.attachments.collect(text);
  } catch (error) {
    status(error.message, true);
    return;
  }
  if (!app.chat) {
    // Cleared before the new chat opens: opening saves the composer as the previous view's
    // draft, and a sent message must never come back as one.
    $('composer').value = '';
    localStorage.removeItem(draftKey(null));
    await newChat();
  }
  applyParams(text);
  const message = { type: 'user_message', content: text, priority };
  if (extra.attachments.length) message.attachments = extra.attachments;
  if (extra.context_files.length) message.context_files = extra.context_files;
  const id = command(message);
  if (id) app.sent.set(id, text);
  app.attachments.clear();
  $('composer').value = '';
  saveComposerDraft();
  updateComposerButtons();
}

function applyParams(firstText) {
  const settings = settingsStore.loadSettings();
  const provider = settingsStore.activeProvider(settings);
  const patch = { provider: provider.kind, tool_policy: settingsStore.toolPolicy(settings, Engine.defaultToolRules(app.tools ?? [])) };
  if (provider.model) patch.model = provider.model;
  // The fallback list of Settings.
  if (settings.fallback_models?.length) patch.fallback_models = settings.fallback_models;
  if (!app.chat.thread.title && firstText) patch.title = firstText.slice(0, 60);
  command({ type: 'set_params', patch });
}

function cancelQueued(item) {
  command({ type: 'cancel_queued', client_request_id: item.client_request_id });
}

/** Steer now: the queued message is taken back and sent with priority, injected at the next safe point. */
function steerNow(item) {
  const text = app.sent.get(item.client_request_id) ?? item.preview;
  if (!text) return;
  cancelQueued(item);
  const id = command({ type: 'user_message', content: text, priority: true });
  if (id) app.sent.set(id, text);
}

// --- transcript actions ---

/** The text of the code block a button of its toolbar belongs to. */
const codeOf = (button) => button.closest('.code')?.querySelector('pre')?.textContent ?? '';

async function onTranscriptClick(event) {
  const target = event.target.closest('button');
  if (!target) return;
  const node = target.closest('[data-message-id]');
  switch (target.dataset.action ?? target.className) {
    case 'copy':
      navigator.clipboard?.writeText(codeOf(target)).catch(() => {});
      target.textContent = 'Copied';
      break;
    case 'copy-message': {
      const message = app.chat?.messages.find((m) => m.message_id === node?.dataset.messageId);
      navigator.clipboard?.writeText(message ? textOfContent(message.content) : '').catch(() => {});
      target.textContent = 'Copied';
      break;
    }
    case 'delete-message':
      if (node?.dataset.messageId) command({ type: 'remove_message', message_id: node.dataset.messageId });
      break;
    case 'insert-code': {
      // The block goes into the composer at the cursor, fenced, for the next message.
      const composer = $('composer');
      const code = codeOf(target);
      const at = composer.selectionStart ?? composer.value.length;
      const block = `\n\`\`\`\n${code.replace(/\n$/, '')}\n\`\`\`\n`;
      composer.value = composer.value.slice(0, at) + block + composer.value.slice(composer.selectionEnd ?? at);
      composer.focus();
      saveComposerDraft();
      updateComposerButtons();
      break;
    }
    case 'wrap-code': {
      const wrapped = target.closest('.code').classList.toggle('wrapped');
      target.setAttribute('aria-pressed', String(wrapped));
      break;
    }
    case 'remote-image':
      loadRemoteImage(target);
      break;
    case 'show-earlier':
      app.view.window += PAGE;
      app.chat.dirty.messages = true;
      scheduleRender();
      break;
    case 'edit':
      editMessage(node);
      break;
    case 'branch':
      await branchFrom(node.dataset.messageId);
      break;
    case 'regenerate':
      command({ type: 'regenerate' });
      break;
    default:
  }
}

/** Edit-and-resend: the history from this message on is replaced by the edited message. */
function editMessage(node) {
  const box = el('textarea', { testid: 'edit-text', value: node.querySelector('.text').textContent });
  const save = button('edit-send', 'Send', 'edit-send', {
    onclick: () => {
      const content = box.value.trim();
      if (!content) return;
      applyParams('');
      command({ type: 'retry_from_index', index: Number(node.dataset.index), content });
    },
  });
  const cancel = button('edit-cancel', 'Cancel', 'edit-cancel', {
    onclick: () => {
      app.chat.bump(node.dataset.messageId); // its node is built again from the message
      scheduleRender();
    },
  });
  node.replaceChildren(el('div', { class: 'edit' }, box, save, cancel));
  box.focus();
}

/** Branch: a new chat holding this chat's messages up to and including `messageId`. */
async function branchFrom(messageId) {
  const source = app.chat;
  const title = `${source.thread.title || 'Untitled chat'} (branch)`;
  const id = await app.palaver.createChat(title);
  await app.palaver.openChat(id);
  const events = app.palaver.send(id, { type: 'branch_from_chat', source_chat_id: source.id, up_to_message_id: messageId });
  const refused = events?.find?.((e) => e.type === 'ack' && e.accepted === false);
  if (refused) return status(`branch refused: ${refused.reason?.message ?? ''}`, true);
  app.palaver.send(id, { type: 'set_params', patch: { title } });
  await showChats();
  await selectChat(id);
}

/** A remote image loads only on the user's click, as a blob (img-src allows no remote origin). */
async function loadRemoteImage(button) {
  const url = button.dataset.src ?? '';
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('not an http(s) image');
    const response = await fetch(parsed, { credentials: 'omit', referrerPolicy: 'no-referrer' });
    const blob = await response.blob();
    if (!response.ok || !blob.type.startsWith('image/')) throw new Error(`not an image (${response.status})`);
    const img = document.createElement('img');
    img.alt = button.querySelector('.alt')?.textContent ?? '';
    img.src = URL.createObjectURL(blob);
    button.replaceWith(img);
  } catch (error) {
    button.textContent = `could not load the image (${error.message}): ${url}`;
  }
}

// --- chat actions ---

async function renameChat() {
  if (!app.chat) return;
  const title = $('chat-title');
  const input = el('input', { testid: 'rename-input', value: app.chat.thread.title ?? '' });
  title.replaceChildren(input);
  input.focus();
  // The title comes back as `thread_updated`, which re-renders the header and the chat list.
  input.addEventListener('keydown', (event) => {
    if (event.key === 'Enter') app.palaver.renameChat(app.chat.id, input.value.trim());
    if (event.key === 'Enter' || event.key === 'Escape') title.textContent = input.value.trim() || app.chat.thread.title || 'Untitled chat';
  });
}

/** The stored chats of a chat's subagents (its children and theirs). */
const subagentChatsOf = (id) => app.chats.filter((c) => c.id !== id && c.link_type === 'subagent' && (c.root_chat_id === id || c.parent_id === id));

/**
 * A chat's export, with its subagents' chats when it has some (issue 18): under `subagents` in
 * JSON, as sections after it in Markdown.
 */
async function exportWithSubagents(id, format) {
  const text = await app.palaver.exportChat(id, format);
  const children = subagentChatsOf(id);
  if (!children.length) return text;
  const parts = await Promise.all(children.map(async (c) => ({ chat: c, text: await app.palaver.exportChat(c.id, format) })));
  if (format === 'markdown') return [text, ...parts.map((p) => `\n\n---\n\n# Subagent: ${p.chat.title || p.chat.id}\n\n${p.text}`)].join('');
  const root = JSON.parse(text);
  if (root === null || typeof root !== 'object' || Array.isArray(root)) return text;
  root.subagents = parts.map((p) => JSON.parse(p.text));
  return JSON.stringify(root, null, 2);
}

async function exportChat(format) {
  if (!app.chat) return;
  const text = await exportWithSubagents(app.chat.id, format);
  const type = format === 'markdown' ? 'text/markdown' : 'application/json';
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([text], { type }));
  link.download = `${(app.chat.thread.title || 'chat').replace(/[^\w.-]+/g, '_').slice(0, 60)}.${format === 'markdown' ? 'md' : 'json'}`;
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
}

async function importChat(file) {
  try {
    const id = await (await ensureEngine()).importChat(await file.text());
    await showChats();
    await selectChat(id);
    status(`Imported ${file.name}`);
  } catch (error) {
    status(`Import failed, nothing changed: ${error?.message ?? error}`, true);
  }
}

/** Deletes at once, keeping an export in memory so "Undo" brings the chat back. */
async function deleteChat() {
  if (!app.chat) return;
  const id = app.chat.id;
  const backup = await app.palaver.exportChat(id, 'refact');
  if (app.subscription !== null) app.palaver.unsubscribe(app.subscription);
  app.subscription = null;
  app.chat = null;
  await app.palaver.deleteChat(id);
  localStorage.removeItem(draftKey(id));
  // A parent's subagent chats are its children: the user says whether they go too.
  const children = subagentChatsOf(id);
  if (children.length && window.confirm(`Delete its ${children.length} subagent chat${children.length === 1 ? '' : 's'} too? (Cancel keeps them.)`)) {
    for (const child of children) await app.palaver.deleteChat(child.id);
  }
  app.view.reset();
  showEmptyState();
  $('chat-title').textContent = '';
  $('chat-actions').hidden = true;
  $('plan').hidden = true;
  $('cards').replaceChildren();
  await showChats();
  const undo = button('undo-delete', 'Undo', 'undo-delete', {
    onclick: async () => {
      const restored = await app.palaver.importChat(backup);
      await showChats();
      await selectChat(restored);
      status('');
    },
  });
  status('Chat deleted. ');
  $('status').append(undo);
}

// --- the user's MCP servers (run by palaver serve) ---

/**
 * Follows palaver serve's MCP changes: when a server's tools change (it started, restarted,
 * or sent tools/list_changed), the engine gets the new list for its next request.
 */
function watchMcp(proxy) {
  app.mcpWatch?.abort();
  app.mcpWatch = null;
  $('attach-resource').hidden = !proxy;
  if (!proxy) return;
  const controller = new AbortController();
  app.mcpWatch = controller;
  let seen = null;
  mcp.watch(proxy, async (event) => {
    const version = event.tools_version;
    if (version === seen) return;
    // The first version (the stream's hello) is fetched too: a server may have changed its
    // tools between the page asking /api/tools and this stream opening (or while it reconnected).
    seen = version;
    const { tools } = await agent.workspaceTools(proxy);
    if (controller.signal.aborted || !app.palaver) return;
    app.tools = tools;
    app.palaver.setWorkspaceTools(tools);
    if ($('settings').open) refreshMcpStatus();
  }, controller.signal);
}

async function refreshMcpStatus() {
  const proxy = agent.proxyOf(settingsStore.loadSettings());
  if (!proxy) {
    $('mcp-status').replaceChildren(el('p', { class: 'hint', text: 'Pair palaver serve to use your MCP servers.' }));
    return;
  }
  try {
    mcp.renderStatus($('mcp-status'), await mcp.status(proxy));
  } catch (error) {
    $('mcp-status').replaceChildren(el('p', { class: 'error', text: `palaver serve did not say how its MCP servers are: ${error.message}` }));
  }
}

// --- the model in the page ---

/**
 * Why the model in the page cannot run here, or null. Chrome's extension pages may not start
 * workers from blob: URLs (manifest v3 refuses that policy), and llama.cpp's wasm build starts its
 * workers that way; a sandboxed extension page has an opaque origin where they fail to load too.
 */
function localUnavailable() {
  if (location.protocol !== 'chrome-extension:') return null;
  return 'The model in the page cannot run inside the extension: Chrome\'s rules for extensions forbid the workers llama.cpp starts. Use it in the app palaver serve (or any static host) serves, or connect a provider here.';
}

function localModel() {
  if (!app.local) app.local = new LocalModel(policy ? policy.createScriptURL('local/worker.js') : 'local/worker.js');
  return app.local;
}

/** The window the page's model is loaded with: the user's, else the default. */
function localWindow() {
  const local = settingsStore.loadSettings().providers?.local ?? {};
  return settingsStore.modelSettings(local).n_ctx ?? DEFAULT_LOCAL_N_CTX;
}

/**
 * Where the default model is served: beside the app (`palaver serve`'s /models/, a static host's
 * models/). The extension has no server of its own: it asks the paired palaver serve.
 */
function defaultModelUrl() {
  if (location.protocol === 'chrome-extension:') {
    const proxy = agent.proxyOf(settingsStore.loadSettings());
    return proxy ? `${proxy.url}/models/${DEFAULT_MODEL.file}` : null;
  }
  return new URL(DEFAULT_MODEL.path, location.href).href;
}

/**
 * Runs one download at a time with its progress (bar, bytes, %) and Cancel in `node`; the model is
 * then loaded once with a window of `n_ctx` tokens to prove it works.
 */
async function download(node, label, start, n_ctx = localWindow()) {
  app.download?.abort();
  const controller = new AbortController();
  app.download = controller;
  localView.renderProgress(node, { loaded: 0, total: 0 }, label);
  try {
    return await start({ signal: controller.signal, n_ctx, onProgress: (progress) => localView.renderProgress(node, progress, label) });
  } finally {
    if (app.download === controller) app.download = null;
    node.hidden = true;
  }
}

/** The default model's id once it is stored, downloading it (sha256 checked) when it is not. */
async function fetchDefaultModel(node) {
  const local = localModel();
  if ((await local.list()).some((m) => m.id === DEFAULT_MODEL.file)) return DEFAULT_MODEL.file;
  const url = defaultModelUrl();
  if (!url) throw new Error('In the extension, pick the .gguf file from disk (Settings → Model in this browser), or pair palaver serve, which serves the default model.');
  const expected = { size: DEFAULT_MODEL.size, sha256: DEFAULT_MODEL.sha256 };
  const stored = await download(node, `Downloading ${DEFAULT_MODEL.label}`, (options) => local.download(url, DEFAULT_MODEL.file, expected, options));
  return stored.id;
}

/**
 * Asks the offline cache to keep llama.cpp's files (loaded only on use), so the model in the page
 * answers offline too; resolves when they are kept (at once without a service worker).
 */
async function cacheModelRuntime() {
  const registration = await navigator.serviceWorker?.getRegistration?.().catch(() => null);
  if (!registration) return;
  // Registered moments ago (the engine's first opening, on a first visit): wait for it to be
  // active, not for ever (the cache is a convenience; the answer does not wait on it).
  const worker = registration.active ?? await Promise.race([
    navigator.serviceWorker.ready.then((r) => r.active),
    new Promise((resolve) => setTimeout(() => resolve(null), 30_000)),
  ]);
  if (!worker) return;
  await new Promise((resolve) => {
    const done = (event) => {
      if (event.data?.type !== 'runtime-cached') return;
      navigator.serviceWorker.removeEventListener('message', done);
      resolve();
    };
    navigator.serviceWorker.addEventListener('message', done);
    worker.postMessage({ type: 'cache-runtime' });
    setTimeout(resolve, 60_000);
  });
}

/** First run: the default model, downloaded once, answers from now on. */
async function tryLocalModel(progress, said) {
  said.textContent = '';
  said.className = '';
  const offer = progress.parentElement?.querySelector('[data-testid=try-local]');
  if (offer) offer.disabled = true; // one download at a time; Cancel is beside the bar
  try {
    const id = await fetchDefaultModel(progress);
    await useLocalModel(id, { n_ctx: DEFAULT_MODEL.n_ctx, max_tokens: DEFAULT_MODEL.max_tokens });
    await cacheModelRuntime();
    if (!app.chat) showEmptyState();
    status(`${DEFAULT_MODEL.label} runs in this browser, offline: write below. ${SMALL_MODEL_NOTE}`);
    $('composer').focus();
  } catch (error) {
    said.textContent = error.message;
    said.className = 'error';
  } finally {
    if (offer) offer.disabled = false;
  }
}

/** Makes the stored model `id` the active provider (defaults in `extra`, the user's settings win). */
async function useLocalModel(id, extra = {}) {
  const settings = settingsStore.loadSettings();
  const current = settings.providers?.local ?? {};
  const kept = Object.fromEntries(settingsStore.MODEL_SETTINGS.filter((k) => k in current).map((k) => [k, current[k]]));
  settingsStore.saveSettings(settingsStore.withProvider(settings, 'local', '', id, { ...extra, ...kept }));
  document.body.dataset.ready = 'false';
  await openEngine();
  document.body.dataset.ready = 'true';
}

function localStatus(text, error = false) {
  $('local-status').textContent = text;
  $('local-status').className = error ? 'error' : '';
}

/** The `local` kind's part of Settings: how it runs, the stored models with sizes, downloads. */
async function refreshLocalPanel() {
  $('local-note').textContent = SMALL_MODEL_NOTE;
  const unavailable = localUnavailable();
  $('local-store').hidden = Boolean(unavailable);
  if (unavailable) {
    $('local-threads').textContent = unavailable;
    return;
  }
  try {
    const local = localModel();
    const [info, models] = await Promise.all([local.info(), local.list()]);
    $('local-threads').textContent = localView.threadsText(info);
    if (!$('provider-model').value && models.length) {
      $('provider-model').value = (models.find((m) => m.id === DEFAULT_MODEL.file) ?? models[0]).id;
    }
    localView.renderModels($('local-models'), models, $('provider-model').value.trim());
    $('model-list').replaceChildren(...models.map((m) => new Option('', m.id)));
    $('local-download-default').hidden = models.some((m) => m.id === DEFAULT_MODEL.file);
  } catch (error) {
    localStatus(error.message, true);
  }
}

/** A download or import from the Settings panel; the model it stores becomes the chosen one. */
async function storeLocalModel(label, start) {
  localStatus('');
  try {
    const stored = await download($('local-progress'), label, start, Number($('provider-n-ctx').value) || localWindow());
    $('provider-model').value = stored.id;
    await cacheModelRuntime();
    localStatus(`${stored.id} is stored in this browser. Save to use it.`);
  } catch (error) {
    localStatus(error.message, true);
  }
  await refreshLocalPanel();
}

function bindLocalPanel() {
  $('local-download-default').addEventListener('click', () => storeLocalModel(`Downloading ${DEFAULT_MODEL.label}`, async (options) => {
    const url = defaultModelUrl();
    if (!url) throw new Error('In the extension, pick the .gguf file from disk, or pair palaver serve, which serves the default model.');
    return localModel().download(url, DEFAULT_MODEL.file, { size: DEFAULT_MODEL.size, sha256: DEFAULT_MODEL.sha256 }, options);
  }));
  $('local-pick').addEventListener('click', () => $('local-file').click());
  $('local-file').addEventListener('change', () => {
    const file = $('local-file').files[0];
    $('local-file').value = '';
    if (file) storeLocalModel(`Storing ${file.name}`, (options) => localModel().importFile(file, options));
  });
  $('local-download-url').addEventListener('click', () => {
    const text = $('local-url').value.trim();
    let url;
    try {
      url = new URL(text);
    } catch {
      localStatus('Give the full address of a .gguf file (https://…/model.gguf).', true);
      return;
    }
    const name = decodeURIComponent(url.pathname.split('/').pop() || 'model.gguf');
    storeLocalModel(`Downloading ${name}`, (options) => localModel().download(url.href, name, {}, options));
  });
  localView.bind($('local-model'), {
    use: (id) => {
      $('provider-model').value = id;
      refreshLocalPanel();
    },
    remove: async (id) => {
      try {
        await localModel().remove(id);
        if ($('provider-model').value === id) $('provider-model').value = '';
        localStatus(`${id} was deleted from this browser.`);
      } catch (error) {
        localStatus(error.message, true);
      }
      await refreshLocalPanel();
    },
    cancel: () => app.download?.abort(),
  });
}

// --- settings ---

/** The key of `kind` if it was given for `baseUrl`'s origin, else '' (SECURITY E1). */
function keyFor(kind, baseUrl) {
  const origin = settingsStore.originOf(baseUrl);
  return app.keys[kind] && origin && app.keyOrigins[kind] === origin ? app.keys[kind] : '';
}

/**
 * Fills the settings form from what is stored each time the panel opens; a link's proposal
 * (`#provider=…`) pre-fills it instead, with a notice, and changes nothing until Save.
 */
function openSettings() {
  const settings = settingsStore.loadSettings();
  const proposal = app.proposal;
  const kind = proposal?.kind ?? settings.kind;
  $('provider-kind').value = kind;
  fillProviderFields(settings, kind, proposal);
  $('proposal-notice').hidden = !proposal;
  if (proposal) {
    const host = settingsStore.originOf($('provider-base-url').value) || 'an address that is not a URL';
    $('proposal-notice').textContent = `A link proposes these ${kind} settings, sending requests to ${host}. Nothing changes until you Save; your key is not sent there unless you type it.`;
  }
  $('remember-key').checked = Boolean(settings.remember_key);
  $('system-prompt').value = settings.system_prompt ?? '';
  $('fallback-models').value = settingsStore.formatFallbackModels(settings.fallback_models);
  $('model-status').textContent = '';
  $('proxy-url').value = settings.proxy_url ? `${settings.proxy_url}/` : '';
  $('sync-url').value = settings.sync?.url ?? '';
  $('sync-database').value = settings.sync?.database ?? '';
  $('sync-username').value = settings.sync?.username ?? '';
  $('sync-password').value = '';
  $('sync-password').placeholder = keyFor('sync', settings.sync?.url ?? '') ? 'kept (type to change)' : '';
  $('remember-sync').checked = Boolean(settings.sync?.remember);
  showSyncStatus(app.palaver?.syncStatus());
  $('proxy-token').value = settings.proxy_token ?? '';
  // What the engine's module knows (its default prompt, the tools' default rules): at once when
  // it is loaded, else when it is (a first visit opening Settings first).
  if (engineModule.loaded) fillEngineDefaults(settings);
  else loadEngineModule().then(() => fillEngineDefaults(settings), (error) => status(String(error?.message ?? error), true));
  refreshMcpStatus();
}

function fillEngineDefaults(settings) {
  $('system-prompt').placeholder = Engine.defaultAgentPrompt();
  const policy = settingsStore.toolPolicy(settings, Engine.defaultToolRules(app.tools ?? []));
  $('tool-policy').replaceChildren(el('legend', { text: 'Tool policy' }), ...Object.keys(policy).map((tool) => el('label', { class: 'inline' },
    el('select', { testid: `policy-${tool}`, 'data-tool': tool }, ...['auto', 'ask', 'deny'].map((rule) => new Option(rule, rule, false, policy[tool] === rule))),
    ` ${tool}`)));
}

/** Opens Settings from a button elsewhere (the first-run offer), as its own summary does. */
function openSettingsPanel() {
  if (!$('settings').open) openSettings();
  $('settings').open = true;
  $('provider-kind').focus();
}

/** The provider fields for `kind`, as configured (each kind keeps its own URL, model and key). */
function fillProviderFields(settings, kind, proposal = null) {
  const config = settings.providers[kind] ?? {};
  const local = kind === 'local';
  for (const node of $('settings-form').querySelectorAll('.remote-only')) node.hidden = local;
  $('local-model').hidden = !local;
  $('provider-n-ctx').placeholder = local ? String(DEFAULT_LOCAL_N_CTX) : 'from the provider, else 128000';
  const fromLink = proposal && (proposal.kind ?? settings.kind) === kind ? proposal : {};
  $('provider-base-url').value = fromLink.base_url ?? config.base_url ?? '';
  $('provider-model').value = fromLink.model ?? config.model ?? '';
  $('provider-n-ctx').value = config.n_ctx ?? '';
  $('provider-max-tokens').value = config.max_tokens ?? '';
  $('provider-temperature').value = config.temperature ?? '';
  $('provider-reasoning').value = config.reasoning_effort ?? '';
  $('provider-thinking').value = config.thinking_budget ?? '';
  $('model-list').replaceChildren();
  app.models = [];
  showKeyFor(kind);
  if (local) refreshLocalPanel();
}

/** The model settings fields, as stored (numbers; '' left out). */
function modelSettingsFields() {
  const number = (id) => ($(id).value === '' ? undefined : Number($(id).value));
  const fields = {
    n_ctx: number('provider-n-ctx'), max_tokens: number('provider-max-tokens'), temperature: number('provider-temperature'),
    reasoning_effort: $('provider-reasoning').value || undefined, thinking_budget: number('provider-thinking'),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined && !Number.isNaN(v)));
}

/** Lists the provider's models into the model field's suggestions; says what is wrong if it fails. */
async function listProviderModels() {
  const kind = $('provider-kind').value;
  const baseUrl = $('provider-base-url').value.trim();
  const key = $('provider-key').value || keyFor(kind, baseUrl);
  $('model-status').textContent = 'Asking the provider…';
  $('model-status').className = '';
  try {
    app.models = await agent.listModels(kind, baseUrl, key);
    $('model-list').replaceChildren(...app.models.map((m) => new Option(m.n_ctx ? `${m.n_ctx.toLocaleString('en')} tokens` : '', m.id)));
    const typed = $('provider-model').value.trim();
    const missing = typed && app.models.length && !app.models.some((m) => m.id === typed);
    $('model-status').textContent = missing
      ? `The connection works, but it does not serve the model ${typed}: pick one of its ${app.models.length} models in the Model field.`
      : app.models.length ? `The connection works: ${app.models.length} models, pick one in the Model field.` : 'The connection works, but the provider lists no models; type a model name.';
    if (missing) $('model-status').className = 'error';
    if (app.models.length && !$('provider-model').value) $('provider-model').value = app.models[0].id;
    fillWindowFromModel();
  } catch (error) {
    app.models = [];
    $('model-list').replaceChildren();
    $('model-status').textContent = error.message;
    $('model-status').className = 'error';
  }
}

/** The context window of the chosen model, when the provider or the built-in table knows it. */
function fillWindowFromModel() {
  const model = $('provider-model').value.trim();
  const known = app.models?.find((m) => m.id === model)?.n_ctx ?? agent.knownWindow(model);
  if (known && (!$('provider-n-ctx').value || $('provider-n-ctx').dataset.auto === 'true')) {
    $('provider-n-ctx').value = known;
    $('provider-n-ctx').dataset.auto = 'true';
  }
}

/** The key field shows a key only for the origin it was given for, and says so otherwise. */
function showKeyFor(kind) {
  const baseUrl = $('provider-base-url').value.trim();
  $('provider-key').value = keyFor(kind, baseUrl);
  const elsewhere = app.keys[kind] && !keyFor(kind, baseUrl);
  $('key-note').hidden = !elsewhere;
  if (elsewhere) {
    const to = settingsStore.originOf(baseUrl) || 'this address';
    $('key-note').textContent = `Your ${kind} key was given for ${app.keyOrigins[kind] || 'another address'}; it is not sent to ${to} unless you type it here.`;
  }
}

async function saveSettingsForm(event) {
  event.preventDefault();
  // Not ready from the first moment: the engine is reopened with the new settings, and what is
  // done meanwhile (a new chat, a message) would go to the engine being closed.
  document.body.dataset.ready = 'false';
  const kind = $('provider-kind').value;
  const pasted = settingsStore.parseProxyUrl($('proxy-url').value);
  const tool_policy = {};
  for (const select of $('tool-policy').querySelectorAll('select')) tool_policy[select.dataset.tool] = select.value;
  const stored = settingsStore.withProvider(settingsStore.loadSettings(), kind, $('provider-base-url').value.trim(), $('provider-model').value.trim(), modelSettingsFields());
  const settings = {
    ...stored,
    system_prompt: $('system-prompt').value.trim(),
    fallback_models: settingsStore.parseFallbackModels($('fallback-models').value),
    remember_key: $('remember-key').checked,
    proxy_url: pasted?.url ?? '',
    proxy_token: $('proxy-token').value.trim() || pasted?.token || '',
    tool_policy,
    sync: { url: $('sync-url').value.trim(), database: $('sync-database').value.trim(), username: $('sync-username').value.trim(), remember: $('remember-sync').checked },
  };
  const syncPassword = $('sync-password').value;
  if (syncPassword) {
    app.keys.sync = syncPassword;
    app.keyOrigins.sync = settingsStore.originOf(settings.sync.url);
  }
  // A typed key is bound to the origin saved with it. An empty field clears a key that was
  // shown (same origin); a key given for another origin stays bound there and is not sent.
  const typed = $('provider-key').value;
  const baseUrl = settingsStore.activeProvider(settings).base_url;
  if (typed) {
    app.keys[kind] = typed;
    app.keyOrigins[kind] = settingsStore.originOf(baseUrl);
  } else if (keyFor(kind, baseUrl)) {
    delete app.keys[kind];
    delete app.keyOrigins[kind];
  }
  app.proposal = null;
  settingsStore.saveSettings(settings);
  for (const known of settingsStore.PROVIDER_KINDS) {
    if (settings.remember_key && app.keys[known]) await settingsStore.rememberKey(known, app.keys[known], app.keyOrigins[known]);
    else await settingsStore.forgetKey(known);
  }
  if (settings.sync.remember && app.keys.sync) await settingsStore.rememberKey('sync', app.keys.sync, app.keyOrigins.sync);
  else await settingsStore.forgetKey('sync');
  $('sync-password').value = '';
  $('provider-key').value = '';
  $('settings').open = false;
  document.body.dataset.ready = 'false';
  await openEngine();
  document.body.dataset.ready = 'true';
}

/** "What the model sees": the chat's last request as sent, the key redacted by the host. */
function showModelView() {
  if (!$('model-view').open || !app.chat) return;
  const request = app.palaver.lastRequest(app.chat.id);
  $('model-view-body').textContent = request
    ? JSON.stringify(request, null, 2)
    : 'No request was sent for this chat since the page opened. Send a message, then look again.';
}

/**
 * A fragment from `palaver serve`'s printed URL pairs the page (`#token=`). A provider fragment
 * from a link is only a proposal: it pre-fills the settings form when the user opens it and is
 * saved only by the user's Save (SECURITY E1: any site can link or redirect here, and a saved
 * base URL would receive the key and the whole conversation). Returns whether settings changed.
 */
function applyFragment() {
  const { provider, token } = settingsStore.takeFragment(location, history);
  if (provider && Object.keys(provider).length) {
    app.proposal = provider;
    status('A link proposes provider settings: open Settings to review them. Nothing changes until you save.');
  }
  if (!token) return false;
  const settings = settingsStore.loadSettings();
  settings.proxy_url = location.origin;
  settings.proxy_token = token;
  settingsStore.saveSettings(settings);
  return true;
}

// --- start ---

function registerServiceWorker() {
  if (!('serviceWorker' in navigator) || location.protocol === 'chrome-extension:') return;
  const url = policy ? policy.createScriptURL('sw.js') : 'sw.js';
  return navigator.serviceWorker.register(url).catch((error) => console.warn('offline cache unavailable:', error.message));
}

/** What the keyboard shortcuts do, through the page's own controls. */
const shortcutActions = {
  stop: () => {
    if ($('stop').hidden) return false;
    $('stop').click();
    return true;
  },
  focusComposer: () => {
    $('composer').focus();
    return true;
  },
  editLast: () => {
    const edit = [...document.querySelectorAll('[data-testid=message][data-role=user] [data-action=edit]')].pop();
    if (!edit) return false;
    edit.click();
    return true;
  },
  newChat: () => {
    newChat().then(() => $('composer').focus()).catch(() => {});
    return true;
  },
  moveChat: (step) => {
    const items = [...document.querySelectorAll('[data-testid=chat-item]')];
    if (!items.length) return false;
    const at = items.findIndex((b) => b.getAttribute('aria-current') === 'true');
    const next = items[Math.min(items.length - 1, Math.max(0, (at < 0 ? (step > 0 ? -1 : items.length) : at) + step))];
    if (!next || next.dataset.chatId === app.chat?.id) return false;
    selectChat(next.dataset.chatId).then(() => document.querySelector(`[data-testid=chat-item][data-chat-id="${CSS.escape(next.dataset.chatId)}"]`)?.focus());
    return true;
  },
  openSettings: () => {
    $('settings').open = true;
    $('provider-kind').focus();
    return true;
  },
};

function wire() {
  keys.bindTheme($('theme'));
  keys.bindShortcuts(shortcutActions, $('shortcuts'));
  $('show-shortcuts').addEventListener('click', () => $('shortcuts').showModal());
  $('sync-now').addEventListener('click', () => app.palaver?.syncNow());
  $('close-shortcuts').addEventListener('click', () => $('shortcuts').close());
  $('show-chats').addEventListener('click', () => {
    const shown = document.body.classList.toggle('show-chats');
    $('show-chats').setAttribute('aria-expanded', String(shown));
  });
  // The narrow layout's chat drawer closes on a pick, a click beside it, or Esc.
  const closeDrawer = () => {
    if (!document.body.classList.contains('show-chats')) return false;
    document.body.classList.remove('show-chats');
    $('show-chats').setAttribute('aria-expanded', 'false');
    return true;
  };
  $('chat-list').addEventListener('click', closeDrawer);
  $('chat').addEventListener('click', (event) => { if (!event.target.closest('#show-chats')) closeDrawer(); });
  shortcutActions.closeDrawer = () => !$('settings').open && closeDrawer();
  $('composer-form').addEventListener('submit', (event) => send(event));
  $('composer').addEventListener('keydown', (event) => {
    if (app.prompts.open && event.key === 'Escape') return app.prompts.close();
    if (app.prompts.open && event.key === 'Enter') {
      event.preventDefault();
      return $('prompt-list').querySelector('button')?.click();
    }
    if (app.attachments.onKeydown(event, $('composer'))) return;
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) send(event);
  });
  $('composer').addEventListener('input', () => {
    markdown.load(); // an answer will need it
    app.composerEdits += 1;
    app.attachments.onInput($('composer'));
    app.prompts.onInput();
    saveComposerDraft();
    updateComposerButtons();
  });
  $('composer').addEventListener('paste', (event) => {
    const images = [...(event.clipboardData?.files ?? [])].filter((f) => f.type.startsWith('image/'));
    if (!images.length) return;
    event.preventDefault();
    app.attachments.addFiles(images);
  });
  $('composer-form').addEventListener('dragover', (event) => event.preventDefault());
  $('composer-form').addEventListener('drop', (event) => {
    event.preventDefault();
    app.attachments.addFiles([...(event.dataTransfer?.files ?? [])]);
  });
  $('attach-image').addEventListener('click', () => $('image-file').click());
  $('attach-resource').addEventListener('click', () => {
    const proxy = agent.proxyOf(settingsStore.loadSettings());
    if (!$('resource-list').hidden) $('resource-list').hidden = true;
    else if (proxy) mcp.pickResource($('resource-list'), proxy, (resource) => app.attachments.addResource(resource), status);
  });
  $('image-file').addEventListener('change', () => {
    app.attachments.addFiles([...$('image-file').files]);
    $('image-file').value = '';
  });
  $('stop').addEventListener('click', () => command({ type: 'abort' }));
  // Taken during an engine reopen too: the new chat opens when the reopen is done.
  $('new-chat').addEventListener('click', () => newChat().catch((error) => status(String(error?.message ?? error), true)));
  $('chat-search').addEventListener('input', renderChatList);
  chatListView.bind($('chat-list'), { select: (id) => selectChat(id) });
  // Filled on the click that opens the panel (before it shows), so typing can follow at once.
  $('settings').querySelector('summary').addEventListener('click', () => {
    if (!$('settings').open) openSettings();
  });
  $('settings-form').addEventListener('submit', saveSettingsForm);
  bindLocalPanel();
  $('provider-kind').addEventListener('change', () => fillProviderFields(settingsStore.loadSettings(), $('provider-kind').value, app.proposal));
  $('provider-base-url').addEventListener('input', () => showKeyFor($('provider-kind').value));
  $('list-models').addEventListener('click', listProviderModels);
  $('provider-model').addEventListener('change', fillWindowFromModel);
  $('provider-n-ctx').addEventListener('input', () => { $('provider-n-ctx').dataset.auto = 'false'; });
  $('model-view').addEventListener('toggle', showModelView);
  // Filled as the summary is clicked, before the panel opens: a `toggle` listener runs a task
  // later and overwrote text typed at once (the agent test lost its prompt that way).
  $('chat-prompt').querySelector('summary').addEventListener('click', () => {
    if (!$('chat-prompt').open && app.chat) $('chat-prompt-text').value = app.chat.thread.system_prompt ?? '';
  });
  $('chat-prompt-save').addEventListener('click', () => {
    const text = $('chat-prompt-text').value.trim();
    command({ type: 'set_params', patch: { system_prompt: text || null } });
    $('chat-prompt').open = false;
    status(text ? 'This chat now has its own system prompt.' : 'This chat uses the system prompt from Settings again.');
  });
  $('transcript').addEventListener('scroll', () => {
    app.atEnd = distanceFromEnd($('transcript')) < 80;
    if (!app.chat) return;
    clearTimeout(app.scrollSave);
    const [id, top] = [app.chat.id, $('transcript').scrollTop];
    app.scrollSave = setTimeout(() => localStorage.setItem(scrollKey(id), String(Math.round(top))), 150);
  }, { passive: true });
  // The transcript shrinks without a render of it when something below it grows (a card, the
  // composer, the status line): one that was at its end stays there.
  new ResizeObserver(() => {
    if (app.atEnd && !Number.isFinite(app.restoreScroll)) $('transcript').scrollTop = $('transcript').scrollHeight;
  }).observe($('transcript'));
  $('cancel-settings').addEventListener('click', () => {
    app.proposal = null;
    $('settings').open = false;
  });
  $('transcript').addEventListener('click', onTranscriptClick);
  $('plan').addEventListener('click', onTranscriptClick);
  cards.bind(cardSlots(), { chat: () => app.chat, send: command, open: selectChat });
  queueView.bind($('queue'), {
    items: () => app.chat?.runtime.queued_items ?? [], cancel: cancelQueued, steer: steerNow, resume: () => command({ type: 'resume_queue' }),
  });
  $('rename-chat').addEventListener('click', renameChat);
  $('export-chat').addEventListener('click', () => exportChat('refact'));
  $('export-markdown').addEventListener('click', () => exportChat('markdown'));
  $('delete-chat').addEventListener('click', deleteChat);
  $('import-chat').addEventListener('click', () => $('import-file').click());
  $('import-file').addEventListener('change', () => {
    const file = $('import-file').files[0];
    if (file) importChat(file);
    $('import-file').value = '';
  });
  window.addEventListener('pagehide', saveComposerDraft);
  // A settings link opened in a tab that already shows the app arrives as a hash change.
  window.addEventListener('hashchange', () => {
    if (applyFragment()) openEngine().catch((error) => status(String(error?.message ?? error), true));
  });
}

async function main() {
  app.view = new TranscriptView($('transcript'), html);
  app.attachments = new Attachments({
    tray: $('attachments'),
    menu: $('mention-list'),
    say: (text, error) => status(text, error),
    proxy: () => {
      const proxy = agent.proxyOf(settingsStore.loadSettings());
      return proxy ? { tool: (name, args) => agent.proxyTool(proxy, name, args) } : null;
    },
    files: () => app.workspaceFiles,
    readResource: (server, uri) => mcp.readResource(agent.proxyOf(settingsStore.loadSettings()), server, uri),
  });
  app.prompts = new mcp.PromptMenu({
    menu: $('prompt-list'),
    composer: $('composer'),
    proxy: () => agent.proxyOf(settingsStore.loadSettings()),
    say: (text, error) => status(text, error),
  });
  applyFragment();
  wire();
  $('composer').value = localStorage.getItem(draftKey(null)) ?? '';
  if (await engineNeededAtStart()) {
    await openEngine();
  } else {
    // A first visit: nothing stored, nothing to sync. The page is drawn without the engine,
    // whose wasm is fetched at the first key or pointer press and opened on first use.
    renderChatList();
    showEmptyState();
    // The workspace line and @-mentions need no engine (no instruction file is read before it).
    await readWorkspace(agent.proxyOf(settingsStore.loadSettings()), []);
    for (const type of ['pointerdown', 'keydown']) {
      addEventListener(type, () => loadEngineModule().catch(() => {}), { once: true, capture: true });
    }
    // Another tab stored the first chat (the engine's marker): this one opens its engine and
    // lists it, instead of showing an empty list until it is used.
    addEventListener('storage', (event) => {
      if (event.key === `palaver.has_data.${DB_NAME}` && !app.palaver) ensureEngine().catch((error) => status(String(error?.message ?? error), true));
    });
  }
  document.body.dataset.ready = 'true';
  performance.mark('palaver-interactive');
}

// Exposed for the page tests and the bench page; the page never needs it itself.
globalThis.palaverApp = app;
app.selectChat = (id) => selectChat(id);
app.engine = () => ensureEngine();
app.showChats = () => showChats();
app.localModel = () => localModel();
main().catch((error) => status(String(error?.message ?? error), true));
