//! The plumbing every JSON-over-SSE decoder shares: SSE framing, fail-once, JSON parsing with the
//! byte offset of the event that broke.
//!
//! Invariants: once a feed fails, every later call returns the same error; `finish` dispatches
//! a pending event and then lets the provider flush what a cut stream left open (`end`), once.

use super::DecodeItem;
use crate::error::StreamDecodeError;
use crate::sse::{SseDecoder, SseEvent};
use serde_json::Value;

/// One provider's event handling, behind the shared framing.
pub trait Events: Default {
    const PROVIDER: &'static str;

    /// Decodes one SSE event into items.
    fn event(
        &mut self,
        event: &SseEvent,
        items: &mut Vec<DecodeItem>,
    ) -> Result<(), StreamDecodeError>;

    /// The stream ended: emit what open blocks hold. Called once, after the last event.
    fn end(&mut self, items: &mut Vec<DecodeItem>);
}

#[derive(Debug)]
pub struct Framed<E> {
    sse: SseDecoder,
    state: E,
    failed: Option<StreamDecodeError>,
}

impl<E: Events> Default for Framed<E> {
    fn default() -> Self {
        Framed {
            sse: SseDecoder::new(E::PROVIDER),
            state: E::default(),
            failed: None,
        }
    }
}

impl<E: Events> Framed<E> {
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<DecodeItem>, StreamDecodeError> {
        self.check_not_failed()?;
        let mut items = Vec::new();
        let state = &mut self.state;
        let fed = self
            .sse
            .feed(bytes, &mut |event| state.event(event, &mut items));
        fed.map_err(|e| self.fail(e))?;
        Ok(items)
    }

    pub fn finish(&mut self) -> Result<Vec<DecodeItem>, StreamDecodeError> {
        self.check_not_failed()?;
        let mut items = Vec::new();
        let state = &mut self.state;
        let fed = self.sse.finish(&mut |event| state.event(event, &mut items));
        fed.map_err(|e| self.fail(e))?;
        self.state.end(&mut items);
        Ok(items)
    }

    fn check_not_failed(&self) -> Result<(), StreamDecodeError> {
        self.failed.clone().map_or(Ok(()), Err)
    }

    fn fail(&mut self, error: StreamDecodeError) -> StreamDecodeError {
        self.failed = Some(error.clone());
        error
    }
}

/// The event's data as a JSON object; `None` for an empty data field, and for the `[DONE]` line
/// that OpenAI-compatible routers (and the official SDKs) add after any provider's own end.
pub fn json_object(event: &SseEvent, provider: &str) -> Result<Option<Value>, StreamDecodeError> {
    let data = event.data.trim();
    if data.is_empty() || data == "[DONE]" {
        return Ok(None);
    }
    let value: Value =
        serde_json::from_str(data).map_err(|e| StreamDecodeError::MalformedStream {
            provider: provider.into(),
            offset: event.offset,
            reason: format!("event data is not JSON: {e}"),
        })?;
    if !value.is_object() {
        return Err(StreamDecodeError::ProviderMisbehaved {
            provider: provider.into(),
            offset: event.offset,
            reason: "event data is not a JSON object".into(),
        });
    }
    Ok(Some(value))
}

/// An event's kind: the payload's `type`, else the SSE `event:` field.
pub fn event_kind<'a>(data: &'a Value, event: &SseEvent<'a>) -> &'a str {
    data.get("type")
        .and_then(Value::as_str)
        .or(event.event)
        .unwrap_or("")
}

pub fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A provider error object's code (`code`, else `type`) and message.
pub fn failure_from(error: &Value, fallback_code: &str) -> crate::delta::StreamFailure {
    let code = ["code", "type"]
        .iter()
        .filter_map(|key| error.get(*key))
        .find_map(|v| match v {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| fallback_code.to_string());
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    crate::delta::StreamFailure { code, message }
}
