//! Cache warmth, measured (issue 40): a replayed 50-turn coding session through the engine with
//! an Anthropic model — each turn reads a file (files re-read in a cycle), one tool output is
//! long (20 KB), the history grows until the engine compacts it — and for each chat request the
//! share of its prompt (≈ characters / 4) that lies in a prefix identical to the previous
//! request's, up to that request's last cache breakpoint it shares: what the provider can serve
//! from its cache. Printed per request and on average; the average must stay ≥ 90 %.

use crate::support::harness::{anthropic_reply, Harness};
use palaver::engine::{Effect, Input, RequestPurpose, Step};
use serde_json::{json, Value};

/// The request a step started: its purpose and body.
fn started(step: &Step) -> Option<(RequestPurpose, Value)> {
    step.effects.iter().rev().find_map(|e| match e {
        Effect::StartRequest {
            purpose, request, ..
        } => Some((purpose.clone(), request.body_json())),
        _ => None,
    })
}

fn strip_marks(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, v)| (k.clone(), strip_marks(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_marks).collect()),
        other => other.clone(),
    }
}

/// The prompt in Anthropic's prefix order (tools, system, messages), one entry per block: its
/// text without the markers, and whether a breakpoint sits on it.
fn blocks(body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut add = |prefix: &str, block: &Value| {
        out.push((
            format!("{prefix}{}", strip_marks(block)),
            block.get("cache_control").is_some(),
        ));
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        add("tool:", tool);
    }
    match &body["system"] {
        Value::Array(items) => items.iter().for_each(|b| add("system:", b)),
        Value::String(text) => add("system:", &json!({"text": text})),
        _ => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("");
        match &message["content"] {
            Value::Array(items) => items.iter().for_each(|b| add(&format!("{role}:"), b)),
            other => add(&format!("{role}:"), &json!({"text": other})),
        }
    }
    out
}

/// The share of `next`'s prompt served from the cache `previous` wrote: the longest prefix up
/// to one of `previous`'s breakpoints that `next` repeats exactly.
fn warmth(previous: &[(String, bool)], next: &[(String, bool)]) -> f64 {
    let size = |blocks: &[(String, bool)]| blocks.iter().map(|b| b.0.len()).sum::<usize>() as f64;
    let hit = previous
        .iter()
        .enumerate()
        .filter(|(i, b)| b.1 && *i < next.len())
        .map(|(i, _)| i)
        .filter(|&i| (0..=i).all(|j| previous[j].0 == next[j].0))
        .max();
    hit.map_or(0.0, |i| size(&next[..=i]) / size(next).max(1.0))
}

/// Answers a compaction request with a summary; the step that starts the round itself.
fn summarize(h: &mut Harness, prompt: usize) -> Step {
    let summary = "Summary: the user asked about the files of src/; each was read and explained.";
    h.stream(anthropic_reply(summary, None, prompt).as_bytes());
    h.stream_end()
}

#[test]
fn a_fifty_turn_coding_session_is_served_from_the_cache() {
    let mut h = Harness::with_config_patch(&json!({
        "providers": [{"kind": "anthropic", "base_url": "http://127.0.0.1:9/v1", "model": "claude-test", "n_ctx": 36000}],
        "default_n_ctx": 36000,
        "compact_at": 0.7,
        "system_prompt": format!("You are a coding agent.\n{}", "Project notes. ".repeat(300)),
    }));
    h.open("c1", None);
    h.command(
        "c1",
        json!({"type": "set_params", "client_request_id": "p", "patch": {"provider": "anthropic"}}),
    );
    let mut chat_requests: Vec<Vec<(String, bool)>> = Vec::new();
    let mut compactions = 0;
    let mut prompt = 0;
    let record = |step: &Step,
                  chat: &mut Vec<Vec<(String, bool)>>,
                  prompt: &mut usize|
     -> Option<RequestPurpose> {
        let (purpose, body) = started(step)?;
        *prompt = body.to_string().len() / 4;
        if purpose == RequestPurpose::Chat {
            chat.push(blocks(&body));
        }
        Some(purpose)
    };
    for turn in 0..50 {
        let mut step = h.command("c1", json!({"type": "user_message", "client_request_id": format!("u{turn}"), "content": format!("Turn {turn}: look at src/file{}.rs and tell me what it does.", turn % 7)}));
        // A compaction may come before any round: answered with a summary, then the round starts.
        while record(&step, &mut chat_requests, &mut prompt) == Some(RequestPurpose::Compaction) {
            compactions += 1;
            step = summarize(&mut h, prompt);
        }
        let id = format!("toolu_{turn}");
        h.stream(
            anthropic_reply(
                "Let me read it.",
                Some((&id, &format!("src/file{}.rs", turn % 7))),
                prompt,
            )
            .as_bytes(),
        );
        h.stream_end();
        let output = if turn == 20 {
            "x".repeat(20_000)
        } else {
            format!(
                "// file {}\n{}",
                turn % 7,
                "fn item() { let value = 1; }\n".repeat(60)
            )
        };
        let mut step = h.handle(Input::ToolResult {
            chat_id: "c1".into(),
            tool_call_id: id,
            content: output,
            tool_failed: false,
            data: None,
            session_metadata: None,
            parts: Vec::new(),
        });
        while record(&step, &mut chat_requests, &mut prompt) == Some(RequestPurpose::Compaction) {
            compactions += 1;
            step = summarize(&mut h, prompt);
        }
        h.stream(anthropic_reply(&format!("It defines item {turn}."), None, prompt).as_bytes());
        h.stream_end();
    }
    let shares: Vec<f64> = chat_requests
        .windows(2)
        .map(|w| warmth(&w[0], &w[1]))
        .collect();
    let average = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    let cold: Vec<String> = shares
        .iter()
        .enumerate()
        .filter(|(_, s)| **s < 0.5)
        .map(|(i, s)| format!("request {} {:.0}%", i + 2, s * 100.0))
        .collect();
    println!(
        "cache warmth over {} chat requests of a 50-turn session ({compactions} compaction(s)): average {:.1}%, lowest {:.1}%; below 50%: {}",
        chat_requests.len(),
        average * 100.0,
        shares.iter().cloned().fold(1.0, f64::min) * 100.0,
        if cold.is_empty() { "none".into() } else { cold.join(", ") }
    );
    assert_eq!(chat_requests.len(), 100, "two chat requests per turn");
    assert!(compactions >= 1, "the session reaches a compaction");
    assert!(
        average >= 0.9,
        "average warmth {:.1}% (per request: {shares:?})",
        average * 100.0
    );
}
