//! What the per-provider request builders share: the model name, the linearized history, inline
//! image data.

use super::RequestInput;
use crate::linearize::{linearize, Thinking};
use crate::message::ChatMessage;

pub(super) fn model_of<'a>(input: &'a RequestInput) -> &'a str {
    if input.thread.model.is_empty() {
        &input.provider.model
    } else {
        &input.thread.model
    }
}

/// The limited copy (see `build_request`), linearized (SPEC §7).
pub(super) fn prepared_history<M: std::borrow::Borrow<ChatMessage>>(
    history: &[M],
    thinking: Thinking,
) -> Vec<ChatMessage> {
    linearize(history, thinking)
}

/// `data:<mime>;base64,<data>` → `(mime, data)`; anything else is a URL, not inline data.
pub(super) fn data_url(url: &str) -> Option<(&str, &str)> {
    let (header, data) = url.strip_prefix("data:")?.split_once(',')?;
    Some((header.strip_suffix(";base64")?, data))
}
