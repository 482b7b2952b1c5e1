// Safe edits (issue 39): "Restore files to before this" on a write of the agent's puts back every
// file the chat changed from that call on, as `palaver serve` recorded them before each write. A
// file changed since the agent wrote it is named and left as it is unless the person confirms.

/** One sentence of what a restore did. */
export function restoredSentence({ restored, skipped }) {
  const left = skipped.length ? `Left as they are: ${skipped.map((s) => `${s.path} (${s.reason})`).join('; ')}.` : '';
  if (!restored.length) return left || 'Nothing to restore: those files are already as they were.';
  return [`Restored to before this change: ${restored.join(', ')}.`, left].filter(Boolean).join(' ');
}

export function install(ctx) {
  async function restore(callId) {
    const chatId = ctx.chat.id;
    try {
      let done = await ctx.workspace.restore(chatId, callId, false);
      const changed = done.skipped.filter((s) => /changed since/.test(s.reason)).map((s) => s.path);
      if (changed.length && window.confirm(`${changed.join(', ')} changed since the agent wrote ${changed.length === 1 ? 'it' : 'them'}. Put back the earlier content anyway (your changes there are lost)?`)) {
        const forced = await ctx.workspace.restore(chatId, callId, true);
        done = { restored: [...done.restored, ...forced.restored], skipped: forced.skipped };
      }
      ctx.say(restoredSentence(done), done.skipped.length > 0);
      ctx.chat.refreshChanges();
    } catch (error) {
      ctx.say(`The files could not be restored: ${error?.message ?? error}`, true);
    }
  }

  ctx.restoreFiles = restore;
}
