//! `RequestBody`: a provider request's JSON text, held in pieces. The body is the longest text a
//! turn writes (the whole history sent), and the wasm memory never shrinks: written into one
//! buffer, each doubling of the body left a hole of its size, and the memory of a long session
//! grew by steps of the body's next power of two (issue 41). Pieces of about `PIECE` bytes fit
//! the holes the last request's pieces left, and the host hands them over one at a time.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use std::cell::RefCell;
use std::rc::Rc;

/// About how long a piece is: each is cut between two elements of an array (two messages), so a
/// long message makes a longer piece.
const PIECE: usize = 64 * 1024;

#[derive(Clone, Default)]
pub struct RequestBody {
    pieces: Vec<Box<str>>,
}

impl RequestBody {
    /// `value` as the compact JSON text `serde_json::to_string` writes (`json_text`), in pieces.
    /// Serializing plain data cannot fail; if it ever did, the body would be `null` and the
    /// provider would say what is wrong.
    pub fn write<T: Serialize + ?Sized>(value: &T) -> Self {
        let pieces = Rc::new(RefCell::new(Vec::new()));
        let into = pieces.clone();
        let sink = Box::new(move |piece: &str| into.borrow_mut().push(Box::from(piece)));
        match crate::json_text::write_in_pieces(value, false, PIECE, sink) {
            Ok(_) => RequestBody {
                pieces: pieces.take(),
            },
            Err(_) => RequestBody::from_text("null"),
        }
    }

    /// A body already written as one text.
    pub fn from_text(text: &str) -> Self {
        RequestBody {
            pieces: vec![Box::from(text)],
        }
    }

    /// The text in the order it is sent.
    pub fn pieces(&self) -> &[Box<str>] {
        &self.pieces
    }

    /// The pieces, taken (the host drops each once it has crossed).
    pub fn into_pieces(self) -> Vec<Box<str>> {
        self.pieces
    }

    /// The whole text (tests, the CLI, what the user is shown of a request).
    pub fn text(&self) -> String {
        self.pieces.concat()
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|piece| piece.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq for RequestBody {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.text() == other.text()
    }
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// Serialized as the JSON value it is (as `RawValue` was): a request written out whole.
impl Serialize for RequestBody {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = RawValue::from_string(self.text()).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RequestBody {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Ok(RequestBody::from_text(raw.get()))
    }
}
