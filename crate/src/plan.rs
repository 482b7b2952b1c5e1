//! Plans (SPEC §8.2, seed 001): the engine tools `set_plan`, `update_plan` and `get_plan`.
//! A plan is a hidden `plan` message (version 1); each update is an `event(plan_delta)` with
//! `seq` = updates so far + 1. Bodies and notes are capped, and a cut is marked and recorded.
//! The tool step places the messages made here after all of its results.

use crate::message::{ChatMessage, Content, Role};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A plan body keeps at most this many characters, the truncation marker included.
pub const PLAN_BODY_CAP: usize = 96 * 1024;
/// A plan delta keeps at most this many characters, the truncation marker included.
pub const PLAN_DELTA_CAP: usize = 16 * 1024;

/// The plan as it stands: its base message and the notes of its updates, in order. The page
/// shows it from `runtime.plan`, so it never re-derives it from the messages.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CurrentPlan {
    pub message_id: String,
    pub mode: String,
    pub version: u64,
    pub body: String,
    pub updates: Vec<(u64, String)>,
}

/// The current plan of a history (with messages not yet added, `pending`, after it): the last
/// `plan` message and the `plan_delta` events after it.
pub fn current_plan(history: &[ChatMessage], pending: &[ChatMessage]) -> Option<CurrentPlan> {
    let all = || history.iter().chain(pending.iter());
    let base_index = all()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Plan)
        .last()?
        .0;
    let base = all().nth(base_index)?;
    let meta = base.plan_meta();
    let updates = all()
        .skip(base_index + 1)
        .filter(|m| m.is_plan_delta())
        .map(|m| (delta_seq(m), m.content.text()))
        .collect();
    Some(CurrentPlan {
        message_id: base.message_id.clone(),
        mode: meta
            .and_then(|p| p.get("mode"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        version: meta
            .and_then(|p| p.get("version"))
            .and_then(Value::as_u64)
            .unwrap_or(1),
        body: base.content.text(),
        updates,
    })
}

fn delta_seq(message: &ChatMessage) -> u64 {
    message
        .event_payload()
        .and_then(|p| p.get("seq"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// `text` cut to `cap` characters including a `[truncated: kept K of N chars]` marker; returns
/// the kept text and, when it was cut, the original length in characters.
pub fn cap_text(text: &str, cap: usize) -> (String, Option<usize>) {
    let total = text.chars().count();
    if total <= cap {
        return (text.to_string(), None);
    }
    // The marker's length depends on K; K only shrinks, so one refinement settles it.
    let mut kept = cap;
    for _ in 0..3 {
        let marker = marker(kept, total);
        kept = cap.saturating_sub(marker.chars().count());
    }
    let mut out: String = text.chars().take(kept).collect();
    out.push_str(&marker(kept, total));
    (out, Some(total))
}

fn marker(kept: usize, total: usize) -> String {
    format!("\n[truncated: kept {kept} of {total} chars]")
}

/// What a plan tool call did: its result, and the hidden message it adds, if any.
pub struct PlanOutcome {
    pub result: Result<String, String>,
    pub message: Option<ChatMessage>,
}

fn refuse(reason: &str) -> PlanOutcome {
    PlanOutcome {
        result: Err(reason.to_string()),
        message: None,
    }
}

/// `set_plan {content, summary?}`: version 1 of the plan; fails when a plan exists.
pub fn set_plan(
    args: &Value,
    existing: Option<&CurrentPlan>,
    mode: &str,
    message_id: String,
    now: u64,
) -> PlanOutcome {
    let Some(content) = args.get("content").and_then(Value::as_str) else {
        return refuse("set_plan needs `content`, the plan as text");
    };
    if content.trim().is_empty() {
        return refuse("set_plan needs a non-empty `content`");
    }
    // Seed 001: set_plan creates the plan, or replaces the current one (a new version that
    // names the one it supersedes); update_plan adds to it.
    let version = existing.map_or(1, |plan| plan.version + 1);
    let supersedes = existing.map(|plan| plan.message_id.clone());
    let (body, original) = cap_text(content, PLAN_BODY_CAP);
    let mut meta =
        json!({"mode": mode, "version": version, "created_at_ms": now, "supersedes": supersedes});
    if let Some(chars) = original {
        meta["truncated"] = json!(true);
        meta["original_chars"] = json!(chars);
    }
    if let Some(summary) = args.get("summary").and_then(Value::as_str) {
        meta["summary"] = json!(summary);
    }
    let mut message = ChatMessage::new(message_id, Role::Plan, Content::Text(body));
    message.created_at_ms = Some(now);
    message.set_plan_meta(meta);
    let verb = if existing.is_some() {
        "replaced"
    } else {
        "set"
    };
    let result = match original {
        Some(chars) => {
            format!(
                "Plan {verb} (version {version}), cut to {PLAN_BODY_CAP} of {chars} characters."
            )
        }
        None => format!("Plan {verb} (version {version})."),
    };
    PlanOutcome {
        result: Ok(result),
        message: Some(message),
    }
}

/// `update_plan {note, summary?}`: appends a `plan_delta` event; fails without a plan.
pub fn update_plan(
    args: &Value,
    existing: Option<&CurrentPlan>,
    message_id: String,
    now: u64,
) -> PlanOutcome {
    let Some(plan) = existing else {
        return refuse("no plan exists; use set_plan first");
    };
    let Some(note) = args.get("note").and_then(Value::as_str) else {
        return refuse("update_plan needs `note`, what changed");
    };
    if note.trim().is_empty() {
        return refuse("update_plan needs a non-empty `note`");
    }
    let seq = plan.updates.len() as u64 + 1;
    let (note, original) = cap_text(note, PLAN_DELTA_CAP);
    let mut payload = json!({"seq": seq, "plan_message_id": plan.message_id});
    if let Some(chars) = original {
        payload["truncated"] = json!(true);
        payload["original_chars"] = json!(chars);
    }
    if let Some(summary) = args.get("summary").and_then(Value::as_str) {
        payload["summary"] = json!(summary);
    }
    let mut message = ChatMessage::new(message_id, Role::Event, Content::Text(note));
    message.created_at_ms = Some(now);
    message.set_plan_delta("update_plan", payload);
    PlanOutcome {
        result: Ok(format!("Plan updated (update {seq}).")),
        message: Some(message),
    }
}

/// `get_plan {}`: the base plan followed by its updates, as the model sees them.
pub fn get_plan(existing: Option<&CurrentPlan>) -> PlanOutcome {
    let Some(plan) = existing else {
        return refuse("no plan exists yet; use set_plan to make one");
    };
    PlanOutcome {
        result: Ok(plan_text(plan)),
        message: None,
    }
}

/// The synthesized current plan: `<plan>` with its `<plan-update>`s (SPEC §7's forms).
pub fn plan_text(plan: &CurrentPlan) -> String {
    let mut out = format!(
        "<plan mode=\"{}\" version=\"{}\">\n{}\n</plan>",
        plan.mode,
        plan.version,
        crate::linearize::escape_body(&plan.body)
    );
    for (seq, note) in &plan.updates {
        out.push_str(&format!(
            "\n<plan-update seq=\"{seq}\">{}</plan-update>",
            crate::linearize::escape_body(note)
        ));
    }
    out
}
