//! The state of the workspace copy of chats (`chat_files`), kept in `Shared`: where each chat's copy
//! stands, the writes under way, the pairing.

use js_sys::Function;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Where a chat's workspace copy stands.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CopyState {
    /// Not paired with `palaver serve`, or the workspace copy is off there (`--no-workspace-copy`).
    Off,
    /// A save is not in the workspace yet.
    Pending,
    /// The workspace holds this browser's latest save.
    Current,
    /// The last write failed; the next save tries again.
    Failed { error: String },
    /// The workspace copy changed elsewhere; nothing is written until the user chooses.
    Conflict,
    /// The chat belongs to another workspace (or was never used with one): not copied here.
    OtherWorkspace,
}

#[derive(Default)]
pub(in crate::web) struct ChatFilesState {
    pub(in crate::web) states: HashMap<String, CopyState>,
    /// Chats with a write waiting for the saves to settle, or under way.
    pub(in crate::web) busy: HashSet<String>,
    /// Chats saved again while their write was under way: written once more after it.
    pub(in crate::web) again: HashSet<String>,
    pub(in crate::web) listener: Option<Function>,
    /// `localStorage` keys of the hashes are `{prefix}{workspace_id}.{chat_id}`.
    pub(in crate::web) prefix: String,
    /// The paired workspace's id, once `/api/health` said it.
    pub(in crate::web) workspace: Option<String>,
    /// Chats the user sent a message in since the pairing: they belong to this workspace.
    pub(in crate::web) used: HashSet<String>,
}

impl ChatFilesState {
    /// `prefix`: where the hashes of the copies written are kept in `localStorage`.
    pub(in crate::web) fn new(prefix: String) -> Self {
        ChatFilesState {
            prefix,
            ..Default::default()
        }
    }
}
