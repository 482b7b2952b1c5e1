// The page's one way to build DOM: `el` (an element with properties, `data-*`/`aria-*`
// attributes and children; text is always set as text), `button`, `textOf` (a message's text)
// and `placeInOrder`. A leaf: every view imports it, it imports nothing.

/** An element with properties (`testid`, `text`, `class`, `data-*`, or any DOM property) and children. */
export const el = (tag, props = {}, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === 'testid') node.dataset.testid = value;
    else if (key === 'text') node.textContent = value;
    else if (key === 'class') node.className = value;
    // `data-*`, `aria-*` and other dashed names are attributes (no DOM property has a dash).
    else if (key.includes('-')) node.setAttribute(key, value);
    else node[key] = value;
  }
  node.append(...children.filter((c) => c != null));
  return node;
};

export function textOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.filter((p) => p.type === 'text' || typeof p.text === 'string').map((p) => p.text).join('\n');
}

export const button = (testid, label, action, extra = {}) => el('button', { type: 'button', testid, text: label, 'data-action': action, ...extra });

/**
 * Makes `nodes` the children of `parent`, in order, moving or adding only those not in place and
 * removing the rest. `replaceChildren` takes every child out and puts it back: the whole list is
 * laid out again, and a selection inside it is lost.
 */
export function placeInOrder(parent, nodes) {
  let at = parent.firstChild;
  for (const node of nodes) {
    if (node === at) at = at.nextSibling;
    else parent.insertBefore(node, at);
  }
  while (at) {
    const next = at.nextSibling;
    at.remove();
    at = next;
  }
}
