//! Whole-stream decoding: a provider's bytes, in any chunking, → the delta ops and the assembled
//! message (SPEC §6.3). Used by `palaver decode`, the conformance suite and the benchmarks; the
//! session does the same step by step.

use crate::collector::Collector;
use crate::delta::{Assembled, DeltaOp, Draft};
use crate::error::StreamDecodeError;
use crate::provider::{ProviderKind, StreamDecoder};

#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub ops: Vec<DeltaOp>,
    pub assembled: Assembled,
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
    feed_all(StreamAssembly::new(kind), kind, chunks)
}

/// The same without keeping the ops (`Decoded::ops` is empty): what the page's
/// `StreamAssembly` does, and what `palaver decode --bench` times.
pub fn assemble_stream(kind: ProviderKind, chunks: &[&[u8]]) -> Result<Decoded, DecodeError> {
    feed_all(StreamAssembly::assembling(kind), kind, chunks)
}

fn feed_all(
    stream: Option<StreamAssembly>,
    kind: ProviderKind,
    chunks: &[&[u8]],
) -> Result<Decoded, DecodeError> {
    let mut stream = stream.ok_or(DecodeError::Unsupported(kind))?;
    for chunk in chunks {
        stream.feed(chunk);
    }
    stream.finish()
}

/// A stream decoded as its bytes arrive: feed chunks, then `finish` for the assembled message.
/// The first decode error stops it; `finish` then reports it with what came before. The items
/// go through the session's own `Collector` and `Draft`, so what this checks is what runs.
pub struct StreamAssembly {
    kind: ProviderKind,
    decoder: StreamDecoder,
    collector: Collector,
    draft: Draft,
    /// The ops in order, when the caller wants them (`None`: only the assembled message).
    ops: Option<Vec<DeltaOp>>,
    error: Option<StreamDecodeError>,
}

impl StreamAssembly {
    /// A stream whose ops are kept for [`Decoded::ops`] beside the assembled message.
    pub fn new(kind: ProviderKind) -> Option<Self> {
        Some(StreamAssembly {
            kind,
            decoder: StreamDecoder::for_kind(kind)?,
            collector: Collector::default(),
            draft: Draft::default(),
            ops: Some(Vec::new()),
            error: None,
        })
    }

    /// A stream assembled into its message only (`Decoded::ops` stays empty): each op's payload
    /// moves into the draft instead of being copied beside the kept op.
    pub fn assembling(kind: ProviderKind) -> Option<Self> {
        Some(StreamAssembly {
            ops: None,
            ..Self::new(kind)?
        })
    }

    fn stopped(&self) -> bool {
        self.collector.failure.is_some() || self.error.is_some()
    }

    fn take(&mut self, items: Vec<crate::provider::DecodeItem>) {
        for op in self.collector.collect(items) {
            match self.ops.as_mut() {
                Some(ops) => {
                    self.draft.apply(&op);
                    ops.push(op);
                }
                None => self.draft.apply_owned(op),
            }
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        if self.stopped() {
            return;
        }
        match self.decoder.feed(chunk) {
            Ok(items) => self.take(items),
            Err(error) => self.error = Some(error),
        }
    }

    pub fn finish(mut self) -> Result<Decoded, DecodeError> {
        if !self.stopped() {
            match self.decoder.finish() {
                Ok(items) => self.take(items),
                Err(error) => self.error = Some(error),
            }
        }
        let decoded = Decoded {
            assembled: self.collector.assembled(self.draft),
            complete: self.collector.completion(self.kind).is_some(),
            ops: self.ops.unwrap_or_default(),
        };
        match self.error {
            Some(error) => Err(DecodeError::Stream {
                error,
                partial: decoded,
            }),
            None => Ok(decoded),
        }
    }
}
