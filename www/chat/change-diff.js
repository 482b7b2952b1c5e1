// The diff of a change the agent made (issue 39), opened from a file in a turn's report or a
// write's numbers in its row: the file as it was before the change against after it, both as
// palaver serve kept them (a new file is all added, a deleted one all removed), shown under the
// button; a second click closes it. A content the server no longer has is said in a sentence.
import { el } from '../elements.js';
import { diffNodes } from '../write-preview.js';

export function install(ctx) {
  ctx.showDiff = async (button) => {
    const open = button.nextElementSibling?.classList.contains('change-diff') ? button.nextElementSibling : null;
    if (open) {
      open.remove();
      button.setAttribute('aria-expanded', 'false');
      return;
    }
    const { path, before, after } = button.dataset;
    const node = el('div', { class: 'change-diff', testid: 'change-diff', role: 'region', 'aria-label': `The diff of ${path}`, text: `Reading ${path}…` });
    button.after(node);
    button.setAttribute('aria-expanded', 'true');
    const chatId = ctx.chat.id;
    const side = (hash) => (hash ? ctx.workspace.changeContent(chatId, hash) : Promise.resolve({ text: '' }));
    try {
      const [was, is] = await Promise.all([side(before), side(after)]);
      if (was.binary || is.binary) {
        node.textContent = `${path} is not text: no line diff to show.`;
        return;
      }
      const name = !before ? `${path} (created)` : !after ? `${path} (deleted)` : path;
      node.replaceChildren(...await diffNodes(el, path, was.text ?? '', is.text ?? '', name));
    } catch (error) {
      node.textContent = `The diff of ${path} cannot be shown: ${error?.message ?? error}.`;
    }
  };
}
