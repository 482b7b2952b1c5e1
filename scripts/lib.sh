# Shared helpers for the scripts: install what is missing, skip what is there.
# Works on a fresh Debian 12 with Rust (rustup) and Node 20; uses sudo when not root.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# The wasm-bindgen version the crate is locked to; the CLI must match it exactly.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' "$ROOT/Cargo.lock"
}

ensure_wasm_target() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
}

ensure_wasm_bindgen() {
  local want
  want="$(wasm_bindgen_version)"
  if command -v wasm-bindgen >/dev/null && [ "$(wasm-bindgen --version | awk '{print $2}')" = "$want" ]; then
    return
  fi
  say "installing wasm-bindgen-cli $want (a few minutes, once)"
  # --locked first; if the registry no longer serves a version its lockfile pins, resolve anew.
  cargo install wasm-bindgen-cli --version "$want" --locked --force \
    || cargo install wasm-bindgen-cli --version "$want" --force
}

ensure_chromium() {
  if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    return
  fi
  say "installing Chromium and ChromeDriver from Debian"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver
}

# Builds the wasm package into pkg/ (wasm-bindgen --target web) and checks its imports.
build_pkg() {
  say "building the wasm engine into pkg/"
  cargo build --release --target wasm32-unknown-unknown --lib --manifest-path "$ROOT/Cargo.toml"
  # Function names are kept out of the shipped bundle (a quarter of its size); stack traces
  # in the browser show offsets instead.
  wasm-bindgen --target web --remove-name-section --remove-producers-section --out-dir "$ROOT/pkg" \
    "$ROOT/target/wasm32-unknown-unknown/release/palaver.wasm"
  node "$ROOT/scripts/check-wasm.mjs" "$ROOT/pkg/palaver_bg.wasm"
  node "$ROOT/scripts/shell-list.mjs" "$ROOT"
}
