//! Hidden-role data (seed 001, SPEC §2): what `event`, `plan`, summary, stopped, error and
//! ui-only messages carry beside their content. Trajectories keep it in a message's flattened
//! `extra` keys, as Refact writes them; this module is the only place that spells those keys,
//! so the history limit, linearization, plans, export and the session read one typed view.
//!
//! Keys: `event {subkind, source, payload}`, `plan {mode, version, …}`,
//! `compression {kind, summarized_source_message_ids}`, `compression_report {…}`,
//! `stopped`, `interrupted`, `ui_only`, `error {code, message}`, `incomplete_tool_calls`, `data`,
//! `proposal_results`.

use crate::delta::Draft;
use crate::edit_blocks::{ProposalKind, ProposalResult};
use crate::message::{ChatMessage, Role};
use serde_json::{json, Value};
use std::borrow::Borrow;
use std::collections::BTreeSet;

/// What may happen to a message when the history is limited (seed 001).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exemption {
    /// Plans and plan deltas survive every compression.
    Never,
    /// Dropped once older than the last `DROP_ON_AGE_USER_TURNS` user turns.
    DropOnAge,
    /// Only the `KEEP_RECENT_N` most recent of the same event subkind are kept.
    KeepRecentN,
    /// The normal rules.
    PreserveAnchor,
}

/// The error a failed turn shows (a UI-only `error` message).
pub struct ErrorNotice<'a> {
    pub code: &'a str,
    pub kind: &'a str,
    pub retryable: bool,
    /// The error class (`network`, `auth`, …) and who said it (`provider`, `app`,
    /// `connection`): the page words the notice from them, the code kept for details.
    pub class: &'a str,
    pub source: &'a str,
}

/// The subkind of a plan update event.
const PLAN_DELTA: &str = "plan_delta";

impl ChatMessage {
    /// An `event` message's subkind (`plan_delta`, `tick`, `tool_decision`, …).
    pub fn event_subkind(&self) -> Option<&str> {
        self.event_field("subkind")?.as_str()
    }

    /// One field of an `event` message: `subkind`, `source` or `payload`.
    fn event_field(&self, key: &str) -> Option<&Value> {
        self.extra.get("event")?.get(key)
    }

    /// An `event` message's source (`update_plan`, `engine`, …).
    pub fn event_source(&self) -> Option<&Value> {
        self.event_field("source")
    }

    /// An `event` message's payload.
    pub fn event_payload(&self) -> Option<&Value> {
        self.event_field("payload")
    }

    /// Whether this is a plan update (`event(plan_delta)`).
    pub fn is_plan_delta(&self) -> bool {
        self.role == Role::Event && self.event_subkind() == Some(PLAN_DELTA)
    }

    /// A plan update, appended to the history by `update_plan`.
    pub fn set_plan_delta(&mut self, source: &str, payload: Value) {
        self.set_event(PLAN_DELTA, source, payload);
    }

    pub fn set_event(&mut self, subkind: &str, source: &str, payload: Value) {
        let event = json!({"subkind": subkind, "source": source, "payload": payload});
        self.extra.insert("event".into(), event);
    }

    /// A plan's metadata: `mode`, `version`, `supersedes`, `summary`, truncation.
    pub fn plan_meta(&self) -> Option<&Value> {
        self.extra.get("plan")
    }

    pub fn set_plan_meta(&mut self, meta: Value) {
        self.extra.insert("plan".into(), meta);
    }

    /// Made by compaction (any kind): such a message replaces earlier ones in what is sent.
    pub fn is_compression(&self) -> bool {
        self.extra.contains_key("compression")
    }

    /// A summary made by compaction (SPEC §5).
    pub fn is_summary(&self) -> bool {
        self.extra
            .get("compression")
            .and_then(|c| c.get("kind"))
            .and_then(Value::as_str)
            == Some("summary")
    }

    /// The ids a summary stands for (`compression.summarized_source_message_ids`).
    pub fn summarized_source_ids(&self) -> impl Iterator<Item = &str> {
        self.extra
            .get("compression")
            .and_then(|c| c.get("summarized_source_message_ids"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    }

    pub fn set_summary_of(&mut self, source_ids: &[String]) {
        let compression = json!({"kind": "summary", "summarized_source_message_ids": source_ids});
        self.extra.insert("compression".into(), compression);
    }

    pub fn set_compression_report(&mut self, report: Value) {
        self.extra.insert("compression_report".into(), report);
    }

    /// What became of this answer's edit blocks and suggested commands the user acted on
    /// (issue 40): `proposal_results`, one per block or command. A value that does not read as
    /// results (a planted chat's) counts as none.
    pub fn proposal_results(&self) -> Vec<ProposalResult> {
        self.extra
            .get("proposal_results")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// Keeps a result, replacing an earlier one for the same block or command.
    pub fn set_proposal_result(&mut self, result: ProposalResult) {
        let mut results = self.proposal_results();
        results.retain(|r| (r.kind, r.index) != (result.kind, result.index));
        results.push(result);
        results.sort_by_key(|r| (r.kind == ProposalKind::Shell, r.index));
        let value = serde_json::to_value(results).unwrap_or(Value::Null);
        self.extra.insert("proposal_results".into(), value);
    }

    /// An answer the user stopped: incomplete, marked so in the page and every export.
    pub fn is_stopped(&self) -> bool {
        self.flag("stopped")
    }

    pub fn mark_stopped(&mut self) {
        self.extra.insert("stopped".into(), Value::Bool(true));
    }

    /// A reply cut by a crash, kept up to its last checkpoint.
    pub fn is_interrupted(&self) -> bool {
        self.flag("interrupted")
    }

    pub fn mark_interrupted(&mut self) {
        self.extra.insert("interrupted".into(), Value::Bool(true));
    }

    /// Shown to the user, never sent to the model: `error` messages and `ui_only` notices.
    pub fn is_ui_only(&self) -> bool {
        self.role == Role::Error || self.flag("ui_only")
    }

    /// Turns the message into the UI-only notice of a failed turn.
    pub fn mark_error_notice(&mut self, notice: ErrorNotice) {
        self.extra.insert("ui_only".into(), Value::Bool(true));
        self.extra.insert("code".into(), notice.code.into());
        self.extra.insert("kind".into(), notice.kind.into());
        self.extra
            .insert("retryable".into(), notice.retryable.into());
        self.extra.insert("class".into(), notice.class.into());
        self.extra.insert("source".into(), notice.source.into());
    }

    /// Tool calls whose arguments were cut mid-stream: kept for the record, never run.
    pub fn set_incomplete_tool_calls(&mut self, calls: Value) {
        self.extra.insert("incomplete_tool_calls".into(), calls);
    }

    /// What cut an answer that hit a token limit: `output_limit` (the answer's limit the request
    /// carried) or `window` (the context window ran out first).
    pub fn set_cut_by(&mut self, by: &str) {
        self.extra.insert("cut_by".into(), by.into());
    }

    /// Structured data a tool returned beside its text.
    pub fn set_tool_data(&mut self, data: Value) {
        self.extra.insert("data".into(), data);
    }

    /// Shown in the page, never sent to the model (a fallback note).
    pub fn mark_ui_only(&mut self) {
        self.extra.insert("ui_only".into(), Value::Bool(true));
    }

    /// The provider kind and model that produced an assistant message (issue 18).
    pub fn set_answered_by(&mut self, provider: Value, model: &str) {
        self.extra.insert("provider".into(), provider);
        self.extra.insert("model".into(), model.into());
    }

    /// The provider kind that produced the message, when it was recorded.
    pub fn answered_by(&self) -> Option<&Value> {
        self.extra.get("provider")
    }

    /// A user message that carries the answers of subagents a `wait_agents` waited for.
    pub fn mark_subagent_answers(&mut self) {
        self.extra
            .insert("subagent_answers".into(), Value::Bool(true));
    }

    fn flag(&self, key: &str) -> bool {
        self.extra.get(key).and_then(Value::as_bool) == Some(true)
    }
}

impl Draft {
    /// The stream error a partial answer ended with.
    pub fn set_stream_error(&mut self, code: &str, message: &str) {
        let error = json!({"code": code, "message": message});
        self.extra.insert("error".into(), error);
    }
}

/// How the history limit treats a message (seed 001's exemption table).
pub fn exemption(message: &ChatMessage) -> Exemption {
    match message.role {
        Role::Plan => Exemption::Never,
        Role::Event => match message.event_subkind() {
            Some(PLAN_DELTA) => Exemption::Never,
            Some("tick" | "mode_switch") => Exemption::DropOnAge,
            Some("process_completed" | "cron_fire") => Exemption::KeepRecentN,
            _ => Exemption::PreserveAnchor,
        },
        _ => Exemption::PreserveAnchor,
    }
}

/// Ids named by summaries as their sources. A `Never` message (a plan, a plan delta) is not
/// suppressed even when a summary names it.
pub fn summarized_sources<M: Borrow<ChatMessage>>(history: &[M]) -> BTreeSet<String> {
    let mut ids: BTreeSet<String> = history
        .iter()
        .flat_map(|m| m.borrow().summarized_source_ids())
        .map(str::to_string)
        .collect();
    if !ids.is_empty() {
        for message in history.iter().map(Borrow::borrow) {
            if exemption(message) == Exemption::Never {
                ids.remove(&message.message_id);
            }
        }
    }
    ids
}
