//! A literal fast path for the per-token events, whose shape a provider never varies (issue 20).
//!
//! In the size-optimized wasm, serde_json reads a small event through a call per byte (`peek`,
//! `parse_whitespace`, `next_key_seed`…): most of the time of a stream of deltas. An event that
//! matches the expected text key for key is read here by plain comparisons; anything else — keys
//! in another order, another key, a number that is not a plain index, a control byte in a
//! string — is not matched, and the caller reads it the general way. A string with escapes is
//! unescaped by serde_json, so a match reads what serde_json would.
//!
//! Invariant: whatever `Cursor` accepts is valid JSON that serde_json reads to the same values.

use std::borrow::Cow;

/// A position in an event's text.
pub struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor { text, at: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// Skips JSON whitespace (space, tab, LF, CR).
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.at) {
            self.at += 1;
        }
    }

    /// `expected` next, after optional whitespace (`expected` is structure and keys: `{"type":`).
    pub fn literal(&mut self, expected: &str) -> Option<()> {
        self.skip_whitespace();
        let end = self.at + expected.len();
        (self.bytes().get(self.at..end)? == expected.as_bytes()).then(|| self.at = end)
    }

    /// A JSON string, borrowed when it has no escapes; `None` for a string JSON refuses (a raw
    /// control byte) or an unterminated one.
    pub fn string(&mut self) -> Option<Cow<'a, str>> {
        self.literal("\"")?;
        let start = self.at;
        let mut escaped = false;
        let bytes = self.bytes();
        loop {
            // Plain bytes are skipped a word at a time: a quote, a backslash or a control byte.
            self.at = crate::json_text::next_escape(bytes, self.at.min(bytes.len()));
            match *bytes.get(self.at)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    self.at += 2;
                }
                _ => return None, // a control byte, which JSON refuses in a string
            }
        }
        self.at += 1;
        if !escaped {
            return self.text.get(start..self.at - 1).map(Cow::Borrowed);
        }
        // With its quotes: serde_json unescapes it, and refuses a bad escape.
        let quoted = self.text.get(start - 1..self.at)?;
        serde_json::from_str::<String>(quoted).ok().map(Cow::Owned)
    }

    /// A non-negative integer as JSON writes one (no sign, no leading zero, no fraction or
    /// exponent), within `u64`.
    pub fn index(&mut self) -> Option<u64> {
        self.skip_whitespace();
        let digits = self
            .bytes()
            .get(self.at..)
            .unwrap_or_default()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let text = self.text.get(self.at..self.at + digits)?;
        if digits == 0 || (digits > 1 && text.starts_with('0')) {
            return None;
        }
        if let Some(b'.' | b'e' | b'E') = self.bytes().get(self.at + digits) {
            return None;
        }
        self.at += digits;
        text.parse().ok()
    }

    /// Nothing but whitespace left.
    pub fn end(mut self) -> Option<()> {
        self.skip_whitespace();
        (self.at == self.text.len()).then_some(())
    }
}
