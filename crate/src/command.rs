//! Commands (SPEC §2.3) with their JSON shapes, and the validation every command passes before it
//! is queued: wrong types, too many images or a data URL that does not decode are refused.

use crate::error::Refusal;
use crate::message::{is_image_part, Content};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub const MAX_IMAGES: usize = 50;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CommandEnvelope {
    pub client_request_id: String,
    #[serde(default)]
    pub priority: bool,
    #[serde(flatten)]
    pub command: Command,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
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
}

impl Command {
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
