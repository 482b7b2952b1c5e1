// What the shipped wasm is made of (issue 20): its sections, and the code of its functions by
// crate and by module of ours, from the name section of the wasm cargo builds (before
// wasm-bindgen strips the names). Generic code is counted where its symbol lives (`serde_json`,
// `alloc` for BTreeMap, …), whichever of our types it was instantiated for.
// node scripts/wasm-size.mjs [target/wasm32-unknown-unknown/wasm/palaver.wasm] [--top N]
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const argv = process.argv.slice(2);
const file = argv.find((a) => !a.startsWith('--') && !/^\d+$/.test(a)) ?? 'target/wasm32-unknown-unknown/wasm/palaver.wasm';
const top = Number(argv[argv.indexOf('--top') + 1]) || 25;
const bytes = readFileSync(file);

function leb(at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
    if (byte < 0x80) return [value, at];
  }
}
const SECTIONS = ['custom', 'type', 'import', 'function', 'table', 'memory', 'global', 'export', 'start', 'element', 'code', 'data', 'data count'];

const sections = [];
const bodies = []; // [function index, size]
const names = new Map();
let imported = 0;
for (let at = 8; at < bytes.length; ) {
  const id = bytes[at];
  const [size, start] = leb(at + 1);
  const end = start + size;
  let name = SECTIONS[id] ?? `#${id}`;
  if (id === 0) {
    const [length, from] = leb(start);
    name = `custom ${bytes.subarray(from, from + length).toString()}`;
    if (name === 'custom name') readNames(from + length, end);
  } else if (id === 2) {
    imported = countFunctionImports(start);
  } else if (id === 10) {
    let [count, p] = leb(start);
    for (let i = 0; i < count; i++) {
      const [length, body] = leb(p);
      bodies.push([imported + i, length + (body - p)]);
      p = body + length;
    }
  }
  sections.push({ name, size, gzip: gzipSync(bytes.subarray(start, end), { level: 9 }).length });
  at = end;
}

function countFunctionImports(start) {
  let [count, p] = leb(start);
  let functions = 0;
  for (let i = 0; i < count; i++) {
    for (let s = 0; s < 2; s++) {
      const [length, after] = leb(p);
      p = after + length;
    }
    const kind = bytes[p++];
    if (kind === 0) {
      functions += 1;
      p = leb(p)[1];
    } else if (kind === 1) {
      p += 1;
      const [flags, after] = leb(p);
      p = leb(after)[1];
      if (flags & 1) p = leb(p)[1];
    } else if (kind === 2) {
      const [flags, after] = leb(p);
      p = leb(after)[1];
      if (flags & 1) p = leb(p)[1];
    } else if (kind === 3) {
      p += 2;
    } else {
      p = leb(p + 1)[1];
    }
  }
  return functions;
}

function readNames(p, end) {
  while (p < end) {
    const kind = bytes[p];
    const [size, start] = leb(p + 1);
    if (kind === 1) {
      let [count, q] = leb(start);
      for (let i = 0; i < count; i++) {
        const [index, a] = leb(q);
        const [length, b] = leb(a);
        names.set(index, bytes.subarray(b, b + length).toString());
        q = b + length;
      }
    }
    p = start + size;
  }
}

/** A legacy Rust symbol (`_ZN…E`) as `crate::module::item` (v0 symbols keep their crate name). */
function demangle(symbol) {
  if (!symbol.startsWith('_ZN')) {
    // A v0 symbol (std's, prebuilt): its first crate root, `C` [`s`disambiguator`_`] length name.
    const root = symbol.match(/^_R[^C]*C(?:s[0-9a-zA-Z]*_)?(\d+)/);
    if (!root) return symbol;
    const at = root.index + root[0].length;
    return `${symbol.slice(at, at + Number(root[1]))}::${symbol}`;
  }
  const parts = [];
  for (let i = 3; i < symbol.length && symbol[i] !== 'E'; ) {
    const digits = symbol.slice(i).match(/^\d+/);
    if (!digits) break;
    i += digits[0].length;
    parts.push(symbol.slice(i, i + Number(digits[0])));
    i += Number(digits[0]);
  }
  if (/^h[0-9a-f]{16}$/.test(parts.at(-1) ?? '')) parts.pop();
  return parts.join('::').replace(/\$LT\$/g, '<').replace(/\$GT\$/g, '>').replace(/\$RF\$/g, '&')
    .replace(/\$u20\$/g, ' ').replace(/\$C\$/g, ',').replace(/\$u7b\$/g, '{').replace(/\$u7d\$/g, '}').replace(/\.\./g, '::');
}

/** Where a function's code is counted: our module (`palaver::web::sync`), else its crate. */
function owner(name) {
  if (name.startsWith('__wbindgen_describe')) return '(wasm-bindgen descriptors: wasm-bindgen removes them)';
  const ours = name.match(/palaver::(web::[a-z_]+|[a-z_]+)/);
  if (ours) return `palaver::${ours[1]}`;
  const crate = name.replace(/^[_<&\s]*(mut\s+)?/, '').match(/^([a-z_][a-z0-9_]*)::/);
  return crate ? crate[1] : '(unnamed)';
}

const functions = bodies.map(([index, size]) => ({ size, name: demangle(names.get(index) ?? `f${index}`) }));
const code = functions.reduce((sum, f) => sum + f.size, 0);
const kb = (n) => `${(n / 1024).toFixed(1).padStart(7)} KB`;
console.log(`${file}: ${kb(bytes.length)} (gzip -9 ${kb(gzipSync(bytes, { level: 9 }).length)}), ${functions.length} functions`);
console.log('\nsections (size, gzipped alone)');
for (const s of sections.sort((a, b) => b.size - a.size)) console.log(`  ${kb(s.size)} ${kb(s.gzip)}  ${s.name}`);
const groups = new Map();
for (const f of functions) {
  const key = owner(f.name);
  const g = groups.get(key) ?? { size: 0, count: 0 };
  g.size += f.size;
  g.count += 1;
  groups.set(key, g);
}
console.log(`\ncode by owner (${kb(code)} in all)`);
for (const [key, g] of [...groups].sort((a, b) => b[1].size - a[1].size).slice(0, top)) {
  console.log(`  ${kb(g.size)} ${(100 * g.size / code).toFixed(1).padStart(5)}% ${String(g.count).padStart(5)} fns  ${key}`);
}
console.log(`\nthe ${top} largest functions`);
for (const f of [...functions].sort((a, b) => b.size - a.size).slice(0, top)) console.log(`  ${kb(f.size)}  ${f.name.slice(0, 140)}`);
