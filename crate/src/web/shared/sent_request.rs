//! The last provider request of a chat as it went out, the key redacted (`Palaver.lastRequest`),
//! kept in `Shared` by `streams`.

use serde_json::Value;

/// A request as it went out, the key redacted (`Palaver.lastRequest`).
#[derive(serde::Serialize)]
pub(in crate::web) struct SentRequest {
    pub(in crate::web) provider: &'static str,
    pub(in crate::web) url: String,
    pub(in crate::web) headers: serde_json::Map<String, Value>,
    pub(in crate::web) body: Box<serde_json::value::RawValue>,
}
