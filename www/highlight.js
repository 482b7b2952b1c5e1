// Syntax highlighting of fenced code (issue 19) with highlight.js (npm @highlightjs/cdn-assets,
// pinned, copied into pkg/vendor/highlight/ by the build; never a CDN). Loaded only when a block
// with a language is on screen, after the first paint. The engine's safe renderer made the block;
// this only splits its text into spans: the result is built as DOM nodes from highlight.js's token
// tree (no HTML string, so nothing new passes the page's Trusted Types policy).

const BASE = '../pkg/vendor/highlight';
const ALIASES = {
  js: 'javascript', jsx: 'javascript', mjs: 'javascript', ts: 'typescript', tsx: 'typescript', py: 'python',
  rs: 'rust', sh: 'bash', zsh: 'bash', shell: 'bash', console: 'bash', html: 'xml', svg: 'xml', yml: 'yaml',
  'c++': 'cpp', cc: 'cpp', hpp: 'cpp', h: 'c', cs: 'csharp', golang: 'go', kt: 'kotlin', md: 'markdown',
  rb: 'ruby', jsonc: 'json', toml: 'ini',
};
export const LANGUAGES = ['bash', 'c', 'cpp', 'csharp', 'css', 'diff', 'go', 'ini', 'java', 'javascript', 'json', 'kotlin',
  'markdown', 'php', 'python', 'ruby', 'rust', 'scss', 'sql', 'swift', 'typescript', 'xml', 'yaml'];

let core = null;
const loaded = new Map();

async function grammar(name) {
  core ??= import(`${BASE}/core.min.js`).then((m) => m.default);
  const hljs = await core;
  if (!loaded.has(name)) {
    loaded.set(name, import(`${BASE}/languages/${name}.min.js`).then((m) => hljs.registerLanguage(name, m.default)));
  }
  await loaded.get(name);
  return hljs;
}

/** `title.function` → `hljs-title function_` (highlight.js's own class names). */
function classes(scope) {
  const [first, ...rest] = scope.split('.');
  return [`hljs-${first}`, ...rest.map((part, i) => `${part}${'_'.repeat(i + 1)}`)].join(' ');
}

function build(node) {
  const fragment = document.createDocumentFragment();
  for (const child of node.children ?? []) {
    if (typeof child === 'string') {
      fragment.append(child);
      continue;
    }
    const span = document.createElement('span');
    if (child.scope && !child.scope.startsWith('language:')) span.className = classes(child.scope);
    span.append(build(child));
    fragment.append(span);
  }
  return fragment;
}

/** Highlights every finished code block with a known language under `root` (once per block). */
export async function highlightIn(root) {
  const blocks = [...root.querySelectorAll('.message:not([data-streaming]) pre > code[class^="language-"]:not([data-highlighted])')];
  for (const code of blocks) {
    const asked = code.className.slice('language-'.length).toLowerCase();
    const name = ALIASES[asked] ?? asked;
    code.dataset.highlighted = LANGUAGES.includes(name) ? name : 'none';
    if (!LANGUAGES.includes(name)) continue;
    try {
      const hljs = await grammar(name);
      const text = code.textContent;
      const result = hljs.highlight(text, { language: name, ignoreIllegals: true });
      const tree = result._emitter?.rootNode;
      // The token tree is highlight.js 11's (pinned); its text must be the block's, or nothing changes.
      if (!tree) continue;
      const fragment = build(tree);
      if (fragment.textContent !== text) continue;
      code.replaceChildren(fragment);
      code.classList.add('hljs');
    } catch {
      code.dataset.highlighted = 'failed';
    }
  }
}
