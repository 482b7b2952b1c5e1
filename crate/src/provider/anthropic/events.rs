//! Anthropic's events as the decoder reads them (issue 20): the per-token deltas typed, borrowing
//! their strings; the others with only the parts a handler reads; a `content_block_stop` read
//! without serde's general reader.

use super::*;

/// Whether the event can be a `content_block_delta` (the per-token events, read typed first):
/// its SSE `event:` field says so, or, without one, its data names the type near the start.
/// Anything else skips that reading — a 20 KB `content_block_start` was scanned twice (issue 20).
/// A delta whose `type` comes late in its object is still read, as a `TypedEvent`.
pub(super) fn may_be_block_delta(event: &SseEvent) -> bool {
    match event.event {
        Some(kind) => kind == "content_block_delta",
        None => {
            let head = &event.data.as_bytes()[..event.data.len().min(48)];
            head.windows(19).any(|w| w == b"content_block_delta")
        }
    }
}

/// What the handlers read of an event, however it was read (typed, or as a `Value`).
pub(super) struct EventParts<'a> {
    pub(super) kind: &'a str,
    pub(super) index: u64,
    pub(super) message_usage: Option<AnthropicReport>,
    pub(super) message_model: Option<String>,
    pub(super) content_block: Option<StartedBlock<'a>>,
    pub(super) delta: Option<&'a Value>,
    pub(super) usage: Option<AnthropicReport>,
    pub(super) error: Option<&'a Value>,
}

/// Any other event: its kind borrowed, the few parts a handler reads as small values, the rest
/// (a `message_start`'s message but its usage) skipped unread (issue 20: a `Value` tree per
/// event was most of a short stream's cost). A field of another type falls back to `Value`.
#[derive(Deserialize)]
pub(super) struct TypedEvent<'a> {
    #[serde(borrow, rename = "type", default)]
    pub(super) kind: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) index: Option<u64>,
    #[serde(default)]
    pub(super) message: Option<MessageHead>,
    #[serde(borrow, default)]
    pub(super) content_block: Option<&'a RawValue>,
    #[serde(default)]
    pub(super) delta: Option<Value>,
    #[serde(default)]
    pub(super) usage: Option<AnthropicReport>,
    #[serde(default)]
    pub(super) error: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct MessageHead {
    #[serde(default)]
    pub(super) usage: Option<AnthropicReport>,
    #[serde(default)]
    pub(super) model: Option<String>,
}

impl<'a> TypedEvent<'a> {
    pub(super) fn read(data: &'a str) -> Option<Self> {
        // A JSON array would fill the struct by position; only an object is an event.
        if !data.trim_start().starts_with('{') {
            return None;
        }
        serde_json::from_str(data).ok()
    }
}

/// A `content_block_delta` event, its strings borrowed from the event's data.
#[derive(Deserialize)]
pub(super) struct TypedBlockDelta<'a> {
    #[serde(borrow, rename = "type")]
    pub(super) kind: Cow<'a, str>,
    pub(super) index: u64,
    #[serde(borrow)]
    pub(super) delta: TypedDelta<'a>,
}

#[derive(Deserialize)]
pub(super) struct TypedDelta<'a> {
    #[serde(borrow, rename = "type")]
    pub(super) kind: Cow<'a, str>,
    #[serde(borrow)]
    pub(super) text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) thinking: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) partial_json: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) signature: Option<Cow<'a, str>>,
    /// Left unread: a citation is kept as its text (`RawJson`).
    #[serde(borrow)]
    pub(super) citation: Option<&'a RawValue>,
}

impl<'a> TypedBlockDelta<'a> {
    pub(super) fn read(data: &'a str) -> Option<Self> {
        if let Some(event) = Self::read_literal(data) {
            return Some(event);
        }
        // A JSON array would fill the struct by position; only an object is an event.
        if !data.trim_start().starts_with('{') {
            return None;
        }
        let event: TypedBlockDelta = serde_json::from_str(data).ok()?;
        (event.kind == "content_block_delta").then_some(event)
    }

    /// The delta as Anthropic writes every one — `{"type":"content_block_delta","index":N,
    /// "delta":{"type":"…","text"|"thinking"|"partial_json"|"signature":"…"}}` — read without serde's
    /// general reader (`literal`); `None` for any other text, which is then read the general way.
    pub(super) fn read_literal(data: &'a str) -> Option<Self> {
        let mut cursor = Cursor::new(data);
        cursor.literal(r#"{"type":"content_block_delta","index":"#)?;
        let index = cursor.index()?;
        cursor.literal(r#","delta":{"type":"#)?;
        let kind = cursor.string()?;
        cursor.literal(",")?;
        let field = cursor.string()?;
        cursor.literal(":")?;
        let value = Some(cursor.string()?);
        cursor.literal("}")?;
        cursor.literal("}")?;
        cursor.end()?;
        let mut delta = TypedDelta {
            kind,
            text: None,
            thinking: None,
            partial_json: None,
            signature: None,
            citation: None,
        };
        match field.as_ref() {
            "text" => delta.text = value,
            "thinking" => delta.thinking = value,
            "partial_json" => delta.partial_json = value,
            "signature" => delta.signature = value,
            _ => return None,
        }
        Some(TypedBlockDelta {
            kind: Cow::Borrowed("content_block_delta"),
            index,
            delta,
        })
    }
}

/// A `content_block_stop` as Anthropic writes every one, `{"type":"content_block_stop",
/// "index":N}`: its index, read without serde's general reader (`literal`).
pub(super) fn read_block_stop(data: &str) -> Option<u64> {
    let mut cursor = Cursor::new(data);
    cursor.literal(r#"{"type":"content_block_stop","index":"#)?;
    let index = cursor.index()?;
    cursor.literal("}")?;
    cursor.end().map(|_| index)
}
