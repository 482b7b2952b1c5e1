#!/usr/bin/env bash
# Packs the browser extension (manifest v3, side panel) from the same files as the site: www/ and
# the built pkg/ (run scripts/dev.sh or scripts/test.sh first, or pass --build), plus extension/.
# Output: target/extension/ (load it unpacked at chrome://extensions) and target/palaver-extension.zip
# when `zip` is present. The extension keeps its own IndexedDB, separate from the site's: move
# chats between them with Export/Import.
source "$(dirname "$0")/lib.sh"
if [ "${1:-}" = "--build" ]; then
  ensure_wasm_target
  ensure_wasm_bindgen
  build_pkg
fi
[ -f "$ROOT/pkg/palaver_bg.wasm" ] || { echo "pkg/ is not built: run with --build" >&2; exit 1; }
OUT="$ROOT/target/extension"
rm -rf "$OUT"
mkdir -p "$OUT/www" "$OUT/pkg"
cp "$ROOT"/extension/manifest.json "$ROOT"/extension/background.js "$OUT/"
# www/'s files the page runs, as the offline shell lists them (its modules are in pkg/app.js); the
# service worker itself is the site's offline cache, and an extension's files are already local.
node --input-type=module -e '
  import { copyFileSync, mkdirSync } from "node:fs";
  import { dirname, join } from "node:path";
  const [root, out] = process.argv.slice(1);
  const { shellFiles } = await import(join(root, "scripts/shell-files.mjs"));
  for (const file of shellFiles(root)) {
    if (file === "./" || file.startsWith("../")) continue;
    mkdirSync(dirname(join(out, "www", file)), { recursive: true });
    copyFileSync(join(root, "www", file), join(out, "www", file));
  }' "$ROOT" "$OUT"
cp "$ROOT/pkg/app.js" "$ROOT/pkg/palaver_bg.wasm" "$OUT/pkg/"
mkdir -p "$OUT/pkg/render"
cp "$ROOT/pkg/render/palaver_render.js" "$ROOT/pkg/render/palaver_render_bg.wasm" "$OUT/pkg/render/"
# highlight.js for code blocks (the model in the page cannot run in an extension: not copied).
mkdir -p "$OUT/pkg/vendor"
cp -r "$ROOT/pkg/vendor/highlight" "$OUT/pkg/vendor/"
# jsdiff, for the diff an approval card shows before a write; brotli copies are palaver serve's.
cp -r "$ROOT/pkg/vendor/diff" "$OUT/pkg/vendor/"
find "$OUT/pkg" -name '*.br' -delete
if command -v zip >/dev/null; then
  (cd "$OUT" && zip -qr "$ROOT/target/palaver-extension.zip" .)
fi
say "extension packed in $OUT ($(du -sk "$OUT" | cut -f1) KiB)"
