//! What a chat reports about itself (`runtime` in snapshots and `runtime_updated`, SPEC §2):
//! its state and what the page shows of it — the turn's phase, what the user can do now, each
//! tool call's status in the current turn, the context gauge (the streaming answer included).
//! The page renders these; it never derives them (issue 34). Computed from the session, the
//! history-derived part cached until the history changes.

use super::state::{SessionState, StreamPhase};
use super::{ChatSession, Ctx, Derived};
use crate::config::EngineConfig;
use crate::event::{ContextUsage, Event, Runtime, ToolCallView};
use crate::history_limit::estimate_tokens;
use crate::message::Role;
use crate::tools::{ToolStep, SKIPPED_AFTER_REJECT};

impl ChatSession {
    pub fn runtime(&self, config: &EngineConfig) -> Runtime {
        let queued_items = self.queue.summary();
        let derived = self.derived();
        Runtime {
            state: self.state.name().to_string(),
            error: match &self.state {
                SessionState::Error(info) => Some(info.clone()),
                _ => None,
            },
            pause_reasons: match &self.state {
                SessionState::Paused(paused) => paused.reasons.clone(),
                _ => Vec::new(),
            },
            queue_size: queued_items.len(),
            queued_items,
            queue_held: self.queue_held(),
            context_usage: self.context_usage(config),
            is_compressing: matches!(&self.state, SessionState::Generating(g) if g.compaction.is_some()),
            compression_phase: self.compression_phase.clone(),
            compression_reason: self.compression_reason.clone(),
            storage_error: self.book.storage_error().map(str::to_string),
            retry: self.retry_status(config),
            compression_strength: self.last_strength,
            busy: self.state.is_busy(),
            plan: derived.plan.clone(),
            questions: match self.state {
                SessionState::WaitingUserInput if self.waiting_for_agents.is_empty() => {
                    Some(derived.questions.clone().unwrap_or_default())
                }
                _ => None,
            },
            subagents: self.subagents.clone(),
            waiting_for_agents: match self.state {
                SessionState::WaitingUserInput => self.waiting_for_agents.clone(),
                _ => Vec::new(),
            },
            phase: self.phase().to_string(),
            offers: self.offers(),
            tool_calls: self.tool_calls(),
            model: Some(self.answering_model(config)).filter(|m| !m.model.is_empty()),
            prompt_profile: Some(self.prompt_profile(config)),
            prompt_tiers: self.prompt_tiers.clone(),
            prompt_progress: self.prompt_progress(),
        }
    }

    /// How far the server has read the prompt, until the answer has anything (the collector
    /// drops it then); the page shows it instead of a bare "thinking…".
    fn prompt_progress(&self) -> Option<crate::provider::PromptProgress> {
        match &self.state {
            SessionState::Generating(g) if g.compaction.is_none() => match &g.phase {
                StreamPhase::Streaming(streaming) => streaming.collected.prompt_progress,
                _ => None,
            },
            _ => None,
        }
    }

    /// The history-derived part of the runtime, from the cache or computed once.
    pub(super) fn derived(&self) -> &Derived {
        self.derived.get_or_init(|| Derived {
            estimated_tokens: self.estimate_history(),
            plan: crate::plan::current_plan(&self.messages, &[]),
            questions: crate::tools::pending_questions(&self.messages),
        })
    }

    /// SPEC §5's estimate: characters / 4 + 10 per message, 1000 per image, anchored to the
    /// provider's last reported `prompt_tokens` when there is one.
    pub(super) fn context_usage(&self, config: &EngineConfig) -> ContextUsage {
        let estimated_tokens = self.derived().estimated_tokens;
        let n_ctx = self.n_ctx(config);
        ContextUsage {
            estimated_tokens,
            n_ctx,
            message_count: self.messages.len(),
            pressure: (estimated_tokens as f64 / n_ctx as f64 * 1000.0).round() / 1000.0,
            draft_tokens: self.draft_tokens(),
            learned: self.learned_n_ctx == Some(n_ctx),
            output_tokens: self.output_tokens(config),
            left_out: self.left_out.last,
        }
    }

    pub(super) fn estimate_history(&self) -> u64 {
        let anchor = self
            .messages
            .iter()
            .rposition(|m| m.usage.as_ref().and_then(|u| u.prompt_tokens).is_some());
        let (base, from) = match anchor {
            Some(i) => (
                self.messages[i]
                    .usage
                    .as_ref()
                    .and_then(|u| u.prompt_tokens)
                    .unwrap_or(0),
                i,
            ),
            None => (0, 0),
        };
        // A summary after the report means the report counted messages no longer sent.
        let last_summary = self.messages.iter().rposition(|m| m.is_compression());
        if last_summary.is_some_and(|s| anchor.is_none_or(|a| s > a)) {
            return crate::history_limit::estimate_history(&self.messages);
        }
        base + self.messages[from..]
            .iter()
            .map(estimate_tokens)
            .sum::<u64>()
    }

    pub(super) fn emit_status_changes(&mut self, ctx: &Ctx) {
        // Computed once per step (each chunk of a stream is one) and compared without copies:
        // a clone is made only when something changed.
        let mut runtime = self.runtime(ctx.config);
        let carried = runtime.take_carried();
        if carried.queued_items != self.last_queue {
            self.last_queue.clone_from(&carried.queued_items);
            self.emit(Event::QueueUpdated {
                queue_size: carried.queue_size,
                queued_items: carried.queued_items.clone(),
            });
        }
        if self.last_runtime.as_ref() != Some(&runtime) {
            self.last_runtime = Some(runtime.clone());
            runtime.restore_carried(carried);
            self.emit(Event::RuntimeUpdated { runtime });
        }
    }

    /// The turn's phase as the page shows it (seed 004): `thinking` until the answer has text,
    /// then `streaming`; `working` while tools run or wait; `compacting`; `done` otherwise.
    pub fn phase(&self) -> &'static str {
        match &self.state {
            SessionState::Generating(g) if g.compaction.is_some() => "compacting",
            SessionState::Generating(_) if self.draft_has_text() => "streaming",
            SessionState::Generating(_) => "thinking",
            SessionState::ExecutingTools(_)
            | SessionState::Paused(_)
            | SessionState::WaitingIde(_) => "working",
            _ => "done",
        }
    }

    fn draft_has_text(&self) -> bool {
        self.draft
            .as_ref()
            .is_some_and(|d| !d.content.is_empty() || !d.reasoning_content.is_empty())
    }

    /// The streaming answer's tokens, counted as the history is (characters / 4).
    pub fn draft_tokens(&self) -> u64 {
        match (&self.state, &self.draft) {
            (SessionState::Generating(_), Some(_)) => self.draft_chars / 4,
            _ => 0,
        }
    }

    /// What the user can do now, in the page's words: `send` or `queue` (a turn is under way),
    /// `stop`, `regenerate`, `answer` (the assistant asked), `approve` and `reject`, `resume_queue`.
    pub fn offers(&self) -> Vec<String> {
        let mut offers = Vec::new();
        let busy = self.state.is_busy();
        offers.push(if busy { "queue" } else { "send" });
        if busy {
            offers.push("stop");
        }
        if matches!(self.state, SessionState::Paused(_)) {
            offers.extend(["approve", "reject"]);
        }
        let asked = matches!(self.state, SessionState::WaitingUserInput)
            && self.waiting_for_agents.is_empty()
            && self.derived().questions.is_some();
        if asked {
            offers.push("answer");
        }
        // The last message of the conversation (events, plans and reports are not turns).
        let last = self.messages.iter().rev().find(|m| {
            !matches!(
                m.role,
                Role::Event
                    | Role::Plan
                    | Role::CompressionReport
                    | Role::System
                    | Role::CdInstruction
                    | Role::ContextFile
            )
        });
        let answered =
            last.is_some_and(|m| matches!(m.role, Role::Assistant | Role::Error | Role::Tool));
        if !busy && !asked && answered && self.messages.iter().any(|m| m.role == Role::User) {
            offers.push("regenerate");
        }
        if self.queue_held() {
            offers.push("resume_queue");
        }
        offers.into_iter().map(String::from).collect()
    }

    /// Every tool call of the current turn (since the last user message) with its status:
    /// `pending` (its arguments still streaming), `queued`, `running`, `awaiting_approval`,
    /// `waiting_host`, `done`, `failed`, `denied` (by a rule), `rejected` (by the user),
    /// `skipped`, or `stopped` (the turn was stopped before it had a result).
    pub fn tool_calls(&self) -> Vec<ToolCallView> {
        let from = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .map_or(0, |i| i + 1);
        let step = self.current_step();
        let mut views = Vec::new();
        for message in &self.messages[from..] {
            for call in message.tool_calls() {
                views.push(ToolCallView {
                    id: call.id.clone(),
                    name: call.function.name.clone(),
                    status: self.call_status(&call.id, step, from).to_string(),
                });
            }
        }
        if let (SessionState::Generating(_), Some(draft)) = (&self.state, &self.draft) {
            for call in &draft.tool_calls {
                views.push(ToolCallView {
                    id: call.id.clone(),
                    name: call.function.name.clone(),
                    status: "pending".into(),
                });
            }
        }
        views
    }

    fn current_step(&self) -> Option<&ToolStep> {
        match &self.state {
            SessionState::ExecutingTools(step) | SessionState::WaitingIde(step) => Some(step),
            SessionState::Paused(paused) => Some(&paused.step),
            _ => None,
        }
    }

    fn call_status(&self, id: &str, step: Option<&ToolStep>, from: usize) -> &'static str {
        let stored = self.messages[from..]
            .iter()
            .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id));
        // A rejection or a rule's denial is the engine's own decision (a `tool_decision` event),
        // never read from the result's text, which a tool could write too.
        if let Some(decided) = self.messages[from..].iter().find_map(|m| decided(m, id)) {
            return decided;
        }
        if let Some(result) = stored {
            let text = result.content.as_text();
            return outcome_status(result.tool_failed == Some(true), &text);
        }
        if let Some(step) = step.filter(|s| s.call(id).is_some()) {
            if let Some(decided) = step.hidden.iter().find_map(|m| decided(m, id)) {
                return decided;
            }
            if let Some(outcome) = step.results.get(id) {
                return outcome_status(outcome.failed, &outcome.content);
            }
            if step.awaiting_approval.contains(id) {
                return "awaiting_approval";
            }
            if step.in_flight.contains(id) || step.awaiting_agents.contains(id) {
                return "running";
            }
            if step.waiting_host.contains(id) {
                return "waiting_host";
            }
            return "queued";
        }
        "stopped"
    }
}

/// A result's status from what the engine wrote for it.
fn outcome_status(failed: bool, text: &str) -> &'static str {
    match text {
        SKIPPED_AFTER_REJECT if failed => "skipped",
        _ if failed => "failed",
        _ => "done",
    }
}

/// `rejected` or `denied` when `message` is the engine's decision on call `id`.
fn decided(message: &crate::message::ChatMessage, id: &str) -> Option<&'static str> {
    let payload = message.event_payload()?;
    if message.event_subkind()? != "tool_decision" || payload.get("tool_call_id")?.as_str()? != id {
        return None;
    }
    match payload.get("decision")?.as_str()? {
        "rejected" => Some("rejected"),
        "denied" => Some("denied"),
        _ => None,
    }
}
