#!/usr/bin/env bash
# The model in the page, measured (issue 16): load cold and warm, time to first token and tokens/s
# multi- and single-threaded, the page's long tasks while generating, and the same model natively
# where llama-cpp-python is installed (PALAVER_LLAMA_PYTHON=/path/to/python). Prints numbers.
# Usage: bash scripts/bench-local.sh
source "$(dirname "$0")/lib.sh"
ensure_wasm_target
ensure_wasm_bindgen
ensure_chromium
cd "$ROOT"
build_pkg
ensure_default_model
cargo build --bin palaver
ensure_npm_packages tests/browser
PALAVER_BIN="$ROOT/target/debug/palaver" node "$ROOT/tests/browser/bench-local.mjs"
