//! A server that says how far it has read the prompt (llama.cpp's `prompt_progress`, asked with
//! `return_progress`): the chat's runtime carries it while the turn is `thinking`, and drops it
//! once the answer shows. The chunks are the shape a real `llama-server` sends (checked against
//! one built from the PyPI sdist). What the server says is data: numbers out of range are
//! bounded, a malformed progress is ignored and the answer still decodes. Runs natively and in
//! headless Chromium.

use crate::support::harness::Harness;
use palaver::engine::Step;
use palaver::event::Event;
use serde_json::{json, Value};

fn chat() -> Harness {
    let mut h = Harness::with_config_patch(&json!({}));
    h.open("c1", None);
    h.command(
        "c1",
        json!({"type": "user_message", "client_request_id": "u1", "content": "a long paste"}),
    );
    h
}

/// One SSE event of llama-server's: the role delta, and `prompt_progress` when given.
fn chunk(progress: Option<Value>, content: Option<&str>) -> String {
    let delta = match content {
        Some(text) => json!({"content": text}),
        None => json!({"role": "assistant", "content": null}),
    };
    let mut chunk = json!({"choices": [{"finish_reason": null, "index": 0, "delta": delta}],
        "created": 1, "id": "chatcmpl-1", "model": "m.gguf", "object": "chat.completion.chunk"});
    if let Some(progress) = progress {
        chunk["prompt_progress"] = progress;
    }
    format!("data: {chunk}\n\n")
}

fn progress(processed: u64, total: u64) -> Option<Value> {
    Some(json!({"total": total, "cache": 0, "processed": processed, "time_ms": 407}))
}

fn runtime(h: &Harness) -> Value {
    serde_json::to_value(h.engine.snapshot("c1")).unwrap_or(Value::Null)["runtime"].clone()
}

/// The `prompt_progress` of each `runtime_updated` in the step (`null` where it has none).
fn updates(step: &Step) -> Vec<Value> {
    step.events
        .iter()
        .filter_map(|e| match &e.event {
            Event::RuntimeUpdated { runtime } => {
                Some(serde_json::to_value(runtime.prompt_progress).unwrap_or(Value::Null))
            }
            _ => None,
        })
        .collect()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn progress_shows_while_thinking_and_goes_when_the_answer_starts() {
    let mut h = chat();
    let step = h.stream(chunk(progress(0, 426), None).as_bytes());
    assert_eq!(updates(&step), [json!({"processed": 0, "total": 426})]);
    assert_eq!(runtime(&h)["phase"], "thinking");
    let step = h.stream(chunk(progress(128, 426), None).as_bytes());
    assert_eq!(updates(&step), [json!({"processed": 128, "total": 426})]);
    let step = h.stream(chunk(progress(128, 426), None).as_bytes());
    assert!(
        updates(&step).is_empty(),
        "the same progress says nothing new"
    );
    let step = h.stream(chunk(None, Some("There are")).as_bytes());
    assert_eq!(updates(&step), [Value::Null], "the answer replaces it");
    assert_eq!(runtime(&h)["phase"], "streaming");
    assert!(runtime(&h).get("prompt_progress").is_none());
    h.stream(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    h.stream_end();
    assert_eq!(runtime(&h)["state"], "idle");
    assert!(runtime(&h).get("prompt_progress").is_none());
}

/// An answer that is only a tool call has no text: the line must not stay at "426 of 426" while
/// the call's arguments stream.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_tool_call_ends_the_progress_too() {
    let mut h = chat();
    h.stream(chunk(progress(426, 426), None).as_bytes());
    assert_eq!(runtime(&h)["prompt_progress"]["processed"], 426);
    let call = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
        "type": "function", "function": {"name": "read_file", "arguments": "{\"pa"}}]}}]});
    let step = h.stream(format!("data: {call}\n\n").as_bytes());
    assert_eq!(updates(&step), [Value::Null], "the call replaces it");
    assert_eq!(runtime(&h)["phase"], "thinking");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_servers_odd_progress_is_bounded_or_ignored() {
    let mut h = chat();
    h.stream(chunk(progress(9_000, 426), None).as_bytes());
    assert_eq!(
        runtime(&h)["prompt_progress"],
        json!({"processed": 426, "total": 426}),
        "never more than the whole prompt"
    );
    let mut h = chat();
    for odd in [
        json!({"total": 0, "processed": 0}),
        json!({"total": "426", "processed": 1}),
        json!({"total": -1, "processed": 1}),
        json!("half"),
    ] {
        let step = h.stream(chunk(Some(odd.clone()), None).as_bytes());
        assert!(updates(&step).is_empty(), "{odd} is no progress");
    }
    h.stream(chunk(None, Some("still read")).as_bytes());
    h.stream(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    h.stream_end();
    let snapshot = serde_json::to_value(h.engine.snapshot("c1")).unwrap_or(Value::Null);
    assert_eq!(snapshot["messages"][1]["content"], "still read");
}
