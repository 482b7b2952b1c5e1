#!/usr/bin/env bash
# The model in the page, measured (issue 16): load cold and warm, time to first token and tokens/s
# multi- and single-threaded, the page's long tasks while generating, and the same model and
# prompts on llama.cpp's own llama-server (built from the PyPI sdist) on the same threads, side by
# side — and with llama-cpp-python where it is installed (PALAVER_LLAMA_PYTHON). Prints numbers.
# Usage: bash scripts/bench-local.sh
source "$(dirname "$0")/lib.sh"
ensure_wasm_target
ensure_wasm_bindgen
ensure_chromium
cd "$ROOT"
build_pkg
ensure_default_model
ensure_llama_server
cargo build --bin palaver
ensure_npm_packages tests/browser
PALAVER_BIN="$ROOT/target/debug/palaver" PALAVER_LLAMA_SERVER="$(llama_server_path)" node "$ROOT/tests/browser/bench-local.mjs"
