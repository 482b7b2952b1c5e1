//! Cache warmth, measured (issue 40): a replayed 50-turn coding session through the engine with
//! an Anthropic model — each turn reads a file (files re-read in a cycle), one tool output is
//! long (20 KB), the history grows until the engine compacts it — and for each chat request the
//! share of its prompt (≈ characters / 4) that lies in a prefix identical to the previous
//! request's, up to that request's last cache breakpoint it shares: what the provider can serve
//! from its cache. Run twice: a chat without workspace, and one whose system prompt carries the
//! workspace (a repository map, the file list, the date) as it changes — every 4th turn a file
//! edited (its map block changes), a file created (the list and the map change), the day turning. Each request
//! is measured as sent (seed 002's stability tiers) and, side by side, as the fixed tiers before
//! them laid it out (the whole prompt one system block; breakpoints on it, at each 8th and 32nd
//! turn and on the last turn). The average must stay ≥ 90 %.

use crate::support::harness::{anthropic_reply, Harness};
use palaver::engine::{Effect, Input, RequestPurpose, Step};
use palaver::prompt::{assemble, InstructionFile, WorkspaceContext};
use serde_json::{json, Value};

/// The request a step started: its purpose and body.
fn started(step: &Step) -> Option<(RequestPurpose, Value)> {
    step.effects.iter().rev().find_map(|e| match e {
        Effect::StartRequest {
            purpose, request, ..
        } => Some((*purpose, request.body_json())),
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

type Blocks = Vec<(String, bool)>;

/// The prompt in Anthropic's prefix order (tools, system, messages), one entry per block: its
/// text without the markers, and whether a breakpoint sits on it.
fn blocks(body: &Value) -> Blocks {
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

/// The same request as the fixed tiers laid it out: the whole system prompt one block, the
/// tiers' own user/"Ok." messages gone, breakpoints on the system prompt, at the end of the last
/// whole 8 and 32 turns, and on the last turn.
fn fixed_tiers(body: &Value, system_prompt: &str) -> Blocks {
    let written = |block: &Value| {
        let text = block["text"].as_str().unwrap_or("");
        [
            "# Repository Structure (continued)",
            "# Repository Files",
            "Today's date: ",
            "# Repository Structure\n",
        ]
        .iter()
        .any(|h| text.starts_with(h))
    };
    let mut turns: Vec<(String, Vec<Value>)> = Vec::new();
    let mut skip_ok = false;
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("").to_string();
        let content: Vec<Value> = message["content"].as_array().cloned().unwrap_or_default();
        if role == "assistant" && skip_ok && content.len() == 1 && content[0]["text"] == "Ok." {
            skip_ok = false;
            continue;
        }
        let kept: Vec<Value> = content
            .iter()
            .filter(|b| !written(b))
            .map(strip_marks)
            .collect();
        skip_ok = kept.len() < content.len();
        if kept.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, blocks)) if *last == role => blocks.extend(kept),
            _ => turns.push((role, kept)),
        }
    }
    let n = turns.len();
    let marked: Vec<usize> = [32usize, 8]
        .iter()
        .filter_map(|t| (n / t * t).checked_sub(1))
        .chain(n.checked_sub(1))
        .collect();
    let mut out: Blocks = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| (format!("tool:{}", strip_marks(t)), false))
        .collect();
    out.push((
        format!("system:{}", json!({"text": system_prompt, "type": "text"})),
        true,
    ));
    for (i, (role, content)) in turns.iter().enumerate() {
        let last = content.len() - 1;
        for (j, block) in content.iter().enumerate() {
            out.push((format!("{role}:{block}"), j == last && marked.contains(&i)));
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

/// The workspace as `palaver serve` describes it at a turn: 12 files in the map; every 4th turn
/// the agent edits the file it read (its definitions move down a line: its map block changes),
/// a file is created at turn 30 (the list and the map change), the day turns at turn 40.
fn workspace_at(turn: usize) -> WorkspaceContext {
    let mut files: Vec<String> = (0..12).map(|i| format!("src/file{i}.rs")).collect();
    if turn >= 30 {
        files.push("src/added.rs".into());
    }
    let edits = |file: usize| (0..turn).filter(|t| t % 4 == 3 && t % 7 == file).count();
    let mut map = String::from(palaver::prompt::REPO_MAP_HEADER);
    map.push_str("Legend: f=function t=type · :N line · ←N used by N other files\n\n");
    for (i, file) in files.iter().enumerate() {
        map.push_str(&format!("{file}:\n"));
        for d in 0..6 {
            map.push_str(&format!("  f item_{d} :{} ←2\n", 10 * d + 1 + edits(i)));
        }
    }
    WorkspaceContext {
        instructions: vec![InstructionFile {
            path: "AGENTS.md".into(),
            text: "Project notes. ".repeat(300),
        }],
        files,
        files_truncated: false,
        date: if turn >= 40 {
            "2026-11-27"
        } else {
            "2026-11-26"
        }
        .into(),
        repo_map: map,
    }
}

struct Session {
    /// Each chat request: its blocks as sent, and as the fixed tiers laid it out.
    tiered: Vec<Blocks>,
    fixed: Vec<Blocks>,
    compactions: usize,
}

fn run_session(workspace: bool) -> Session {
    let prompt_at = |turn: usize| {
        if workspace {
            assemble(Some("You are a coding agent."), &workspace_at(turn))
        } else {
            format!("You are a coding agent.\n{}", "Project notes. ".repeat(300))
        }
    };
    let mut h = Harness::with_config_patch(&json!({
        "providers": [{"kind": "anthropic", "base_url": "http://127.0.0.1:9/v1", "model": "claude-test", "n_ctx": 36000}],
        "default_n_ctx": 36000,
        "compact_at": 0.7,
        "system_prompt": prompt_at(0),
    }));
    h.open("c1", None);
    h.command(
        "c1",
        json!({"type": "set_params", "client_request_id": "p", "patch": {"provider": "anthropic"}}),
    );
    let mut session = Session {
        tiered: Vec::new(),
        fixed: Vec::new(),
        compactions: 0,
    };
    let mut prompt = 0;
    let mut system = prompt_at(0);
    let record = |step: &Step,
                  session: &mut Session,
                  system: &str,
                  prompt: &mut usize|
     -> Option<RequestPurpose> {
        let (purpose, body) = started(step)?;
        *prompt = body.to_string().len() / 4;
        if purpose == RequestPurpose::Chat {
            session.tiered.push(blocks(&body));
            session.fixed.push(fixed_tiers(&body, system));
        } else {
            session.compactions += 1;
        }
        Some(purpose)
    };
    for turn in 0..50 {
        if prompt_at(turn) != system {
            system = prompt_at(turn);
            let mut config = h.engine.config().clone();
            config.system_prompt = Some(system.clone());
            h.engine.reconfigure(h.now, config);
        }
        let mut step = h.command("c1", json!({"type": "user_message", "client_request_id": format!("u{turn}"), "content": format!("Turn {turn}: look at src/file{}.rs and tell me what it does.", turn % 7)}));
        // A compaction may come before any round: answered with a summary, then the round starts.
        while record(&step, &mut session, &system, &mut prompt) == Some(RequestPurpose::Compaction)
        {
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
        while record(&step, &mut session, &system, &mut prompt) == Some(RequestPurpose::Compaction)
        {
            step = summarize(&mut h, prompt);
        }
        h.stream(anthropic_reply(&format!("It defines item {turn}."), None, prompt).as_bytes());
        h.stream_end();
    }
    session
}

/// Average and lowest warmth over a session's requests, and those under half.
fn measure(requests: &[Blocks]) -> (f64, f64, Vec<String>) {
    let shares: Vec<f64> = requests.windows(2).map(|w| warmth(&w[0], &w[1])).collect();
    let average = shares.iter().sum::<f64>() / shares.len().max(1) as f64;
    let cold = (shares.iter().enumerate())
        .filter(|(_, s)| **s < 0.5)
        .map(|(i, s)| format!("{} {:.0}%", i + 2, s * 100.0))
        .collect();
    (average, shares.iter().cloned().fold(1.0, f64::min), cold)
}

#[test]
fn a_fifty_turn_coding_session_is_served_from_the_cache() {
    for (name, workspace) in [("chat", false), ("workspace", true)] {
        let session = run_session(workspace);
        assert_eq!(session.tiered.len(), 100, "two chat requests per turn");
        assert!(session.compactions >= 1, "the session reaches a compaction");
        if std::env::var("WARMTH_DEBUG").is_ok() {
            for (i, (t, f)) in session
                .tiered
                .windows(2)
                .zip(session.fixed.windows(2))
                .enumerate()
            {
                let marks: Vec<usize> = t[1]
                    .iter()
                    .enumerate()
                    .filter(|b| b.1 .1)
                    .map(|b| b.0)
                    .collect();
                println!(
                    "{name} {}: tiered {:.0}% fixed {:.0}% blocks {} marks {marks:?}",
                    i + 2,
                    warmth(&t[0], &t[1]) * 100.0,
                    warmth(&f[0], &f[1]) * 100.0,
                    t[1].len()
                );
            }
        }
        let (tiered, tiered_low, tiered_cold) = measure(&session.tiered);
        let (fixed, fixed_low, fixed_cold) = measure(&session.fixed);
        println!(
            "cache warmth, {name} session, 100 chat requests ({} compaction(s)): stability tiers average {:.1}% (lowest {:.1}%; under 50%: {}) · fixed tiers average {:.1}% (lowest {:.1}%; under 50%: {})",
            session.compactions,
            tiered * 100.0,
            tiered_low * 100.0,
            if tiered_cold.is_empty() { "none".into() } else { tiered_cold.join(", ") },
            fixed * 100.0,
            fixed_low * 100.0,
            if fixed_cold.is_empty() { "none".into() } else { fixed_cold.join(", ") },
        );
        assert!(
            tiered >= 0.9,
            "{name}: average warmth {:.1}%",
            tiered * 100.0
        );
        if workspace {
            assert!(
                tiered > fixed,
                "{name}: the tiers keep more of the prompt cached"
            );
        }
    }
}
