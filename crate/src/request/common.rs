//! What the per-provider request builders share: the model name, the linearized history, inline
//! image data.

use super::tiers::{self, Layout};
use super::RequestInput;
use crate::history_limit::LimitedMessage;
use crate::linearize::{linear, Linear, Thinking};
use crate::message::{ChatMessage, Content};
use crate::provider::ProviderKind;
use serde_json::Value;

pub(super) fn model_of<'a>(input: &'a RequestInput) -> &'a str {
    if input.thread.model.is_empty() {
        &input.provider.model
    } else {
        &input.thread.model
    }
}

/// The limited copy (see `build_request`), linearized (SPEC §7), borrowing its texts.
pub(super) fn prepared_history<M: std::borrow::Borrow<ChatMessage>>(
    history: &[M],
    thinking: Thinking,
) -> Vec<Linear<'_>> {
    linear(history, thinking)
}

/// The prompt and history laid out in the chat's stability tiers (issue 40); untiered when the
/// request has no tracker (compaction, the CLI) or goes to the model in the page (one small
/// context of its own, which the tiers' extra messages would only crowd).
pub(super) fn laid_out<'a>(
    input: &RequestInput<'a>,
    history: &'a [LimitedMessage<'a>],
    thinking: Thinking,
) -> Layout<'a> {
    let linear = prepared_history(history, thinking);
    match input.tiers {
        Some(tracker) if input.provider.kind != ProviderKind::Local => {
            tiers::tiered(input.system_prompt, linear, tracker)
        }
        _ => tiers::plain(input.system_prompt, linear),
    }
}

/// `data:<mime>;base64,<data>` → `(mime, data)`; anything else is a URL, not inline data.
pub(super) fn data_url(url: &str) -> Option<(&str, &str)> {
    let (header, data) = url.strip_prefix("data:")?.split_once(',')?;
    Some((header.strip_suffix(";base64")?, data))
}

/// The image parts of a message (a tool result with images from an MCP server).
pub(super) fn image_parts(content: &Content) -> Vec<&Value> {
    match content {
        Content::Text(_) => Vec::new(),
        Content::Parts(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("image_url"))
            .collect(),
    }
}
