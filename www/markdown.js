// The Markdown renderer: its own wasm (`pkg/render/`, the crate `palaver-render`). It is never
// fetched for the first paint of an empty app (issue 20), and on a first visit not before the
// first answer's words (issue 41: its bytes would delay them on a slow network). Until it is
// there, and if it cannot load, model text is shown as escaped plain text: safe, readable, never
// lost; once it is, `onReady`'s callers draw that text again as Markdown.

let render = null;
let loading = null;
let settled = false;
let deferred = false;
const waiting = new Set();

/** Loads the renderer once; resolves when `html` renders Markdown (or the load failed). */
export function load() {
  loading ??= import('../pkg/render/palaver_render.js')
    .then(async (module) => {
      await module.default();
      render = module.renderMarkdown;
    })
    .catch((error) => {
      console.warn('the Markdown renderer did not load; model text is shown as plain text', error);
    })
    .finally(() => {
      settled = true;
      if (render) for (const redraw of waiting) redraw();
    });
  return loading;
}

/** A first visit: nothing fetches the renderer ahead (`preload`) until model text is drawn. */
export function defer() {
  deferred = true;
}

/** Fetches the renderer ahead of need (a person typing, a new chat), unless this is a first visit. */
export function preload() {
  if (!deferred) load();
}

/** Whether the load has ended, well or not: a stored chat's first frame waits for this. */
export const settledLoad = () => settled;

/** `redraw` is called when the renderer arrives, to draw again what was drawn as plain text. */
export function onReady(redraw) {
  waiting.add(redraw);
}

/** Model output as safe HTML (for the page's one Trusted Types policy). */
export function html(markdown) {
  if (render) return render(markdown);
  load(); // model text is here: the renderer is needed now
  return plain(markdown);
}

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function plain(text) {
  return `<p class="plain">${String(text).replace(/[&<>"']/g, (c) => ESCAPES[c])}</p>`;
}
