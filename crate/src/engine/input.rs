//! What a host feeds the engine: `Input` (commands, stream bytes, tool results, acknowledgements,
//! ticks), read leniently where the host's JSON varies (`Bytes`: text or byte values).

use super::*;

/// Bytes from the host: a JSON string (UTF-8 text) or an array of byte values.
#[derive(Serialize, Clone, Debug, PartialEq, Default)]
#[serde(transparent)]
pub struct Bytes(pub Vec<u8>);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        // By hand: an untagged derive would buffer the value before trying each shape.
        match Value::deserialize(de)? {
            Value::String(text) => Ok(Bytes(text.into_bytes())),
            raw @ Value::Array(_) => Vec::<u8>::deserialize(raw)
                .map(Bytes)
                .map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "invalid bytes: {other}, expected a string or an array of byte values"
            ))),
        }
    }
}

/// Read by hand (`tagged::Fields`, see there why), written by derive.
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "input", rename_all = "snake_case")]
pub enum Input {
    OpenChat {
        chat_id: String,
        /// The stored chat as JSON text: read once, straight into the message model
        /// (`trajectory::load_text`; no `Value` tree of a long chat is built).
        #[serde(default)]
        trajectory: Option<trajectory::TrajectoryText>,
        /// Where the trajectory's messages are stored, in order (the browser host reads it with
        /// them); without it their indexes are taken as their positions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stored: Option<Vec<trajectory::StoredMessage>>,
    },
    CloseChat {
        chat_id: String,
    },
    /// The chat's stored records changed under the engine (sync brought another device's
    /// messages): an open, idle chat with nothing unsaved takes them and its subscribers get a
    /// snapshot; a busy or unsaved one refuses, and the host asks again when it is idle.
    ReloadChat {
        chat_id: String,
        trajectory: trajectory::TrajectoryText,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stored: Option<Vec<trajectory::StoredMessage>>,
    },
    Command {
        chat_id: String,
        command: Value,
    },
    StreamBytes {
        request_id: String,
        bytes: Bytes,
    },
    StreamEnd {
        request_id: String,
    },
    RequestFailed {
        request_id: String,
        #[serde(default)]
        status: Option<u16>,
        #[serde(default)]
        error_type: Option<String>,
        #[serde(default)]
        message: String,
        #[serde(default)]
        retry_after_ms: Option<u64>,
        /// The response headers, if there was a response; names in any case.
        #[serde(default)]
        headers: LiteMap<String, String>,
        /// A context window the error body states (llama.cpp's `n_ctx`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context_window: Option<u64>,
        /// The prompt's size in tokens the error body states (llama.cpp's `n_prompt_tokens`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_tokens: Option<u64>,
    },
    ToolResult {
        chat_id: String,
        tool_call_id: String,
        content: String,
        #[serde(default)]
        tool_failed: bool,
        #[serde(default)]
        data: Option<Value>,
        /// Keys the tool merges into the thread (SPEC §8.3); never the ones that steer the agent.
        #[serde(default)]
        session_metadata: Option<serde_json::Map<String, Value>>,
        /// Parts beside the text — images an MCP tool returned (`{type: "image_url", …}`): the
        /// result becomes a parts message, sent as images to providers that take them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        parts: Vec<Value>,
    },
    /// A line of output from a running workspace tool (`run_command`'s NDJSON, MCP progress).
    ToolProgress {
        chat_id: String,
        tool_call_id: String,
        #[serde(default)]
        stream: String,
        text: String,
    },
    SaveAcked {
        chat_id: String,
        version: u64,
    },
    SaveFailed {
        chat_id: String,
        version: u64,
        #[serde(default)]
        reason: String,
    },
    Tick {},
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        tagged::read(deserializer, Input::from_fields)
    }
}

impl Input {
    /// The `input` tags, in the order the TypeScript union lists them (a test compares them).
    pub const VARIANTS: &'static [&'static str] = &[
        "open_chat",
        "close_chat",
        "reload_chat",
        "command",
        "stream_bytes",
        "stream_end",
        "request_failed",
        "tool_result",
        "tool_progress",
        "save_acked",
        "save_failed",
        "tick",
    ];

    fn from_fields(mut f: Fields) -> Result<Self, serde_json::Error> {
        let tag = f.tag("input")?;
        Ok(match tag.as_str() {
            "open_chat" => Input::OpenChat {
                chat_id: f.take("chat_id")?,
                trajectory: f.or_default("trajectory")?,
                stored: f.or_default("stored")?,
            },
            "close_chat" => Input::CloseChat {
                chat_id: f.take("chat_id")?,
            },
            "reload_chat" => Input::ReloadChat {
                chat_id: f.take("chat_id")?,
                trajectory: f.take("trajectory")?,
                stored: f.or_default("stored")?,
            },
            "command" => Input::Command {
                chat_id: f.take("chat_id")?,
                command: f.take("command")?,
            },
            "stream_bytes" => Input::StreamBytes {
                request_id: f.take("request_id")?,
                bytes: f.take("bytes")?,
            },
            "stream_end" => Input::StreamEnd {
                request_id: f.take("request_id")?,
            },
            "request_failed" => Input::RequestFailed {
                request_id: f.take("request_id")?,
                status: f.or_default("status")?,
                error_type: f.or_default("error_type")?,
                message: f.or_default("message")?,
                retry_after_ms: f.or_default("retry_after_ms")?,
                headers: f.or_default("headers")?,
                context_window: f.or_default("context_window")?,
                prompt_tokens: f.or_default("prompt_tokens")?,
            },
            "tool_result" => Input::ToolResult {
                chat_id: f.take("chat_id")?,
                tool_call_id: f.take("tool_call_id")?,
                content: f.take("content")?,
                tool_failed: f.or_default("tool_failed")?,
                data: f.or_default("data")?,
                session_metadata: f.or_default("session_metadata")?,
                parts: f.or_default("parts")?,
            },
            "tool_progress" => Input::ToolProgress {
                chat_id: f.take("chat_id")?,
                tool_call_id: f.take("tool_call_id")?,
                stream: f.or_default("stream")?,
                text: f.take("text")?,
            },
            "save_acked" => Input::SaveAcked {
                chat_id: f.take("chat_id")?,
                version: f.take("version")?,
            },
            "save_failed" => Input::SaveFailed {
                chat_id: f.take("chat_id")?,
                version: f.take("version")?,
                reason: f.or_default("reason")?,
            },
            "tick" => Input::Tick {},
            other => return Err(tagged::unknown_variant(other, Self::VARIANTS)),
        })
    }
}

impl Input {
    /// A `RequestFailed`'s request id and failure; `None` for any other input.
    pub(super) fn into_request_failure(self) -> Option<(String, RequestFailure)> {
        let Input::RequestFailed {
            request_id,
            status,
            error_type,
            message,
            retry_after_ms,
            headers,
            context_window,
            prompt_tokens,
        } = self
        else {
            return None;
        };
        let failure = RequestFailure {
            status,
            error_type,
            message,
            retry_after_ms,
            headers,
            context_window,
            prompt_tokens,
        };
        Some((request_id, failure))
    }

    /// A `ToolResult`'s chat, call and outcome; `None` for any other input.
    pub(super) fn into_tool_result(self) -> Option<(String, String, ToolOutcome)> {
        let Input::ToolResult {
            chat_id,
            tool_call_id,
            content,
            tool_failed,
            data,
            session_metadata,
            parts,
        } = self
        else {
            return None;
        };
        let outcome = ToolOutcome {
            content,
            failed: tool_failed,
            data,
            session_metadata,
            parts,
        };
        Some((chat_id, tool_call_id, outcome))
    }
}
