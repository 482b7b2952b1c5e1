//! A deterministic harness (GUIDE §9): drives the engine with simulated time, keeps a subscriber
//! view per chat, and after every step checks the stream rules of SPEC §3.1 — `seq` rises by
//! exactly 1, and the view (snapshot + events) equals the engine's own snapshot.

use palaver::engine::{Bytes, Effect, Engine, EngineConfig, Input, Step};
use palaver::event::EventEnvelope;
use palaver::mirror::ChatMirror;
use palaver::trajectory::TrajectoryText;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub struct Harness {
    pub engine: Engine,
    pub now: u64,
    views: BTreeMap<String, ChatMirror>,
    last_seq: BTreeMap<String, u64>,
    pub last_request: Option<String>,
    /// Each chat's latest request (subagents stream beside their parent).
    pub chat_requests: BTreeMap<String, String>,
    pub last_save: Option<(String, u64)>,
}

impl Harness {
    pub fn new(config: EngineConfig) -> Self {
        Harness {
            engine: Engine::new(config),
            now: 0,
            views: BTreeMap::new(),
            last_seq: BTreeMap::new(),
            last_request: None,
            chat_requests: BTreeMap::new(),
            last_save: None,
        }
    }

    /// A harness whose config is EngineConfig defaults plus an openai-chat provider.
    pub fn with_config_patch(patch: &Value) -> Self {
        let mut config = json!({
            "id_prefix": "",
            "stall_timeout_ms": 120000,
            "providers": [{"kind": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "test-model"}],
            "host_tools": [{"name": "read_tab", "description": "Read the current tab", "parameters": {"type": "object"}}],
        });
        if let (Value::Object(base), Value::Object(extra)) = (&mut config, patch) {
            base.extend(extra.clone());
        }
        let config: EngineConfig =
            serde_json::from_value(config).unwrap_or_else(|e| panic!("bad test config: {e}"));
        Harness::new(config)
    }

    pub fn open(&mut self, chat_id: &str, trajectory: Option<Value>) -> Step {
        let step = self.handle(Input::OpenChat {
            chat_id: chat_id.into(),
            trajectory: trajectory.as_ref().map(TrajectoryText::from_value),
            stored: None,
        });
        let snapshot = self
            .engine
            .snapshot(chat_id)
            .unwrap_or_else(|| panic!("chat {chat_id} did not open"));
        self.last_seq.insert(chat_id.into(), snapshot.seq);
        self.views.insert(
            chat_id.into(),
            ChatMirror::from_snapshot(&snapshot).unwrap_or_else(|e| panic!("{e}")),
        );
        step
    }

    pub fn command(&mut self, chat_id: &str, command: Value) -> Step {
        self.handle(Input::Command {
            chat_id: chat_id.into(),
            command,
        })
    }

    pub fn stream(&mut self, bytes: &[u8]) -> Step {
        let request_id = self.request_id();
        self.handle(Input::StreamBytes {
            request_id,
            bytes: Bytes(bytes.to_vec()),
        })
    }

    pub fn stream_end(&mut self) -> Step {
        let request_id = self.request_id();
        self.handle(Input::StreamEnd { request_id })
    }

    /// The `seq` of the last event seen for each chat (children of a subagent included).
    pub fn seen_seqs(&self) -> &BTreeMap<String, u64> {
        &self.last_seq
    }

    /// Makes the next `stream`, `stream_end` and failure go to this chat's latest request.
    pub fn aim_at(&mut self, chat_id: &str) {
        if let Some(request) = self.chat_requests.get(chat_id) {
            self.last_request = Some(request.clone());
        }
    }

    pub fn request_id(&self) -> String {
        self.last_request
            .clone()
            .unwrap_or_else(|| "no-request".into())
    }

    pub fn handle(&mut self, input: Input) -> Step {
        let step = self.engine.handle(self.now, input);
        self.observe(&step);
        step
    }

    fn observe(&mut self, step: &Step) {
        for effect in &step.effects {
            match effect {
                Effect::StartRequest {
                    request_id,
                    chat_id,
                    ..
                } => {
                    self.last_request = Some(request_id.clone());
                    self.chat_requests
                        .insert(chat_id.clone(), request_id.clone());
                }
                Effect::SaveTrajectory { save } => {
                    self.last_save = Some((save.chat_id.clone(), save.version))
                }
                _ => {}
            }
        }
        for event in &step.events {
            self.check_seq(event);
            if let Some(view) = self.views.get_mut(&event.chat_id) {
                view.apply(event).unwrap_or_else(|e| panic!("view: {e}"));
            }
        }
        for (chat_id, view) in &self.views {
            let Some(expected) = self.engine.snapshot(chat_id) else {
                continue;
            };
            // The borrowed snapshots a page is sent write the same text as the owned ones.
            let text = |v: &dyn erased::Text| v.text();
            let owned = text(&expected);
            let borrowed = self.engine.snapshot_view(chat_id).map(|v| text(&v));
            assert_eq!(
                borrowed.as_deref(),
                Some(owned.as_str()),
                "engine's snapshot_view"
            );
            let mirrored = view.to_snapshot(chat_id);
            assert_eq!(
                text(&view.snapshot_view(chat_id)),
                text(&mirrored),
                "mirror's"
            );
            let seen = serde_json::to_value(mirrored).unwrap_or(Value::Null);
            let expected = serde_json::to_value(expected).unwrap_or(Value::Null);
            if seen != expected {
                panic!("snapshot + events != engine snapshot for {chat_id}\n view: {seen}\n engine: {expected}");
            }
        }
    }

    fn check_seq(&mut self, event: &EventEnvelope) {
        let last = self.last_seq.entry(event.chat_id.clone()).or_insert(0);
        assert_eq!(
            event.seq,
            *last + 1,
            "seq must rise by exactly 1 (event {:?})",
            event.event.name()
        );
        *last = event.seq;
    }
}

/// Anthropic SSE for an answer: text, and a `read_file` call when `call` names one; the prompt's
/// size reported as a provider does (≈ characters / 4 of the request it answers).
pub fn anthropic_reply(text: &str, call: Option<(&str, &str)>, input_tokens: usize) -> String {
    let text = serde_json::to_string(text).unwrap_or_default();
    let mut sse = format!("event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{{\"input_tokens\":{input_tokens},\"output_tokens\":1}}}}}}\n\n");
    sse.push_str(&format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\nevent: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":{text}}}}}\n\nevent: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n"));
    let stop = match call {
        Some((id, path)) => {
            sse.push_str(&format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"read_file\",\"input\":{{}}}}}}\n\nevent: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":\"{{\\\"path\\\":\\\"{path}\\\"}}\"}}}}\n\nevent: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":1}}\n\n"));
            "tool_use"
        }
        None => "end_turn",
    };
    sse.push_str(&format!("event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop}\"}},\"usage\":{{\"output_tokens\":3}}}}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"));
    sse
}

/// OpenAI-chat SSE for a reply: reasoning, text, tool calls, finish reason, usage.
pub fn openai_reply(reply: &Value) -> String {
    let mut out = String::new();
    let mut chunk = |delta: Value, finish: Value| {
        let body = json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        out.push_str(&format!("data: {body}\n\n"));
    };
    chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    if let Some(reasoning) = reply.get("reasoning").and_then(Value::as_str) {
        chunk(json!({"reasoning_content": reasoning}), Value::Null);
    }
    for piece in text_pieces(reply) {
        chunk(json!({"content": piece}), Value::Null);
    }
    for (index, call) in reply
        .get("tool_calls")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let arguments = match call.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => "{}".into(),
        };
        chunk(
            json!({"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": arguments}}]}),
            Value::Null,
        );
    }
    if reply.get("partial").and_then(Value::as_bool) == Some(true) {
        return out;
    }
    let has_calls = reply
        .get("tool_calls")
        .is_some_and(|c| c.as_array().is_some_and(|a| !a.is_empty()));
    let finish = reply
        .get("finish_reason")
        .cloned()
        .unwrap_or_else(|| json!(if has_calls { "tool_calls" } else { "stop" }));
    chunk(json!({}), finish);
    let usage = reply.get("usage").cloned().unwrap_or_else(
        || json!({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}),
    );
    out.push_str(&format!("data: {}\n\n", json!({"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [], "usage": usage})));
    out.push_str("data: [DONE]\n\n");
    out
}

fn text_pieces(reply: &Value) -> Vec<String> {
    match reply.get("text") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(pieces)) => pieces
            .iter()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

mod erased {
    /// A value's JSON text as the browser host writes it (`json_text`).
    pub trait Text {
        fn text(&self) -> String;
    }
    impl<T: serde::Serialize> Text for T {
        fn text(&self) -> String {
            palaver::json_text::to_string(self).unwrap_or_else(|e| format!("error: {e}"))
        }
    }
}
