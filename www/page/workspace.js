// The paired workspace (`palaver serve`) as the page uses it: its tools and the context for the
// system prompt, the one line that says why there are none, its MCP servers' changes (a tool list
// that changed reaches the engine; bursts are coalesced, a broken stream reconnects with backoff
// and quietly while offline), and the workspace copies of chats (where the open chat's stands, the
// offer to restore chats this browser lacks).
import * as agent from '../workspace-api.js';
import * as mcp from '../mcp.js';
import * as settingsStore from '../settings.js';
import * as workspaceChats from '../views/workspace-chats.js';
import { $ } from './dom.js';

export function install(ctx) {
  const known = { tools: [], context: { date: today() }, files: [], problem: null };
  let watching = null;

  const proxy = () => agent.proxyOf(settingsStore.loadSettings());

  /** Reads the tools and the prompt's context (`instructionFiles`: which files to look for, or a
   *  promise of them). */
  async function read(instructionFiles = []) {
    const paired = proxy();
    const [{ tools, problem, version }, context] = await Promise.all([
      agent.workspaceTools(paired),
      agent.workspaceContext(paired, instructionFiles).catch(() => ({ date: today() })),
    ]);
    Object.assign(known, { tools, context, files: context.files ?? [], problem });
    $('tools-status').textContent = problem ?? '';
    $('tools-status').hidden = !problem;
    $('attach-resource').hidden = !tools.some((t) => t.mcp);
    watch(paired, version);
  }

  /**
   * Follows palaver serve's MCP changes: when a server's tools change the engine gets the new
   * list. Changes coming in a burst make one request (F10: 20 000 list_changed are not 20 000
   * fetches of /api/tools). `version` is the one the tools just read were listed at: the stream's
   * first event says it again unless they changed since.
   */
  function watch(paired, version = null) {
    const key = paired ? `${paired.url} ${paired.token}` : '';
    if (watching?.key === key) return;
    watching?.controller.abort();
    watching = null;
    if (!paired) return;
    const controller = new AbortController();
    watching = { key, controller, seen: version, timer: 0 };
    const current = watching;
    mcp.watch(paired, (event) => {
      if (event.type !== 'reconnected' && event.tools_version === current.seen) return;
      current.seen = event.tools_version ?? null;
      clearTimeout(current.timer);
      current.timer = setTimeout(async () => {
        const { tools } = await agent.workspaceTools(paired);
        if (controller.signal.aborted) return;
        known.tools = tools;
        $('attach-resource').hidden = !tools.some((t) => t.mcp);
        ctx.engine.toolsChanged();
        ctx.settings?.refresh('workspace');
        ctx.settings?.refresh('agent');
      }, 150);
    }, controller.signal);
  }

  /** The open chat's workspace copy, and the choice when it changed elsewhere. */
  function showCopy(state) {
    const chatId = ctx.chat.id;
    const palaver = ctx.engine.palaver;
    workspaceChats.renderCopy($('workspace-copy'), state?.state === 'other_workspace' ? null : state, {
      keep: async () => showCopy(await palaver.keepBrowserCopy(chatId)),
      openTheirs: async () => {
        const id = await palaver.restoreFromWorkspace(chatId, true);
        await ctx.chat.open(id);
      },
    });
  }

  /** Chats the workspace keeps that this browser does not: offered for restoring. */
  async function offerRestore() {
    const palaver = ctx.engine.palaver;
    if (!palaver || !proxy()) return;
    const missing = await workspaceChats.missingChats(palaver, ctx.chats.ids()).catch(() => []);
    workspaceChats.renderRestoreOffer($('workspace-restore'), missing, async () => {
      const { restored, failed } = await workspaceChats.restoreChats(palaver, missing);
      $('workspace-restore').hidden = true;
      ctx.say(`Restored ${restored} chat${restored === 1 ? '' : 's'} from the workspace.${failed.length ? ` Not restored: ${failed.join('; ')}` : ''}`, failed.length > 0);
    });
  }

  ctx.workspace = {
    proxy,
    read,
    tools: () => known.tools,
    context: () => known.context,
    files: () => known.files,
    hasChats: (paired) => agent.workspaceHasChats(paired),
    showCopy,
    offerRestore,
    tool: (name, args) => agent.proxyTool(proxy(), name, args),
    restore: (chatId, callId, force, path) => agent.restoreChanges(proxy(), chatId, callId, force, path),
    changes: (chatId) => agent.listChanges(proxy(), chatId),
    changeContent: (chatId, hash) => agent.changeContent(proxy(), chatId, hash),
  };
}

function today() {
  return new Date().toISOString().slice(0, 10);
}
