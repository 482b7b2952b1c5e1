// The engine as the page has it: its wasm (fetched and compiled once, when first needed), the
// browser host `Palaver` over IndexedDB, and its configuration from Settings. Settings saved are
// applied to the open engine (`configure`): nothing is closed and reopened, so a message sent the
// moment after Save goes with them (issue 34). A first visit with nothing stored is drawn without
// the engine; it opens on first use.
import init, { Palaver, Engine } from '../../pkg/palaver.js';
import * as settingsStore from '../settings.js';
import * as secrets from './secrets.js';
import * as vault from './vault.js';
import { $ } from './dom.js';
import { DEFAULT_LOCAL_N_CTX } from '../local/catalog.js';
import * as proposals from '../views/proposals.js';

/** The engine's IndexedDB database (its host's `palaver.has_data.{name}` marker says data was saved). */
export const DB_NAME = 'palaver';
/** That marker (boot.js reads it too, before this module runs). */
export const HAS_DATA_KEY = `palaver.has_data.${DB_NAME}`;

export function install(ctx) {
  const engine = { palaver: null, module: null, opening: null, memory: null };

  /** The wasm, fetched and compiled once (boot.js may have begun its compile with the page). */
  function loadModule() {
    // boot.js's compile if it began one; if it has not run yet, it now never starts one.
    const early = (globalThis.palaverBoot ??= { engine: null }).engine;
    engine.module ??= Promise.resolve(early).then((module) => init(module ? { module_or_path: module } : undefined)).then((exports) => {
      engine.memory = exports.memory;
      $('engine-version').textContent = Engine.version();
      proposals.setReader((text) => Engine.editBlocks(text));
      return Engine;
    }, (error) => {
      engine.module = null;
      throw error;
    });
    return engine.module;
  }

  /** The open engine, opened now if it is not yet. */
  function ensure() {
    if (engine.palaver) return Promise.resolve(engine.palaver);
    engine.opening ??= open().finally(() => { engine.opening = null; });
    return engine.opening;
  }

  async function open() {
    ctx.store.dispatch({ type: 'engine_loading' });
    try {
      // The workspace is asked for its tools, files and map while the wasm compiles: its round
      // trips are off the start's path. Only the instruction files wait for the engine's list of
      // their names.
      const module = loadModule();
      const reading = ctx.workspace.read(module.then(() => Engine.instructionFiles()));
      reading.catch(() => {}); // awaited below, after the module: its failure is the one said
      await module;
      const settings = settingsStore.loadSettings();
      const proxy = ctx.workspace.proxy();
      // Its database opens while the workspace is still being read: the engine opens with what
      // is known of the workspace so far and takes its whole configuration below, before any use.
      const opening = Palaver.open(configOf(settings), DB_NAME, (message) => ctx.say(message, true));
      opening.catch(() => {}); // awaited below, after the reading: the first failure is the one said
      // An engine opened for a start that failed is closed, not left holding the database.
      await reading.catch((error) => {
        opening.then((opened) => opened.close(), () => {});
        throw error;
      });
      const palaver = await opening;
      palaver.setLocalTransport((url, init) => ctx.local.transport(url, init));
      engine.palaver = palaver;
      // The workspace as read, and Settings saved while it opened (Save found no engine to
      // configure), hold from now on.
      const latest = settingsStore.loadSettings();
      palaver.configure(configOf(latest));
      await applySecrets(palaver, latest, proxy);
      if (proxy) palaver.setProxy(proxy.url, proxy.token);
      await ctx.afterEngineOpen(palaver);
      ctx.store.dispatch({ type: 'engine_open' });
      return palaver;
    } catch (error) {
      ctx.store.dispatch({ type: 'engine_failed', error: String(error?.message ?? error) });
      throw error;
    }
  }

  /**
   * The engine's configuration from Settings and the paired workspace: the providers with their
   * model settings, the system prompt (assembled by the engine), the tools and the user's rules.
   */
  function configOf(settings) {
    const tools = ctx.workspace.tools();
    const providers = Object.entries(settings.providers)
      .filter(([kind, p]) => settingsStore.PROVIDER_KINDS.includes(kind) && p?.base_url)
      .map(([kind, p]) => ({ kind, base_url: p.base_url, model: p.model ?? '', ...(kind === 'local' ? { n_ctx: DEFAULT_LOCAL_N_CTX } : {}), ...settingsStore.saidSettings(p), ...settingsStore.modelSettings(p) }));
    const context = ctx.workspace.context();
    const prompt = Engine.assembleSystemPrompt(settings.system_prompt?.trim() || null, tools.length ? context : { date: context.date });
    return {
      // A plain chat's prompt (no tools), and the same with the workspace for chats that ask.
      chat_prompt: Engine.assembleChatPrompt({ date: context.date }, false),
      chat_workspace_prompt: Engine.assembleChatPrompt(context, true),
      edit_blocks_prompt: Engine.assembleEditBlocksPrompt(context),
      providers,
      // Settings name the model that answers: every chat uses it unless it pinned its own.
      active_provider: settingsStore.isConfigured(settings) ? settings.kind : null,
      fallback_models: Array.isArray(settings.fallback_models) ? settings.fallback_models : [],
      system_prompt: prompt,
      workspace_tools: tools,
      tool_rules: settingsStore.toolRules(settings, Engine.defaultToolRules(tools)),
    };
  }

  /** Each provider's key, sent only to the origin it was given for (E1). */
  async function applySecrets(palaver, settings, proxy) {
    if (settings.remember_key || settings.sync?.remember) {
      await vault.unlock(proxy);
      const names = settings.remember_key ? [...settingsStore.PROVIDER_KINDS] : [];
      if (settings.sync?.remember) names.push('sync');
      const locked = await secrets.recall(names, (name) => (name === 'sync' ? settings.sync?.url : settings.providers[name]?.base_url));
      if (locked.length) ctx.say('Your remembered keys stay locked until palaver serve runs: start it, then reload this page (or type the key in Settings).', true);
      ctx.settings?.refresh('provider'); // an open Settings shows the keys just unlocked
    }
    // Every kind's key again (an empty one forgets it), bound to the origin it was given for.
    for (const [kind, config] of Object.entries(settings.providers)) {
      const baseUrl = config?.base_url ?? '';
      palaver.setProviderKey(kind, secrets.keyFor(kind, baseUrl), baseUrl);
    }
  }

  /** Settings were saved: the open engine takes them at once; the page's state says what can answer. */
  async function configure() {
    const settings = settingsStore.loadSettings();
    ctx.store.dispatch({ type: 'settings', configured: settingsStore.isConfigured(settings), usesLocal: settingsStore.activeProvider(settings).kind === 'local' });
    const palaver = engine.palaver;
    if (!palaver) {
      // A first visit drawn without the engine: sync needs it now (it pulls the other devices' chats).
      if (settings.sync?.url) await ensure();
      return;
    }
    const proxy = ctx.workspace.proxy();
    if (proxy) palaver.setProxy(proxy.url, proxy.token);
    // The new settings hold at once (a message sent the moment after Save goes with them and
    // their key); the workspace is read again after, and the prompt follows it.
    palaver.configure(configOf(settings));
    await applySecrets(palaver, settings, proxy);
    await ctx.workspace.read(Engine.instructionFiles());
    palaver.configure(configOf(settingsStore.loadSettings()));
  }

  /** The workspace's tools changed (an MCP server): the engine offers the new ones next. */
  function toolsChanged() {
    if (!engine.palaver) return;
    engine.palaver.configure(configOf(settingsStore.loadSettings()));
  }

  /**
   * Whether this start has work for the engine: chats stored here (or lost since: B18), sync, or
   * chats in the paired workspace to offer. A first visit with none of these is drawn without it.
   */
  async function neededAtStart() {
    const settings = settingsStore.loadSettings();
    if (localStorage.getItem(HAS_DATA_KEY) || settings.sync?.url) return true;
    const databases = await indexedDB.databases?.().catch(() => null);
    if (!databases || databases.some((d) => d.name === DB_NAME)) return true;
    const proxy = ctx.workspace.proxy();
    return proxy ? ctx.workspace.hasChats(proxy) : false;
  }

  ctx.engine = {
    get palaver() {
      return engine.palaver;
    },
    loadModule,
    ensure,
    configure,
    toolsChanged,
    neededAtStart,
    /** The engine's wasm memory in bytes (0 before it loads): what the memory benchmark reads. */
    memoryBytes: () => engine.memory?.buffer.byteLength ?? 0,
    defaults: () => loadModule().then(() => ({
      prompt: Engine.defaultAgentPrompt(),
      rules: Engine.defaultToolRules(ctx.workspace.tools()),
      outputTokens: (nCtx, own) => Engine.defaultOutputTokens(nCtx, own),
    })),
  };
  ctx.store.perform('load_engine', () => ensure().catch(() => {}));
}
