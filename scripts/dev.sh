#!/usr/bin/env bash
# Sets everything up, builds the engine (wasm + native) and serves the app on 127.0.0.1.
# Usage: scripts/dev.sh [palaver serve options…]   (default port 8787)
source "$(dirname "$0")/lib.sh"
ensure_wasm_target
ensure_wasm_bindgen
build_pkg
say "building the palaver binary"
cargo build --release --bin palaver --manifest-path "$ROOT/Cargo.toml"
cd "$ROOT"
say "serving www/ and pkg/ (Ctrl-C stops)"
exec "$ROOT/target/release/palaver" serve --www "$ROOT/www" --pkg "$ROOT/pkg" "$@"
