//! The session conformance runner: every `tests/fixtures/session/*.json` is a sequence of inputs
//! with the events, effects and state expected after each, and the final history. One `check`
//! function runs them all, natively and in headless Chromium.

use crate::support::fixtures_in;
use crate::support::harness::{openai_reply, Harness};
use crate::support::json::{short, subsequence_mismatch, subset_mismatch};
use palaver::engine::{Input, Step};
use serde_json::{json, Value};

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn session_fixtures() {
    let fixtures = fixtures_in("session");
    assert!(
        fixtures.len() >= 20,
        "expected the session fixtures, found {}",
        fixtures.len()
    );
    let failures: Vec<String> = fixtures
        .iter()
        .filter_map(|(name, text)| check(name, text).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} session fixtures failed:\n{}",
        failures.len(),
        fixtures.len(),
        failures.join("\n\n")
    );
}

/// Keys a fixture, a step and an expectation may have: anything else is a typo that would
/// otherwise check nothing (issue 15), so the runner refuses it.
const FIXTURE_KEYS: [&str; 6] = [
    "description",
    "config",
    "trajectory",
    "chat",
    "steps",
    "final",
];
const STEP_KEYS: [&str; 18] = [
    "do",
    "expect",
    "advance",
    "chat",
    "command",
    "reply",
    "text",
    "status",
    "error_type",
    "message",
    "retry_after_ms",
    "headers",
    "context_window",
    "tool_call_id",
    "content",
    "tool_failed",
    "data",
    "reason",
];
const STEP_KEYS_MORE: [&str; 3] = ["trajectory", "input", "chats"];
const EXPECT_KEYS: [&str; 10] = [
    "events",
    "effects",
    "events_match",
    "effects_match",
    "state",
    "messages",
    "runtime",
    "thread",
    "draft",
    "roles",
];

fn unknown_keys(value: &Value, allowed: &[&str]) -> Vec<String> {
    value
        .as_object()
        .map(|map| {
            map.keys()
                .filter(|k| !allowed.contains(&k.as_str()))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// A fixture's shape: known keys only, a non-empty `steps` array, each step with a `do`.
fn check_shape(name: &str, fixture: &Value) -> Result<(), String> {
    let mut problems = unknown_keys(fixture, &FIXTURE_KEYS);
    let steps = fixture.get("steps").and_then(Value::as_array);
    if steps.is_none_or(Vec::is_empty) {
        problems.push("no steps".into());
    }
    let step_keys: Vec<&str> = STEP_KEYS.iter().chain(&STEP_KEYS_MORE).copied().collect();
    for (index, step) in steps.into_iter().flatten().enumerate() {
        if step.get("do").and_then(Value::as_str).is_none() {
            problems.push(format!("step {index} has no `do`"));
        }
        problems.extend(
            unknown_keys(step, &step_keys)
                .into_iter()
                .map(|k| format!("step {index}: {k}")),
        );
        if let Some(expect) = step.get("expect") {
            problems.extend(
                unknown_keys(expect, &EXPECT_KEYS)
                    .into_iter()
                    .map(|k| format!("step {index} expect: {k}")),
            );
        }
    }
    if let Some(expect) = fixture.get("final") {
        problems.extend(
            unknown_keys(expect, &EXPECT_KEYS)
                .into_iter()
                .map(|k| format!("final: {k}")),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{name}: unknown or missing keys: {}",
            problems.join(", ")
        ))
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_runner_refuses_unknown_keys_and_empty_fixtures() {
    for (bad, what) in [
        (r#"{"steps": []}"#, "no steps"),
        (r#"{"description": "x"}"#, "no steps"),
        (
            r#"{"steps": [{"do": "command", "expcet": {"state": "idle"}}]}"#,
            "expcet",
        ),
        (
            r#"{"steps": [{"do": "command", "expect": {"stat": "idle"}}]}"#,
            "stat",
        ),
        (r#"{"steps": [{"command": {}}]}"#, "no `do`"),
        (r#"{"steps": [{"do": "tick"}], "finall": {}}"#, "finall"),
    ] {
        let error = check("bad.json", bad).err().unwrap_or_default();
        assert!(error.contains(what), "{bad}: {error}");
    }
}

/// Runs one fixture; `Err` says which step and what differed.
pub fn check(name: &str, text: &str) -> Result<(), String> {
    let fixture: Value =
        serde_json::from_str(text).map_err(|e| format!("{name}: not JSON: {e}"))?;
    check_shape(name, &fixture)?;
    let chat = fixture
        .get("chat")
        .and_then(Value::as_str)
        .unwrap_or("c1")
        .to_string();
    let mut harness = Harness::with_config_patch(fixture.get("config").unwrap_or(&json!({})));
    harness.open(&chat, fixture.get("trajectory").cloned());
    let steps = fixture
        .get("steps")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut command_counter = 0;
    for (index, step) in steps.iter().enumerate() {
        let produced = run_step(&mut harness, &chat, step, &mut command_counter);
        // A step aimed at another chat (`chat`) is checked against that chat.
        let target = step.get("chat").and_then(Value::as_str).unwrap_or(&chat);
        if let Some(expect) = step.get("expect") {
            check_expect(&harness, target, &produced, expect)
                .map_err(|e| format!("{name} step {index} ({}): {e}", step_label(step)))?;
        }
    }
    if let Some(expect) = fixture.get("final") {
        check_expect(&harness, &chat, &Step::default(), expect)
            .map_err(|e| format!("{name} final: {e}"))?;
    }
    Ok(())
}

fn step_label(step: &Value) -> String {
    step.get("do")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string()
}

fn run_step(h: &mut Harness, chat: &str, step: &Value, counter: &mut u32) -> Step {
    if let Some(ms) = step.get("advance").and_then(Value::as_u64) {
        h.now += ms;
    }
    let target = step
        .get("chat")
        .and_then(Value::as_str)
        .unwrap_or(chat)
        .to_string();
    let action = step.get("do").and_then(Value::as_str).unwrap_or("");
    // Replies go to the step's chat's latest request (subagents stream beside their parent).
    if ["reply", "stream", "stream_end", "fail"].contains(&action) {
        h.aim_at(&target);
    }
    match action {
        "command" => {
            let mut command = step.get("command").cloned().unwrap_or(Value::Null);
            if command.get("client_request_id").is_none() {
                *counter += 1;
                command["client_request_id"] = json!(format!("cmd-{counter}"));
            }
            h.command(&target, command)
        }
        "reply" => {
            let reply = step.get("reply").cloned().unwrap_or(Value::Null);
            let mut produced = h.stream(openai_reply(&reply).as_bytes());
            if reply.get("partial").and_then(Value::as_bool) != Some(true) {
                merge(&mut produced, h.stream_end());
            }
            produced
        }
        "stream" => h.stream(
            step.get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .as_bytes(),
        ),
        "stream_end" => h.stream_end(),
        "fail" => {
            let request_id = h.request_id();
            h.handle(Input::RequestFailed {
                request_id,
                status: step.get("status").and_then(Value::as_u64).map(|s| s as u16),
                error_type: step
                    .get("error_type")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                message: step
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("failed")
                    .to_string(),
                retry_after_ms: step.get("retry_after_ms").and_then(Value::as_u64),
                headers: step
                    .get("headers")
                    .cloned()
                    .and_then(|h| serde_json::from_value(h).ok())
                    .unwrap_or_default(),
                context_window: step.get("context_window").and_then(Value::as_u64),
                prompt_tokens: None,
            })
        }
        "tool_result" => h.handle(Input::ToolResult {
            chat_id: target,
            tool_call_id: step["tool_call_id"].as_str().unwrap_or("").to_string(),
            content: step
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            tool_failed: step
                .get("tool_failed")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            data: step.get("data").cloned(),
            session_metadata: None,
            parts: Vec::new(),
        }),
        "tick" => h.handle(Input::Tick {}),
        "save_acked" => {
            let version = h.last_save.as_ref().map_or(0, |(_, v)| *v);
            h.handle(Input::SaveAcked {
                chat_id: target,
                version,
            })
        }
        "save_failed" => {
            let version = h.last_save.as_ref().map_or(0, |(_, v)| *v);
            let reason = step
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("QuotaExceededError")
                .to_string();
            h.handle(Input::SaveFailed {
                chat_id: target,
                version,
                reason,
            })
        }
        "open" => h.open(&target, step.get("trajectory").cloned()),
        "reload" => reload(h, step, &target),
        "input" => {
            match serde_json::from_value::<Input>(step.get("input").cloned().unwrap_or(Value::Null))
            {
                Ok(input) => h.handle(input),
                Err(e) => panic!("bad raw input: {e}"),
            }
        }
        other => panic!("unknown step `{other}`"),
    }
}

/// The page closed and came back: a new engine, and the chats named (`chats`, else the step's
/// chat) opened again from what the old one held — thread and messages, as storage keeps them.
fn reload(h: &mut Harness, step: &Value, target: &str) -> Step {
    let chats: Vec<String> = match step.get("chats").and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        None => vec![target.to_string()],
    };
    let stored: Vec<(String, Value)> = chats
        .into_iter()
        .map(|chat| {
            let session = h
                .engine
                .session(&chat)
                .unwrap_or_else(|| panic!("reload: no chat {chat}"));
            let mut trajectory = serde_json::to_value(&session.thread).unwrap_or(json!({}));
            trajectory["messages"] = serde_json::to_value(&session.messages).unwrap_or(json!([]));
            (chat, trajectory)
        })
        .collect();
    let now = h.now;
    *h = Harness::new(h.engine.config().clone());
    h.now = now;
    let mut produced = Step::default();
    for (chat, trajectory) in stored {
        merge(&mut produced, h.open(&chat, Some(trajectory)));
    }
    produced
}

fn merge(into: &mut Step, more: Step) {
    into.events.extend(more.events);
    into.effects.extend(more.effects);
    into.errors.extend(more.errors);
}

fn check_expect(h: &Harness, chat: &str, produced: &Step, expect: &Value) -> Result<(), String> {
    let events: Vec<Value> = produced
        .events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
        .collect();
    let effects: Vec<Value> = produced
        .effects
        .iter()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
        .collect();
    if let Some(names) = expect.get("events") {
        let got: Vec<Value> = events.iter().map(|e| e["type"].clone()).collect();
        if names != &Value::Array(got.clone()) {
            return Err(format!(
                "events {} expected {}",
                short(&Value::Array(got)),
                short(names)
            ));
        }
    }
    if let Some(names) = expect.get("effects") {
        let got: Vec<Value> = effects.iter().map(|e| e["effect"].clone()).collect();
        if names != &Value::Array(got.clone()) {
            return Err(format!(
                "effects {} expected {}",
                short(&Value::Array(got)),
                short(names)
            ));
        }
    }
    if let Some(Value::Array(items)) = expect.get("events_match") {
        subsequence_mismatch(items, &events)
            .map_or(Ok(()), |e| Err(format!("events_match: {e}")))?;
    }
    if let Some(Value::Array(items)) = expect.get("effects_match") {
        subsequence_mismatch(items, &effects)
            .map_or(Ok(()), |e| Err(format!("effects_match: {e}")))?;
    }
    let snapshot = serde_json::to_value(h.engine.snapshot(chat)).unwrap_or(Value::Null);
    if let Some(state) = expect.get("state") {
        subset_mismatch(state, &snapshot["runtime"]["state"], "state").map_or(Ok(()), Err)?;
    }
    for key in ["messages", "runtime", "thread", "draft"] {
        if let Some(value) = expect.get(key) {
            let actual = snapshot.get(key).cloned().unwrap_or(Value::Null);
            subset_mismatch(value, &actual, key).map_or(Ok(()), Err)?;
        }
    }
    if let Some(Value::Array(roles)) = expect.get("roles") {
        let got: Vec<Value> = snapshot["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|m| m["role"].clone())
            .collect();
        if roles != &got {
            return Err(format!(
                "roles {} expected {}",
                short(&Value::Array(got)),
                short(&Value::Array(roles.clone()))
            ));
        }
    }
    Ok(())
}
