//! The enums and structs read by hand (`palaver::tagged::Fields`, issue 20) read back what their
//! derived `Serialize` writes: every variant, every field set to something other than its
//! default, through JSON text and through a `Value`. The `variant_count` matches have no
//! wildcard, so a new variant does not compile until it has an example here.

use palaver::command::{Command, CommandEnvelope};
use palaver::delta::DeltaOp;
use palaver::engine::{Bytes, Input};
use palaver::event::{Event, EventEnvelope};
use palaver::thread::ThreadParams;
use palaver::trajectory::TrajectoryText;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use std::fmt::Debug;

fn from<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("test value: {e}"))
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(item: &T) {
    let value = serde_json::to_value(item).unwrap_or_else(|e| panic!("{item:?}: {e}"));
    let back: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{value} does not read back: {e}"));
    assert_eq!(&back, item, "through a Value: {value}");
    let text = value.to_string();
    let back: T =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text} does not read back: {e}"));
    assert_eq!(&back, item, "through text: {text}");
}

fn message(id: &str) -> Value {
    json!({"message_id": id, "role": "assistant", "content": "hi", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    ], "usage": {"prompt_tokens": 3, "completion_tokens": 4}, "finish_reason": "stop", "x-extra": 1})
}

fn runtime() -> Value {
    json!({
        "state": "paused", "busy": true, "queue_held": true, "is_compressing": true,
        "error": {"kind": "llm_error", "code": "429", "message": "slow down", "retryable": true, "class": "rate_limited", "attempts": 3},
        "pause_reasons": [{"tool_call_id": "c1", "tool_name": "write_file", "args": {"path": "a"}, "rule": "ask"}],
        "queue_size": 1,
        "queued_items": [{"client_request_id": "r1", "type": "user_message", "priority": true, "preview": "next"}],
        "context_usage": {"estimated_tokens": 10, "n_ctx": 100, "message_count": 2, "pressure": 0.1},
        "compression_phase": "summarizing", "compression_reason": "full", "storage_error": "quota",
        "compression_strength": "medium",
        "retry": {"attempt": 2, "max_attempts": 5, "at_ms": 9, "class": "overloaded", "code": "529", "message": "busy"},
        "plan": {"message_id": "p1", "mode": "agent", "version": 2, "body": "1. a", "updates": [[3, "done"]]},
        "questions": ["Which file?"],
        "subagents": [{"chat_id": "c", "title": "t", "task": "do", "tool_call_id": "s1", "status": "running", "model": "m", "tokens": 5, "started_at_ms": 1, "ended_at_ms": 2, "pause_reasons": []}],
        "waiting_for_agents": ["c"]
    })
}

fn delta_ops() -> Vec<DeltaOp> {
    let ops = vec![
        DeltaOp::AppendContent { text: "a".into() },
        DeltaOp::AppendReasoning { text: "r".into() },
        DeltaOp::SetToolCalls {
            tool_calls: from(message("m")["tool_calls"].clone()),
        },
        DeltaOp::SetThinkingBlocks {
            blocks: vec![json!({"type": "thinking", "thinking": "t", "signature": "s"})],
        },
        DeltaOp::AddCitation {
            citation: json!({"url": "https://example.com"}).into(),
        },
        DeltaOp::AddServerContentBlock {
            block: json!({"type": "web_search_tool_result"}).into(),
        },
        DeltaOp::SetUsage {
            usage: from(json!({"prompt_tokens": 1, "completion_tokens": 2})),
        },
        DeltaOp::MergeExtra {
            extra: from(json!({"k": "v"})),
        },
    ];
    let variant_count = |op: &DeltaOp| match op {
        DeltaOp::AppendContent { .. }
        | DeltaOp::AppendReasoning { .. }
        | DeltaOp::SetToolCalls { .. }
        | DeltaOp::SetThinkingBlocks { .. }
        | DeltaOp::AddCitation { .. }
        | DeltaOp::AddServerContentBlock { .. }
        | DeltaOp::SetUsage { .. }
        | DeltaOp::MergeExtra { .. } => 1,
    };
    assert_eq!(ops.iter().map(variant_count).sum::<usize>(), 8);
    ops
}

fn commands() -> Vec<Command> {
    let commands = vec![
        Command::UserMessage {
            content: from(
                json!([{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]),
            ),
            attachments: Some(vec![json!({"url": "https://example.com"})]),
            context_files: Some(vec![
                json!({"file_name": "a.rs", "file_content": "x", "line1": 1, "line2": 1}),
            ]),
            message_id: Some("m9".into()),
        },
        Command::SetParams {
            patch: from(json!({"temperature": 0.5})),
        },
        Command::UpdateMessage {
            message_id: "m1".into(),
            content: from(json!("edited")),
            regenerate: true,
        },
        Command::RemoveMessage {
            message_id: "m1".into(),
            regenerate: true,
        },
        Command::TruncateMessages { from_index: 3 },
        Command::RetryFromIndex {
            index: 2,
            content: from(json!("again")),
        },
        Command::Abort {},
        Command::ApproveTools {
            tool_call_ids: vec!["c1".into()],
        },
        Command::RejectTools {
            tool_call_ids: vec!["c1".into()],
            reason: Some("no".into()),
        },
        Command::BranchFromChat {
            source_chat_id: "c".into(),
            up_to_message_id: "m2".into(),
        },
        Command::RestoreFromTrajectory {
            trajectory: json!({"messages": []}),
            own_copy: true,
        },
        Command::InsertMessage {
            index: 0,
            message: serde_json::from_value(
                json!({"message_id": "m9", "role": "user", "content": "back"}),
            )
            .unwrap_or_else(|e| panic!("{e}")),
        },
        Command::ClearDraft {},
        Command::SetDraft { text: "dr".into() },
        Command::Regenerate {},
        Command::IdeToolResult {
            tool_call_id: "c1".into(),
            content: "done".into(),
            tool_failed: true,
        },
        Command::CancelQueued {},
        Command::ResumeQueue {},
        Command::ResumeSubagent {
            child_id: "c~s1".into(),
        },
        Command::CancelSubagent {
            child_id: "c~s1".into(),
        },
        Command::ApplyEditBlock {
            message_id: "m2".into(),
            index: 1,
        },
        Command::SkipEditBlock {
            message_id: "m2".into(),
            index: 0,
        },
        Command::RunSuggestedCommand {
            message_id: "m2".into(),
            index: 2,
        },
    ];
    let variant_count = |command: &Command| match command {
        Command::UserMessage { .. }
        | Command::SetParams { .. }
        | Command::UpdateMessage { .. }
        | Command::RemoveMessage { .. }
        | Command::TruncateMessages { .. }
        | Command::RetryFromIndex { .. }
        | Command::Abort {}
        | Command::ApproveTools { .. }
        | Command::RejectTools { .. }
        | Command::BranchFromChat { .. }
        | Command::RestoreFromTrajectory { .. }
        | Command::ClearDraft {}
        | Command::SetDraft { .. }
        | Command::Regenerate {}
        | Command::IdeToolResult { .. }
        | Command::CancelQueued {}
        | Command::ResumeQueue {}
        | Command::InsertMessage { .. }
        | Command::ResumeSubagent { .. }
        | Command::CancelSubagent { .. }
        | Command::ApplyEditBlock { .. }
        | Command::SkipEditBlock { .. }
        | Command::RunSuggestedCommand { .. } => 1,
    };
    assert_eq!(commands.iter().map(variant_count).sum::<usize>(), 23);
    commands
}

fn inputs() -> Vec<Input> {
    let inputs = vec![
        Input::OpenChat {
            chat_id: "c".into(),
            trajectory: Some(TrajectoryText::from_value(
                &json!({"messages": [message("m1")]}),
            )),
            stored: Some(from(json!([{"message_id": "m1", "position": 1.5}]))),
        },
        Input::CloseChat {
            chat_id: "c".into(),
        },
        Input::ReloadChat {
            chat_id: "c".into(),
            trajectory: TrajectoryText::from_value(&json!({"messages": []})),
            stored: Some(Vec::new()),
        },
        Input::Command {
            chat_id: "c".into(),
            command: json!({"type": "abort", "client_request_id": "r"}),
        },
        Input::StreamBytes {
            request_id: "q".into(),
            bytes: Bytes(b"data: {}\n\n".to_vec()),
        },
        Input::StreamEnd {
            request_id: "q".into(),
        },
        Input::RequestFailed {
            request_id: "q".into(),
            status: Some(429),
            error_type: Some("rate_limit".into()),
            message: "slow".into(),
            retry_after_ms: Some(1000),
            headers: from(json!({"retry-after": "1"})),
            context_window: Some(4096),
            prompt_tokens: None,
        },
        Input::ToolResult {
            chat_id: "c".into(),
            tool_call_id: "c1".into(),
            content: "ok".into(),
            tool_failed: true,
            data: Some(json!({"lines": 3})),
            session_metadata: Some(from(json!({"title": "t"}))),
            parts: vec![
                json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}),
            ],
        },
        Input::ToolProgress {
            chat_id: "c".into(),
            tool_call_id: "c1".into(),
            stream: "stderr".into(),
            text: "line".into(),
        },
        Input::SaveAcked {
            chat_id: "c".into(),
            version: 4,
        },
        Input::SaveFailed {
            chat_id: "c".into(),
            version: 4,
            reason: "quota".into(),
        },
        Input::Tick {},
    ];
    let variant_count = |input: &Input| match input {
        Input::OpenChat { .. }
        | Input::CloseChat { .. }
        | Input::ReloadChat { .. }
        | Input::Command { .. }
        | Input::StreamBytes { .. }
        | Input::StreamEnd { .. }
        | Input::RequestFailed { .. }
        | Input::ToolResult { .. }
        | Input::ToolProgress { .. }
        | Input::SaveAcked { .. }
        | Input::SaveFailed { .. }
        | Input::Tick {} => 1,
    };
    assert_eq!(inputs.iter().map(variant_count).sum::<usize>(), 12);
    inputs
}

fn events() -> Vec<Event> {
    let model = |m: &str| from(json!({"provider": "anthropic", "model": m}));
    let events = vec![
        Event::Snapshot {
            thread: json!({"title": "t"}),
            runtime: from(runtime()),
            messages: vec![from(message("m1"))],
            draft: Some(from(
                json!({"message_id": "m2", "content": "par", "reasoning_content": "", "tool_calls": [], "thinking_blocks": [], "citations": [], "server_content_blocks": []}),
            )),
        },
        Event::StreamStarted {
            message_id: "m2".into(),
        },
        Event::StreamDelta {
            message_id: "m2".into(),
            ops: delta_ops(),
            phase: "streaming".into(),
            draft_tokens: 12,
        },
        Event::StreamFinished {
            message_id: "m2".into(),
            finish_reason: "stop".into(),
        },
        Event::MessageAdded {
            message: from(message("m3")),
            index: 2,
        },
        Event::MessageUpdated {
            message_id: "m3".into(),
            message: from(message("m3")),
        },
        Event::MessageRemoved {
            message_id: "m3".into(),
        },
        Event::MessagesTruncated { from_index: 1 },
        Event::ThreadUpdated {
            patch: from(json!({"title": "new"})),
        },
        Event::QueueUpdated {
            queue_size: 1,
            queued_items: from(runtime()["queued_items"].clone()),
        },
        Event::RuntimeUpdated {
            runtime: from(runtime()),
        },
        Event::PauseRequired {
            reasons: from(runtime()["pause_reasons"].clone()),
        },
        Event::PauseCleared {},
        Event::IdeToolRequired {
            tool_call_id: "c1".into(),
            tool_name: "open_file".into(),
            args: json!({"path": "a"}),
        },
        Event::ToolDecision {
            tool_call_id: "c1".into(),
            tool_name: "read_file".into(),
            decision: "approved".into(),
            source: "rule".into(),
        },
        Event::ToolProgress {
            tool_call_id: "c1".into(),
            stream: "stdout".into(),
            text: "x".into(),
        },
        Event::SubagentSpawned {
            parent: "p".into(),
            child: "c".into(),
            tool_call_id: "s1".into(),
            title: "t".into(),
            task: "do".into(),
        },
        Event::SubagentResult {
            parent: "p".into(),
            child: "c".into(),
            tool_call_id: "s1".into(),
            outcome: "done".into(),
            text: "ok".into(),
        },
        Event::ModelFallback {
            preferred: model("a"),
            actual: model("b"),
            reason: "overloaded".into(),
        },
        Event::Ack {
            client_request_id: "r".into(),
            accepted: false,
            reason: Some(json!({"kind": "queue_full", "limit": 100})),
        },
    ];
    let variant_count = |event: &Event| match event {
        Event::Snapshot { .. }
        | Event::StreamStarted { .. }
        | Event::StreamDelta { .. }
        | Event::StreamFinished { .. }
        | Event::MessageAdded { .. }
        | Event::MessageUpdated { .. }
        | Event::MessageRemoved { .. }
        | Event::MessagesTruncated { .. }
        | Event::ThreadUpdated { .. }
        | Event::QueueUpdated { .. }
        | Event::RuntimeUpdated { .. }
        | Event::PauseRequired { .. }
        | Event::PauseCleared {}
        | Event::IdeToolRequired { .. }
        | Event::ToolDecision { .. }
        | Event::ToolProgress { .. }
        | Event::SubagentSpawned { .. }
        | Event::SubagentResult { .. }
        | Event::ModelFallback { .. }
        | Event::Ack { .. } => 1,
    };
    assert_eq!(events.iter().map(variant_count).sum::<usize>(), 20);
    events
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_variant_reads_back_what_it_writes() {
    delta_ops().iter().for_each(round_trip);
    inputs().iter().for_each(round_trip);
    for (n, command) in commands().into_iter().enumerate() {
        round_trip(&command);
        round_trip(&CommandEnvelope {
            client_request_id: format!("r{n}"),
            priority: true,
            command,
        });
    }
    for (seq, event) in events().into_iter().enumerate() {
        round_trip(&event);
        round_trip(&EventEnvelope {
            chat_id: "c".into(),
            seq: seq as u64,
            event,
        });
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn thread_params_keep_every_field_and_unknown_keys() {
    let all = json!({
        "title": "t", "model": "m", "provider": "gemini", "mode": "ask", "temperature": 0.3,
        "max_tokens": 9, "reasoning_effort": "high", "thinking_budget": 100,
        "context_tokens_cap": 5000, "system_prompt": "be brief", "max_tool_rounds": 7,
        "tool_policy": {"run_command": "deny"}, "parent_id": "p", "root_chat_id": "r",
        "link_type": "subagent", "depth": 1, "max_subagent_depth": 3, "max_subagents": 4,
        "allowed_tools": ["read_file"], "fallback_models": [{"provider": "anthropic", "model": "x"}],
        "composer_draft": "half", "x-unknown": {"kept": true}
    });
    let params: ThreadParams = from(all.clone());
    assert_eq!(
        params.extra.len(),
        1,
        "only the unknown key is extra: {:?}",
        params.extra
    );
    assert_eq!(serde_json::to_value(&params).ok(), Some(all));
    round_trip(&params);
    let defaults: ThreadParams = from(json!({}));
    assert_eq!(defaults, ThreadParams::default());
    assert_eq!(
        (defaults.mode.as_str(), defaults.max_tool_rounds),
        ("agent", 50)
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn bad_objects_are_refused_in_serdes_words() {
    let error = |value: Value| {
        serde_json::from_value::<CommandEnvelope>(value)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(error(json!({"client_request_id": "r"})).contains("missing field `type`"));
    let unknown = error(json!({"client_request_id": "r", "type": "fly"}));
    assert!(
        unknown.contains("unknown variant `fly`") && unknown.contains("`user_message`"),
        "{unknown}"
    );
    assert!(
        error(json!({"client_request_id": "r", "type": "set_draft"}))
            .contains("missing field `text`")
    );
    assert!(error(json!({"client_request_id": "r", "type": 3})).contains("invalid type"));
    assert!(error(json!({"type": "abort"})).contains("missing field `client_request_id`"));
    assert!(error(json!(["abort"])).contains("invalid type"));
    let wrong =
        error(json!({"client_request_id": "r", "type": "truncate_messages", "from_index": "x"}));
    assert!(wrong.contains("invalid type"), "{wrong}");
    let input = serde_json::from_value::<Input>(
        json!({"input": "stream_bytes", "request_id": "q", "bytes": 5}),
    );
    assert!(input.is_err_and(|e| e.to_string().contains("invalid bytes")));
}
