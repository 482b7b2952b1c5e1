#!/usr/bin/env bash
# The context pipeline benchmark of issue 4 on ../shared/bench/history-5k.json.gz: natively
# (criterion) and as wasm under Node, there also the whole request with a real prompt (palaver
# serve on this repository with two MCP servers from npm: its tools, repository map, file list
# and README; issue 41). Prints ms per step.
# Usage: bash scripts/bench-context.sh [rounds]
source "$(dirname "$0")/lib.sh"
ensure_wasm_target
ensure_wasm_bindgen
cd "$ROOT"
say "native (cargo bench --bench context)"
cargo bench --bench context -- --quick 2>&1 | grep -E '^history-5k'
say "wasm under Node"
# The shipped engine plus the benchmarks' JS classes (the `bench` feature).
cargo build --profile wasm --target wasm32-unknown-unknown --lib -p palaver --features bench
wasm-bindgen --target nodejs --out-dir "$ROOT/target/bench-node-pkg" \
  "$ROOT/target/wasm32-unknown-unknown/wasm/palaver.wasm"
# The real prompt's parts come from palaver serve, which serves the page it needs built.
build_pkg
ensure_npm_packages tests/mcp
ensure_npm_packages tests/browser
cargo build --bin palaver
node tests/bench/bench-context.mjs --pkg "$ROOT/target/bench-node-pkg" \
  --history "$ROOT/../shared/bench/history-5k.json.gz" --rounds "${1:-10}" \
  --serve "$ROOT/target/debug/palaver"
