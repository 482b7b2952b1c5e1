//! Stability tiers (issue 40, seed 002): the tracker's conformance fixtures
//! (`tests/fixtures/stability/*.json`: promotion, demotion, stale removal, history graduation),
//! and the message array the tiers give, the same for every provider kind.

use crate::support::fixtures_in;
use palaver::message::ChatMessage;
use palaver::prompt::{assemble, WorkspaceContext};
use palaver::provider::ProviderKind;
use palaver::request::{build_request, ProviderConfig, RequestInput};
use palaver::stability::{Item, ItemKind, Tier, Tracker};
use palaver::thread::ThreadParams;
use serde_json::{json, Value};

fn kind(name: &str) -> ItemKind {
    match name {
        "system" => ItemKind::System,
        "symbols" => ItemKind::Symbols,
        "listing" => ItemKind::Listing,
        _ => ItemKind::History,
    }
}

fn tier_name(tier: Tier) -> &'static str {
    tier.name()
}

fn sorted_keys(moves: &[palaver::stability::Move]) -> Vec<String> {
    let mut keys: Vec<String> = moves.iter().map(|m| m.key.clone()).collect();
    keys.sort();
    keys
}

fn expected_keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = (value.as_array().into_iter().flatten())
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect();
    keys.sort();
    keys
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_tracker_moves_items_as_the_fixtures_say() {
    let fixtures = fixtures_in("stability");
    assert!(fixtures.len() >= 4, "the stability fixtures are embedded");
    for (path, text) in fixtures {
        let fixture: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut tracker = Tracker::default();
        for (n, step) in fixture["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let items: Vec<Item> = (step["items"].as_array().into_iter().flatten())
                .map(|i| Item {
                    kind: kind(i[0].as_str().unwrap_or("")),
                    key: i[1].as_str().unwrap_or("").to_string(),
                    hash: i[2].as_u64().unwrap_or(0),
                    tokens: i[3].as_u64().unwrap_or(0),
                })
                .collect();
            let changes = tracker.update(&items);
            let at = format!("{path}, request {}", n + 1);
            let expect = &step["expect"];
            for (key, tier) in expect["tiers"].as_object().into_iter().flatten() {
                assert_eq!(
                    tier_name(tracker.tier_of(key)),
                    tier.as_str().unwrap_or(""),
                    "{at}: the tier of {key}"
                );
            }
            if let Some(broken) = expect.get("broken") {
                assert_eq!(
                    changes.broken.map(tier_name),
                    broken.as_str(),
                    "{at}: the most stable tier broken"
                );
            }
            for (field, moves) in [
                ("promoted", &changes.promoted),
                ("demoted", &changes.demoted),
                ("removed", &changes.removed),
            ] {
                if let Some(keys) = expect.get(field) {
                    assert_eq!(sorted_keys(moves), expected_keys(keys), "{at}: {field}");
                }
            }
        }
    }
}

/// A workspace prompt (a 3-file map, the file list, the date) and a chat of three finished
/// exchanges and a question.
fn workspace_prompt(agent: &str) -> String {
    let mut map = String::from(palaver::prompt::REPO_MAP_HEADER);
    map.push_str("Legend: f=function · :N line\n\n");
    for file in ["a.rs", "b.rs", "c.rs"] {
        map.push_str(&format!("{file}:\n  f run :1\n"));
    }
    assemble(
        Some(agent),
        &WorkspaceContext {
            files: vec!["a.rs".into(), "b.rs".into(), "c.rs".into()],
            date: "2026-11-26".into(),
            repo_map: map,
            ..Default::default()
        },
    )
}

fn chat() -> Vec<ChatMessage> {
    let mut messages = Vec::new();
    for n in 1..=3 {
        messages.push(json!({"message_id": format!("u{n}"), "role": "user", "content": format!("question {n}")}));
        messages.push(json!({"message_id": format!("a{n}"), "role": "assistant", "content": format!("answer {n}")}));
    }
    messages.push(json!({"message_id": "u4", "role": "user", "content": "question 4"}));
    serde_json::from_value(Value::Array(messages)).unwrap_or_default()
}

/// The body as `(role, text)` turns, whatever the provider kind: the system prompt first,
/// consecutive turns of one role joined.
fn turns(kind: ProviderKind, body: &Value) -> Vec<(String, String)> {
    let text_of = |content: &Value| match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => (parts.iter())
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("|"),
        _ => String::new(),
    };
    let mut out: Vec<(String, String)> = Vec::new();
    let mut push = |role: &str, text: String| match out.last_mut() {
        Some((last, joined)) if last == role => {
            joined.push('|');
            joined.push_str(&text);
        }
        _ => out.push((role.to_string(), text)),
    };
    match kind {
        ProviderKind::Anthropic => {
            push("system", text_of(&body["system"]));
            for m in body["messages"].as_array().into_iter().flatten() {
                push(m["role"].as_str().unwrap_or(""), text_of(&m["content"]));
            }
        }
        ProviderKind::Gemini => {
            push("system", text_of(&body["systemInstruction"]["parts"]));
            for m in body["contents"].as_array().into_iter().flatten() {
                let role = if m["role"] == "model" {
                    "assistant"
                } else {
                    "user"
                };
                push(role, text_of(&m["parts"]));
            }
        }
        ProviderKind::OpenaiResponses => {
            push("system", body["instructions"].as_str().unwrap_or("").into());
            for m in body["input"].as_array().into_iter().flatten() {
                push(m["role"].as_str().unwrap_or(""), text_of(&m["content"]));
            }
        }
        _ => {
            for m in body["messages"].as_array().into_iter().flatten() {
                push(m["role"].as_str().unwrap_or(""), text_of(&m["content"]));
            }
        }
    }
    out
}

/// Five requests of the same chat, the tracker carried from each to the next as a session does;
/// the agent prompt changes before the fifth (L0 is rewritten, and the map blocks, unchanged
/// four requests, ride into L3). Returns the first and the fifth body.
fn first_and_fifth(kind: ProviderKind) -> (Value, Value) {
    let provider = ProviderConfig {
        kind,
        base_url: "http://127.0.0.1:9/v1".into(),
        model: "m".into(),
        ..Default::default()
    };
    let history = chat();
    let mut tracker = Tracker::default();
    let mut bodies = Vec::new();
    for n in 1..=5 {
        let prompt = workspace_prompt(if n < 5 { "Agent." } else { "Agent, v2." });
        let request = build_request(&RequestInput {
            provider: &provider,
            thread: &ThreadParams::default(),
            system_prompt: Some(&prompt),
            tools: &[],
            history: &history,
            budget: None,
            tiers: Some(&tracker),
        });
        let Ok(mut request) = request else {
            panic!("{kind:?}: request {n} not built")
        };
        if let Some(applied) = request.tiers.take() {
            tracker = applied.tracker;
        }
        bodies.push(request.body_json());
    }
    (bodies[0].clone(), bodies[4].clone())
}

const BLOCKS: &str =
    "# Repository Structure (continued)\n\na.rs:\n  f run :1\nb.rs:\n  f run :1\nc.rs:\n  f run :1";
const LISTING: &str =
    "# Repository Files\n\nComplete list of files in the repository:\n\n# File Tree (3 files)\n\na.rs\nb.rs\nc.rs\n\nToday's date: 2026-11-26.";

fn expected(agent: &str, blocks_cached: bool) -> Vec<(String, String)> {
    let legend = format!(
        "{agent}\n\n{}Legend: f=function · :N line",
        palaver::prompt::REPO_MAP_HEADER
    );
    let mut turns = vec![("system".to_string(), legend)];
    let history = "question 1|answer 1|question 2|answer 2|question 3|answer 3";
    let mut user = history.split('|').collect::<Vec<_>>();
    let mut push = |role: &str, text: &str| turns.push((role.into(), text.into()));
    for pair in user.chunks_mut(2) {
        push("user", pair[0]);
        push("assistant", pair[1]);
    }
    if blocks_cached {
        push("user", BLOCKS);
        push("assistant", "Ok.");
        push("user", LISTING);
    } else {
        push("user", &format!("{BLOCKS}\n\n{LISTING}"));
    }
    push("assistant", "Ok.");
    push("user", "question 4");
    turns
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_provider_kind_gets_the_same_tiered_message_array() {
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::OpenaiChat,
        ProviderKind::OpenaiResponses,
        ProviderKind::Gemini,
    ] {
        let (first, fifth) = first_and_fifth(kind);
        assert_eq!(
            turns(kind, &first),
            expected("Agent.", false),
            "{kind:?}: the first request (history in L0, the map blocks active)"
        );
        assert_eq!(
            turns(kind, &fifth),
            expected("Agent, v2.", true),
            "{kind:?}: the fifth (the map blocks in L3)"
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn anthropic_marks_the_tier_ends_and_the_last_turn() {
    let (_, body) = first_and_fifth(ProviderKind::Anthropic);
    let mut marks = Vec::new();
    if body["system"][0].get("cache_control").is_some() {
        marks.push("system".to_string());
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block.get("cache_control").is_some() {
                marks.push(
                    block["text"]
                        .as_str()
                        .unwrap_or("")
                        .chars()
                        .take(12)
                        .collect(),
                );
            }
        }
    }
    // The last turn, the system prompt (L0 without history would end there; here L0 holds the
    // history, which ends at "answer 3"), then L3's "Ok.": four, the API's most.
    assert_eq!(
        marks,
        vec!["system", "answer 3", "Ok.", "question 4"],
        "{body}"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_prompt_taken_apart_keeps_every_part_and_only_the_real_sections_move() {
    // An instruction file (the workspace's, so data) quoting the headers stays in the core.
    let quoting = format!(
        "Notes.\n\n{}a.rs\n\nToday's date: never.",
        palaver::prompt::FILE_TREE_HEADER
    );
    let mut map = String::from(palaver::prompt::REPO_MAP_HEADER);
    map.push_str("Legend: f=function · :N line\n@1 = src/deep/folder/\n\n");
    map.push_str("@1/a.rs:\n  f run :1\n  f stop :9\nb.rs:\n  f go :2");
    let prompt = assemble(
        Some("Agent."),
        &WorkspaceContext {
            instructions: vec![palaver::prompt::InstructionFile {
                path: "AGENTS.md".into(),
                text: quoting.clone(),
            }],
            files: vec!["a.rs".into(), "b.rs".into()],
            date: "2026-11-26".into(),
            repo_map: map,
            ..Default::default()
        },
    );
    let parts = palaver::prompt::sections(&prompt);
    assert_eq!(parts.core.len(), 1, "{parts:?}");
    assert!(parts.core[0].starts_with("Agent.\n\n# Workspace Instructions"));
    assert!(parts.core[0].ends_with(&quoting), "{parts:?}");
    assert_eq!(
        parts.map_legend,
        Some(
            format!(
                "{}Legend: f=function · :N line\n@1 = src/deep/folder/",
                palaver::prompt::REPO_MAP_HEADER
            )
            .as_str()
        )
    );
    assert_eq!(
        parts.map_blocks,
        vec!["@1/a.rs:\n  f run :1\n  f stop :9", "b.rs:\n  f go :2"]
    );
    assert_eq!(parts.volatile.len(), 2);
    assert!(parts.volatile[0].ends_with("a.rs\nb.rs"), "{parts:?}");
    assert_eq!(parts.volatile[1], "Today's date: 2026-11-26.");
    // Nothing lost: every part is in the prompt, and together they are all of it.
    let pieces: Vec<&str> = (parts.core.iter().copied())
        .chain(parts.map_legend)
        .chain(parts.map_blocks.iter().copied())
        .chain(parts.volatile.iter().copied())
        .collect();
    let covered: usize = pieces.iter().map(|p| p.len()).sum();
    let content = prompt.len() - prompt.matches("\n\n").count() * 2;
    assert!(pieces.iter().all(|p| prompt.contains(p)));
    assert!(covered >= content - 2, "{covered} of {content}");
    // A prompt without the sections is all core, byte for byte.
    let plain = "You are a coding agent.\n\nBe brief.";
    assert_eq!(palaver::prompt::sections(plain).core, vec![plain]);
}
