// Safe edits (issue 39): "Restore files to before this" on a write of the agent's puts back every
// file the chat changed from that call on, as `palaver serve` recorded them before each write. A
// file changed since the agent wrote it is named and left as it is unless the person confirms.
// "Restore conversation" cuts the chat back to before the turn of that call (its question goes
// back into the composer; Undo puts every message back); "Both" does the two.
import { button, textOf } from '../elements.js';
import { $ } from '../page/dom.js';

/** One sentence of what a restore did. */
export function restoredSentence({ restored, skipped }) {
  const left = skipped.length ? `Left as they are: ${skipped.map((s) => `${s.path} (${s.reason})`).join('; ')}.` : '';
  if (!restored.length) return left || 'Nothing to restore: those files are already as they were.';
  return [`Restored to before this change: ${restored.join(', ')}.`, left].filter(Boolean).join(' ');
}

export function install(ctx) {
  /** True when the restore ran (whatever it left), false when it could not. `path`: that file only. */
  async function restore(callId, path) {
    const chatId = ctx.chat.id;
    try {
      let done = await ctx.workspace.restore(chatId, callId, false, path);
      const changed = done.skipped.filter((s) => /changed since/.test(s.reason)).map((s) => s.path);
      if (changed.length && window.confirm(`${changed.join(', ')} changed since the agent wrote ${changed.length === 1 ? 'it' : 'them'}. Put back the earlier content anyway (your changes there are lost)?`)) {
        const forced = await ctx.workspace.restore(chatId, callId, true, path);
        done = { restored: [...done.restored, ...forced.restored], skipped: forced.skipped };
      }
      ctx.say(restoredSentence(done), done.skipped.length > 0);
      ctx.chat.refreshChanges();
      if (done.restored.length) tellTheModel(chatId, callId, done.restored);
      return true;
    } catch (error) {
      ctx.say(`The files could not be restored: ${error?.message ?? error}`, true);
      return false;
    }
  }

  /**
   * The model hears which files went back: an event at the chat's end, sent with the next request
   * (`<event subkind="files_restored" …>`), so it does not trust what it wrote before.
   */
  function tellTheModel(chatId, callId, files) {
    const messages = ctx.chat.id === chatId ? ctx.chat.mirror?.messages ?? [] : [];
    const message = {
      message_id: `files-restored-${Date.now()}`,
      role: 'event',
      content: `The user restored ${files.join(', ')} to their content before the agent's change (${callId}) and what came after it. Read ${files.length === 1 ? 'it' : 'them'} again before relying on what was written.`,
      event: { subkind: 'files_restored', source: 'user', payload: { files, call_id: callId } },
      created_at_ms: Date.now(),
    };
    ctx.composer.command({ type: 'insert_message', index: messages.length, message }, chatId);
  }

  /** The chat cut back to before the turn that made call `callId`; Undo puts it back. */
  function restoreConversation(callId) {
    const chat = ctx.chat.mirror;
    const messages = chat?.messages ?? [];
    const at = messages.findIndex((m) => m.tool_calls?.some((call) => call.id === callId));
    let start = at;
    while (start > 0 && !(messages[start].role === 'user' && !messages[start].subagent_answers)) start -= 1;
    chat?.fill?.(start, start + 1); // a long chat's early question may be held light
    if (at < 0 || messages[start]?.role !== 'user') {
      ctx.say('That turn is not in this chat any more.', true);
      return;
    }
    const question = textOf(messages[start].content);
    const removed = messages.slice(start);
    if (!window.confirm(`Cut the conversation back to before “${question.slice(0, 80)}”? ${removed.length} messages go; Undo puts them back.`)) return;
    const chatId = chat.id;
    if (!ctx.composer.command({ type: 'truncate_messages', from_index: start }, chatId)) return;
    // The question goes back into the composer, unless the person has words there: never lost.
    const composer = $('composer');
    const kept = composer.value.trim() && composer.value !== question;
    if (!kept) {
      composer.value = question;
      composer.dispatchEvent(new Event('input'));
    }
    ctx.say(`Conversation restored to before “${question.slice(0, 60)}”: ${removed.length} messages removed${kept ? ' (your words in the composer are kept)' : ''}. `);
    $('status').append(button('undo-restore-conversation', 'Undo', 'undo-restore-conversation', {
      onclick: () => {
        removed.forEach((message, i) => ctx.composer.command({ type: 'insert_message', index: start + i, message }, chatId));
        ctx.say('');
      },
    }));
  }

  ctx.restoreFiles = restore;
  ctx.restoreConversation = restoreConversation;
}
