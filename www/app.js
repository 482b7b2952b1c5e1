// The chat a person uses: plain ES module, no framework. It only renders the engine's state and
// sends commands; everything else (streams, storage, retries, tools) happens in the engine and
// its browser host (`Palaver`, from pkg/). Model output goes through the engine's safe Markdown
// renderer; user text is set as text, never as HTML.
import init, { Palaver, Engine, renderMarkdown } from '../pkg/palaver.js';

const $ = (id) => document.getElementById(id);
const SETTINGS_KEY = 'palaver.settings'; // provider URL/model/kind and proxy URL; never the key
let palaver = null;
let currentChat = null;
let subscription = null;
let frame = 0;
let apiKey = '';

function loadSettings() {
  try {
    return JSON.parse(localStorage.getItem(SETTINGS_KEY)) ?? {};
  } catch {
    return {};
  }
}

function engineConfig(settings) {
  if (!settings.base_url) return {};
  return { providers: [{ kind: settings.kind ?? 'openai-chat', base_url: settings.base_url, model: settings.model ?? '' }] };
}

/** `http://127.0.0.1:N/#token=T` as printed by `palaver serve` → [url, token]. */
function parseProxy(text) {
  if (!text) return null;
  try {
    const url = new URL(text.trim());
    const token = new URLSearchParams(url.hash.slice(1)).get('token') ?? '';
    return [url.origin, token];
  } catch {
    return null;
  }
}

async function openEngine() {
  const settings = loadSettings();
  if (palaver) palaver.close();
  palaver = await Palaver.open(engineConfig(settings), undefined, (message) => status(message, true));
  if (apiKey) palaver.setProviderKey(settings.kind ?? 'openai-chat', apiKey);
  const proxy = parseProxy(settings.proxy);
  if (proxy) palaver.setProxy(proxy[0], proxy[1]);
  subscription = null;
  await showChats();
  if (currentChat) await selectChat(currentChat);
}

function status(text, error = false) {
  $('status').textContent = text;
  $('status').className = error ? 'error' : '';
}

async function showChats() {
  const chats = await palaver.listChats();
  const nav = $('chats');
  nav.replaceChildren(
    ...chats.map((chat) => {
      const button = document.createElement('button');
      button.type = 'button';
      button.textContent = chat.title || 'Untitled chat';
      button.dataset.chatId = chat.id;
      button.dataset.testid = 'chat-item';
      button.setAttribute('aria-current', String(chat.id === currentChat));
      button.addEventListener('click', () => selectChat(chat.id));
      return button;
    }),
  );
}

async function selectChat(id) {
  if (subscription !== null) palaver.unsubscribe(subscription);
  currentChat = id;
  await palaver.openChat(id);
  subscription = palaver.subscribe(id, () => scheduleRender());
  scheduleRender();
  await showChats();
}

/** Renders at most once per animation frame, however fast the stream is. */
function scheduleRender() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = 0;
    render();
  });
}

function messageView(message) {
  const div = document.createElement('div');
  div.className = `message ${message.role}`;
  div.dataset.testid = `message-${message.role}`;
  const text = typeof message.content === 'string'
    ? message.content
    : (message.content ?? []).filter((p) => p.type === 'text').map((p) => p.text).join('\n');
  if (message.role === 'assistant') {
    div.innerHTML = renderMarkdown(text); // safe by construction: see crate/src/render.rs
  } else {
    div.textContent = text;
  }
  if (message.stopped) div.append(marker('stopped'));
  if (message.interrupted) div.append(marker('interrupted'));
  if (message.role === 'error') div.append(marker(message.code ?? 'error'));
  return div;
}

function marker(text) {
  const span = document.createElement('span');
  span.className = 'marker';
  span.dataset.testid = `marker-${text}`;
  span.textContent = ` [${text}]`;
  return span;
}

function render() {
  if (!currentChat) return;
  const snapshot = palaver.snapshot(currentChat);
  if (!snapshot) return;
  const views = snapshot.messages.filter((m) => m.role !== 'compression_report').map(messageView);
  if (snapshot.draft) views.push(messageView({ role: 'assistant', content: snapshot.draft.content ?? '' }));
  $('transcript').replaceChildren(...views);
  $('transcript').scrollTop = $('transcript').scrollHeight;
  const runtime = snapshot.runtime;
  const busy = runtime.state === 'generating' || runtime.state === 'executing_tools';
  $('send').textContent = busy ? 'Stop' : 'Send';
  $('send').dataset.mode = busy ? 'stop' : 'send';
  if (runtime.error) status(`${runtime.error.class ?? 'error'}: ${runtime.error.message}`, true);
  else if (runtime.retry) status(`retrying (${runtime.retry.class}), attempt ${runtime.retry.attempt} of ${runtime.retry.max_attempts}`);
  else if (runtime.storage_error) status(`not saved yet: ${runtime.storage_error}`, true);
  else status(runtime.state === 'idle' ? '' : runtime.state);
}

async function send(event) {
  event.preventDefault();
  if (!currentChat) {
    currentChat = await palaver.createChat('');
    await selectChat(currentChat);
  }
  if ($('send').dataset.mode === 'stop') {
    palaver.send(currentChat, { type: 'abort' });
    return;
  }
  const text = $('prompt').value.trim();
  if (!text) return;
  const settings = loadSettings();
  palaver.send(currentChat, { type: 'set_params', patch: { provider: settings.kind ?? 'openai-chat', ...(isUntitled() ? { title: text.slice(0, 60) } : {}) } });
  palaver.send(currentChat, { type: 'user_message', content: text });
  $('prompt').value = '';
  scheduleRender();
  await showChats();
}

function isUntitled() {
  const snapshot = palaver.snapshot(currentChat);
  return !snapshot?.thread?.title;
}

function openSettings() {
  const settings = loadSettings();
  $('provider-kind').value = settings.kind ?? 'openai-chat';
  $('provider-url').value = settings.base_url ?? '';
  $('provider-model').value = settings.model ?? '';
  $('provider-key').value = apiKey;
  $('proxy-url').value = settings.proxy ?? '';
  $('settings').showModal();
}

async function saveSettings() {
  const settings = {
    kind: $('provider-kind').value,
    base_url: $('provider-url').value.trim(),
    model: $('provider-model').value.trim(),
    proxy: $('proxy-url').value.trim(),
  };
  apiKey = $('provider-key').value;
  localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
  await openEngine();
}

async function main() {
  await init();
  $('engine-version').textContent = Engine.version();
  // Pasting the URL `palaver serve` prints pairs the proxy: it arrives in our own fragment.
  const pairing = new URLSearchParams(location.hash.slice(1)).get('token');
  if (pairing) {
    const settings = loadSettings();
    settings.proxy = `${location.origin}/#token=${pairing}`;
    localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings));
    history.replaceState(null, '', location.pathname);
  }
  await openEngine();
  $('composer').addEventListener('submit', send);
  $('prompt').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) send(event);
  });
  $('new-chat').addEventListener('click', async () => {
    await selectChat(await palaver.createChat(''));
  });
  $('open-settings').addEventListener('click', openSettings);
  $('settings-form').addEventListener('submit', () => saveSettings());
  $('transcript').addEventListener('click', (event) => {
    const copy = event.target.closest('button.copy');
    if (copy) navigator.clipboard?.writeText(copy.nextElementSibling?.textContent ?? '');
  });
  document.body.dataset.ready = 'true';
}

main().catch((error) => status(String(error), true));
