//! Providers (SPEC §6): which wire formats exist, and the stream decoders that turn a provider's
//! bytes into delta ops. One submodule per provider kind; `StreamDecoder` dispatches by kind.
//!
//! Invariant: a decoder never panics on bytes; it returns `StreamDecodeError` with the byte offset
//! of the event that broke, and once failed it stays failed.

pub mod anthropic;
pub mod framed;
pub mod gemini;
pub mod literal;
pub mod openai_chat;
pub mod openai_responses;
pub mod usage;

use crate::delta::{DeltaOp, StreamFailure};
use crate::error::StreamDecodeError;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    #[default]
    OpenaiChat,
    Anthropic,
    Gemini,
    OpenaiResponses,
    /// A model running in the page (llama.cpp compiled to wasm): the requests and the stream are
    /// OpenAI chat's, only the host's transport differs (no network, no key).
    Local,
}

impl ProviderKind {
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::OpenaiChat => "openai-chat",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
            ProviderKind::OpenaiResponses => "openai-responses",
            ProviderKind::Local => "local",
        }
    }

    /// Whether the wire format has an explicit end marker (`[DONE]`, `message_stop`,
    /// `response.completed`). Without one (Gemini), a finish reason is the end; with one, a
    /// stream that stops before it is truncated however complete it looks (SECURITY D8).
    pub fn has_end_marker(self) -> bool {
        !matches!(self, ProviderKind::Gemini)
    }

    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::OpenaiChat,
            Self::Anthropic,
            Self::Gemini,
            Self::OpenaiResponses,
            Self::Local,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }
}

/// What a decoder reports: ops for the draft, the finish reason, a provider error, the end.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeItem {
    Op(DeltaOp),
    Finish(String),
    /// The provider said, inside the stream, that the round failed.
    Failure(StreamFailure),
    /// The provider's explicit end marker (`[DONE]`, `message_stop`, …).
    Done,
    /// The model the provider says answered (the chunk's `model`, Anthropic's `message_start`,
    /// Gemini's `modelVersion`, Responses' `response.model`): the answer is labelled with it
    /// (issue 35), not with the name the user typed. Said once, when first seen.
    Model(String),
    /// How far the server has read the prompt before answering (llama.cpp's `prompt_progress`):
    /// a long prompt on a slow machine takes a minute, and the page shows this meanwhile.
    PromptProgress(PromptProgress),
}

/// `processed` of `total` prompt tokens read (those reused from the server's cache included).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptProgress {
    pub processed: u64,
    pub total: u64,
}

/// The answer's text of one delta, joined to the item before it when that is the answer's text
/// too: a chunk of many small deltas makes one op instead of an allocation each (the collector
/// would join them anyway; issue 41).
pub(crate) fn push_content(items: &mut Vec<DecodeItem>, more: &str) {
    match items.last_mut() {
        Some(DecodeItem::Op(DeltaOp::AppendContent { text })) => text.push_str(more),
        _ => items.push(DecodeItem::Op(DeltaOp::AppendContent { text: more.into() })),
    }
}

/// The reasoning's text of one delta, joined as [`push_content`] joins the answer's.
pub(crate) fn push_reasoning(items: &mut Vec<DecodeItem>, more: &str) {
    match items.last_mut() {
        Some(DecodeItem::Op(DeltaOp::AppendReasoning { text })) => text.push_str(more),
        _ => items.push(DecodeItem::Op(DeltaOp::AppendReasoning {
            text: more.into(),
        })),
    }
}

/// A stream decoder for one provider kind.
#[derive(Debug)]
pub enum StreamDecoder {
    OpenaiChat(openai_chat::Decoder),
    Anthropic(anthropic::Decoder),
    Gemini(gemini::Decoder),
    OpenaiResponses(openai_responses::Decoder),
}

impl StreamDecoder {
    /// The decoder for `kind` (every kind has one; `Option` keeps callers ready for new kinds).
    pub fn for_kind(kind: ProviderKind) -> Option<Self> {
        match kind {
            // The model in the page answers in OpenAI chat's stream format.
            ProviderKind::OpenaiChat | ProviderKind::Local => {
                Some(StreamDecoder::OpenaiChat(openai_chat::Decoder::default()))
            }
            ProviderKind::Anthropic => Some(StreamDecoder::Anthropic(Default::default())),
            ProviderKind::Gemini => Some(StreamDecoder::Gemini(Default::default())),
            ProviderKind::OpenaiResponses => {
                Some(StreamDecoder::OpenaiResponses(Default::default()))
            }
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<DecodeItem>, StreamDecodeError> {
        match self {
            StreamDecoder::OpenaiChat(decoder) => decoder.feed(bytes),
            StreamDecoder::Anthropic(decoder) => decoder.feed(bytes),
            StreamDecoder::Gemini(decoder) => decoder.feed(bytes),
            StreamDecoder::OpenaiResponses(decoder) => decoder.feed(bytes),
        }
    }

    pub fn kind(&self) -> ProviderKind {
        match self {
            StreamDecoder::OpenaiChat(_) => ProviderKind::OpenaiChat,
            StreamDecoder::Anthropic(_) => ProviderKind::Anthropic,
            StreamDecoder::Gemini(_) => ProviderKind::Gemini,
            StreamDecoder::OpenaiResponses(_) => ProviderKind::OpenaiResponses,
        }
    }

    /// The round's finish reason if the stream reached its end, `None` if it was cut short:
    /// the end marker (defaulting the reason to `stop`), or for formats without a marker the
    /// finish reason itself.
    pub fn completion(
        kind: ProviderKind,
        finish_reason: Option<&str>,
        saw_end_marker: bool,
    ) -> Option<String> {
        match (saw_end_marker, finish_reason) {
            (true, reason) => Some(reason.unwrap_or("stop").to_string()),
            (false, Some(reason)) if !kind.has_end_marker() => Some(reason.to_string()),
            (false, _) => None,
        }
    }

    pub fn finish(&mut self) -> Result<Vec<DecodeItem>, StreamDecodeError> {
        match self {
            StreamDecoder::OpenaiChat(decoder) => decoder.finish(),
            StreamDecoder::Anthropic(decoder) => decoder.finish(),
            StreamDecoder::Gemini(decoder) => decoder.finish(),
            StreamDecoder::OpenaiResponses(decoder) => decoder.finish(),
        }
    }
}
