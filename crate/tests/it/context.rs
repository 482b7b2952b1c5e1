//! The context pipeline (SPEC §5, §7, §8.2): plans through the engine with their caps and
//! placement, each stage of the history limit with its strength and exemptions, the repairs of
//! the fix stage, and the byte-stable request prefix from one round to the next. Runs natively
//! and in headless Chromium.

use crate::support::harness::{anthropic_reply, openai_reply, Harness};
use palaver::engine::{Effect, Input, Step};
use palaver::history_limit::{limit_history, CompressionStrength, HistoryLimitError};
use palaver::message::ChatMessage;
use palaver::plan::{PLAN_BODY_CAP, PLAN_DELTA_CAP};
use serde_json::{json, Value};

fn harness() -> Harness {
    let mut h = Harness::with_config_patch(&json!({}));
    h.open("c1", None);
    h
}

fn send(h: &mut Harness, id: &str, text: &str) -> Step {
    h.command(
        "c1",
        json!({"type": "user_message", "client_request_id": id, "content": text}),
    )
}

fn reply(h: &mut Harness, reply: Value) -> Step {
    let mut step = h.stream(openai_reply(&reply).as_bytes());
    let end = h.stream_end();
    step.events.extend(end.events);
    step.effects.extend(end.effects);
    step
}

fn messages(h: &Harness) -> Vec<Value> {
    let snapshot = serde_json::to_value(h.engine.snapshot("c1")).unwrap_or(Value::Null);
    snapshot["messages"].as_array().cloned().unwrap_or_default()
}

fn request_body(step: &Step) -> Value {
    step.effects
        .iter()
        .rev()
        .find_map(|e| match e {
            Effect::StartRequest { request, .. } => Some(request.body_json()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no request in this step"))
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "name": name, "arguments": args})
}

fn tool_results(h: &Harness) -> Vec<(String, String, bool)> {
    messages(h)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
                m["tool_failed"] == true,
            )
        })
        .collect()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn plans_are_set_updated_read_and_placed_after_the_steps_results() {
    let mut h = harness();
    send(&mut h, "u1", "plan it");
    let step = reply(
        &mut h,
        json!({"tool_calls": [
            call("c1", "update_plan", json!({"note": "too early"})),
            call("c2", "set_plan", json!({"content": "1. read\n2. write", "summary": "two steps"})),
            call("c3", "update_plan", json!({"note": "read done"})),
            call("c4", "get_plan", json!({})),
            call("c5", "read_file", json!({"path": "a.txt"})),
        ]}),
    );
    assert!(
        step.effects
            .iter()
            .any(|e| matches!(e, Effect::RunTool { name, .. } if name == "read_file")),
        "the workspace tool runs; engine tools ran inline"
    );
    let next = h.handle(Input::ToolResult {
        chat_id: "c1".into(),
        tool_call_id: "c5".into(),
        content: "file body".into(),
        tool_failed: false,
        data: None,
        session_metadata: None,
        parts: Vec::new(),
    });
    let results = tool_results(&h);
    assert_eq!(
        results[0].2, true,
        "update_plan without a plan fails: {results:?}"
    );
    assert!(results[0].1.contains("no plan exists"));
    assert!(!results[1].2 && !results[2].2);
    assert!(
        !results[3].2 && results[3].1.contains("1. read"),
        "get_plan sees the plan set earlier in the same step: {results:?}"
    );
    let roles: Vec<String> = messages(&h)
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "tool",
            "tool",
            "tool",
            "tool",
            "plan",
            "event"
        ],
        "the plan and its delta come after all of the step's results"
    );
    let all = messages(&h);
    assert_eq!(all[7]["plan"]["version"], 1);
    assert_eq!(all[8]["event"]["subkind"], "plan_delta");
    assert_eq!(all[8]["event"]["payload"]["seq"], 1);
    // The next request carries them as text after the results, never as roles `plan`/`event`.
    let body = request_body(&next);
    let sent: Vec<Value> = body["messages"].as_array().cloned().unwrap_or_default();
    assert!(sent
        .iter()
        .all(|m| m["role"] != "plan" && m["role"] != "event"));
    let last = sent.last().cloned().unwrap_or(Value::Null);
    assert_eq!(last["role"], "user");
    let text = last["content"].as_str().unwrap_or("");
    assert!(
        text.starts_with("<plan mode=\"agent\" version=\"1\">\n1. read\n2. write\n</plan>"),
        "{text}"
    );
    assert!(
        text.contains("<plan-update seq=\"1\">read done</plan-update>"),
        "{text}"
    );

    // get_plan returns the base and its updates; a second update gets seq 2.
    reply(
        &mut h,
        json!({"tool_calls": [
            call("c6", "update_plan", json!({"note": "write <b>done</b>"})),
            call("c7", "get_plan", json!({})),
        ]}),
    );
    let results = tool_results(&h);
    let snapshot = serde_json::to_value(h.engine.snapshot("c1")).unwrap_or(Value::Null);
    assert_eq!(
        snapshot["runtime"]["plan"]["updates"],
        json!([[1, "read done"], [2, "write <b>done</b>"]]),
        "the runtime's plan has every update in order"
    );
    let got = &results[6].1;
    assert!(
        got.contains("1. read")
            && got.contains("seq=\"1\">read done")
            && got.contains("seq=\"2\"><![CDATA[write <b>done</b>]]>"),
        "{got}"
    );
}

/// Issue 15 / seed 001: `set_plan` creates the plan or replaces it — a new version that names
/// the one it supersedes; later updates and `get_plan` go with the new one.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn set_plan_replaces_the_current_plan() {
    let mut h = harness();
    send(&mut h, "u1", "plan it");
    reply(
        &mut h,
        json!({"tool_calls": [call("p1", "set_plan", json!({"content": "1. old"}))]}),
    );
    reply(
        &mut h,
        json!({"tool_calls": [
            call("p2", "set_plan", json!({"content": "1. new\n2. better"})),
            call("p3", "get_plan", json!({})),
        ]}),
    );
    let results = tool_results(&h);
    assert!(
        !results[1].2 && results[1].1.contains("Plan replaced (version 2)"),
        "{results:?}"
    );
    assert!(
        results[2].1.contains("1. new") && !results[2].1.contains("1. old"),
        "{results:?}"
    );
    let plans: Vec<Value> = messages(&h)
        .into_iter()
        .filter(|m| m["role"] == "plan")
        .collect();
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[1]["plan"]["version"], 2);
    assert_eq!(plans[1]["plan"]["supersedes"], plans[0]["message_id"]);
    // The runtime carries the plan as it stands, so the page shows it without re-deriving it.
    let snapshot = serde_json::to_value(h.engine.snapshot("c1")).unwrap_or(Value::Null);
    let shown = &snapshot["runtime"]["plan"];
    assert_eq!(shown["version"], 2, "{shown}");
    assert_eq!(shown["body"], "1. new\n2. better");
    assert_eq!(shown["message_id"], plans[1]["message_id"]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn plan_caps_cut_and_mark() {
    let mut h = harness();
    send(&mut h, "u1", "plan it");
    let long_plan = "p".repeat(200_000);
    let long_note = "n".repeat(20_000);
    reply(
        &mut h,
        json!({"tool_calls": [
            call("c1", "set_plan", json!({"content": long_plan})),
            call("c2", "update_plan", json!({"note": long_note})),
        ]}),
    );
    let all = messages(&h);
    let plan = all
        .iter()
        .find(|m| m["role"] == "plan")
        .cloned()
        .unwrap_or(Value::Null);
    let body = plan["content"].as_str().unwrap_or("");
    assert_eq!(body.chars().count(), PLAN_BODY_CAP);
    assert!(body.ends_with("of 200000 chars]") && body.contains("[truncated: kept "));
    assert_eq!(plan["plan"]["truncated"], true);
    assert_eq!(plan["plan"]["original_chars"], 200_000);
    let delta = all
        .iter()
        .find(|m| m["role"] == "event")
        .cloned()
        .unwrap_or(Value::Null);
    let note = delta["content"].as_str().unwrap_or("");
    assert_eq!(note.chars().count(), PLAN_DELTA_CAP);
    assert_eq!(PLAN_DELTA_CAP, 16_384);
    assert!(
        note.ends_with("of 20000 chars]"),
        "{}",
        &note[note.len() - 60..]
    );
}

fn history(value: Value) -> Vec<ChatMessage> {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("bad history: {e}"))
}

fn user(id: &str, text: &str) -> Value {
    json!({"message_id": id, "role": "user", "content": text})
}

fn assistant(id: &str, text: &str) -> Value {
    json!({"message_id": id, "role": "assistant", "content": text})
}

fn calls(id: &str, calls: &[(&str, &str)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(cid, args)| json!({"id": cid, "type": "function", "function": {"name": "read_file", "arguments": args}}))
        .collect();
    json!({"message_id": id, "role": "assistant", "content": "", "tool_calls": calls})
}

fn result(id: &str, call: &str, text: &str) -> Value {
    json!({"message_id": id, "role": "tool", "tool_call_id": call, "content": text})
}

fn event(id: &str, subkind: &str) -> Value {
    json!({"message_id": id, "role": "event", "content": format!("{subkind} {id}"), "event": {"subkind": subkind, "source": "test"}})
}

fn ids(messages: &[palaver::history_limit::LimitedMessage<'_>]) -> Vec<String> {
    messages.iter().map(|m| m.message_id.clone()).collect()
}

fn total(messages: &[ChatMessage]) -> u64 {
    messages
        .iter()
        .map(palaver::history_limit::estimate_tokens)
        .sum()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn nothing_changes_under_budget() {
    let h = history(json!([user("u1", "hi"), assistant("a1", "hello")]));
    let limited = limit_history(&h, Some(10_000)).expect("fits");
    assert_eq!(limited.strength, CompressionStrength::Absent);
    let same: Vec<ChatMessage> = limited
        .messages
        .into_iter()
        .map(|m| m.into_owned())
        .collect();
    assert_eq!(same, h);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn stage_one_deduplicates_context_files_keeping_the_largest_copy() {
    let file = |id: &str, l1: u64, l2: u64, body: &str| json!({"message_id": id, "role": "context_file", "content": json!([{"file_name": "src/a.rs", "file_content": body, "line1": l1, "line2": l2}]).to_string()});
    let big = "x".repeat(4000);
    let small = "y".repeat(400);
    let h = history(json!([
        user("u1", "look"),
        file("f1", 1, 100, &big),
        assistant("a1", "ok"),
        user("u2", "again"),
        file("f2", 10, 20, &small),
        assistant("a2", "ok"),
        user("u3", "now"),
    ]));
    let budget = total(&h) - 50;
    let limited = limit_history(&h, Some(budget)).expect("fits after dedup");
    assert_eq!(limited.strength, CompressionStrength::Low);
    let text = |id: &str| {
        limited
            .messages
            .iter()
            .find(|m| m.message_id == id)
            .map(|m| m.content.text())
            .unwrap_or_default()
    };
    assert!(text("f1").contains(&big), "the largest copy stays");
    assert!(
        text("f2").contains("src/a.rs is shown again later"),
        "{}",
        text("f2")
    );
    assert_eq!(ids(&limited.messages).len(), 7, "no message dropped");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn stage_two_compresses_old_tool_results_outside_the_tail() {
    let long = "r".repeat(3000);
    let h = history(json!([
        user("u1", "read"),
        calls("a1", &[("k1", "{\"path\":\"a\"}")]),
        result("t1", "k1", &long),
        assistant("a2", "done"),
        user("u2", "again"),
        calls("a3", &[("k2", "{\"path\":\"b\"}")]),
        result("t2", "k2", &long),
    ]));
    let limited = limit_history(&h, Some(total(&h) - 200)).expect("fits");
    assert_eq!(limited.strength, CompressionStrength::Low);
    let t1 = limited
        .messages
        .iter()
        .find(|m| m.message_id == "t1")
        .map(|m| m.content.text())
        .unwrap_or_default();
    let t2 = limited
        .messages
        .iter()
        .find(|m| m.message_id == "t2")
        .map(|m| m.content.text())
        .unwrap_or_default();
    assert!(
        t1.starts_with(&"r".repeat(200)) && t1.contains("[compressed: kept 200 of 3000 characters"),
        "{t1}"
    );
    assert_eq!(
        t2, long,
        "the protected tail is not compressed at this stage"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn stage_three_repairs_calls_and_results_always() {
    let h = history(json!([
        user("u1", "go"),
        calls(
            "a1",
            &[
                ("k1", "{\"path\":\"a\"}"),
                ("k2", "{\"path\":\"b\"}"),
                ("k3", "{\"path\": \"c")
            ]
        ),
        result("t-orphan", "nobody", "orphan"),
        result("t2", "k2", "second"),
        user("u-mid", "hm"),
        result("t1", "k1", "first"),
        result("t1-dup", "k1", "first again"),
        assistant("a2", "done"),
    ]));
    let limited = limit_history(&h, None).expect("no budget");
    assert_eq!(
        limited.strength,
        CompressionStrength::Absent,
        "repairs are not compression"
    );
    assert!(limited.repairs >= 3);
    let got = ids(&limited.messages);
    assert_eq!(
        got,
        ["u1", "a1", "t1", "t2", "a1-bad-args", "u-mid", "a2"],
        "{got:?}"
    );
    let a1 = &limited.messages[1];
    let call_ids: Vec<&str> = a1.tool_calls().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        call_ids,
        ["k1", "k2"],
        "the call with cut arguments is taken out"
    );
    assert!(limited.messages[4]
        .content
        .text()
        .contains("not a JSON object"));
    // An unanswered call disappears with nothing left of its message.
    let h = history(json!([
        user("u1", "go"),
        calls("a1", &[("k9", "{}")]),
        user("u2", "still there?")
    ]));
    let limited = limit_history(&h, None).expect("no budget");
    assert_eq!(ids(&limited.messages), ["u1", "u2"]);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn stage_four_drops_old_turns_but_never_plans_and_applies_exemptions() {
    let words = "w".repeat(2000);
    let h = history(json!([
        {"message_id": "s", "role": "system", "content": "system prompt"},
        user("u1", &words), event("tick1", "tick"), assistant("a1", &words),
        {"message_id": "p1", "role": "plan", "content": "the plan", "plan": {"mode": "agent", "version": 1}},
        event("pc1", "process_completed"), event("pc2", "process_completed"),
        user("u2", &words), event("pc3", "process_completed"), event("mode1", "mode_switch"), assistant("a2", &words),
        event("pc4", "process_completed"), {"message_id": "d1", "role": "event", "content": "note", "event": {"subkind": "plan_delta", "source": "update_plan", "payload": {"seq": 1}}},
        user("u3", &words), event("tick2", "tick"), assistant("a3", &words),
        user("u4", "last question"),
    ]));
    let limited = limit_history(&h, Some(total(&h) - 700)).expect("fits");
    assert_eq!(limited.strength, CompressionStrength::Medium);
    let got = ids(&limited.messages);
    for kept in ["s", "p1", "d1", "u4", "tick2"] {
        assert!(got.iter().any(|g| g == kept), "{kept} kept: {got:?}");
    }
    for dropped in ["u1", "a1", "tick1", "pc1"] {
        assert!(
            !got.iter().any(|g| g == dropped),
            "{dropped} dropped: {got:?}"
        );
    }
    assert!(
        !got.iter().any(|g| g == "mode1"),
        "DropOnAge: older than the last 2 user turns: {got:?}"
    );
}

/// KeepRecentN on its own (issue 15: the test above could pass without the rule, its surplus
/// event sat in a turn dropped anyway): every turn fits but for a few tokens, so only the rule
/// drops — the oldest `process_completed` events beyond the last three, their turns kept.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn keep_recent_n_keeps_the_last_three_of_a_kind_and_nothing_else_goes() {
    let h = history(json!([
        {"message_id": "s", "role": "system", "content": "system prompt"},
        user("u1", "first"), event("pc1", "process_completed"), event("pc2", "process_completed"), assistant("a1", "one"),
        user("u2", "second"), event("pc3", "process_completed"), event("pc4", "process_completed"), assistant("a2", "two"),
        user("u3", "third"), event("pc5", "process_completed"), assistant("a3", "three"),
        user("u4", "last question"),
    ]));
    let limited = limit_history(&h, Some(total(&h) - 5)).expect("fits");
    let got = ids(&limited.messages);
    let pcs: Vec<&String> = got.iter().filter(|id| id.starts_with("pc")).collect();
    assert_eq!(
        pcs,
        ["pc3", "pc4", "pc5"],
        "the last three are kept: {got:?}"
    );
    for kept in ["s", "u1", "a1", "u2", "a2", "u3", "a3", "u4"] {
        assert!(
            got.iter().any(|g| g == kept),
            "{kept} kept (only the rule dropped): {got:?}"
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_protected_tail_is_cut_last_and_an_impossible_history_is_an_error() {
    let long = "r".repeat(3000);
    let h = history(json!([
        user("u1", "old"),
        assistant("a1", "old answer"),
        user("u2", "read both"),
        calls("a2", &[("k1", "{}")]),
        result("t1", "k1", &long),
        calls("a3", &[("k2", "{}")]),
        result("t2", "k2", &long),
    ]));
    let limited = limit_history(&h, Some(300)).expect("fits once the tail is cut");
    assert_eq!(limited.strength, CompressionStrength::High);
    assert!(
        ids(&limited.messages).iter().any(|g| g == "u2"),
        "the last user message stays"
    );
    let huge = "q".repeat(40_000);
    let h = history(json!([user("u1", &huge)]));
    match limit_history(&h, Some(1000)) {
        Err(HistoryLimitError::TooLarge { estimated, budget }) => {
            assert!(estimated > budget && budget == 1000);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_history_too_large_ends_the_turn_with_a_typed_error_and_no_request() {
    let mut h = Harness::with_config_patch(&json!({"default_n_ctx": 2000}));
    h.open("c1", None);
    let step = send(&mut h, "u1", &"z".repeat(40_000));
    assert!(!step
        .effects
        .iter()
        .any(|e| matches!(e, Effect::StartRequest { .. })));
    let snapshot = serde_json::to_value(h.engine.snapshot("c1")).unwrap_or(Value::Null);
    let error = &snapshot["runtime"]["error"];
    assert_eq!(error["code"], "history_too_large", "{error}");
    assert_eq!(error["class"], "request_too_large");
    assert_eq!(
        messages(&h).len(),
        2,
        "the user message is kept, with an error notice"
    );
}

/// Round N's request is a byte prefix of round N+1's: the body is assembled in a fixed order
/// and nothing already sent changes.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn three_rounds_of_a_tool_chat_keep_a_byte_stable_prefix() {
    let mut h = harness();
    let mut bodies = vec![request_body(&send(&mut h, "u1", "read a, then b"))];
    for (i, path) in ["a.txt", "b.txt"].iter().enumerate() {
        let id = format!("k{i}");
        reply(
            &mut h,
            json!({"text": format!("reading {path}"), "tool_calls": [call(&id, "read_file", json!({"path": path}))]}),
        );
        let next = h.handle(Input::ToolResult {
            chat_id: "c1".into(),
            tool_call_id: id,
            content: format!("contents of {path}"),
            tool_failed: false,
            data: None,
            session_metadata: None,
            parts: Vec::new(),
        });
        bodies.push(request_body(&next));
    }
    for pair in bodies.windows(2) {
        let (a, b) = (&pair[0]["messages"], &pair[1]["messages"]);
        let a_text = serde_json::to_string(a).unwrap_or_default();
        let b_text = serde_json::to_string(b).unwrap_or_default();
        let prefix = &a_text[..a_text.len() - 1]; // without the closing `]`
        assert!(
            b_text.starts_with(prefix),
            "round prefix changed:\n{a_text}\n{b_text}"
        );
        assert_eq!(pair[0]["tools"], pair[1]["tools"], "tools are stable");
    }
}

fn without_cache_control(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, v)| (k.clone(), without_cache_control(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_control).collect()),
        other => other.clone(),
    }
}

fn breakpoints(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if tool.get("cache_control").is_some() {
            found.push(format!("tool {i}"));
        }
    }
    for (i, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for block in message["content"].as_array().into_iter().flatten() {
            if block.get("cache_control").is_some() {
                found.push(format!("message {i}"));
            }
        }
    }
    found
}

/// Anthropic: at most 4 breakpoints (the tools, the tiers' ends, the last turn); in one
/// exchange's tool loop only the tools and the last turn carry one; without the markers each
/// round's messages are a prefix of the next round's.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn anthropic_cache_breakpoints_in_a_tool_loop() {
    let mut h = Harness::with_config_patch(
        &json!({"providers": [{"kind": "anthropic", "base_url": "http://127.0.0.1:9/v1", "model": "claude-test"}]}),
    );
    h.open("c1", None);
    h.command(
        "c1",
        json!({"type": "set_params", "client_request_id": "p", "patch": {"provider": "anthropic"}}),
    );
    let mut bodies = vec![request_body(&send(&mut h, "u0", "start"))];
    for round in 0..12 {
        let id = format!("toolu_{round}");
        h.stream(anthropic_reply("reading", Some((&id, &format!("f{round}.txt"))), 5).as_bytes());
        h.stream_end();
        let next = h.handle(Input::ToolResult {
            chat_id: "c1".into(),
            tool_call_id: id,
            content: format!("contents {round}"),
            tool_failed: false,
            data: None,
            session_metadata: None,
            parts: Vec::new(),
        });
        bodies.push(request_body(&next));
    }
    for (round, body) in bodies.iter().enumerate() {
        let marks = breakpoints(body);
        assert!(marks.len() <= 4, "round {round}: {marks:?}");
        assert!(
            marks.iter().any(|m| m.starts_with("tool")),
            "round {round}: the tools carry one: {marks:?}"
        );
        let last = body["messages"].as_array().map_or(0, Vec::len) - 1;
        assert!(
            marks.contains(&format!("message {last}")),
            "round {round}: the last turn carries one"
        );
    }
    // One exchange under way (a question and its tool rounds) is all active: no tier ends in
    // it, so the tools' breakpoint and the last turn's are the only ones (the stability tiers'
    // own breakpoints are `stability.rs`'s and `cache_warmth.rs`'s).
    for body in &bodies {
        assert_eq!(breakpoints(body).len(), 2, "{}", body["messages"]);
    }
    for pair in bodies.windows(2) {
        let a =
            serde_json::to_string(&without_cache_control(&pair[0]["messages"])).unwrap_or_default();
        let b =
            serde_json::to_string(&without_cache_control(&pair[1]["messages"])).unwrap_or_default();
        assert!(
            b.starts_with(&a[..a.len() - 1]),
            "the prefix changed:\n{a}\n{b}"
        );
    }
}

fn purpose_of(step: &Step) -> Vec<String> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::StartRequest { purpose, .. } => {
                Some(serde_json::to_value(purpose).ok()?.as_str()?.to_string())
            }
            _ => None,
        })
        .collect()
}

fn runtime(h: &Harness) -> Value {
    serde_json::to_value(h.engine.snapshot("c1")).unwrap_or(Value::Null)["runtime"].clone()
}

/// A chat of six old turns (about 3 000 tokens) with a plan, in an engine whose n_ctx is 5 000
/// and which compacts at 50%.
fn long_chat() -> Harness {
    let mut h = Harness::with_config_patch(&json!({"default_n_ctx": 5000, "compact_at": 0.5}));
    let mut messages = vec![
        json!({"message_id": "plan", "role": "plan", "content": "keep going", "plan": {"mode": "agent", "version": 1}}),
    ];
    for turn in 0..6 {
        messages.push(json!({"message_id": format!("old-u{turn}"), "role": "user", "content": format!("question {turn} {}", "q".repeat(1000))}));
        messages.push(json!({"message_id": format!("old-a{turn}"), "role": "assistant", "content": format!("answer {turn} {}", "a".repeat(1000))}));
    }
    h.open(
        "c1",
        Some(json!({"id": "c1", "title": "long", "messages": messages})),
    );
    h
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn compaction_by_the_model_summarizes_old_turns_and_keeps_them_stored() {
    let mut h = long_chat();
    let step = send(&mut h, "u-new", "and now?");
    assert_eq!(purpose_of(&step), ["compaction"], "compaction first");
    assert_eq!(runtime(&h)["is_compressing"], true);
    assert_eq!(runtime(&h)["compression_phase"], "running");
    let summarizer = request_body(&step).to_string();
    assert!(
        summarizer.contains("question 0") && !summarizer.contains("keep going"),
        "sources but not the plan"
    );
    let step = reply(
        &mut h,
        json!({"text": "The user asked six questions; all answered."}),
    );
    assert_eq!(purpose_of(&step), ["chat"], "then the round itself");
    let rt = runtime(&h);
    assert_eq!(rt["compression_phase"], "applied");
    assert!(
        rt["compression_reason"]
            .as_str()
            .is_some_and(|r| r.contains("messages summarized")),
        "the runtime says what compaction did: {rt}"
    );
    assert_eq!(rt["is_compressing"], false);
    let all = messages(&h);
    let summary = all
        .iter()
        .find(|m| m["compression"]["kind"] == "summary")
        .cloned()
        .unwrap_or(Value::Null);
    let sources = summary["compression"]["summarized_source_message_ids"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(sources.len(), 12, "{summary}");
    assert!(!sources.contains(&json!("plan")) && !sources.contains(&json!("u-new")));
    assert!(all.iter().any(|m| m["role"] == "compression_report"));
    assert!(
        all.iter().any(|m| m["message_id"] == "old-u0"),
        "the sources stay stored"
    );
    let body = request_body(&step).to_string();
    assert!(!body.contains("question 0"), "sources are not sent again");
    assert!(
        body.contains("The user asked six questions")
            && body.contains("keep going")
            && body.contains("and now?")
    );
    let estimate = rt["context_usage"]["estimated_tokens"]
        .as_u64()
        .unwrap_or(u64::MAX);
    assert!(
        estimate < 2500,
        "the estimate follows the summary: {estimate}"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_failed_compaction_falls_back_to_the_four_stages() {
    let mut h = long_chat();
    send(&mut h, "u-new", "and now?");
    let request_id = h.request_id();
    let step = h.handle(Input::RequestFailed {
        request_id,
        status: Some(500),
        error_type: None,
        message: "boom".into(),
        retry_after_ms: None,
        headers: Default::default(),
        context_window: None,
        prompt_tokens: None,
    });
    assert_eq!(purpose_of(&step), ["chat"]);
    assert_eq!(runtime(&h)["compression_phase"], "failed");
    assert!(
        runtime(&h)["compression_reason"]
            .as_str()
            .is_some_and(|r| r.contains("summary request failed")),
        "and why it failed"
    );
    assert!(!messages(&h)
        .iter()
        .any(|m| m["role"] == "compression_report"));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn context_too_long_from_the_provider_compacts_then_resends() {
    let mut h = Harness::with_config_patch(&json!({"compact_at": 0.7}));
    let mut messages = Vec::new();
    for turn in 0..4 {
        messages.push(json!({"message_id": format!("u{turn}"), "role": "user", "content": format!("q{turn}")}));
        messages.push(json!({"message_id": format!("a{turn}"), "role": "assistant", "content": format!("a{turn}")}));
    }
    h.open("c1", Some(json!({"id": "c1", "messages": messages})));
    send(&mut h, "u-new", "next");
    let request_id = h.request_id();
    let step = h.handle(Input::RequestFailed {
        request_id,
        status: Some(400),
        error_type: Some("context_length_exceeded".into()),
        message: "This model's maximum context length is 8192 tokens".into(),
        retry_after_ms: None,
        headers: Default::default(),
        context_window: None,
        prompt_tokens: None,
    });
    assert_eq!(purpose_of(&step), ["compaction"]);
    let step = reply(&mut h, json!({"text": "summary"}));
    assert_eq!(
        purpose_of(&step),
        ["chat"],
        "the round is sent again after the summary"
    );
}

/// Issue 14 §10: every provider's "context too long" is recognised, with the window it states.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn context_too_long_errors_of_every_provider_are_recognised_with_their_window() {
    use palaver::retry::context_overflow;
    let cases: [(Option<&str>, &str, Option<u64>, Option<u64>); 7] = [
        (Some("exceed_context_size_error"), "the request exceeds the available context size, try increasing it", Some(4096), Some(4096)),
        (Some("context_length_exceeded"), "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.", None, Some(128000)),
        (Some("invalid_request_error"), "prompt is too long: 210417 tokens > 200000 maximum", None, Some(200000)),
        (Some("INVALID_ARGUMENT"), "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", None, Some(1048576)),
        (None, "input length exceeds the context length", None, None),
        (Some("BadRequestError"), "This model's maximum context length is 4,096 tokens.", None, Some(4096)),
        (None, "Trying to keep the first 5000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens", None, Some(4096)),
    ];
    for (kind, message, reported, window) in cases {
        let found = context_overflow(kind, message, reported);
        assert_eq!(found.map(|o| o.window), Some(window), "{message}");
    }
    assert_eq!(
        context_overflow(
            Some("invalid_request_error"),
            "messages: text content blocks must be non-empty",
            None
        ),
        None
    );
    assert_eq!(context_overflow(None, "rate limited", None), None);
}

/// What llama.cpp answers when the prompt exceeds its `-c`: the type, its words, and `n_ctx`.
fn llama_cpp_context_refusal(h: &mut Harness, n_ctx: u64) -> Step {
    let request_id = h.request_id();
    h.handle(Input::RequestFailed {
        request_id,
        status: Some(400),
        error_type: Some("exceed_context_size_error".into()),
        message: "the request exceeds the available context size, try increasing it".into(),
        retry_after_ms: None,
        headers: Default::default(),
        context_window: Some(n_ctx),
        prompt_tokens: None,
    })
}

/// Issue 14 §10: llama.cpp's refusal teaches the window; the round is sent again once, limited
/// to it; a second refusal ends the turn with the provider's words.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_context_refusal_teaches_the_window_and_the_round_is_resent_once() {
    let mut h = Harness::with_config_patch(&json!({"compact_at": null}));
    let mut messages = Vec::new();
    for turn in 0..30 {
        messages.push(json!({"message_id": format!("u{turn}"), "role": "user", "content": format!("question {turn} {}", "words ".repeat(60))}));
        messages.push(json!({"message_id": format!("a{turn}"), "role": "assistant", "content": format!("answer {turn} {}", "words ".repeat(60))}));
    }
    h.open("c1", Some(json!({"id": "c1", "messages": messages})));
    let first = send(&mut h, "u-new", "and now?");
    let first_len = request_body(&first)["messages"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(runtime(&h)["context_usage"]["n_ctx"], 128000);
    let step = llama_cpp_context_refusal(&mut h, 2048);
    assert_eq!(
        purpose_of(&step),
        ["chat"],
        "the round is sent again at once"
    );
    assert_eq!(
        runtime(&h)["context_usage"]["n_ctx"],
        2048,
        "the window is learned"
    );
    let resent = request_body(&step)["messages"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(
        resent < first_len,
        "the history limit cut to the learned window ({resent} < {first_len})"
    );
    let step = llama_cpp_context_refusal(&mut h, 2048);
    assert!(purpose_of(&step).is_empty(), "only once");
    assert_eq!(runtime(&h)["state"], "error");
    assert_eq!(runtime(&h)["error"]["class"], "request_too_large");
}

/// Issue 16: a server that opened its stream before it knew the prompt was too long (the model in
/// the page, which answers 200 at once) says so in the stream. Before anything visible, that is
/// the same remedy as a refusal: the window is learned, the round resent once; after content
/// it is a stream error that keeps the partial answer.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_context_overflow_said_in_the_stream_before_content_teaches_the_window() {
    let mut h = Harness::with_config_patch(&json!({"compact_at": null}));
    let mut history = Vec::new();
    for turn in 0..30 {
        history.push(json!({"message_id": format!("u{turn}"), "role": "user", "content": format!("question {turn} {}", "words ".repeat(60))}));
        history.push(json!({"message_id": format!("a{turn}"), "role": "assistant", "content": format!("answer {turn} {}", "words ".repeat(60))}));
    }
    h.open("c1", Some(json!({"id": "c1", "messages": history})));
    let first = send(&mut h, "u-new", "and now?");
    let first_len = request_body(&first)["messages"]
        .as_array()
        .map_or(0, Vec::len);
    let overflow = b": the model is working\n\ndata: {\"error\":{\"type\":\"exceed_context_size_error\",\"message\":\"The chat no longer fits the model's window: the request exceeds the available context size (the context length is 2048 tokens).\",\"n_ctx\":2048}}\n\n";
    let step = h.stream(overflow);
    assert!(
        step.effects
            .iter()
            .any(|e| matches!(e, Effect::CancelRequest { .. })),
        "the broken stream is let go"
    );
    assert_eq!(purpose_of(&step), ["chat"], "the round is sent again");
    assert_eq!(
        runtime(&h)["context_usage"]["n_ctx"],
        2048,
        "the window is learned from the words"
    );
    let resent = request_body(&step)["messages"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(
        resent < first_len,
        "cut to the learned window ({resent} < {first_len})"
    );
    // After visible content the same words end the round with the partial kept.
    let content = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Par\"}}]}\n\n";
    h.stream(content);
    let step = h.stream(overflow);
    assert!(
        purpose_of(&step).is_empty(),
        "no silent retry after content"
    );
    assert_eq!(runtime(&h)["state"], "error");
    let last = messages(&h).last().cloned().unwrap_or_default();
    assert_eq!(last["role"], "error", "{last}");
    assert!(
        messages(&h)
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "Par"),
        "the partial answer is kept"
    );
}

/// Issue 14 §3: the provider's model settings reach every request in its own shape; a chat's
/// params win; the provider's window drives the gauge and the limit.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn provider_model_settings_and_the_chats_system_prompt_reach_the_request() {
    let providers = json!([
        {"kind": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "m", "n_ctx": 4096, "max_tokens": 300, "temperature": 0.2, "reasoning_effort": "low"},
        {"kind": "anthropic", "base_url": "http://127.0.0.1:9/v1", "model": "claude", "max_tokens": 2000, "thinking_budget": 1024},
        {"kind": "gemini", "base_url": "http://127.0.0.1:9/v1beta", "model": "gemini", "n_ctx": 1048576, "max_tokens": 700, "thinking_budget": 512},
        {"kind": "openai-responses", "base_url": "http://127.0.0.1:9/v1", "model": "o4", "max_tokens": 900, "reasoning_effort": "high"},
    ]);
    let mut h = Harness::with_config_patch(
        &json!({"providers": providers, "system_prompt": "HOST PROMPT"}),
    );
    h.open("c1", None);
    let step = send(&mut h, "u1", "hi");
    let body = request_body(&step);
    assert_eq!(
        (
            body["max_tokens"].clone(),
            body["temperature"].clone(),
            body["reasoning_effort"].clone()
        ),
        (json!(300), json!(0.2), json!("low")),
        "{body}"
    );
    assert_eq!(body["messages"][0]["content"], "HOST PROMPT");
    assert_eq!(
        runtime(&h)["context_usage"]["n_ctx"],
        4096,
        "the provider's window"
    );
    reply(&mut h, json!({"text": "ok"}));
    let patch = json!({"type": "set_params", "client_request_id": "p1", "patch": {"provider": "anthropic", "system_prompt": "CHAT PROMPT"}});
    h.command("c1", patch);
    let body = request_body(&send(&mut h, "u2", "again"));
    assert_eq!(body["max_tokens"], 2000);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 1024})
    );
    assert_eq!(
        body["system"][0]["text"], "CHAT PROMPT",
        "the chat's prompt replaces the host's"
    );
    assert!(
        body["system"][0].get("cache_control").is_some(),
        "the system prompt carries the first breakpoint: {}",
        body["system"]
    );
    assert_eq!(
        runtime(&h)["context_usage"]["n_ctx"],
        128000,
        "anthropic names no window: the default"
    );
    h.handle(Input::RequestFailed {
        request_id: h.request_id(),
        status: Some(401),
        error_type: None,
        message: "x".into(),
        retry_after_ms: None,
        headers: Default::default(),
        context_window: None,
        prompt_tokens: None,
    });
    for (kind, check) in [("gemini", "gemini"), ("openai-responses", "responses")] {
        h.command("c1", json!({"type": "set_params", "client_request_id": format!("p-{kind}"), "patch": {"provider": kind, "max_tokens": null}}));
        let body = request_body(&send(&mut h, &format!("u-{kind}"), "once more"));
        match check {
            "gemini" => {
                assert_eq!(body["generationConfig"]["maxOutputTokens"], 700, "{body}");
                assert_eq!(
                    body["generationConfig"]["thinkingConfig"]["thinkingBudget"], 512,
                    "{body}"
                );
                assert_eq!(runtime(&h)["context_usage"]["n_ctx"], 1048576);
            }
            _ => {
                assert_eq!(body["max_output_tokens"], 900, "{body}");
                assert_eq!(body["reasoning"]["effort"], "high", "{body}");
            }
        }
        h.handle(Input::RequestFailed {
            request_id: h.request_id(),
            status: Some(401),
            error_type: None,
            message: "x".into(),
            retry_after_ms: None,
            headers: Default::default(),
            context_window: None,
            prompt_tokens: None,
        });
    }
    // A chat's own max_tokens beats its provider's.
    h.command("c1", json!({"type": "set_params", "client_request_id": "p-own", "patch": {"provider": "openai-chat", "max_tokens": 55}}));
    let body = request_body(&send(&mut h, "u-own", "last"));
    assert_eq!(body["max_tokens"], 55);
}

/// Issue 14 §2: the system prompt assembled from the agent prompt and the workspace context.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_system_prompt_carries_the_instructions_the_sorted_file_tree_and_the_date() {
    use palaver::prompt::{
        assemble, InstructionFile, WorkspaceContext, DEFAULT_AGENT_PROMPT, FILE_TREE_CAP,
        INSTRUCTION_FILE_CAP, REPO_MAP_CAP,
    };
    let mut files: Vec<String> = (0..FILE_TREE_CAP + 5)
        .map(|i| format!("src/f{i:04}.rs"))
        .collect();
    files.push("README.md".into());
    files.reverse();
    let context = WorkspaceContext {
        instructions: vec![InstructionFile {
            path: "AGENTS.md".into(),
            text: format!("Use tabs.\n{}", "x".repeat(INSTRUCTION_FILE_CAP + 100)),
        }],
        files,
        files_truncated: false,
        date: "2026-11-23".into(),
        repo_map: format!(
            "# Repository Structure\n\nLegend: f=function\n\nsrc/core.rs:\n  f open_book :3 ←2\n{}",
            "  f filler :9\n".repeat(REPO_MAP_CAP / 10)
        ),
    };
    let prompt = assemble(None, &context);
    // The map after the instructions, before the file list, cut at a whole line within its cap.
    let map_at = prompt.find("# Repository Structure").unwrap_or(usize::MAX);
    let tree_at = prompt.find("# Repository Files").unwrap_or(0);
    assert!(prompt.find("## AGENTS.md").unwrap_or(0) < map_at && map_at < tree_at);
    assert!(prompt.contains("src/core.rs:\n  f open_book :3 ←2\n"));
    let map_part = &prompt[map_at..tree_at];
    assert!(
        map_part.len() <= REPO_MAP_CAP + 2 && map_part.trim_end().ends_with("f filler :9"),
        "{}",
        map_part.len()
    );
    assert!(prompt.starts_with(DEFAULT_AGENT_PROMPT));
    assert!(prompt.contains("## AGENTS.md\n\nUse tabs."));
    assert!(prompt.contains("[… AGENTS.md cut at"));
    assert!(
        prompt.contains(&format!(
            "# File Tree ({} files)\n\nREADME.md\nsrc/f0000.rs\n",
            FILE_TREE_CAP + 6
        )),
        "flat and sorted"
    );
    assert!(prompt.contains("[… 6 more files"));
    assert!(prompt.ends_with("Today's date: 2026-11-23."));
    let own = assemble(Some("Be terse."), &WorkspaceContext::default());
    assert_eq!(own, "Be terse.");
}

/// Issue 14 §5: a running tool's output lines reach subscribers as `tool_progress` events while
/// it runs, and are dropped once it ended (they are never stored).
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn tool_progress_lines_reach_subscribers_only_while_the_tool_runs() {
    let mut h = harness();
    send(&mut h, "u1", "read it");
    reply(
        &mut h,
        json!({"tool_calls": [call("t1", "read_file", json!({"path": "a"}))]}),
    );
    let progress = |h: &mut Harness, text: &str| {
        h.handle(Input::ToolProgress {
            chat_id: "c1".into(),
            tool_call_id: "t1".into(),
            stream: "stdout".into(),
            text: text.into(),
        })
    };
    let step = progress(&mut h, "line one");
    let names: Vec<&str> = step.events.iter().map(|e| e.event.name()).collect();
    assert_eq!(names, ["tool_progress"]);
    let stored = messages(&h).len();
    h.handle(Input::ToolResult {
        chat_id: "c1".into(),
        tool_call_id: "t1".into(),
        content: "done".into(),
        tool_failed: false,
        data: Some(json!({"exit_code": 0})),
        session_metadata: None,
        parts: Vec::new(),
    });
    let late = progress(&mut h, "late line");
    assert!(
        late.events.is_empty(),
        "after its result a tool's progress is dropped"
    );
    assert!(messages(&h).len() > stored);
    assert!(
        !serde_json::to_string(&messages(&h))
            .unwrap_or_default()
            .contains("line one"),
        "progress is never stored"
    );
    let tool = messages(&h)
        .into_iter()
        .find(|m| m["role"] == "tool")
        .unwrap_or_default();
    assert_eq!(
        tool["data"]["exit_code"], 0,
        "the tool's data is kept with its result: {tool}"
    );
}

/// Issue 14 §9: after Stop the queued messages are held (`queue_held`); Regenerate then runs
/// exactly one turn, the held messages untouched; `resume_queue` sends them; a discarded one
/// never runs.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn after_stop_held_messages_wait_and_regenerate_runs_one_turn() {
    let mut h = harness();
    send(&mut h, "u1", "first question");
    h.stream(
        openai_reply(&json!({"text": "partial"}))
            .as_bytes()
            .get(..60)
            .unwrap_or_default(),
    );
    send(&mut h, "q1", "held one");
    send(&mut h, "q2", "held two");
    h.command("c1", json!({"type": "abort", "client_request_id": "stop"}));
    let rt = runtime(&h);
    assert_eq!(rt["queue_held"], true, "{rt}");
    assert_eq!(rt["queue_size"], 2);
    let step = h.command(
        "c1",
        json!({"type": "regenerate", "client_request_id": "regen"}),
    );
    let body = request_body(&step);
    let users: Vec<String> = body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        users,
        ["first question"],
        "one turn: the held messages are not merged in"
    );
    reply(&mut h, json!({"text": "a full answer"}));
    let rt = runtime(&h);
    assert_eq!(
        (rt["queue_size"].clone(), rt["queue_held"].clone()),
        (json!(2), json!(true)),
        "still held after the regenerated turn: {rt}"
    );
    h.command(
        "c1",
        json!({"type": "cancel_queued", "client_request_id": "q2"}),
    );
    let step = h.command(
        "c1",
        json!({"type": "resume_queue", "client_request_id": "go"}),
    );
    let body = request_body(&step);
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last().cloned())
        .unwrap_or_default();
    assert_eq!(last["content"], "held one", "send now runs what was held");
    assert!(
        !body.to_string().contains("held two"),
        "the discarded one never runs"
    );
    assert!(runtime(&h).get("queue_held").is_none());
}

/// Issue 14 §9: a stopped answer and one cut at the output limit are marked in the Markdown
/// export; the Refact export keeps `stopped` and `finish_reason` as they are.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn exports_mark_stopped_and_cut_answers() {
    let trajectory = json!({"id": "c1", "title": "t", "messages": [
        {"message_id": "u1", "role": "user", "content": "q"},
        {"message_id": "a1", "role": "assistant", "content": "half", "stopped": true, "finish_reason": "abort"},
        {"message_id": "u2", "role": "user", "content": "q2"},
        {"message_id": "a2", "role": "assistant", "content": "cut", "finish_reason": "length"},
        {"message_id": "u3", "role": "user", "content": "q3"},
        {"message_id": "a3", "role": "assistant", "content": "whole", "finish_reason": "stop"},
    ]});
    let markdown = palaver::export::export_chat(&trajectory, "markdown").unwrap_or_default();
    assert_eq!(
        markdown.matches("[stopped by the user").count(),
        1,
        "{markdown}"
    );
    assert_eq!(
        markdown.matches("[cut at the output token limit").count(),
        1,
        "{markdown}"
    );
    let refact = palaver::export::export_chat(&trajectory, "refact").unwrap_or_default();
    assert!(
        refact.contains("\"stopped\": true") || refact.contains("\"stopped\":true"),
        "{refact}"
    );
    assert!(refact.contains("length"));
}

/// Issue 14 §5: a call the thread's rule approves gets its `tool_decision` event too (the ones
/// the user decides are stored as `event(tool_decision)` messages); engine tools get none.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn auto_approved_calls_get_their_tool_decision_event() {
    use palaver::event::Event;
    let mut h = harness();
    send(&mut h, "u1", "read and plan");
    let step = reply(
        &mut h,
        json!({"tool_calls": [
            call("t1", "read_file", json!({"path": "a"})),
            call("t2", "set_plan", json!({"plan": "1. read"})),
        ]}),
    );
    let decisions: Vec<(String, String, String)> = step
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolDecision {
                tool_call_id,
                decision,
                source,
                ..
            } => Some((tool_call_id.clone(), decision.clone(), source.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        decisions,
        [(
            "t1".to_string(),
            "approved".to_string(),
            "policy".to_string()
        )]
    );
}

/// Issue 15: a command that edits the history without starting a turn, popped in `error`,
/// leaves the chat `idle` (the error was about the old history); a draft change does not.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_edit_popped_in_error_leaves_the_chat_idle() {
    let mut h = harness();
    send(&mut h, "u1", "hello");
    h.handle(Input::RequestFailed {
        request_id: h.request_id(),
        status: Some(401),
        error_type: None,
        message: "bad key".into(),
        retry_after_ms: None,
        headers: Default::default(),
        context_window: None,
        prompt_tokens: None,
    });
    assert_eq!(runtime(&h)["state"], "error");
    h.command(
        "c1",
        json!({"type": "set_draft", "client_request_id": "d", "text": "typing"}),
    );
    assert_eq!(
        runtime(&h)["state"],
        "error",
        "a draft is not an edit of the history"
    );
    h.command(
        "c1",
        json!({"type": "truncate_messages", "client_request_id": "t", "from_index": 0}),
    );
    assert_eq!(runtime(&h)["state"], "idle");
    assert!(runtime(&h).get("error").is_none());
}

/// Issue 15 / SPEC §8.3: a tool's `session_metadata` is merged into the thread; the params that
/// steer the agent (tool rules, provider, model, prompt) are not a tool's to set.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn session_metadata_merges_into_the_thread_but_never_steers() {
    let mut h = harness();
    send(&mut h, "u1", "look");
    reply(
        &mut h,
        json!({"tool_calls": [call("t1", "read_file", json!({"path": "a"}))]}),
    );
    let metadata = json!({"title": "Named by the tool", "ticket": "ABC-1", "tool_policy": {"write_file": "auto"}, "model": "evil"});
    let step = h.handle(Input::ToolResult {
        chat_id: "c1".into(),
        tool_call_id: "t1".into(),
        content: "ok".into(),
        tool_failed: false,
        data: None,
        session_metadata: metadata.as_object().cloned(),
        parts: Vec::new(),
    });
    assert!(step
        .events
        .iter()
        .any(|e| e.event.name() == "thread_updated"));
    let thread =
        serde_json::to_value(h.engine.snapshot("c1")).unwrap_or_default()["thread"].clone();
    assert_eq!(thread["title"], "Named by the tool");
    assert_eq!(thread["ticket"], "ABC-1");
    assert!(
        thread
            .get("tool_policy")
            .is_none_or(|p| p.get("write_file").is_none()),
        "{thread}"
    );
    assert_ne!(thread["model"], "evil");
}

/// Issue 15 / SPEC §5: the compression phase goes `checking` → `running` → `applied`, each
/// seen by subscribers through `runtime_updated`.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn compaction_phases_are_emitted_checking_running_applied() {
    use palaver::event::Event;
    let phases = |step: &Step| -> Vec<String> {
        step.events
            .iter()
            .filter_map(|e| match &e.event {
                Event::RuntimeUpdated { runtime } => runtime.compression_phase.clone(),
                _ => None,
            })
            .collect()
    };
    let mut h = long_chat();
    let step = send(&mut h, "u-new", "and now?");
    assert_eq!(purpose_of(&step), ["compaction"]);
    assert_eq!(phases(&step), ["checking", "running"]);
    let step = reply(&mut h, json!({"text": "The user asked six questions."}));
    assert_eq!(phases(&step).last().map(String::as_str), Some("applied"));
}

/// Issue 15: the queue's cap and its priority order, through the engine: while a turn runs,
/// priority messages queue after earlier priority ones and before the rest; past 100 queued
/// commands the next is refused with `queue_full`, and nothing else changes.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_queue_keeps_priority_order_and_refuses_past_its_cap() {
    let mut h = harness();
    send(&mut h, "u0", "busy now");
    for (id, priority) in [("n1", false), ("p1", true), ("n2", false), ("p2", true)] {
        h.command("c1", json!({"type": "user_message", "client_request_id": id, "content": id, "priority": priority}));
    }
    let order: Vec<String> = runtime(&h)["queued_items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|i| i["client_request_id"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(order, ["p1", "p2", "n1", "n2"]);
    for i in 4..palaver::queue::MAX_QUEUE {
        h.command(
            "c1",
            json!({"type": "user_message", "client_request_id": format!("f{i}"), "content": "x"}),
        );
    }
    assert_eq!(runtime(&h)["queue_size"], palaver::queue::MAX_QUEUE);
    let step = h.command(
        "c1",
        json!({"type": "user_message", "client_request_id": "over", "content": "x"}),
    );
    let ack = step
        .events
        .iter()
        .map(|e| serde_json::to_value(e).unwrap_or_default())
        .find(|e| e["type"] == "ack")
        .unwrap_or_default();
    assert_eq!(
        (ack["accepted"].clone(), ack["reason"]["kind"].clone()),
        (json!(false), json!("queue_full")),
        "{ack}"
    );
    assert_eq!(runtime(&h)["queue_size"], palaver::queue::MAX_QUEUE);
}

/// Issue 15 / SPEC §8.3: at most 8 workspace tools run at once; the others start as results
/// come in, and the results are added in call order.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn at_most_eight_tools_run_at_once_and_results_keep_call_order() {
    let mut h = harness();
    send(&mut h, "u1", "read ten");
    let calls: Vec<Value> = (0..10)
        .map(|i| {
            call(
                &format!("t{i}"),
                "read_file",
                json!({"path": format!("f{i}")}),
            )
        })
        .collect();
    let step = reply(&mut h, json!({"tool_calls": calls}));
    let started = |step: &Step| -> Vec<String> {
        step.effects
            .iter()
            .filter_map(|e| match e {
                Effect::RunTool { tool_call_id, .. } => Some(tool_call_id.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(started(&step).len(), palaver::tools::MAX_PARALLEL_TOOLS);
    // Answer in reverse; each answer lets one more start.
    let mut later = Vec::new();
    for i in (0..8).rev() {
        let step = h.handle(Input::ToolResult {
            chat_id: "c1".into(),
            tool_call_id: format!("t{i}"),
            content: format!("r{i}"),
            tool_failed: false,
            data: None,
            session_metadata: None,
            parts: Vec::new(),
        });
        later.extend(started(&step));
    }
    assert_eq!(later, ["t8", "t9"], "the held calls start as slots free up");
    for i in [9, 8] {
        h.handle(Input::ToolResult {
            chat_id: "c1".into(),
            tool_call_id: format!("t{i}"),
            content: format!("r{i}"),
            tool_failed: false,
            data: None,
            session_metadata: None,
            parts: Vec::new(),
        });
    }
    let order: Vec<String> = tool_results(&h).into_iter().map(|(id, _, _)| id).collect();
    assert_eq!(
        order,
        (0..10).map(|i| format!("t{i}")).collect::<Vec<_>>(),
        "results in call order"
    );
}

/// A real server's quirk (llama-cpp-python): a prompt over its window is answered `200` with an
/// empty stream. The failure says what that likely means instead of "the stream was cut".
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_empty_stream_is_named_as_such() {
    let mut h = Harness::with_config_patch(&json!({"retry": {"max_attempts": 1}}));
    h.open("c1", None);
    send(&mut h, "u1", "a long prompt");
    h.stream_end();
    let rt = runtime(&h);
    assert_eq!(rt["state"], "error");
    assert!(
        rt["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("empty stream"),
        "{rt}"
    );
    send(&mut h, "u2", "again");
    h.stream(b": keep-alive\n\n");
    h.stream_end();
    assert!(runtime(&h)["error"]["message"]
        .as_str()
        .unwrap_or("")
        .contains("ended before the provider finished"));
}
