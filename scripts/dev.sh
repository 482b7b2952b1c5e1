#!/usr/bin/env bash
# Sets everything up, builds the engine (wasm + native) and serves the app on 127.0.0.1.
# Usage: scripts/dev.sh [palaver serve options…]   (default port 8787)
# The workspace (what the agent's tools may touch) is the directory you run this from, unless you
# pass --workspace DIR. The app itself is served from a private copy outside any workspace:
# `palaver serve` refuses to serve it from a directory the model can write (SECURITY E3).
CALLER_DIR="$PWD"
source "$(dirname "$0")/lib.sh"
ensure_wasm_target
ensure_wasm_bindgen
build_pkg
say "building the palaver binary"
cargo build --release --bin palaver --manifest-path "$ROOT/Cargo.toml"
APP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/palaver-app.XXXXXX")"
trap 'rm -rf "$APP_DIR"' EXIT
cp -R "$ROOT/www" "$ROOT/pkg" "$APP_DIR/"
args=("$@")
case " $* " in
  *" --workspace "* | *" --workspace="*) ;;
  *) args=(--workspace "$CALLER_DIR" "${args[@]}") ;;
esac
say "serving the app from $APP_DIR with the workspace ${CALLER_DIR} (Ctrl-C stops)"
"$ROOT/target/release/palaver" serve --www "$APP_DIR/www" --pkg "$APP_DIR/pkg" "${args[@]}"
