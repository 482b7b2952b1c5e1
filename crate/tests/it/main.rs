//! The one integration test binary (GUIDE §7). Conformance and wire cases run natively and, with
//! `--target wasm32-unknown-unknown`, in headless Chromium; property, tidy and CLI tests are
//! native only.

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod support;

#[cfg(not(target_arch = "wasm32"))]
mod cache_warmth;
mod conformance;
mod context;
#[cfg(not(target_arch = "wasm32"))]
mod edit_blocks;
#[cfg(not(target_arch = "wasm32"))]
mod json_text;
#[cfg(not(target_arch = "wasm32"))]
mod literal;
mod outside;
mod prompt_progress;
mod proposals;
mod refusals;
mod render;
#[cfg(not(target_arch = "wasm32"))]
mod replicas;
#[cfg(not(target_arch = "wasm32"))]
mod replication;
mod requests;
mod security_streams;
mod stability;
#[cfg(not(target_arch = "wasm32"))]
mod stored_order;
mod streams;
mod tagged;
mod thinking;
#[cfg(not(target_arch = "wasm32"))]
mod trajectory;
mod windows;

#[cfg(target_arch = "wasm32")]
mod browser_host;
#[cfg(target_arch = "wasm32")]
mod facade;
mod wire;

#[cfg(not(target_arch = "wasm32"))]
mod boundary_docs;
#[cfg(not(target_arch = "wasm32"))]
mod cli;
#[cfg(not(target_arch = "wasm32"))]
mod host_graph;
#[cfg(not(target_arch = "wasm32"))]
mod names;
#[cfg(not(target_arch = "wasm32"))]
mod props;
#[cfg(not(target_arch = "wasm32"))]
mod tidy;
#[cfg(not(target_arch = "wasm32"))]
mod types;
