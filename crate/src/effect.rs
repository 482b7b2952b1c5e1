//! `Effect`: what the engine asks its host to do (SPEC §0): start or cancel a provider request,
//! run or cancel a tool (a workspace tool or a host tool), save a trajectory, wake it at a time. A leaf of the core: the session
//! makes effects, the engine hands them out, the hosts perform them.

use crate::request::ProviderRequest;
use crate::trajectory::TrajectorySave;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RequestPurpose {
    Chat,
    Compaction,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum Effect {
    StartRequest {
        chat_id: String,
        request_id: String,
        purpose: RequestPurpose,
        request: ProviderRequest,
    },
    CancelRequest {
        request_id: String,
    },
    RunTool {
        chat_id: String,
        tool_call_id: String,
        name: String,
        args: Value,
    },
    CancelTool {
        chat_id: String,
        tool_call_id: String,
    },
    /// A host tool (one the page itself provides) to run; announced to the page with
    /// `ide_tool_required` too, and answered with `ide_tool_result`.
    RunHostTool {
        chat_id: String,
        tool_call_id: String,
        name: String,
        args: Value,
    },
    SaveTrajectory {
        save: TrajectorySave,
    },
    WakeAt {
        at_ms: u64,
    },
}
