//! Edit blocks (seed 002, issue 40): how a model that cannot call tools changes files. The
//! answer names a file, then a block
//!
//! ```text
//! src/lib.rs
//! <<<<<<< SEARCH
//! the exact lines to find
//! =======
//! the lines to put there
//! >>>>>>> REPLACE
//! ```
//!
//! An empty SEARCH creates a new file. Blocks are read by a line state machine (`parser`) that
//! takes the answer in any chunks — fenced or not, CRLF or LF, cut off at a stop — and gives the
//! same blocks as reading it whole. Fenced shell commands in the answer are collected beside
//! them (`shell`), to be offered as commands the user may run. Nothing here applies anything:
//! the session turns a block the user approved into an `edit_file`/`write_file` call.

mod parser;
mod shell;

pub use parser::EditBlockParser;

use serde::{Deserialize, Serialize};

/// One proposed change to one file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct EditBlock {
    /// The file, as the answer named it (relative to the workspace; checked when applied).
    pub path: String,
    /// The text to find, whole lines with their line ends; empty: create the file.
    pub search: String,
    /// The text to put in its place.
    pub replace: String,
    /// False when the answer stopped before the block's `>>>>>>> REPLACE`: never applied.
    pub complete: bool,
}

/// What an answer proposes: its edit blocks and the shell commands it suggests.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Proposals {
    pub blocks: Vec<EditBlock>,
    pub shell_commands: Vec<String>,
}

/// Reads a whole answer.
pub fn parse(text: &str) -> Proposals {
    let mut parser = EditBlockParser::default();
    parser.push(text);
    parser.finish()
}

/// Which of an answer's proposals a result is about.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProposalKind {
    Edit,
    Shell,
}

/// What became of a proposal the user acted on.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ProposalStatus {
    Passed,
    Failed,
    Skipped,
}

/// One result, kept on the answer that proposed it and read by the model after that answer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProposalResult {
    pub kind: ProposalKind,
    /// The block's or command's place among the answer's blocks or commands, from 0.
    pub index: usize,
    pub status: ProposalStatus,
    /// The file, or the command.
    pub label: String,
    /// Why it failed (the server's sentence, the nearest match), or what a command printed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The workspace call that performed it: `palaver serve` records its changes under this id,
    /// so "Restore files to before this" can turn them back.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub call_id: String,
}

impl ProposalResult {
    /// The result as the model reads it.
    pub fn sentence(&self) -> String {
        let what = match self.kind {
            ProposalKind::Shell => format!("Command `{}`", self.label),
            ProposalKind::Edit => format!("Edit block {} ({})", self.index + 1, self.label),
        };
        let status = match self.status {
            ProposalStatus::Passed => "applied",
            ProposalStatus::Failed => "failed",
            ProposalStatus::Skipped => "skipped by the user",
        };
        let status = match (self.kind, self.status) {
            (ProposalKind::Shell, ProposalStatus::Passed) => "ran",
            _ => status,
        };
        match self.detail.trim() {
            "" => format!("{what}: {status}."),
            detail => format!("{what}: {status}: {detail}"),
        }
    }
}
