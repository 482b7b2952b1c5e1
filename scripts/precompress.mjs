// Writes each built file of pkg/ compressed with brotli at its highest quality beside it
// (`palaver_bg.wasm.br`), which `palaver serve` sends as it is to a browser that takes brotli:
// a fifth less than gzip for the engine, a third less for wllama (issue 41). A file whose bytes
// have not changed since the last run keeps its `.br` (the hashes are kept in
// pkg/.precompressed.json), and a `.br` whose file is gone or changed is rewritten or removed,
// so a `.br` is never older than what it stands for. Each one is checked to decompress to its
// file before it is kept.
// Usage: node scripts/precompress.mjs <pkg dir>
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';

const dir = process.argv[2];
if (!dir || !existsSync(dir)) {
  console.error('usage: node scripts/precompress.mjs <pkg dir>');
  process.exit(2);
}
const SMALLEST = 1024; // below this the headers outweigh what compression saves
const MANIFEST = '.precompressed.json';
const compressible = (path) => /\.(wasm|js|mjs|css|json)$/.test(path) && !path.endsWith('.d.ts') && !path.endsWith(MANIFEST);
const manifestPath = join(dir, MANIFEST);
let before = {};
try {
  before = JSON.parse(readFileSync(manifestPath, 'utf8'));
} catch {
  before = {}; // none yet, or unreadable: everything is compressed again
}
const after = {};
const files = readdirSync(dir, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile())
  .map((e) => join(e.parentPath ?? e.path, e.name));
let written = 0;
let kept = 0;
let saved = 0;
for (const path of files) {
  const name = relative(dir, path);
  if (path.endsWith('.br')) {
    const source = path.slice(0, -3);
    if (!existsSync(source) || !compressible(source)) rmSync(path);
    continue;
  }
  if (!compressible(path)) continue;
  const bytes = readFileSync(path);
  if (bytes.length < SMALLEST) {
    rmSync(`${path}.br`, { force: true });
    continue;
  }
  const hash = createHash('sha256').update(bytes).digest('hex');
  if (before[name] === hash && existsSync(`${path}.br`)) {
    after[name] = hash;
    kept += 1;
    continue;
  }
  const compressed = brotliCompressSync(bytes, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
      [constants.BROTLI_PARAM_LGWIN]: constants.BROTLI_MAX_WINDOW_BITS,
      [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
    },
  });
  if (!brotliDecompressSync(compressed).equals(bytes)) {
    console.error(`${name}: its brotli does not decompress to it`);
    process.exit(1);
  }
  writeFileSync(`${path}.br`, compressed);
  after[name] = hash;
  written += 1;
  saved += bytes.length - compressed.length;
}
writeFileSync(manifestPath, `${JSON.stringify(after, null, 1)}\n`);
console.log(`precompressed pkg/: ${written} written (${saved.toLocaleString('en')} B less than raw), ${kept} unchanged`);
