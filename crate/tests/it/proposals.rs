//! Edit blocks through the engine (issue 40): a provider set to edit blocks gets the block
//! format and no tools; the user's Apply turns block N of an answer into one `edit_file` (or a
//! create-only `write_file`), Skip and a cut-off block are kept as such, a denied tool is refused,
//! and the next request tells the model what became of each block, right after its answer.

use crate::support::harness::{openai_reply, Harness};
use palaver::engine::{Effect, Input, Step};
use palaver::event::Event;
use serde_json::{json, Value};

const ANSWER: &str = "I'll fix the greeting.\n\ngreet.py\n```python\n<<<<<<< SEARCH\ndef greet():\n    return \"Hi\"\n=======\ndef greet(name):\n    return f\"Hi {name}\"\n>>>>>>> REPLACE\n```\n\nnotes.md\n<<<<<<< SEARCH\n=======\n# Notes\n>>>>>>> REPLACE\n\nRun:\n\n```sh\npython -m pytest -q\n```\n\nbroken.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2";

fn edit_blocks_chat(rules: Value) -> Harness {
    let mut h = Harness::with_config_patch(&json!({
        "providers": [{"kind": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "small", "tool_use": false, "edit_blocks": true}],
        "edit_blocks_prompt": "PROMPT WITH THE WORKSPACE\n<<<<<<< SEARCH",
        "tool_rules": rules,
    }));
    h.open("c", None);
    h
}

fn request_of(step: &Step) -> Value {
    step.effects
        .iter()
        .find_map(|e| match e {
            Effect::StartRequest { request, .. } => serde_json::to_value(request).ok(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no request in {:?}", step.effects))
}

fn answered(h: &mut Harness) -> String {
    let step = h.command("c", json!({"type": "user_message", "client_request_id": "u1", "content": "make greet take a name"}));
    let body = request_of(&step);
    let text = body.to_string();
    assert!(
        text.contains("PROMPT WITH THE WORKSPACE"),
        "the edit-block prompt is sent: {text}"
    );
    assert!(
        body.pointer("/body/tools").is_none(),
        "no tools are offered: {text}"
    );
    h.stream(openai_reply(&json!({"text": ANSWER, "finish_reason": "stop"})).as_bytes());
    h.stream_end();
    let session = h.engine.session("c").unwrap_or_else(|| panic!("chat c"));
    let answer = session
        .messages
        .last()
        .unwrap_or_else(|| panic!("an answer"));
    answer.message_id.clone()
}

fn run_tool(step: &Step) -> Option<(String, String, Value)> {
    step.effects.iter().find_map(|e| match e {
        Effect::RunTool {
            tool_call_id,
            name,
            args,
            ..
        } => Some((tool_call_id.clone(), name.clone(), args.clone())),
        _ => None,
    })
}

fn refused(step: &Step) -> Option<String> {
    step.events.iter().find_map(|e| match &e.event {
        Event::Ack {
            accepted: false,
            reason,
            ..
        } => Some(reason.clone().unwrap_or_default().to_string()),
        _ => None,
    })
}

fn tool_result(h: &mut Harness, id: &str, content: &str, failed: bool) -> Step {
    h.handle(Input::ToolResult {
        chat_id: "c".into(),
        tool_call_id: id.into(),
        content: content.into(),
        tool_failed: failed,
        data: None,
        session_metadata: None,
        parts: Vec::new(),
    })
}

fn results(h: &Harness, message_id: &str) -> Value {
    let session = h.engine.session("c").unwrap_or_else(|| panic!("chat c"));
    let message = session.messages.iter().find(|m| m.message_id == message_id);
    let value = serde_json::to_value(message).unwrap_or(Value::Null);
    value
        .get("proposal_results")
        .cloned()
        .unwrap_or(Value::Null)
}

#[test]
fn apply_skip_and_run_reach_the_workspace_and_the_model() {
    let mut h = edit_blocks_chat(json!({}));
    let answer = answered(&mut h);

    let step = h.command("c", json!({"type": "apply_edit_block", "client_request_id": "a0", "message_id": answer, "index": 0}));
    let (id, name, args) = run_tool(&step).unwrap_or_else(|| panic!("an edit_file call: {step:?}"));
    assert_eq!(name, "edit_file");
    assert_eq!(
        args,
        json!({"path": "greet.py", "old_text": "def greet():\n    return \"Hi\"\n", "new_text": "def greet(name):\n    return f\"Hi {name}\"\n"})
    );
    let again = h.command("c", json!({"type": "apply_edit_block", "client_request_id": "a0b", "message_id": answer, "index": 0}));
    assert!(
        refused(&again).is_some_and(|r| r.contains("under way")),
        "{again:?}"
    );
    tool_result(
        &mut h,
        &id,
        "old_text was not found in greet.py; nearest match at lines 3-4",
        true,
    );
    assert_eq!(results(&h, &answer)[0]["status"], "failed");

    let step = h.command("c", json!({"type": "apply_edit_block", "client_request_id": "a1", "message_id": answer, "index": 1}));
    let (id, name, args) = run_tool(&step).unwrap_or_else(|| panic!("a write_file call"));
    assert_eq!(
        (name.as_str(), &args["if_match"]),
        ("write_file", &json!("")),
        "a new file is created, never overwritten"
    );
    tool_result(&mut h, &id, "Wrote 8 bytes", false);
    let done = h.command("c", json!({"type": "apply_edit_block", "client_request_id": "a1b", "message_id": answer, "index": 1}));
    assert!(
        refused(&done).is_some_and(|r| r.contains("already applied")),
        "{done:?}"
    );

    let cut = h.command("c", json!({"type": "apply_edit_block", "client_request_id": "a2", "message_id": answer, "index": 2}));
    assert!(run_tool(&cut).is_none(), "a cut-off block is never written");
    let none = h.command("c", json!({"type": "skip_edit_block", "client_request_id": "a3", "message_id": answer, "index": 3}));
    assert!(
        refused(&none).is_some_and(|r| r.contains("no edit block 4")),
        "{none:?}"
    );

    let step = h.command("c", json!({"type": "run_suggested_command", "client_request_id": "r0", "message_id": answer, "index": 0}));
    let (id, name, args) = run_tool(&step).unwrap_or_else(|| panic!("a run_command call"));
    assert_eq!(
        (name.as_str(), args),
        (
            "run_command",
            json!({"argv": ["sh", "-c", "python -m pytest -q"]})
        )
    );
    tool_result(&mut h, &id, "1 passed in 0.01s\nexit code 0", false);

    let statuses: Vec<(Value, Value, Value)> = results(&h, &answer)
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| (r["kind"].clone(), r["index"].clone(), r["status"].clone()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        statuses,
        vec![
            (json!("edit"), json!(0), json!("failed")),
            (json!("edit"), json!(1), json!("passed")),
            (json!("edit"), json!(2), json!("failed")),
            (json!("shell"), json!(0), json!("passed")),
        ]
    );

    let step = h.command(
        "c",
        json!({"type": "user_message", "client_request_id": "u2", "content": "thanks"}),
    );
    let body = request_of(&step);
    let messages = body
        .pointer("/body/messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let at = messages
        .iter()
        .position(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("the answer is sent"));
    let next = messages[at + 1]["content"].to_string();
    assert!(next.contains("edit_results"), "{next}");
    assert!(
        next.contains("Edit block 1 (greet.py): failed: old_text was not found"),
        "{next}"
    );
    assert!(next.contains("Edit block 2 (notes.md): applied."), "{next}");
    assert!(
        next.contains(
            "Edit block 3 (broken.py): failed: the answer stopped before the block's end"
        ),
        "{next}"
    );
    assert!(
        next.contains("Command `python -m pytest -q`: ran: 1 passed"),
        "{next}"
    );
    assert!(
        next.contains("thanks"),
        "the user's words follow in the same turn: {next}"
    );
}

#[test]
fn a_denied_tool_is_refused_and_a_skip_is_told() {
    let mut h = edit_blocks_chat(json!({"edit_file": "deny"}));
    let answer = answered(&mut h);
    let step = h.command("c", json!({"type": "apply_edit_block", "client_request_id": "a0", "message_id": answer, "index": 0}));
    assert!(run_tool(&step).is_none(), "a denied tool never runs");
    assert!(results(&h, &answer)[0]["detail"]
        .to_string()
        .contains("denied"));
    h.command("c", json!({"type": "skip_edit_block", "client_request_id": "s1", "message_id": answer, "index": 1}));
    assert_eq!(results(&h, &answer)[1]["status"], "skipped");
}

#[test]
fn results_from_outside_grant_nothing_and_unknown_answers_are_refused() {
    let mut h = edit_blocks_chat(json!({}));
    let step = h.command("c", json!({"type": "apply_edit_block", "client_request_id": "x", "message_id": "nope", "index": 0}));
    assert!(refused(&step).is_some(), "{step:?}");
    // A tool result nobody asked for (a planted id) changes nothing.
    let before = h.engine.session("c").map(|s| s.messages.len());
    tool_result(&mut h, "proposal~edit~0~nope", "done", false);
    assert_eq!(h.engine.session("c").map(|s| s.messages.len()), before);
}
