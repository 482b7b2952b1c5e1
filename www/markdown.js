// The Markdown renderer: its own wasm (`pkg/render/`, the crate `palaver-render`), loaded the
// first time the page has a message to draw or the user starts typing, never for the first paint
// of an empty app (issue 20). Until it is there, and if it cannot load, model text is shown as
// escaped plain text: safe, readable, never lost.

let render = null;
let loading = null;
let settled = false;

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
    });
  return loading;
}

/** Whether the load has ended, well or not: the page waits for this before a first frame. */
export const settledLoad = () => settled;

/** Model output as safe HTML (for the page's one Trusted Types policy). */
export function html(markdown) {
  return render ? render(markdown) : plain(markdown);
}

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function plain(text) {
  return `<p class="plain">${String(text).replace(/[&<>"']/g, (c) => ESCAPES[c])}</p>`;
}
