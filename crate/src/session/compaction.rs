//! Compaction by the model (SPEC §5, seeds 002 and 003): when the estimate passes `compact_at`
//! of n_ctx (before a round, or after a reply that ends the turn), or the provider says the
//! context is too long, the engine asks the model to summarize the oldest turns (a
//! `start_request` with purpose `compaction`). The summary is stored as an assistant message
//! naming its sources, with a `compression_report`; the sources stay in the trajectory and
//! linearize stops sending them. A failed compaction falls back to the four stages, which run on
//! every request anyway. The status travels in `runtime_updated`.

use super::state::{Compaction, Generating, Resume, SessionState, StreamPhase, Streaming};
use super::{ChatSession, Ctx};
use crate::delta::Draft;
use crate::effect::{Effect, RequestPurpose};
use crate::hidden::{exemption, Exemption};
use crate::message::{ChatMessage, Content, Role};
use crate::provider::StreamDecoder;
use crate::request::{build_request, RequestInput};
use serde_json::json;

/// What the summarizer is told; the sources follow as the conversation.
pub const COMPACTION_PROMPT: &str = "You are summarizing the earlier part of a conversation between a user and a coding assistant so that it can continue without it. Write a concise summary that keeps: the user's goals and constraints, decisions made and why, files and code touched (paths, names), tool results that still matter, open questions and what was about to happen next. Do not invent anything. Answer with the summary only.";

/// Fewer sources than this are not worth a request.
const MIN_SOURCES: usize = 4;

impl ChatSession {
    /// Whether the history is over `compact_at` of n_ctx and compaction has not just failed.
    pub(super) fn should_compact(&self, ctx: &Ctx) -> bool {
        let Some(fraction) = ctx.config.compact_at.filter(|f| *f > 0.0) else {
            return false;
        };
        if self
            .compaction_blocked_until
            .is_some_and(|len| self.messages.len() < len)
        {
            return false;
        }
        let threshold = (self.n_ctx(ctx.config) as f64 * fraction) as u64;
        self.context_usage(ctx.config).estimated_tokens > threshold
    }

    /// Whether a compaction could run now: on, not blocked, and with enough to summarize.
    pub(super) fn can_compact(&self, ctx: &Ctx) -> bool {
        ctx.config.compact_at.is_some_and(|f| f > 0.0)
            && self
                .compaction_blocked_until
                .is_none_or(|len| self.messages.len() >= len)
            && self.compaction_sources().len() >= MIN_SOURCES
    }

    /// The messages a summary may replace: everything before the last user message that is
    /// still sent, but never the system prompt, a plan or a plan delta.
    fn compaction_sources(&self) -> Vec<usize> {
        let tail = self
            .messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .unwrap_or(0);
        let suppressed = crate::hidden::summarized_sources(&self.messages);
        (0..tail)
            .filter(|&i| {
                let m = &self.messages[i];
                m.role != Role::System
                    && !m.is_ui_only()
                    && m.role != Role::CompressionReport
                    && exemption(m) != Exemption::Never
                    && !suppressed.contains(&m.message_id)
            })
            .collect()
    }

    /// Sends the compaction request, or says why not (`skipped`) and goes on with `resume`.
    pub(super) fn start_compaction(&mut self, ctx: &mut Ctx, resume: Resume) -> SessionState {
        // SPEC §5: the phase goes checking → running → applied/skipped/failed; `checking` is
        // emitted at once, or a subscriber would only ever see where the check ended.
        self.compression_phase = Some("checking".into());
        let usage = self.context_usage(ctx.config);
        self.compression_reason = Some(format!(
            "the history is about {} of {} tokens",
            usage.estimated_tokens, usage.n_ctx
        ));
        self.emit_status_changes(ctx);
        let sources = self.compaction_sources();
        if sources.len() < MIN_SOURCES {
            let why = format!("fewer than {MIN_SOURCES} messages can be summarized");
            return self.compaction_over(ctx, "skipped", &why, resume);
        }
        let Some(provider) = ctx.config.provider_for(self.answering_provider(ctx.config)) else {
            return self.compaction_over(ctx, "failed", "no provider is configured", resume);
        };
        let mut history: Vec<ChatMessage> =
            sources.iter().map(|&i| self.messages[i].clone()).collect();
        history.push(ChatMessage::text(
            "compaction-instruction",
            Role::User,
            "Summarize the conversation above as instructed.",
        ));
        let budget = self.history_budget(ctx, Some(COMPACTION_PROMPT), &[]);
        // Over twice the trigger the summarizer cannot read it all: the four stages cut its
        // copy to the budget first (the emergency cut), and the report says so.
        let emergency = ctx.config.compact_at.is_some_and(|f| {
            self.context_usage(ctx.config).estimated_tokens
                > (2.0 * f * self.n_ctx(ctx.config) as f64) as u64
        });
        let request = match build_request(&RequestInput {
            provider,
            thread: &self.thread,
            system_prompt: Some(COMPACTION_PROMPT),
            tools: &[],
            history: &history,
            budget: Some(budget),
            tiers: None,
        }) {
            Ok(request) => request,
            Err(e) => return self.compaction_over(ctx, "failed", &e.to_string(), resume),
        };
        let Some(decoder) = StreamDecoder::for_kind(request.provider) else {
            let why = "no decoder for this provider";
            return self.compaction_over(ctx, "failed", why, resume);
        };
        let request_id = ctx.ids.next("r");
        self.effect(Effect::StartRequest {
            chat_id: self.chat_id.clone(),
            request_id: request_id.clone(),
            purpose: RequestPurpose::Compaction,
            request,
        });
        self.effect(Effect::WakeAt {
            at_ms: ctx.now + ctx.config.stall_timeout_ms,
        });
        self.compression_phase = Some("running".into());
        let source_ids = sources
            .iter()
            .map(|&i| self.messages[i].message_id.clone())
            .collect();
        SessionState::Generating(Generating {
            round: 0,
            attempt: 1,
            request_id,
            phase: StreamPhase::Streaming(Box::new(Streaming::new(decoder, ctx.now))),
            last_failure: None,
            overflow_retried: false,
            compaction: Some(Box::new(Compaction {
                source_ids,
                draft: Draft::default(),
                resume,
                emergency,
            })),
        })
    }

    /// The summary stream ended cleanly: store the summary and its report, then resume.
    pub(super) fn finish_compaction(&mut self, ctx: &mut Ctx, job: Compaction) -> SessionState {
        let summary = job.draft.content.trim().to_string();
        if summary.is_empty() {
            return self.compaction_failed(ctx, job);
        }
        let before: u64 = job
            .source_ids
            .iter()
            .filter_map(|id| self.messages.iter().find(|m| &m.message_id == id))
            .map(crate::history_limit::estimate_tokens)
            .sum();
        let mut message = self.new_message(ctx, Role::Assistant, Content::Text(summary));
        let after = crate::history_limit::estimate_tokens(&message);
        message.set_summary_of(&job.source_ids);
        let summary_id = message.message_id.clone();
        self.push_message(message);
        let mut report = self.new_message(
            ctx,
            Role::CompressionReport,
            Content::Text(format!(
                "Summarized {} earlier messages: about {before} tokens became {after}.",
                job.source_ids.len()
            )),
        );
        report.set_compression_report(json!({
            "summary_message_id": summary_id,
            "source_count": job.source_ids.len(),
            "tokens_before": before,
            "tokens_after": after,
            "emergency": job.emergency,
        }));
        self.push_message(report);
        let why = format!(
            "{} messages summarized: about {before} tokens became {after}",
            job.source_ids.len()
        );
        self.compaction_over(ctx, "applied", &why, job.resume)
    }

    /// The compaction request failed: the four stages will do (SPEC §5); not tried again until
    /// the history has grown.
    pub(super) fn compaction_failed(&mut self, ctx: &mut Ctx, job: Compaction) -> SessionState {
        self.compaction_blocked_until = Some(self.messages.len() + MIN_SOURCES);
        let why = "the summary request failed; the four stages limit the history instead";
        self.compaction_over(ctx, "failed", why, job.resume)
    }

    fn compaction_over(
        &mut self,
        ctx: &mut Ctx,
        phase: &str,
        reason: &str,
        resume: Resume,
    ) -> SessionState {
        if phase != "applied" {
            self.compaction_blocked_until = Some(self.messages.len() + MIN_SOURCES);
        }
        self.compression_phase = Some(phase.into());
        self.compression_reason = Some(reason.into());
        match resume {
            Resume::Idle => SessionState::Idle,
            Resume::Round(round) => self.send_round(ctx, round, 1, None),
        }
    }
}
