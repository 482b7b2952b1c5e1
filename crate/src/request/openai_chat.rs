//! OpenAI Chat Completions requests (and every OpenAI-compatible server: llama.cpp, Ollama, vLLM).
//!
//! The body is written straight from the linearized history, which borrows the stored texts
//! (issue 20): no `Value` tree is built for it. The key order is the API's documented one, the
//! same the golden files hold byte for byte.

use super::body::RequestBody;
use super::common::{image_parts, laid_out, model_of};
use super::{ProviderRequest, RequestInput};
use crate::history_limit::{CompressionStrength, LimitedMessage};
use crate::linearize::{Linear, Thinking};
use crate::message::{Content, Role, ToolCall};
use crate::provider::ProviderKind;
use crate::tools::ToolSpec;
use serde::Serialize;
use serde_json::Value;
use std::borrow::Cow;

pub(super) fn openai_chat(input: &RequestInput, history: &[LimitedMessage<'_>]) -> ProviderRequest {
    let layout = laid_out(input, history, Thinking::Off);
    let body = Body {
        model: model_of(input),
        messages: Messages {
            system: layout.system.as_deref(),
            history: &layout.messages,
        },
        tools: input.tools.iter().map(Tool::of).collect(),
        temperature: input.thread.temperature,
        max_tokens: input.thread.max_tokens,
        reasoning_effort: input.thread.reasoning_effort.as_deref(),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        return_progress: (input.provider.kind == ProviderKind::OpenaiChat
            && input.provider.return_progress == Some(true))
        .then_some(true),
    };
    ProviderRequest {
        // `local` speaks this format too; the request keeps the kind the host routes by.
        provider: input.provider.kind,
        url: format!(
            "{}/chat/completions",
            input.provider.base_url.trim_end_matches('/')
        ),
        headers: input.provider.headers.clone(),
        body: RequestBody::write(&body),
        compression_strength: CompressionStrength::Absent,
        left_out: Default::default(),
        tiers: layout.tiers,
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Messages<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    return_progress: Option<bool>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// The system prompt and the history in OpenAI's shape, each message written as it is made:
/// a vector of them beside the history, alive until the body was written, added its length to
/// the high-water mark a long chat's wasm memory keeps (issue 41).
struct Messages<'a> {
    system: Option<&'a str>,
    history: &'a [Linear<'a>],
}

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(None)?;
        if let Some(system) = self.system {
            seq.serialize_element(&Message::text("system", system))?;
        }
        each_with_tool_images_after(self.history, |message| seq.serialize_element(&message))?;
        seq.end()
    }
}

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: MessageContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<&'a [ToolCall]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

/// A string, or content parts (the message's own, or a text then the images of tool results).
#[derive(Serialize)]
#[serde(untagged)]
enum MessageContent<'a> {
    Text(Cow<'a, str>),
    Parts(&'a [Value]),
    TextThenImages(TextThenImages<'a>),
}

/// `[{"type": "text", "text": …}, image, image, …]`.
struct TextThenImages<'a> {
    text: &'static str,
    images: Vec<&'a Value>,
}

impl Serialize for TextThenImages<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.images.len() + 1))?;
        seq.serialize_element(&TextPart {
            kind: "text",
            text: self.text,
        })?;
        for image in &self.images {
            seq.serialize_element(image)?;
        }
        seq.end()
    }
}

impl<'a> Message<'a> {
    fn text(role: &'static str, text: &'a str) -> Self {
        Message {
            role,
            content: MessageContent::Text(Cow::Borrowed(text)),
            tool_calls: None,
            tool_call_id: None,
        }
    }
}

#[derive(Serialize)]
struct TextPart {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'static str,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> Tool<'a> {
    fn of(spec: &'a ToolSpec) -> Self {
        Tool {
            kind: "function",
            function: Function {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.parameters,
            },
        }
    }
}

/// The messages in OpenAI's shape. A tool message carries text only (the API takes no images
/// there): the images of a step's results follow its last result as one user message.
fn each_with_tool_images_after<'a, E>(
    history: &'a [Linear<'a>],
    mut out: impl FnMut(Message<'a>) -> Result<(), E>,
) -> Result<(), E> {
    let mut images: Vec<&'a Value> = Vec::new();
    for message in history {
        if message.role != Role::Tool && !images.is_empty() {
            out(tool_images_message(std::mem::take(&mut images)))?;
        }
        let content = match message.content.as_ref() {
            Content::Parts(_) if message.role == Role::Tool => {
                images.extend(image_parts(&message.content));
                MessageContent::Text(message.content.as_text())
            }
            Content::Parts(parts) => MessageContent::Parts(parts),
            Content::Text(text) => MessageContent::Text(Cow::Borrowed(text)),
        };
        out(Message {
            role: role_name(message.role),
            content,
            tool_calls: message.tool_calls.filter(|calls| !calls.is_empty()),
            tool_call_id: message.tool_call_id,
        })?;
    }
    match images.is_empty() {
        true => Ok(()),
        false => out(tool_images_message(images)),
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        _ => "user",
    }
}

fn tool_images_message(images: Vec<&Value>) -> Message<'_> {
    Message {
        role: "user",
        content: MessageContent::TextThenImages(TextThenImages {
            text: "The images the tool calls above returned:",
            images,
        }),
        tool_calls: None,
        tool_call_id: None,
    }
}
