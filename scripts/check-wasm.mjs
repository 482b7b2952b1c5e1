// Proves each wasm bundle imports nothing but wasm-bindgen's glue (GUIDE §6), and prints its size.
// Usage: node scripts/check-wasm.mjs <file.wasm>...
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { gzipSync } from 'node:zlib';

for (const path of process.argv.slice(2)) {
  const bytes = readFileSync(path);
  const module = new WebAssembly.Module(bytes);
  // wasm-bindgen names its glue module after the bundle: ./palaver_bg.js, ./palaver_render_bg.js.
  const glue = `./${basename(path, '.wasm')}`;
  const foreign = WebAssembly.Module.imports(module).filter((i) => !i.module.startsWith(glue) && i.module !== '__wbindgen_placeholder__' && i.module !== 'wbg');
  if (foreign.length > 0) {
    console.error(`${path} imports something other than wasm-bindgen glue:`, foreign);
    process.exit(1);
  }
  console.log(`${basename(path)}: ${bytes.length} bytes raw, ${gzipSync(bytes, { level: 9 }).length} bytes gzipped; imports: wasm-bindgen glue only`);
}
