//! The session states of SPEC §2.1, each with the data it waits on (GUIDE §2).

use crate::event::{ErrorInfo, PauseReason};
use crate::provider::StreamDecoder;
use crate::retry::ErrorClass;
use crate::tools::ToolStep;
use serde::{Deserialize, Serialize};

#[derive(Debug)]
pub enum SessionState {
    Idle,
    Generating(Generating),
    ExecutingTools(ToolStep),
    Paused(Paused),
    WaitingIde(ToolStep),
    WaitingUserInput,
    Completed,
    Error(ErrorInfo),
}

impl SessionState {
    pub fn name(&self) -> &'static str {
        match self {
            SessionState::Idle => "idle",
            SessionState::Generating(_) => "generating",
            SessionState::ExecutingTools(_) => "executing_tools",
            SessionState::Paused(_) => "paused",
            SessionState::WaitingIde(_) => "waiting_ide",
            SessionState::WaitingUserInput => "waiting_user_input",
            SessionState::Completed => "completed",
            SessionState::Error(_) => "error",
        }
    }

    /// A turn is under way: the user can stop it, and a message now is queued.
    pub fn is_busy(&self) -> bool {
        matches!(
            self,
            SessionState::Generating(_)
                | SessionState::ExecutingTools(_)
                | SessionState::Paused(_)
                | SessionState::WaitingIde(_)
        )
    }

    /// The states a new turn may start from (SPEC §2.1, first row).
    pub fn can_start_turn(&self) -> bool {
        matches!(
            self,
            SessionState::Idle
                | SessionState::Completed
                | SessionState::Error(_)
                | SessionState::WaitingUserInput
        )
    }
}

/// A round talking to the provider: waiting for bytes, or for the moment to retry.
#[derive(Debug)]
pub struct Generating {
    pub round: u32,
    pub attempt: u32,
    pub request_id: String,
    pub phase: StreamPhase,
    /// Why the previous attempt failed, while this round is being retried.
    pub last_failure: Option<AttemptFailure>,
    /// Set when this request asks for a summary instead of a reply (SPEC §5).
    pub compaction: Option<Box<Compaction>>,
    /// This round was already sent again after a "context too long" refusal (once only).
    pub overflow_retried: bool,
}

/// A compaction request under way: its sources, the summary streaming in, and what comes after.
#[derive(Debug)]
pub struct Compaction {
    pub source_ids: Vec<String>,
    pub draft: crate::delta::Draft,
    pub resume: Resume,
    pub emergency: bool,
}

/// What the turn does once compaction is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// The turn had ended: back to idle.
    Idle,
    /// Send this round of the turn.
    Round(u32),
}

/// A failed attempt that is being retried: shown as the retry countdown (SECURITY D24).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct AttemptFailure {
    pub class: ErrorClass,
    pub code: String,
    pub message: String,
}

#[derive(Debug)]
pub enum StreamPhase {
    Streaming(Box<Streaming>),
    /// The request failed before anything reached the user; it is sent again at `at_ms`.
    Retrying {
        at_ms: u64,
    },
}

#[derive(Debug)]
pub struct Streaming {
    pub decoder: StreamDecoder,
    pub last_bytes_at: u64,
    /// Any byte at all arrived: until then the first-byte timeout applies, after it the idle one.
    pub got_bytes: bool,
    /// What the decoded items meant so far (the same collector `decode` uses).
    pub collected: crate::collector::Collector,
}

impl Streaming {
    pub fn new(decoder: StreamDecoder, now: u64) -> Self {
        Streaming {
            decoder,
            last_bytes_at: now,
            got_bytes: false,
            collected: Default::default(),
        }
    }
}

#[derive(Debug)]
pub struct Paused {
    pub step: ToolStep,
    pub reasons: Vec<PauseReason>,
}
