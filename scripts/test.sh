#!/usr/bin/env bash
# Runs every test: the native suite (cargo test), then the same conformance suite compiled to
# wasm in headless Chromium (wasm-bindgen-test), after building and checking the wasm package.
# Installs what is missing first (wasm target, wasm-bindgen-cli, Chromium + ChromeDriver).
source "$(dirname "$0")/lib.sh"
ensure_wasm_target
ensure_wasm_bindgen
ensure_chromium
cd "$ROOT"
build_pkg
say "native tests"
cargo test --workspace
say "wasm tests in headless Chromium"
CHROMEDRIVER=/usr/bin/chromedriver WASM_BINDGEN_TEST_TIMEOUT=300 \
  cargo test --target wasm32-unknown-unknown --test it
say "all tests passed"
