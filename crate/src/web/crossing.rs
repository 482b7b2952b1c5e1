//! Values crossing between wasm and JS: JSON text both ways, a long text in pieces or as
//! UTF-8 bytes rather than wasm-bindgen's character-at-a-time string passing.

use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// A JS `Error` whose `name` says the kind (`BadInput`, `StorageError`…).
pub(super) fn js_error(name: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    error.set_name(name);
    error.into()
}

/// Values cross the wasm boundary as JSON text, parsed by the browser's `JSON.parse`: every type
/// then has one text serializer (`json_text`: serde_json's output, strings escaped a word at a
/// time) instead of a second serde-wasm-bindgen copy of each (issue 20: a sixth of the wasm), and
/// V8 builds the objects faster than one boundary call per field would.
pub(super) fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    let internal = |e: serde_json::Error| js_error("Internal", &e.to_string());
    let (mut text, escaped_bytes) = js_text(value, true).map_err(internal)?;
    // A text whose characters outside ASCII are few (an English message with an emoji or an
    // accent) is handed over in pure ASCII: the browser's decoder and `JSON.parse` each take their
    // one-byte fast path, about half the time. A text mostly in another script (over an eighth of
    // it escaped) is faster as UTF-8, written again so (measured in Node and Chromium, issue 20).
    if escaped_bytes * 8 > text.length() as usize {
        text = js_text(value, false).map_err(internal)?.0;
    }
    parse_text(&text)
}

/// How much text crosses to JS at a time: a long chat's snapshot is never whole in wasm memory.
const TEXT_PIECE: usize = 256 * 1024;

/// `value`'s JSON text as a JS string, written and handed over in pieces (`write_in_pieces`).
fn js_text<T: Serialize>(
    value: &T,
    ascii: bool,
) -> Result<(js_sys::JsString, usize), serde_json::Error> {
    let text = std::rc::Rc::new(std::cell::RefCell::new(None::<js_sys::JsString>));
    let into = text.clone();
    let sink = Box::new(move |piece: &str| {
        let mut text = into.borrow_mut();
        *text = Some(appended(text.take(), piece));
    });
    let escaped = crate::json_text::write_in_pieces(value, ascii, TEXT_PIECE, sink)?;
    let whole = text.borrow_mut().take().unwrap_or_default();
    Ok((whole, escaped))
}

/// Texts in pieces as one JS string, each piece dropped once it has crossed (a request's body:
/// `RequestBody`).
pub(super) fn joined(pieces: Vec<Box<str>>) -> JsValue {
    let mut whole = None;
    for piece in pieces {
        whole = Some(appended(whole, &piece));
    }
    whole.map_or_else(|| JsValue::from_str(""), JsValue::from)
}

/// A text made in JS a piece at a time, then encoded as UTF-8 bytes there: a long text (a chat's
/// packed copy) is never whole in the wasm memory.
#[derive(Default)]
pub(super) struct JsText(Option<js_sys::JsString>);

impl JsText {
    pub(super) fn push(&mut self, piece: &str) {
        self.0 = Some(appended(self.0.take(), piece));
    }

    /// The text as UTF-8 bytes; `None` without a `TextEncoder`.
    pub(super) fn utf8(self) -> Option<js_sys::Uint8Array> {
        let encoder = Utf8Encoder::new().ok()?;
        Some(encoder.encode(&self.0.unwrap_or_else(|| js_sys::JsString::from(""))))
    }
}

/// `piece` crossed to JS and put after `before`.
fn appended(before: Option<js_sys::JsString>, piece: &str) -> js_sys::JsString {
    let piece = js_sys::JsString::from(piece);
    match before {
        Some(before) => before.concat(&piece),
        None => piece,
    }
}

/// A JS value read as `T` through `JSON.stringify` (the reverse of [`to_js`]); `undefined` reads
/// as `null`. The error says what did not fit, for the caller's named JS error.
pub(super) fn from_js<T: serde::de::DeserializeOwned>(value: &JsValue) -> Result<T, String> {
    let text = if value.is_undefined() {
        None
    } else {
        let text = js_sys::JSON::stringify(value).map_err(|e| format!("not JSON: {e:?}"))?;
        text_of(&text.into())
    };
    serde_json::from_str(text.as_deref().unwrap_or("null")).map_err(|e| e.to_string())
}

/// Texts shorter than this cross as wasm-bindgen passes strings; longer ones as UTF-8 bytes.
const ENCODED_TEXT_OVER: u32 = 4096;

/// A JS string as a Rust `String`; `None` when `value` is not a string. A long text is encoded by
/// the browser's `TextEncoder` and copied in at once: wasm-bindgen's own string passing writes an
/// ASCII text into wasm memory a character at a time in JS, a fifth of opening a 5 MB chat (issue
/// 20). A lone surrogate becomes U+FFFD either way.
pub(super) fn text_of(value: &JsValue) -> Option<String> {
    let text = value.dyn_ref::<js_sys::JsString>()?;
    if text.length() < ENCODED_TEXT_OVER {
        return value.as_string();
    }
    // Without a `TextEncoder` (none is known), the slow way: never a text lost.
    let Ok(encoder) = Utf8Encoder::new() else {
        return value.as_string();
    };
    let bytes = encoder.encode(text).to_vec();
    Some(
        String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
    )
}

#[wasm_bindgen]
extern "C" {
    /// The browser's `TextEncoder`, given the JS string itself (web-sys's binding takes a `&str`,
    /// which would cross the slow way first).
    #[wasm_bindgen(js_name = TextEncoder)]
    type Utf8Encoder;
    #[wasm_bindgen(constructor, catch, js_class = "TextEncoder")]
    fn new() -> Result<Utf8Encoder, JsValue>;
    #[wasm_bindgen(method, js_class = "TextEncoder")]
    fn encode(this: &Utf8Encoder, text: &js_sys::JsString) -> js_sys::Uint8Array;
    /// `JSON.parse` given a JS string (js-sys's takes a `&str`, which would cross again).
    #[wasm_bindgen(js_namespace = JSON, js_name = parse, catch)]
    pub(super) fn parse_text(text: &js_sys::JsString) -> Result<JsValue, JsValue>;
}

/// An open chat's "refact" export (its workspace copy) as a `Blob`, written a piece at a time;
/// `None`: the chat is not open in this engine.
pub(super) fn refact_blob(
    engine: &crate::Engine,
    chat_id: &str,
) -> Option<Result<web_sys::Blob, String>> {
    let mut pieces = BlobPieces::new();
    let written = engine.write_refact(chat_id, &mut pieces)?;
    Some(written.and_then(|()| pieces.finish().map_err(|e| format!("{e:?}"))))
}

/// Bytes written in wasm and kept in JS, a piece of `TEXT_PIECE` at a time, as a `Blob` (a
/// request's body): a long chat's workspace copy is never whole in the wasm memory (issue 41).
/// The buffer is one piece long and the same one every time (`PIECE_BUFFER`), so no writing
/// leaves a piece-sized hole that later allocations split.
struct BlobPieces {
    buffer: Vec<u8>,
    pieces: js_sys::Array,
}

thread_local! {
    static PIECE_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl BlobPieces {
    fn new() -> Self {
        let mut buffer = PIECE_BUFFER.with(|kept| std::mem::take(&mut *kept.borrow_mut()));
        buffer.clear();
        buffer.reserve_exact(TEXT_PIECE);
        BlobPieces {
            buffer,
            pieces: js_sys::Array::new(),
        }
    }

    fn hand_over(&mut self) {
        if !self.buffer.is_empty() {
            self.pieces
                .push(&js_sys::Uint8Array::from(self.buffer.as_slice()));
            self.buffer.clear();
        }
    }

    /// Everything written, as one `Blob` of its bytes.
    fn finish(mut self) -> Result<web_sys::Blob, JsValue> {
        self.hand_over();
        web_sys::Blob::new_with_u8_array_sequence(&self.pieces)
    }
}

impl Drop for BlobPieces {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.buffer);
        PIECE_BUFFER.with(|kept| *kept.borrow_mut() = buffer);
    }
}

impl std::io::Write for BlobPieces {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let room = TEXT_PIECE - self.buffer.len();
        let taken = bytes.len().min(room);
        self.buffer.extend_from_slice(&bytes[..taken]);
        if self.buffer.len() >= TEXT_PIECE {
            self.hand_over();
        }
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
