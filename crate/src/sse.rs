//! SSE framing (SPEC §6.2): bytes in any chunking → whole events.
//!
//! Handles `event:` and multi-line `data:` fields, comment lines, CRLF/LF/CR line ends (a CR at
//! the end of one chunk and its LF at the start of the next count once), splits inside UTF-8
//! characters, and a stream that ends without its final blank line (the pending event is still
//! dispatched, as the Python SDKs do). Incomplete input is kept, not an error (GUIDE §4).
//! Invariant: every byte is scanned once; a partial line is not rescanned on the next chunk.

use crate::error::StreamDecodeError;

/// The longest line accepted. A longer line is a typed error, not an allocation without bound.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// Byte offset in the stream of the event's first line.
    pub offset: u64,
}

#[derive(Debug, Default)]
pub struct SseDecoder {
    provider: String,
    /// Bytes not yet consumed as whole lines.
    pending: Vec<u8>,
    /// Index in `pending` up to which no line end was found.
    scanned: usize,
    /// Stream offset of `pending[0]`.
    pending_offset: u64,
    /// The previous chunk ended on CR: a leading LF belongs to that line end.
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    event_offset: Option<u64>,
}

impl SseDecoder {
    pub fn new(provider: &str) -> Self {
        SseDecoder {
            provider: provider.to_string(),
            ..SseDecoder::default()
        }
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<Vec<SseEvent>, StreamDecodeError> {
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
                self.pending_offset += 1;
            }
        }
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        self.drain_lines(&mut events)?;
        Ok(events)
    }

    /// Ends the stream: a last unterminated line and a pending event are dispatched.
    pub fn finish(&mut self) -> Result<Vec<SseEvent>, StreamDecodeError> {
        let mut events = Vec::new();
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            let offset = self.pending_offset;
            self.pending_offset += line.len() as u64;
            self.scanned = 0;
            self.take_line(&line, offset, &mut events)?;
        }
        self.dispatch(&mut events);
        Ok(events)
    }

    fn drain_lines(&mut self, events: &mut Vec<SseEvent>) -> Result<(), StreamDecodeError> {
        let mut start = 0;
        let mut index = self.scanned;
        while let Some(found) = find_line_end(&self.pending[index..]) {
            let end = index + found;
            let line_offset = self.pending_offset + start as u64;
            let line = self.pending[start..end].to_vec();
            let mut next = end + 1;
            if self.pending[end] == b'\r' {
                match self.pending.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            self.take_line(&line, line_offset, events)?;
            start = next;
            index = next;
        }
        self.pending.drain(..start);
        self.pending_offset += start as u64;
        self.scanned = self.pending.len();
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(self.malformed(self.pending_offset, "line longer than the 8 MiB limit"));
        }
        Ok(())
    }

    fn take_line(
        &mut self,
        line: &[u8],
        offset: u64,
        events: &mut Vec<SseEvent>,
    ) -> Result<(), StreamDecodeError> {
        if line.len() > MAX_LINE_BYTES {
            return Err(self.malformed(offset, "line longer than the 8 MiB limit"));
        }
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        let text = std::str::from_utf8(line)
            .map_err(|e| self.malformed(offset + e.valid_up_to() as u64, "invalid UTF-8"))?;
        if text.starts_with(':') {
            return Ok(());
        }
        let (field, value) = split_field(text);
        self.event_offset.get_or_insert(offset);
        match field {
            "data" => self.push_data(value),
            "event" => self.event = Some(value.to_string()),
            _ => {} // `id`, `retry` and unknown fields are ignored, as the SSE spec says.
        }
        Ok(())
    }

    fn push_data(&mut self, value: &str) {
        if self.has_data {
            self.data.push('\n');
        }
        self.data.push_str(value);
        self.has_data = true;
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        let offset = self.event_offset.take().unwrap_or(self.pending_offset);
        let event = self.event.take();
        if self.has_data {
            self.has_data = false;
            events.push(SseEvent {
                event,
                data: std::mem::take(&mut self.data),
                offset,
            });
        }
    }

    fn malformed(&self, offset: u64, reason: &str) -> StreamDecodeError {
        StreamDecodeError::MalformedStream {
            provider: self.provider.clone(),
            offset,
            reason: reason.to_string(),
        }
    }
}

fn find_line_end(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n' || b == b'\r')
}

/// `field: value` → (field, value) with one leading space of the value removed.
fn split_field(line: &str) -> (&str, &str) {
    match line.split_once(':') {
        Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
        None => (line, ""),
    }
}
