//! The last provider request of a chat as it went out, the key redacted (`Palaver.lastRequest`),
//! kept in `Shared` by `streams`.

use serde_json::Value;
use wasm_bindgen::JsValue;

/// A request as it went out, the key redacted (`Palaver.lastRequest`). The body is the JS string
/// the fetch sent, not a copy in wasm: a chat's last body alive beside the next one being written
/// raised the wasm memory's high-water mark at every turn (issue 41).
pub(in crate::web) struct SentRequest {
    pub(in crate::web) head: SentHead,
    pub(in crate::web) body: JsValue,
}

/// What of a sent request is not its body.
#[derive(serde::Serialize)]
pub(in crate::web) struct SentHead {
    pub(in crate::web) provider: &'static str,
    pub(in crate::web) url: String,
    pub(in crate::web) headers: serde_json::Map<String, Value>,
}
