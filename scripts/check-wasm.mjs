// Proves the wasm bundle imports nothing but wasm-bindgen's glue (GUIDE §6), and prints its size.
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';

const path = process.argv[2];
const bytes = readFileSync(path);
const module = new WebAssembly.Module(bytes);
const foreign = WebAssembly.Module.imports(module).filter((i) => !i.module.startsWith('./palaver_bg') && i.module !== '__wbindgen_placeholder__' && i.module !== 'wbg');
if (foreign.length > 0) {
  console.error('the wasm imports something other than wasm-bindgen glue:', foreign);
  process.exit(1);
}
console.log(`wasm bundle: ${bytes.length} bytes raw, ${gzipSync(bytes).length} bytes gzipped; imports: wasm-bindgen glue only`);
