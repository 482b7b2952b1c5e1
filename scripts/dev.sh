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
ensure_default_model
say "building the palaver binary"
cargo build --release --bin palaver --manifest-path "$ROOT/Cargo.toml"
args=("$@")
WORKSPACE=""
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --workspace) WORKSPACE="${args[$((i + 1))]:-}" ;;
    --workspace=*) WORKSPACE="${args[$i]#--workspace=}" ;;
  esac
done
if [ -z "$WORKSPACE" ]; then
  WORKSPACE="$CALLER_DIR"
  args=(--workspace "$CALLER_DIR" "${args[@]}")
fi
# A private copy of the app in the first place that is neither inside the workspace nor holds it.
WORKSPACE_REAL="$(realpath -m "$WORKSPACE")"
APP_DIR=""
for base in "${TMPDIR:-/tmp}" /var/tmp "$HOME/.cache"; do
  base_real="$(realpath -m "$base")"
  case "$base_real/" in "${WORKSPACE_REAL%/}"/*) continue ;; esac
  case "$WORKSPACE_REAL/" in "$base_real"/*) continue ;; esac
  mkdir -p "$base" && APP_DIR="$(mktemp -d "$base/palaver-app.XXXXXX")" && break
done
[ -n "$APP_DIR" ] || { echo "no place outside the workspace $WORKSPACE to serve the app from; pass --workspace" >&2; exit 1; }
trap 'rm -rf "$APP_DIR"' EXIT
cp -R "$ROOT/www" "$ROOT/pkg" "$APP_DIR/"
say "serving the app from $APP_DIR with the workspace $WORKSPACE (Ctrl-C stops)"
"$ROOT/target/release/palaver" serve --www "$APP_DIR/www" --pkg "$APP_DIR/pkg" "${args[@]}"
