//! `StreamAssembly` for JS: one provider stream decoded as its chunks arrive, for tools, the
//! bench page and the SDK comparison (`tests/bench`). The engine itself decodes inside `handle`.

use super::{js_error, to_js};
use crate::decode::{DecodeError, StreamAssembly};
use crate::provider::ProviderKind;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(js_name = StreamAssembly)]
pub struct WasmStreamAssembly {
    assembly: Option<StreamAssembly>,
}

#[wasm_bindgen(js_class = StreamAssembly)]
impl WasmStreamAssembly {
    /// `new StreamAssembly("anthropic")`; throws `BadConfig` for an unknown provider kind.
    #[wasm_bindgen(constructor)]
    pub fn new(kind: &str) -> Result<WasmStreamAssembly, JsValue> {
        let assembly = ProviderKind::parse(kind)
            .and_then(StreamAssembly::assembling)
            .ok_or_else(|| js_error("BadConfig", &format!("unknown provider kind {kind}")))?;
        Ok(WasmStreamAssembly {
            assembly: Some(assembly),
        })
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        if let Some(assembly) = self.assembly.as_mut() {
            assembly.feed(bytes);
        }
    }

    /// The assembled message (SPEC §6.3); throws `StreamError` (with the byte offset in its
    /// message) when the bytes broke, and `BadInput` when called twice.
    pub fn finish(&mut self) -> Result<JsValue, JsValue> {
        let assembly = self
            .assembly
            .take()
            .ok_or_else(|| js_error("BadInput", "finish() was already called"))?;
        match assembly.finish() {
            Ok(decoded) => to_js(&decoded.assembled),
            Err(DecodeError::Stream { error, .. }) => {
                Err(js_error("StreamError", &error.to_string()))
            }
            Err(DecodeError::Unsupported(kind)) => Err(js_error(
                "BadConfig",
                &format!("no decoder for {}", kind.name()),
            )),
        }
    }
}
