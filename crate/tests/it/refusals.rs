//! "A refused command changes nothing" (SPEC §2.1), made to fail (issue 36): a malformed command
//! to a chat the engine does not have makes no chat — it is a typed error of the step — and to an
//! open chat it is answered by a refusing `ack` and changes nothing else. Runs natively and in
//! headless Chromium.

use crate::support::harness::Harness;
use palaver::engine::Input;
use serde_json::json;

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_refused_command_to_an_unknown_chat_creates_nothing() {
    let mut h = Harness::with_config_patch(&json!({}));
    let step = h.engine.handle(
        0,
        Input::Command {
            chat_id: "nobody".into(),
            command: json!({"type": "no_such_command", "client_request_id": "x"}),
        },
    );
    assert!(h.engine.snapshot("nobody").is_none(), "a chat was made");
    assert!(step.events.is_empty(), "{:?}", step.events);
    assert_eq!(step.errors.len(), 1, "{:?}", step.errors);
    assert!(h.engine.chat_ids().next().is_none());
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_refused_command_to_an_open_chat_changes_nothing_but_its_ack() {
    let mut h = Harness::with_config_patch(&json!({}));
    h.open("c1", None);
    h.command(
        "c1",
        json!({"type": "set_params", "client_request_id": "p", "patch": {"title": "kept"}}),
    );
    let before = serde_json::to_value(h.engine.snapshot("c1")).unwrap_or_default();
    for command in [
        json!({"type": "no_such_command", "client_request_id": "x1"}),
        json!({"type": "approve_tools", "client_request_id": "x2", "tool_call_ids": ["nope"]}),
        json!({"type": "user_message", "client_request_id": "x3"}),
    ] {
        let step = h.command("c1", command.clone());
        let names: Vec<&str> = step.events.iter().map(|e| e.event.name()).collect();
        assert_eq!(names, ["ack"], "{command}");
        assert!(step.effects.is_empty(), "{command}");
    }
    let mut after = serde_json::to_value(h.engine.snapshot("c1")).unwrap_or_default();
    after["seq"] = before["seq"].clone();
    assert_eq!(after, before);
}
