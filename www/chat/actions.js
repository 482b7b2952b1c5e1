// What a person does with a whole chat, from its ⋯ menu and the sidebar: rename, export (JSON with
// its subagents' chats, or Markdown), import, delete (Undo brings it back under its own id), its
// own system prompt (a prompt that came with an imported or restored chat waits here for the
// user's yes: SECURITY F2), and "what the model sees" (the last request, pretty-printed, folded).
import { el, button } from '../view.js';
import { $ } from '../page/dom.js';

export function install(ctx) {
  const palaver = () => ctx.engine.palaver;

  // --- the ⋯ menu: opens on a click, closes on a pick, a click elsewhere or Esc ---
  const menu = $('chat-menu');
  const toggle = $('chat-menu-button');
  const setMenu = (open) => {
    menu.hidden = !open;
    toggle.setAttribute('aria-expanded', String(open));
    if (open) menu.querySelector('button')?.focus();
  };
  toggle.addEventListener('click', (event) => {
    event.stopPropagation();
    if (menu.hidden) showProfile();
    setMenu(menu.hidden);
  });

  // --- what the chat's requests carry: the agent (tools), or a plain chat (issue 35) ---
  function showProfile() {
    const runtime = ctx.chat.mirror?.runtime;
    const plain = ['chat', 'edit_blocks'].includes(runtime?.prompt_profile);
    $('toggle-profile').textContent = plain ? 'Agent: tools and the workspace' : 'Plain chat (no tools)';
    $('toggle-workspace-context').hidden = !plain;
    $('toggle-workspace-context').setAttribute('aria-checked', String(Boolean(ctx.chat.mirror?.thread?.workspace_context)));
  }
  $('toggle-profile').addEventListener('click', () => {
    const plain = ['chat', 'edit_blocks'].includes(ctx.chat.mirror?.runtime?.prompt_profile);
    ctx.composer.command({ type: 'set_params', patch: { prompt_profile: plain ? 'agent' : 'chat' } });
    ctx.say(plain ? 'This chat is an agent again: it gets the tools and the workspace.' : 'This chat is a plain chat: a short prompt, no tools.');
  });
  $('toggle-workspace-context').addEventListener('click', () => {
    const on = !ctx.chat.mirror?.thread?.workspace_context;
    ctx.composer.command({ type: 'set_params', patch: { workspace_context: on } });
  });
  menu.addEventListener('click', () => setMenu(false));
  document.addEventListener('click', (event) => {
    if (!menu.hidden && !event.target.closest('#chat-actions')) setMenu(false);
  });
  menu.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') {
      event.stopPropagation();
      setMenu(false);
      toggle.focus();
    }
  });

  function rename() {
    if (!ctx.chat.id) return;
    const title = $('chat-title');
    const input = el('input', { testid: 'rename-input', value: ctx.chat.title, 'aria-label': 'Chat title' });
    title.replaceChildren(input);
    input.focus();
    input.select();
    // The title comes back as `thread_updated`, which redraws the header and the chat list.
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && input.value.trim()) palaver().renameChat(ctx.chat.id, input.value.trim());
      if (event.key === 'Enter' || event.key === 'Escape') {
        event.preventDefault();
        title.textContent = (event.key === 'Enter' && input.value.trim()) || ctx.chat.title || 'Untitled chat';
      }
    });
  }

  /** A chat's export, with its subagents' chats when it has some (JSON: `subagents`). */
  async function exportText(id, format) {
    const text = await palaver().exportChat(id, format);
    const children = ctx.chats.subagentsOf(id);
    if (!children.length) return text;
    const parts = await Promise.all(children.map(async (c) => ({ chat: c, text: await palaver().exportChat(c.id, format) })));
    if (format === 'markdown') return [text, ...parts.map((p) => `\n\n---\n\n# Subagent: ${p.chat.title || p.chat.id}\n\n${p.text}`)].join('');
    const root = JSON.parse(text);
    if (root === null || typeof root !== 'object' || Array.isArray(root)) return text;
    root.subagents = parts.map((p) => JSON.parse(p.text));
    return JSON.stringify(root, null, 2);
  }

  async function exportChat(format) {
    if (!ctx.chat.id) return;
    const text = await exportText(ctx.chat.id, format);
    const link = document.createElement('a');
    link.href = URL.createObjectURL(new Blob([text], { type: format === 'markdown' ? 'text/markdown' : 'application/json' }));
    link.download = `${(ctx.chat.title || 'chat').replace(/[^\w.-]+/g, '_').slice(0, 60)}.${format === 'markdown' ? 'md' : 'json'}`;
    link.click();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
  }

  async function importChat(file) {
    try {
      const engine = await ctx.engine.ensure();
      const id = await engine.importChat(await file.text());
      await ctx.chat.open(id);
      ctx.say(`Imported ${file.name}.`);
    } catch (error) {
      ctx.say(`Import failed, nothing changed: ${error?.message ?? error}`, true);
    }
  }

  /** Deletes at once, keeping the chat's copy in memory so Undo brings it back as it was. */
  async function deleteChat() {
    const id = ctx.chat.id;
    if (!id) return;
    const backup = await palaver().exportChat(id, 'refact');
    const children = ctx.chats.subagentsOf(id);
    const alsoChildren = children.length && window.confirm(`Delete its ${children.length} subagent chat${children.length === 1 ? '' : 's'} too? (Cancel keeps them.)`);
    ctx.chats.deleting = true;
    try {
      ctx.chat.close();
      await palaver().deleteChat(id);
      if (alsoChildren) for (const child of children) await palaver().deleteChat(child.id);
    } finally {
      ctx.chats.deleting = false;
    }
    ctx.say('Chat deleted. ');
    $('status').append(button('undo-delete', 'Undo', 'undo-delete', {
      onclick: async () => {
        ctx.say('');
        await palaver().undeleteChat(id, backup);
        await ctx.chat.open(id);
      },
    }));
  }

  // --- the chat's own system prompt ---
  const promptDialog = $('chat-prompt-dialog');
  function openPrompt() {
    const thread = ctx.chat.mirror?.thread ?? {};
    const proposed = thread.proposed_system_prompt;
    $('chat-prompt-text').value = proposed ?? thread.system_prompt ?? '';
    $('proposed-prompt-note').hidden = !proposed;
    $('proposed-prompt-note').textContent = proposed ? 'This chat came with a system prompt of its own (it was imported, restored or synced). It is not used until you choose "Use for this chat"; Cancel keeps it waiting.' : '';
    promptDialog.showModal();
    $('chat-prompt-text').focus();
  }
  $('chat-prompt-save').addEventListener('click', () => {
    const text = $('chat-prompt-text').value.trim();
    ctx.composer.command({ type: 'set_params', patch: { system_prompt: text || null, proposed_system_prompt: null } });
    promptDialog.close();
    ctx.say(text ? 'This chat now has its own system prompt.' : 'This chat uses the system prompt from Settings again.');
  });
  $('chat-prompt-cancel').addEventListener('click', () => promptDialog.close());

  // --- what the model sees: the last request, pretty-printed and folded ---
  function openModelView() {
    const request = ctx.chat.id ? palaver().lastRequest(ctx.chat.id) : undefined;
    const body = $('model-view-body');
    if (!request) {
      body.replaceChildren(el('p', { text: 'No request was sent for this chat since the page opened. Send a message, then look again.' }));
    } else {
      const messages = request.body?.messages ?? request.body?.contents ?? request.body?.input ?? [];
      body.replaceChildren(
        el('p', { class: 'hint', text: `${request.provider} · ${request.url}` }),
        fold('Headers (the key redacted)', request.headers),
        ...(Array.isArray(messages) ? messages.map((m, i) => fold(`${i + 1}. ${m.role ?? m.type ?? 'part'}`, m, i === messages.length - 1)) : []),
        fold('The whole request body', request.body));
    }
    $('model-view').showModal();
  }
  const fold = (label, value, open = false) => el('details', { open }, el('summary', { text: label }), el('pre', { text: JSON.stringify(value, null, 2) }));
  $('close-model-view').addEventListener('click', () => $('model-view').close());

  $('rename-chat').addEventListener('click', rename);
  $('export-chat').addEventListener('click', () => exportChat('refact'));
  $('export-markdown').addEventListener('click', () => exportChat('markdown'));
  $('delete-chat').addEventListener('click', deleteChat);
  $('open-chat-prompt').addEventListener('click', openPrompt);
  $('open-model-view').addEventListener('click', openModelView);
  $('import-chat').addEventListener('click', () => $('import-file').click());
  $('import-file').addEventListener('change', () => {
    const file = $('import-file').files[0];
    if (file) importChat(file);
    $('import-file').value = '';
  });

  ctx.actions = { openPrompt };
}
