#!/usr/bin/env bash
# The decoding benchmark of issues 3 and 41, in one run: the engine natively and as wasm under Node
# against the official JS SDKs' accumulators (openai ChatCompletionStream, @anthropic-ai/sdk
# MessageStream) on the transcripts of ../shared/wire. Prints MiB/s and ratios.
# Usage: bash scripts/bench-sdk.sh [rounds]
source "$(dirname "$0")/lib.sh"
ensure_wasm_target
ensure_wasm_bindgen
cd "$ROOT"
say "building the engine (native release, wasm for Node)"
cargo build --release --bin palaver
# The shipped engine plus the benchmarks' JS classes (the `bench` feature).
cargo build --profile wasm --target wasm32-unknown-unknown --lib -p palaver --features bench
wasm-bindgen --target nodejs --out-dir "$ROOT/target/bench-node-pkg" \
  "$ROOT/target/wasm32-unknown-unknown/wasm/palaver.wasm"
say "installing the SDKs (tests/bench/package-lock.json)"
(cd tests/bench && npm ci --no-audit --no-fund --silent)
say "measuring"
node tests/bench/bench-sdk.mjs --pkg "$ROOT/target/bench-node-pkg" \
  --native "$ROOT/target/release/palaver" --wire "$ROOT/../shared/wire" --rounds "${1:-30}"
