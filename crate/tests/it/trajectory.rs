//! Issue 20: the typed load (`trajectory::load_text`) reads exactly what the `Value` load reads —
//! messages, repair notes, thread and recovered draft — on the 5 000-message bench trajectory, on
//! a trajectory with every repair, and on random trajectories; and a saved message reads back equal.

use palaver::message::ChatMessage;
use palaver::trajectory::{load, load_text};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::io::Read;

fn same_both_ways(text: &str) {
    let value: Value = serde_json::from_str(text).expect("test input is JSON");
    let by_value = load("c", &value);
    let typed = load_text("c", text);
    assert_eq!(typed, by_value, "typed load differs for {text:.200}");
}

/// The 5 000-message bench trajectory of `../shared/bench`, as text.
fn bench_trajectory() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/bench/history-5k.json.gz"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("bench trajectory"))
        .read_to_string(&mut text)
        .expect("gzip");
    text
}

#[test]
fn the_bench_trajectory_loads_the_same_typed() {
    let text = bench_trajectory();
    same_both_ways(&text);
    let loaded = load_text("c", &text).expect("loads");
    assert_eq!(loaded.messages.len(), 5000);
}

/// The workspace copy of an open chat is written from its typed messages (`refact_text`): the
/// same text as the "refact" export of the chat built as a JSON tree, key for key.
#[test]
fn the_copy_written_from_typed_messages_is_the_refact_export() {
    let text = bench_trajectory();
    let loaded = load_text("c", &text).expect("loads");
    let mut thread = loaded.thread.to_json();
    thread["title"] = json!("A long chat");
    let mut tree = thread.as_object().cloned().unwrap_or_default();
    tree.insert("id".into(), json!("chat-1"));
    tree.insert("messages".into(), json!(loaded.messages));
    let by_tree = palaver::export::export_chat(&Value::Object(tree), "refact").expect("exports");
    let direct = palaver::export::refact_text("chat-1", &thread, &loaded.messages).expect("writes");
    assert!(direct.len() > 1_000_000, "the whole chat is written");
    let differs_at = direct
        .bytes()
        .zip(by_tree.bytes())
        .position(|(a, b)| a != b);
    assert!(
        direct == by_tree,
        "differs at byte {differs_at:?}: {:.120}",
        &direct[differs_at.unwrap_or(0).saturating_sub(40).min(direct.len())..]
    );
}

#[test]
fn every_repair_reads_the_same_typed() {
    let trajectory = json!({
        "id": "t1", "title": "Repairs", "model": "m", "temperature": 0.5,
        "messages": [
            {"role": "user", "content": "no id"},
            {"message_id": "a", "role": "assistant", "content": null,
             "tool_calls": [{"id": "call1", "function": {"name": "f", "arguments": "{}"}}]},
            {"message_id": "a", "role": "tool", "tool_call_id": "call1", "content": "dup id"},
            {"message_id": "b", "role": "wizard", "content": "bad role"},
            {"message_id": "c", "content": "no role"},
            {"message_id": "d", "role": "user", "content": 42},
            17,
            "text",
            null,
            {"message_id": "e", "role": "user", "content": [{"type": "text", "text": "parts"}],
             "unknown": {"x": 1}, "extra": {"unknown": 2, "nested": true}, "z": [1]},
            {"message_id": "f", "role": "assistant", "content": "x", "usage": {"prompt_tokens": 1},
             "created_at_ms": 5, "finish_reason": "stop", "tool_failed": null},
            {"message_id": "g", "role": "user", "content": "dup key", "content": "later wins"}
        ],
        "draft": {"message_id": "dr", "role": "assistant", "content": "half"}
    });
    same_both_ways(&trajectory.to_string());
    let loaded = load_text("c", &trajectory.to_string()).expect("loads");
    assert_eq!(
        loaded.messages.len(),
        13,
        "every message kept, the draft recovered"
    );
    assert!(loaded.notes.len() >= 7, "{:?}", loaded.notes);
    assert_eq!(loaded.recovered_draft.as_deref(), Some("dr"));
    assert_eq!(loaded.thread.title, "Repairs");
    let e = &loaded.messages[9];
    assert_eq!(
        e.extra["unknown"],
        json!({"x": 1}),
        "top-level key wins over nested extra"
    );
    assert_eq!(e.extra["nested"], json!(true));
    assert_eq!(loaded.messages[11].content.text(), "later wins");
    // Arrays, and what is not a trajectory.
    same_both_ways(&json!([{"role": "user", "content": "bare"}, 3]).to_string());
    for bad in ["3", "\"x\"", "null", "{}", "{\"messages\": 4}", "true"] {
        same_both_ways(bad);
        assert!(load_text("c", bad).is_err(), "{bad} refused");
    }
    assert!(
        load_text("c", "{\"messages\": [").is_err(),
        "not JSON refused"
    );
}

/// The one-pass read (messages typed in place) and the tolerant one (each message read from its
/// own text) meet: a bad message, a message nested deeper than can be read in place, repeated
/// `messages` keys, keys after a `messages` that is not an array.
#[test]
fn the_one_pass_read_falls_back_without_a_difference() {
    let good = json!({"message_id": "g", "role": "user", "content": "fine"});
    let bad = json!({"message_id": "b", "role": "wizard", "content": "bad role"});
    let mut deep = json!("bottom");
    for _ in 0..125 {
        deep = json!([deep]);
    }
    let nested =
        json!({"message_id": "n", "role": "user", "content": "deep", "extra": {"x": deep}});
    for messages in [json!([good, bad]), json!([bad, good])] {
        same_both_ways(&json!({"title": "t", "messages": messages}).to_string());
        same_both_ways(&messages.to_string());
    }
    // 127 levels: readable on its own, one level too deep inside the trajectory's object and
    // array (serde_json's limit is 128), so it is read the tolerant way. The text as a whole is
    // too deep for `Value`: compared with the `Value` load of the same trajectory built in code.
    let trajectory = json!({"title": "t", "messages": [nested, good]});
    let loaded = load_text("c", &trajectory.to_string()).expect("loads");
    assert_eq!(Ok(loaded.clone()), load("c", &trajectory));
    assert_eq!(loaded.messages.len(), 2);
    assert_eq!(loaded.messages[0].extra["x"], deep, "kept whole");
    for text in [
        r#"{"messages": [{"role": "user", "content": "a"}], "messages": 4, "title": "t"}"#,
        r#"{"messages": 4, "messages": [{"role": "user", "content": "a"}], "title": "t"}"#,
        r#"{"messages": {"role": "user", "x": [1, {"y": 2}]}, "title": "t"}"#,
        r#"{"messages": [{"role": "user", "content": "a"}], "draft": {"role": "assistant", "content": "d"}, "title": "t"}"#,
    ] {
        same_both_ways(text);
    }
    assert!(load_text("c", r#"{"messages": 4, "messages": [], "title": "t"}"#).is_ok());
    assert!(load_text("c", r#"{"messages": [], "messages": {"a": 1}}"#).is_err());
    assert!(
        load_text("c", r#"{"messages": []} trailing"#).is_err(),
        "text after the trajectory refused"
    );
}

fn message_json() -> impl Strategy<Value = Value> {
    let role = prop_oneof![
        Just(json!("user")),
        Just(json!("assistant")),
        Just(json!("tool")),
        Just(json!("event")),
        Just(json!("nope")),
        Just(json!(3)),
    ];
    let content = prop_oneof![
        "[a-z \\\\\"é]{0,12}".prop_map(Value::from),
        Just(Value::Null),
        Just(json!([{"type": "text", "text": "p"}])),
        Just(json!({"bad": 1})),
    ];
    let id = prop_oneof![
        Just(None),
        Just(Some(json!("m1"))),
        Just(Some(json!("m2"))),
        Just(Some(json!(7)))
    ];
    (role, content, id, any::<bool>(), any::<bool>()).prop_map(|(role, content, id, calls, extra)| {
        let mut m = json!({"role": role, "content": content});
        if let Some(id) = id {
            m["message_id"] = id;
        }
        if calls {
            m["tool_calls"] = json!([{"id": "c", "type": "function", "function": {"name": "n", "arguments": "{"}}]);
        }
        if extra {
            m["extra"] = json!({"k": "v"});
            m["k2"] = json!([1, 2]);
        }
        m
    })
}

proptest! {
    #[test]
    fn random_trajectories_load_the_same_typed(messages in prop::collection::vec(message_json(), 0..12), wrap in any::<bool>()) {
        let text = if wrap {
            json!({"id": "x", "title": "t", "messages": messages}).to_string()
        } else {
            Value::Array(messages).to_string()
        };
        same_both_ways(&text);
    }

    #[test]
    fn a_saved_message_reads_back_equal(messages in prop::collection::vec(message_json(), 1..6)) {
        let loaded = load_text("c", &Value::Array(messages).to_string()).expect("loads");
        for message in &loaded.messages {
            let text = serde_json::to_string(message).expect("serializes");
            let back: ChatMessage = serde_json::from_str(&text).expect("reads back");
            prop_assert_eq!(&back, message);
        }
    }
}

/// Issue 37: an export with its subagents' chats is imported as a whole tree — each child (and
/// grandchild) under the new parent's id with its links moved there; a child that does not
/// descend from the exported parent is left out; an export without subagents is unchanged.
#[test]
fn an_export_with_subagents_is_split_into_a_tree_under_the_new_id() {
    let export = json!({
        "id": "chat-1", "title": "Spiders", "messages": [],
        "subagents": [
            {"id": "chat-1~call_a", "parent_id": "chat-1", "root_chat_id": "chat-1", "link_type": "subagent", "messages": []},
            {"id": "chat-1~call_a~call_b", "parent_id": "chat-1~call_a", "root_chat_id": "chat-1", "link_type": "subagent", "messages": []},
            {"id": "elsewhere~call_c", "parent_id": "elsewhere", "messages": []},
            {"id": "chat-1~", "messages": []},
            "not a chat"
        ]
    });
    let (root, children) = palaver::export::split_subagents(export, "chat-9");
    assert!(root.get("subagents").is_none(), "{root}");
    assert_eq!(root["title"], "Spiders");
    let links: Vec<(String, Value, Value, Value)> = children
        .iter()
        .map(|(id, c)| {
            (
                id.clone(),
                c["id"].clone(),
                c["parent_id"].clone(),
                c["root_chat_id"].clone(),
            )
        })
        .collect();
    assert_eq!(
        links,
        vec![
            (
                "chat-9~call_a".to_string(),
                json!("chat-9~call_a"),
                json!("chat-9"),
                json!("chat-9")
            ),
            (
                "chat-9~call_a~call_b".to_string(),
                json!("chat-9~call_a~call_b"),
                json!("chat-9~call_a"),
                json!("chat-9")
            ),
        ]
    );
    let plain = json!({"id": "chat-2", "messages": []});
    assert_eq!(
        palaver::export::split_subagents(plain.clone(), "chat-3"),
        (plain, Vec::new())
    );
}

/// A made-up id (for an unreadable record or a repeated id) is never one another message of the
/// chat carries: the made-up message's save would overwrite that message's record. (Seen with a
/// chat whose ids follow `{chat}-m{index}` and an early message removed: the unreadable sixth
/// record became `c-m4`, the fifth message's id, and replaced it on the next save.)
#[test]
fn a_made_up_id_is_never_another_messages() {
    let trajectory = json!({"id": "c", "messages": [
        {"message_id": "c-m1", "role": "user", "content": "one"},
        {"message_id": "c-m2", "role": "assistant", "content": "two"},
        "not a message",
        {"message_id": "c-m1", "role": "user", "content": "a repeated id"},
        {"message_id": "c-m3", "role": "assistant", "content": "a later id the made-up one would take"},
    ]});
    let loaded = load("c", &trajectory).expect("loads");
    let ids: Vec<&str> = loaded
        .messages
        .iter()
        .map(|m| m.message_id.as_str())
        .collect();
    let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    assert_eq!(ids[0], "c-m1");
    assert_eq!(ids[4], "c-m3");
}

/// Issue 41: a stored chat's text is written from its parts (`TrajectoryText::of_parts`) as
/// `serde_json` writes the same object — the thread's own `id`, `messages` and `draft` left out,
/// the draft only when it is an object — and it loads as that object does. A text that is not
/// JSON is not checked when made: the load refuses it, typed.
#[test]
fn a_stored_chat_text_from_its_parts_is_the_object_serde_writes() {
    use palaver::trajectory::TrajectoryText;
    use serde_json::value::RawValue;
    let messages = [
        r#"{"role":"user","content":"Hé \"quoted\" \u00e9","message_id":"m1"}"#,
        r#"{"role":"assistant","content":"ok","message_id":"m2"}"#,
    ];
    let raw: Vec<Box<RawValue>> = messages
        .iter()
        .map(|m| RawValue::from_string(m.to_string()).expect("raw"))
        .collect();
    let borrowed: Vec<&RawValue> = raw.iter().map(|m| m.as_ref()).collect();
    let thread = json!({"model": "gpt-4o", "title": "A \"title\"", "id": "not this", "messages": [1], "draft": 2, "temperature": 0.5});
    let draft = json!({"role": "assistant", "content": "half", "message_id": "d1"});
    for (draft, with_draft) in [
        (draft.clone(), true),
        (json!(null), false),
        (json!("x"), false),
    ] {
        let text =
            TrajectoryText::of_parts(&thread, "chat \"1\"", &borrowed, &draft).expect("text");
        let mut object = json!({"model": "gpt-4o", "title": "A \"title\"", "temperature": 0.5, "id": "chat \"1\""});
        object["messages"] = json!("@messages");
        if with_draft {
            object["draft"] = draft.clone();
        }
        // The messages' texts as stored, byte for byte (`\u00e9` stays as it was written).
        let expected = serde_json::to_string(&object)
            .expect("text")
            .replace("\"@messages\"", &format!("[{}]", messages.join(",")));
        assert_eq!(text.get(), expected);
        assert_eq!(
            load_text("c", text.get()),
            load("c", &serde_json::from_str(&expected).expect("json"))
        );
    }
    let none = TrajectoryText::of_parts(&json!(null), "c", &[], &json!(null)).expect("text");
    assert_eq!(none.get(), r#"{"id":"c","messages":[]}"#);
    let broken = TrajectoryText::from_text("{\"messages\": [".into());
    assert!(load_text("c", broken.get()).is_err());
}

/// Issue 41, goal 4: every message of a chat is a `ChatMessage` in the engine, and a long chat's
/// `Vec` of them grows by doubling, so its own size counts up to twice per message. Its usage (six
/// optional numbers, on assistant messages only) is boxed: 416 bytes natively before, 328 after;
/// its unknown keys are a plain `Vec` (`Extra`), not an `IndexMap`: 280; its reasoning, thinking
/// blocks, citations and server blocks, which few messages have, behind one pointer (`Rare`):
/// 192 (`cargo bench --bench memory` prints what a session holds).
#[test]
fn a_message_held_in_memory_stays_small() {
    let size = std::mem::size_of::<palaver::message::ChatMessage>();
    let pointers = std::mem::size_of::<usize>();
    assert!(size <= 24 * pointers, "a ChatMessage is {size} bytes");
}
