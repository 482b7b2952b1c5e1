//! SSE framing (SPEC §6.2): bytes in any chunking → whole events.
//!
//! Handles `event:` and multi-line `data:` fields, comment lines, CRLF/LF/CR line ends (a CR at
//! the end of one chunk and its LF at the start of the next count once), splits inside UTF-8
//! characters, and a stream that ends without its final blank line (the pending event is still
//! dispatched, as the Python SDKs do). Incomplete input is kept, not an error (GUIDE §4).
//! Invariant: every byte is scanned once; a partial line is not rescanned on the next chunk.
//!
//! Events are handed to a callback, borrowed from buffers the decoder reuses: a stream of many
//! small events allocates nothing per line or per event (issue 20: that was most of the time
//! the wasm spent per token before the JSON).

use crate::error::StreamDecodeError;

/// The longest line accepted. A longer line is a typed error, not an allocation without bound.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// One event, valid during the callback it is given to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field, if any.
    pub event: Option<&'a str>,
    /// The `data:` lines joined with `\n`.
    pub data: &'a str,
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
    /// The event being read: its `event:` field, its data, where it started.
    event: String,
    has_event: bool,
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

    /// Feeds a chunk; `on_event` gets each event it completes, in order. The first error —
    /// the decoder's or the callback's — stops the feed and is returned.
    pub fn feed<F>(&mut self, mut bytes: &[u8], on_event: &mut F) -> Result<(), StreamDecodeError>
    where
        F: FnMut(&SseEvent) -> Result<(), StreamDecodeError>,
    {
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
                self.pending_offset += 1;
            }
        }
        self.pending.extend_from_slice(bytes);
        self.drain_lines(on_event)
    }

    /// Ends the stream: a last unterminated line and a pending event are dispatched.
    pub fn finish<F>(&mut self, on_event: &mut F) -> Result<(), StreamDecodeError>
    where
        F: FnMut(&SseEvent) -> Result<(), StreamDecodeError>,
    {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            let offset = self.pending_offset;
            self.pending_offset += line.len() as u64;
            self.scanned = 0;
            self.take_line(&line, offset, on_event)?;
        }
        self.dispatch(on_event)
    }

    fn drain_lines<F>(&mut self, on_event: &mut F) -> Result<(), StreamDecodeError>
    where
        F: FnMut(&SseEvent) -> Result<(), StreamDecodeError>,
    {
        // The buffer is taken out while its lines are read, so a line is borrowed from it
        // instead of copied; it goes back (its read part drained) whatever happens.
        let pending = std::mem::take(&mut self.pending);
        let mut start = 0;
        let mut index = self.scanned;
        let mut result = Ok(());
        while let Some(found) = find_line_end(&pending[index..]) {
            let end = index + found;
            let line_offset = self.pending_offset + start as u64;
            let mut next = end + 1;
            if pending[end] == b'\r' {
                match pending.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            result = self.take_line(&pending[start..end], line_offset, on_event);
            start = next;
            index = next;
            if result.is_err() {
                break;
            }
        }
        self.pending = pending;
        self.pending.drain(..start);
        self.pending_offset += start as u64;
        self.scanned = self.pending.len();
        result?;
        if self.pending.len() > MAX_LINE_BYTES {
            return Err(self.malformed(self.pending_offset, "line longer than the 8 MiB limit"));
        }
        Ok(())
    }

    fn take_line<F>(
        &mut self,
        line: &[u8],
        offset: u64,
        on_event: &mut F,
    ) -> Result<(), StreamDecodeError>
    where
        F: FnMut(&SseEvent) -> Result<(), StreamDecodeError>,
    {
        if line.len() > MAX_LINE_BYTES {
            return Err(self.malformed(offset, "line longer than the 8 MiB limit"));
        }
        if line.is_empty() {
            return self.dispatch(on_event);
        }
        let text = std::str::from_utf8(line)
            .map_err(|e| self.malformed(offset + e.valid_up_to() as u64, "invalid UTF-8"))?;
        if line.first() == Some(&b':') {
            return Ok(());
        }
        let (field, value) = split_field(text);
        self.event_offset.get_or_insert(offset);
        match field {
            "data" => self.push_data(value),
            "event" => {
                self.event.clear();
                self.event.push_str(value);
                self.has_event = true;
            }
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

    /// Hands over the event read so far (if it has data) and starts the next one.
    fn dispatch<F>(&mut self, on_event: &mut F) -> Result<(), StreamDecodeError>
    where
        F: FnMut(&SseEvent) -> Result<(), StreamDecodeError>,
    {
        let offset = self.event_offset.take().unwrap_or(self.pending_offset);
        let result = if self.has_data {
            on_event(&SseEvent {
                event: self.has_event.then_some(self.event.as_str()),
                data: &self.data,
                offset,
            })
        } else {
            Ok(())
        };
        self.has_event = false;
        self.has_data = false;
        self.event.clear();
        self.data.clear();
        result
    }

    fn malformed(&self, offset: u64, reason: &str) -> StreamDecodeError {
        StreamDecodeError::MalformedStream {
            provider: self.provider.clone(),
            offset,
            reason: reason.to_string(),
        }
    }
}

/// The first LF or CR. Eight bytes a step (SWAR): the wasm is size-optimized and 32-bit, where
/// `memchr2` looks at four bytes a step through calls it does not inline — 7 % of a stream of
/// short events (issue 20).
fn find_line_end(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const LFS: u64 = ONES * b'\n' as u64;
    const CRS: u64 = ONES * b'\r' as u64;
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let (lf, cr) = (word ^ LFS, word ^ CRS);
        // A byte of `lf` or `cr` is zero where the word has that byte.
        if (lf.wrapping_sub(ONES) & !lf | cr.wrapping_sub(ONES) & !cr) & HIGHS != 0 {
            break;
        }
        at += 8;
    }
    let rest = bytes.get(at..)?;
    rest.iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|i| at + i)
}

/// `field: value` → (field, value) with one leading space of the value removed.
/// The field name is a few bytes: found by a plain look, not a general string search (the size-
/// optimized wasm does not inline `split_once`'s searcher; it was 7 % of a stream of deltas).
fn split_field(line: &str) -> (&str, &str) {
    match line.bytes().position(|b| b == b':') {
        Some(at) => {
            let skip = if line.as_bytes().get(at + 1) == Some(&b' ') {
                2
            } else {
                1
            };
            (&line[..at], &line[at + skip..])
        }
        None => (line, ""),
    }
}
