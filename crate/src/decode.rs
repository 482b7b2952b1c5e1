//! Whole-stream decoding: a provider's bytes, in any chunking, → the delta ops and the assembled
//! message (SPEC §6.3). Used by `palaver decode`, the conformance suite and the benchmarks; the
//! session does the same step by step.

use crate::delta::{DeltaOp, Draft, StreamFailure};
use crate::error::StreamDecodeError;
use crate::provider::{DecodeItem, ProviderKind, StreamDecoder};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub ops: Vec<DeltaOp>,
    pub assembled: Value,
    /// The stream reached its end (SECURITY D8/D9): the end marker, or for Gemini a finish
    /// reason. A stream without it is truncated, whatever its content.
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    Unsupported(ProviderKind),
    /// The bytes broke; `partial` holds what was decoded before.
    Stream {
        error: StreamDecodeError,
        partial: Decoded,
    },
}

/// Decodes `chunks` in order, as if they arrived one by one.
pub fn decode_stream(kind: ProviderKind, chunks: &[&[u8]]) -> Result<Decoded, DecodeError> {
    let mut stream = StreamAssembly::new(kind).ok_or(DecodeError::Unsupported(kind))?;
    for chunk in chunks {
        stream.feed(chunk);
    }
    stream.finish()
}

/// A stream decoded as its bytes arrive: feed chunks, then `finish` for the assembled message.
/// The first decode error stops it; `finish` then reports it with what came before.
pub struct StreamAssembly {
    decoder: StreamDecoder,
    acc: Accumulator,
    error: Option<StreamDecodeError>,
}

impl StreamAssembly {
    pub fn new(kind: ProviderKind) -> Option<Self> {
        Some(StreamAssembly {
            decoder: StreamDecoder::for_kind(kind)?,
            acc: Accumulator {
                kind,
                draft: Draft::default(),
                ops: Vec::new(),
                finish_reason: None,
                failure: None,
                done: false,
            },
            error: None,
        })
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        if self.acc.stopped() || self.error.is_some() {
            return;
        }
        match self.decoder.feed(chunk) {
            Ok(items) => self.acc.take(items),
            Err(error) => self.error = Some(error),
        }
    }

    pub fn finish(mut self) -> Result<Decoded, DecodeError> {
        if !self.acc.stopped() && self.error.is_none() {
            match self.decoder.finish() {
                Ok(items) => self.acc.take(items),
                Err(error) => self.error = Some(error),
            }
        }
        match self.error {
            Some(error) => Err(DecodeError::Stream {
                error,
                partial: self.acc.finish(),
            }),
            None => Ok(self.acc.finish()),
        }
    }
}

struct Accumulator {
    kind: ProviderKind,
    done: bool,
    draft: Draft,
    ops: Vec<DeltaOp>,
    finish_reason: Option<String>,
    failure: Option<StreamFailure>,
}

impl Accumulator {
    fn stopped(&self) -> bool {
        self.failure.is_some()
    }

    fn take(&mut self, items: Vec<DecodeItem>) {
        for item in items {
            match item {
                DecodeItem::Op(op) => {
                    self.draft.apply(&op);
                    self.ops.push(op);
                }
                DecodeItem::Finish(reason) => self.finish_reason = Some(reason),
                DecodeItem::Failure(failure) => {
                    self.failure = Some(failure);
                    return;
                }
                DecodeItem::Done => self.done = true,
            }
        }
    }

    fn finish(self) -> Decoded {
        let finish_reason = if self.failure.is_some() {
            Some("error")
        } else {
            self.finish_reason.as_deref()
        };
        let complete = self.failure.is_none()
            && StreamDecoder::completion(self.kind, self.finish_reason.as_deref(), self.done)
                .is_some();
        Decoded {
            assembled: self.draft.assembled(finish_reason, self.failure.as_ref()),
            ops: self.ops,
            complete,
        }
    }
}
