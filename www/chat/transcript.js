// What a person does inside the conversation: copy a code block or a message, insert or wrap
// code, load a remote image on a click, show earlier messages, edit and resend (Esc cancels),
// branch, delete a message (with Undo), Regenerate or Retry; the cards' buttons (approve, answer,
// the plan, subagents) and the queue's (cancel, steer now, send held). Each is a command to the
// engine, or the page's own copy or view.
import * as cards from '../cards/registry.js';
import * as queueView from '../views/queue.js';
import { el, button, textOf, STEP } from '../view.js';
import { $ } from '../page/dom.js';

/** What a proposal's button says while the engine does it, and while a turn under way holds it. */
const DOING = { apply_edit_block: 'Applying…', skip_edit_block: 'Skipping…', run_suggested_command: 'Running…' };
const HELD = {
  apply_edit_block: 'Applies when the answer under way ends…',
  skip_edit_block: 'Skipped when the answer under way ends…',
  run_suggested_command: 'Runs when the answer under way ends…',
};

/** The text of the code block a button of its toolbar belongs to. */
const codeOf = (target) => target.closest('.code')?.querySelector('pre')?.textContent ?? '';

export function install(ctx) {
  const command = (body, chatId) => ctx.composer.command(body, chatId);
  const messageOf = (node) => ctx.chat.mirror?.messages.find((m) => m.message_id === node?.dataset.messageId);

  async function onClick(event) {
    const target = event.target.closest('button');
    if (!target) return;
    const node = target.closest('[data-message-id]');
    switch (target.dataset.action ?? target.className) {
      case 'copy':
        navigator.clipboard?.writeText(codeOf(target)).catch(() => {});
        target.textContent = 'Copied';
        break;
      case 'copy-message':
        navigator.clipboard?.writeText(textOf(messageOf(node)?.content)).catch(() => {});
        target.textContent = 'Copied';
        break;
      case 'delete-message':
        removeMessage(node);
        break;
      case 'restore-files':
      case 'restore-turn-files':
        ctx.restoreFiles(target.dataset.callId);
        break;
      case 'show-diff':
        ctx.showDiff(target);
        break;
      case 'revert-file':
        ctx.restoreFiles(target.dataset.callId, target.dataset.path);
        break;
      case 'restore-turn-chat':
        ctx.restoreConversation(target.dataset.callId);
        break;
      case 'restore-turn-both':
        if (await ctx.restoreFiles(target.dataset.callId)) ctx.restoreConversation(target.dataset.callId);
        break;
      case 'apply-edit-block':
      case 'skip-edit-block':
      case 'run-suggested-command':
        actOnProposal(target, node);
        break;
      case 'insert-code':
        insertCode(target);
        break;
      case 'wrap-code': {
        const wrapped = target.closest('.code').classList.toggle('wrapped');
        target.setAttribute('aria-pressed', String(wrapped));
        break;
      }
      case 'remote-image':
        loadRemoteImage(target);
        break;
      case 'show-earlier':
        ctx.chat.view.shift(ctx.chat.mirror, -STEP);
        break;
      case 'show-later':
        ctx.chat.view.shift(ctx.chat.mirror, STEP);
        break;
      case 'jump-first':
        ctx.chat.jump('first');
        break;
      case 'jump-last':
        ctx.chat.jump('last');
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

  /**
   * Apply, Skip or Run on what an answer proposes (issue 40): a command to the engine, which
   * performs it through palaver serve (after the turn under way, if one is) and keeps the result
   * on the answer; until then the button says what it waits for.
   */
  function actOnProposal(target, node) {
    const message = messageOf(node);
    const type = { 'apply-edit-block': 'apply_edit_block', 'skip-edit-block': 'skip_edit_block', 'run-suggested-command': 'run_suggested_command' }[target.dataset.action];
    if (!message || !type) return;
    if (!command({ type, message_id: message.message_id, index: Number(target.dataset.index) })) return;
    target.disabled = true;
    // A turn under way holds it (the engine's queue): the button says so, and until when.
    const held = !['idle', 'completed', 'error'].includes(ctx.chat.mirror?.runtime?.state ?? 'idle');
    target.textContent = held ? HELD[type] : DOING[type];
  }

  /** Deletes a message at once; Undo puts it back where it was (same id, same place). */
  function removeMessage(node) {
    const message = messageOf(node);
    if (!message) return;
    const index = ctx.chat.mirror.messages.indexOf(message);
    if (!command({ type: 'remove_message', message_id: message.message_id })) return;
    const chatId = ctx.chat.id;
    ctx.say('Message deleted. ');
    $('status').append(button('undo-delete-message', 'Undo', 'undo-delete-message', {
      onclick: () => {
        command({ type: 'insert_message', index, message }, chatId);
        ctx.say('');
      },
    }));
  }

  function insertCode(target) {
    const composer = $('composer');
    const at = composer.selectionStart ?? composer.value.length;
    const block = `\n\`\`\`\n${codeOf(target).replace(/\n$/, '')}\n\`\`\`\n`;
    composer.value = composer.value.slice(0, at) + block + composer.value.slice(composer.selectionEnd ?? at);
    composer.focus();
    composer.dispatchEvent(new Event('input'));
  }

  /** Edit-and-resend: the history from this message on is replaced by the edited message. */
  function editMessage(node) {
    const box = el('textarea', { testid: 'edit-text', value: messageOf(node) ? textOf(messageOf(node).content) : node.querySelector('.text').textContent });
    const cancel = () => {
      ctx.chat.mirror.bump(node.dataset.messageId); // its node is built again from the message
      ctx.chat.schedule();
    };
    const save = button('edit-send', 'Send', 'edit-send', {
      class: 'primary',
      onclick: () => {
        const content = box.value.trim();
        if (content) command({ type: 'retry_from_index', index: Number(node.dataset.index), content });
      },
    });
    box.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        cancel();
      }
    });
    node.replaceChildren(el('div', { class: 'edit' }, box, save, button('edit-cancel', 'Cancel', 'edit-cancel', { onclick: cancel })));
    box.focus();
  }

  /** Branch: a new chat holding this chat's messages up to and including `messageId`. */
  async function branchFrom(messageId) {
    const source = ctx.chat.mirror;
    const palaver = ctx.engine.palaver;
    const title = `${source.thread.title || 'Untitled chat'} (branch)`;
    const id = await palaver.createChat(title);
    await palaver.loadChat(id);
    const events = palaver.send(id, { type: 'branch_from_chat', source_chat_id: source.id, up_to_message_id: messageId });
    const refused = events?.find?.((e) => e.type === 'ack' && e.accepted === false);
    if (refused) return ctx.say(`The branch could not be made: ${refused.reason?.message ?? ''}`, true);
    palaver.send(id, { type: 'set_params', patch: { title } });
    return ctx.chat.open(id);
  }

  /** A remote image loads only on the user's click, as a blob (img-src allows no remote origin). */
  async function loadRemoteImage(target) {
    const url = target.dataset.src ?? '';
    try {
      const parsed = new URL(url);
      if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('not an http(s) image');
      const response = await fetch(parsed, { credentials: 'omit', referrerPolicy: 'no-referrer' });
      const blob = await response.blob();
      if (!response.ok || !blob.type.startsWith('image/')) throw new Error(`not an image (${response.status})`);
      const img = document.createElement('img');
      img.alt = target.querySelector('.alt')?.textContent ?? '';
      img.src = URL.createObjectURL(blob);
      target.replaceWith(img);
    } catch (error) {
      target.textContent = `could not load the image (${error.message}): ${url}`;
    }
  }

  /** Steer now: the queued message is taken back and sent with priority, injected at the next safe point. */
  function steer(item) {
    const text = ctx.composer.sentText(item.client_request_id) ?? item.preview;
    if (!text) return;
    command({ type: 'cancel_queued', client_request_id: item.client_request_id });
    const id = command({ type: 'user_message', content: text, priority: true });
    if (id) ctx.composer.remember(id, text);
  }

  $('transcript').addEventListener('click', onClick);
  $('plan').addEventListener('click', onClick);
  cards.bind({ plan: $('plan'), cards: $('cards') }, { chat: () => ctx.chat.mirror, send: command, open: (id) => ctx.chat.open(id), review: () => ctx.actions.openPrompt(), load: (id) => ctx.engine.palaver.loadChat(id), say: (text) => ctx.say(text, true) });
  queueView.bind($('queue'), {
    items: () => ctx.chat.mirror?.runtime.queued_items ?? [],
    cancel: (item) => command({ type: 'cancel_queued', client_request_id: item.client_request_id }),
    steer,
    resume: () => command({ type: 'resume_queue' }),
  });
}
