//! Browser host (wasm32 only).
