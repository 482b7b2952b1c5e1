//! The TypeScript types the wasm facade declares (`web/mod.rs`, `typescript_custom_section`) are
//! the page's view of the Rust ones: this compares them field by field — every field a Rust value
//! serializes is declared, and nothing is declared that Rust does not have (issue 34: `Runtime`
//! had lost `subagents` and `waiting_for_agents`, `Input` lacked `reload_chat`). Native only.

use palaver::config::EngineConfig;
use palaver::engine::Input;
use palaver::event::{
    ContextUsage, ErrorInfo, PauseReason, RetryStatus, Runtime, SubagentView, ToolCallView,
};
use palaver::request::ProviderConfig;
use palaver::tools::ToolSpec;
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn declarations() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/web/mod.rs");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
    let start = text
        .find("const TYPES: &str = r#\"")
        .unwrap_or_else(|| panic!("no TYPES"));
    let end = text[start..]
        .find("\"#;")
        .unwrap_or_else(|| panic!("no end"))
        + start;
    text[start..end].to_string()
}

/// The body of `export interface NAME { … }`, comments removed.
fn interface(types: &str, name: &str) -> String {
    let start = types
        .find(&format!("export interface {name} {{"))
        .unwrap_or_else(|| panic!("no interface {name}"));
    let open = start + types[start..].find('{').unwrap_or(0);
    let mut depth = 0;
    for (i, c) in types[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return strip_comments(&types[open + 1..open + i]);
                }
            }
            _ => {}
        }
    }
    panic!("interface {name} is not closed")
}

fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("/**") {
        out.push_str(&rest[..at]);
        rest = rest[at..]
            .find("*/")
            .map_or("", |end| &rest[at + end + 2..]);
    }
    out.push_str(rest);
    out
}

/// The names of a body's top-level members (`name: …;` or `name?: …;`).
fn members(body: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut depth = 0i32;
    let mut member = String::new();
    for c in body.chars() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            _ => {}
        }
        if (c == ';' || c == '\n') && depth == 0 {
            take_name(&member, &mut names);
            member.clear();
        } else {
            member.push(c);
        }
    }
    take_name(&member, &mut names);
    names
}

fn take_name(member: &str, names: &mut BTreeSet<String>) {
    let member = member.trim();
    let Some(colon) = member.find(':') else {
        return;
    };
    let name = member[..colon].trim().trim_end_matches('?');
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        names.insert(name.to_string());
    }
}

fn keys(value: &Value) -> BTreeSet<String> {
    value
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn same(name: &str, declared: BTreeSet<String>, rust: BTreeSet<String>) {
    let missing: Vec<_> = rust.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&rust).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{name}: not declared in TypeScript {missing:?}; declared but not in Rust {extra:?}"
    );
}

/// A runtime with every optional part present.
fn full_runtime() -> Runtime {
    let reason = PauseReason {
        tool_call_id: "k".into(),
        tool_name: "t".into(),
        args: json!({}),
        rule: "ask".into(),
    };
    let mut runtime: Runtime = serde_json::from_value(json!({
        "state": "paused",
        "context_usage": {"estimated_tokens": 1, "n_ctx": 2, "message_count": 3, "pressure": 0.5, "draft_tokens": 1, "learned": true, "output_tokens": 1},
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    runtime.error = Some(ErrorInfo {
        kind: "k".into(),
        code: "c".into(),
        message: "m".into(),
        retryable: false,
        class: Default::default(),
        attempts: 1,
        source: palaver::event::ErrorSource::App,
    });
    runtime.pause_reasons = vec![reason.clone()];
    runtime.queue_held = true;
    runtime.compression_phase = Some("running".into());
    runtime.compression_reason = Some("r".into());
    runtime.storage_error = Some("s".into());
    runtime.compression_strength = Some(palaver::history_limit::CompressionStrength::Low);
    runtime.retry = Some(RetryStatus {
        attempt: 1,
        max_attempts: 4,
        at_ms: Some(1),
        class: Default::default(),
        code: "c".into(),
        message: "m".into(),
    });
    runtime.plan = Some(palaver::plan::CurrentPlan {
        message_id: "p".into(),
        mode: "m".into(),
        version: 1,
        body: "b".into(),
        updates: vec![(1, "u".into())],
    });
    runtime.questions = Some(vec!["q".into()]);
    runtime.subagents = vec![SubagentView {
        chat_id: "c".into(),
        title: "t".into(),
        task: "t".into(),
        tool_call_id: "k".into(),
        status: "running".into(),
        model: "m".into(),
        tokens: 1,
        started_at_ms: 1,
        ended_at_ms: Some(2),
        pause_reasons: vec![reason],
    }];
    runtime.waiting_for_agents = vec!["c".into()];
    runtime.tool_calls = vec![ToolCallView {
        id: "k".into(),
        name: "t".into(),
        status: "running".into(),
    }];
    runtime.prompt_profile = Some(palaver::thread::PromptProfile::Chat);
    runtime.prompt_tiers = Some(palaver::event::PromptTiers::default());
    runtime.context_usage.left_out = palaver::event::LeftOutCounts {
        dropped: 1,
        shortened: 2,
    };
    runtime.prompt_progress = Some(palaver::provider::PromptProgress {
        processed: 1,
        total: 2,
    });
    runtime.model = Some(palaver::thread::ModelRef {
        provider: palaver::provider::ProviderKind::OpenaiChat,
        model: "m".into(),
    });
    runtime
}

#[test]
fn the_runtime_and_its_parts_are_declared_as_they_are() {
    let types = declarations();
    let runtime = serde_json::to_value(full_runtime()).unwrap_or_default();
    same(
        "Runtime",
        members(&interface(&types, "Runtime")),
        keys(&runtime),
    );
    let context: ContextUsage =
        serde_json::from_value(runtime["context_usage"].clone()).unwrap_or_else(|e| panic!("{e}"));
    let declared = interface(&types, "Runtime");
    let gauge = declared
        .lines()
        .find(|l| l.trim_start().starts_with("context_usage:"))
        .unwrap_or_default();
    same(
        "Runtime.context_usage",
        members(&gauge[gauge.find('{').unwrap_or(0) + 1..gauge.rfind('}').unwrap_or(0)]),
        keys(&serde_json::to_value(context).unwrap_or_default()),
    );
}

#[test]
fn the_configs_and_tool_specs_are_declared_as_they_are() {
    let types = declarations();
    same(
        "EngineConfig",
        members(&interface(&types, "EngineConfig")),
        keys(&serde_json::to_value(EngineConfig::default()).unwrap_or_default()),
    );
    let provider: ProviderConfig = serde_json::from_value(json!({
        "kind": "openai-chat", "base_url": "u", "model": "m", "headers": {}, "n_ctx": 1, "max_tokens": 1,
        "temperature": 0.5, "reasoning_effort": "low", "thinking_budget": 1,
        "max_output_tokens": 1, "input_modalities": ["text"], "tool_use": false, "edit_blocks": true, "return_progress": true,
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let provider = serde_json::to_value(provider).unwrap_or_default();
    same(
        "ProviderConfig",
        members(&interface(&types, "ProviderConfig")),
        keys(&provider),
    );
    let mut spec = ToolSpec::new("t", "d", json!({}));
    spec.annotations = Some(json!({}));
    spec.trust_annotations = true;
    let mut declared = members(&interface(&types, "ToolSpec"));
    // `mcp` is the page's: `palaver serve` says which server a tool is of; the engine ignores it.
    assert!(declared.remove("mcp"));
    same(
        "ToolSpec",
        declared,
        keys(&serde_json::to_value(spec).unwrap_or_default()),
    );
}

#[test]
fn every_input_is_declared() {
    let types = declarations();
    let union = &types[types.find("export type Input =").unwrap_or(0)..];
    let union = &union[..union.find(";\n").unwrap_or(union.len())];
    let declared: BTreeSet<String> = union
        .split("input: \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next().map(String::from))
        .collect();
    let rust: BTreeSet<String> = Input::VARIANTS.iter().map(|s| s.to_string()).collect();
    same("Input", declared, rust);
}
