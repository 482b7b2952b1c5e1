//! Commands (SPEC §2.3) with their JSON shapes, and the validation every command passes before it
//! is queued: wrong types, too many images or a data URL that does not decode are refused.

use crate::error::Refusal;
use crate::message::{is_image_part, Content};
use crate::tagged::{self, Fields};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

pub const MAX_IMAGES: usize = 50;

/// Read by hand (`tagged::Fields`, see there why), written by derive.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct CommandEnvelope {
    pub client_request_id: String,
    #[serde(default)]
    pub priority: bool,
    #[serde(flatten)]
    pub command: Command,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    UserMessage {
        content: Content,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attachments: Option<Vec<Value>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context_files: Option<Vec<Value>>,
        /// Optional host-chosen id for the new message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
    },
    SetParams {
        patch: Map<String, Value>,
    },
    UpdateMessage {
        message_id: String,
        content: Content,
        #[serde(default)]
        regenerate: bool,
    },
    RemoveMessage {
        message_id: String,
        #[serde(default)]
        regenerate: bool,
    },
    TruncateMessages {
        from_index: usize,
    },
    RetryFromIndex {
        index: usize,
        content: Content,
    },
    Abort {},
    ApproveTools {
        tool_call_ids: Vec<String>,
    },
    RejectTools {
        tool_call_ids: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    BranchFromChat {
        source_chat_id: String,
        up_to_message_id: String,
    },
    RestoreFromTrajectory {
        trajectory: Value,
        /// The host's own copy (an Undo of a delete): its params come back too. Anything from
        /// outside — an import, the workspace, a pull — never sets this (SECURITY F2).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        own_copy: bool,
    },
    ClearDraft {},
    SetDraft {
        text: String,
    },
    Regenerate {},
    IdeToolResult {
        tool_call_id: String,
        content: String,
        #[serde(default)]
        tool_failed: bool,
    },
    /// Removes the queued command whose id is this envelope's `client_request_id`.
    CancelQueued {},
    /// Runs the commands held since an `abort` (the page's "send now").
    ResumeQueue {},
    /// Puts a message back at `index` (the page's Undo of a deletion, same id and place).
    InsertMessage {
        index: usize,
        message: crate::message::ChatMessage,
    },
    /// Resumes a subagent the page's closing interrupted (its chat must be open): it goes on with
    /// its task, and its answer reaches the parent's call. Sent to the parent.
    ResumeSubagent {
        child_id: String,
    },
    /// Gives up a subagent the page's closing interrupted: the parent's call is answered as
    /// interrupted (its partial work stays in its chat). Sent to the parent.
    CancelSubagent {
        child_id: String,
    },
    /// Applies edit block `index` of answer `message_id` (issue 40) through the workspace's
    /// `edit_file` (`write_file` for a new file); the result is kept on the answer. Held while a
    /// turn runs.
    ApplyEditBlock {
        message_id: String,
        index: usize,
    },
    /// The user declines edit block `index`: the model is told it was skipped.
    SkipEditBlock {
        message_id: String,
        index: usize,
    },
    /// Runs shell command `index` the answer suggested, through `run_command` (`sh -c`).
    RunSuggestedCommand {
        message_id: String,
        index: usize,
    },
}

impl<'de> Deserialize<'de> for CommandEnvelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        tagged::read(deserializer, |mut f| {
            Ok(CommandEnvelope {
                client_request_id: f.take("client_request_id")?,
                priority: f.or_default("priority")?,
                command: Command::from_fields(f)?,
            })
        })
    }
}

impl<'de> Deserialize<'de> for Command {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        tagged::read(deserializer, Command::from_fields)
    }
}

impl Command {
    const VARIANTS: &'static [&'static str] = &[
        "user_message",
        "set_params",
        "update_message",
        "remove_message",
        "truncate_messages",
        "retry_from_index",
        "abort",
        "approve_tools",
        "reject_tools",
        "branch_from_chat",
        "restore_from_trajectory",
        "clear_draft",
        "set_draft",
        "regenerate",
        "ide_tool_result",
        "cancel_queued",
        "resume_queue",
        "insert_message",
        "resume_subagent",
        "cancel_subagent",
        "apply_edit_block",
        "skip_edit_block",
        "run_suggested_command",
    ];

    fn from_fields(mut f: Fields) -> Result<Self, serde_json::Error> {
        let tag = f.tag("type")?;
        Ok(match tag.as_str() {
            "user_message" => Command::UserMessage {
                content: f.take("content")?,
                attachments: f.or_default("attachments")?,
                context_files: f.or_default("context_files")?,
                message_id: f.or_default("message_id")?,
            },
            "set_params" => Command::SetParams {
                patch: f.take("patch")?,
            },
            "update_message" => Command::UpdateMessage {
                message_id: f.take("message_id")?,
                content: f.take("content")?,
                regenerate: f.or_default("regenerate")?,
            },
            "remove_message" => Command::RemoveMessage {
                message_id: f.take("message_id")?,
                regenerate: f.or_default("regenerate")?,
            },
            "truncate_messages" => Command::TruncateMessages {
                from_index: f.take("from_index")?,
            },
            "retry_from_index" => Command::RetryFromIndex {
                index: f.take("index")?,
                content: f.take("content")?,
            },
            "abort" => Command::Abort {},
            "approve_tools" => Command::ApproveTools {
                tool_call_ids: f.take("tool_call_ids")?,
            },
            "reject_tools" => Command::RejectTools {
                tool_call_ids: f.take("tool_call_ids")?,
                reason: f.or_default("reason")?,
            },
            "branch_from_chat" => Command::BranchFromChat {
                source_chat_id: f.take("source_chat_id")?,
                up_to_message_id: f.take("up_to_message_id")?,
            },
            "restore_from_trajectory" => Command::RestoreFromTrajectory {
                trajectory: f.take("trajectory")?,
                own_copy: f.or_default("own_copy")?,
            },
            "clear_draft" => Command::ClearDraft {},
            "set_draft" => Command::SetDraft {
                text: f.take("text")?,
            },
            "regenerate" => Command::Regenerate {},
            "ide_tool_result" => Command::IdeToolResult {
                tool_call_id: f.take("tool_call_id")?,
                content: f.take("content")?,
                tool_failed: f.or_default("tool_failed")?,
            },
            "cancel_queued" => Command::CancelQueued {},
            "resume_queue" => Command::ResumeQueue {},
            "insert_message" => Command::InsertMessage {
                index: f.take("index")?,
                message: f.take("message")?,
            },
            "resume_subagent" => Command::ResumeSubagent {
                child_id: f.take("child_id")?,
            },
            "cancel_subagent" => Command::CancelSubagent {
                child_id: f.take("child_id")?,
            },
            "apply_edit_block" => Command::ApplyEditBlock {
                message_id: f.take("message_id")?,
                index: f.take("index")?,
            },
            "skip_edit_block" => Command::SkipEditBlock {
                message_id: f.take("message_id")?,
                index: f.take("index")?,
            },
            "run_suggested_command" => Command::RunSuggestedCommand {
                message_id: f.take("message_id")?,
                index: f.take("index")?,
            },
            other => return Err(tagged::unknown_variant(other, Self::VARIANTS)),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Command::UserMessage { .. } => "user_message",
            Command::SetParams { .. } => "set_params",
            Command::UpdateMessage { .. } => "update_message",
            Command::RemoveMessage { .. } => "remove_message",
            Command::TruncateMessages { .. } => "truncate_messages",
            Command::RetryFromIndex { .. } => "retry_from_index",
            Command::Abort {} => "abort",
            Command::ApproveTools { .. } => "approve_tools",
            Command::RejectTools { .. } => "reject_tools",
            Command::BranchFromChat { .. } => "branch_from_chat",
            Command::RestoreFromTrajectory { .. } => "restore_from_trajectory",
            Command::ClearDraft {} => "clear_draft",
            Command::SetDraft { .. } => "set_draft",
            Command::ResumeQueue {} => "resume_queue",
            Command::Regenerate {} => "regenerate",
            Command::IdeToolResult { .. } => "ide_tool_result",
            Command::CancelQueued {} => "cancel_queued",
            Command::InsertMessage { .. } => "insert_message",
            Command::ResumeSubagent { .. } => "resume_subagent",
            Command::CancelSubagent { .. } => "cancel_subagent",
            Command::ApplyEditBlock { .. } => "apply_edit_block",
            Command::SkipEditBlock { .. } => "skip_edit_block",
            Command::RunSuggestedCommand { .. } => "run_suggested_command",
        }
    }

    /// Checks what can be checked without the session: content shapes and sizes.
    pub fn validate(&self) -> Result<(), Refusal> {
        match self {
            Command::UserMessage {
                content,
                attachments,
                ..
            } => {
                validate_content(content)?;
                validate_attachments(attachments.as_deref().unwrap_or(&[]), content.image_count())
            }
            Command::UpdateMessage { content, .. } | Command::RetryFromIndex { content, .. } => {
                validate_content(content)
            }
            Command::ApproveTools { tool_call_ids }
            | Command::RejectTools { tool_call_ids, .. }
                if tool_call_ids.is_empty() =>
            {
                Err(invalid("tool_call_ids is empty"))
            }
            _ => Ok(()),
        }
    }
}

/// Parses a command from JSON, turning serde's message into a typed refusal.
pub fn parse_envelope(value: Value) -> Result<CommandEnvelope, Refusal> {
    serde_json::from_value(value).map_err(|e| invalid(&e.to_string()))
}

fn invalid(reason: &str) -> Refusal {
    Refusal::InvalidCommand {
        reason: reason.to_string(),
    }
}

fn validate_content(content: &Content) -> Result<(), Refusal> {
    let Content::Parts(parts) = content else {
        return Ok(());
    };
    for part in parts {
        validate_part(part)?;
    }
    if content.image_count() > MAX_IMAGES {
        return Err(invalid(&format!("more than {MAX_IMAGES} images")));
    }
    Ok(())
}

fn validate_part(part: &Value) -> Result<(), Refusal> {
    match part.get("type").and_then(Value::as_str) {
        Some("text") if part.get("text").is_some_and(Value::is_string) => Ok(()),
        Some("text") => Err(invalid("a text part needs a string `text`")),
        Some("image_url") => validate_image(part),
        Some(other) => Err(invalid(&format!("unknown content part type `{other}`"))),
        None => Err(invalid("a content part needs a `type`")),
    }
}

fn validate_image(part: &Value) -> Result<(), Refusal> {
    let url = part
        .get("image_url")
        .and_then(|i| i.get("url"))
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("an image part needs `image_url.url`"))?;
    if url.starts_with("data:") {
        return validate_data_url(url);
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(());
    }
    Err(invalid("an image URL must be a data: URL or http(s)"))
}

fn validate_attachments(attachments: &[Value], images_in_content: usize) -> Result<(), Refusal> {
    let images = attachments.iter().filter(|a| is_image_part(a)).count();
    if images + images_in_content > MAX_IMAGES {
        return Err(invalid(&format!("more than {MAX_IMAGES} images")));
    }
    attachments.iter().try_for_each(validate_part)
}

/// `data:[<mime>][;base64],<payload>`: the base64 payload must decode.
fn validate_data_url(url: &str) -> Result<(), Refusal> {
    let Some((header, payload)) = url["data:".len()..].split_once(',') else {
        return Err(invalid("data URL without a comma"));
    };
    if header.ends_with(";base64") && !is_base64(payload) {
        return Err(invalid("data URL payload is not valid base64"));
    }
    Ok(())
}

fn is_base64(payload: &str) -> bool {
    let bytes = payload.as_bytes();
    let body = bytes.iter().take_while(|&&b| b != b'=').count();
    let padding = bytes.len() - body;
    padding <= 2
        && bytes[body..].iter().all(|&b| b == b'=')
        && bytes[..body]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
        && bytes.len() % 4 == 0
}
