//! Typed errors that say who is at fault (GUIDE §3): bad bytes from a provider, a command the
//! state refuses, a trajectory that cannot be read. Domain errors travel inside events as data.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A provider stream that cannot be decoded. `offset` is the byte offset in the whole stream
/// where the offending event or line starts. A failed stream stays failed.
#[derive(Error, Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum StreamDecodeError {
    #[error("malformed {provider} stream at byte {offset}: {reason}")]
    MalformedStream {
        provider: String,
        offset: u64,
        reason: String,
    },
    #[error("{provider} stream broke its protocol at byte {offset}: {reason}")]
    ProviderMisbehaved {
        provider: String,
        offset: u64,
        reason: String,
    },
}

impl StreamDecodeError {
    pub fn code(&self) -> &'static str {
        match self {
            StreamDecodeError::MalformedStream { .. } => "malformed_stream",
            StreamDecodeError::ProviderMisbehaved { .. } => "provider_misbehaved",
        }
    }
}

/// Why a command was not accepted. Serialized into `ack.reason`.
#[derive(Error, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Refusal {
    #[error("state {state} does not accept {command}; it accepts {accepts:?}")]
    Refused {
        state: String,
        command: String,
        accepts: Vec<String>,
    },
    #[error("invalid command: {reason}")]
    InvalidCommand { reason: String },
    #[error("duplicate client_request_id {client_request_id}")]
    Duplicate { client_request_id: String },
    #[error("the command queue is full ({limit} items)")]
    QueueFull { limit: usize },
    #[error("no such message: {message_id}")]
    UnknownMessage { message_id: String },
    #[error("no such chat: {chat_id}")]
    UnknownChat { chat_id: String },
    #[error("nothing queued under client_request_id {client_request_id}")]
    NotQueued { client_request_id: String },
    #[error("bad trajectory: {reason}")]
    BadTrajectory { reason: String },
}
