//! When a round fails (SPEC §6.5): a refused prompt's window learned and the turn retried once,
//! a failure retried with backoff while it may be, a fallback model tried, or the turn ended
//! with an error that says whose it is.

use super::state::{AttemptFailure, Generating, Resume, SessionState, StreamPhase};
use super::{ChatSession, Ctx, RequestFailure};
use crate::delta::StreamFailure;
use crate::effect::Effect;
use crate::event::{ErrorInfo, ErrorSource, Event};
use crate::message::Role;
use crate::retry::{self, ErrorClass, Verdict};
use serde_json::json;

impl ChatSession {
    pub(super) fn on_request_failed(
        &mut self,
        ctx: &mut Ctx,
        g: Generating,
        failure: RequestFailure,
    ) -> SessionState {
        let overflow = retry::context_overflow_counted(
            failure.error_type.as_deref(),
            &failure.message,
            failure.context_window,
            failure.prompt_tokens,
        );
        let mut verdict = retry::classify_request(
            failure.status,
            failure.error_type.as_deref(),
            &failure.headers,
        );
        if overflow.is_some() {
            verdict = Verdict {
                class: ErrorClass::RequestTooLarge,
                retryable: false,
            };
        } else if retry::images_refused(&failure.message) {
            // A text-only model: sending the same images again cannot help.
            verdict = Verdict {
                class: ErrorClass::Unsupported,
                retryable: false,
            };
        }
        let code = failure
            .error_type
            .clone()
            .or(failure.status.map(|s| s.to_string()))
            .unwrap_or_else(|| "network_error".into());
        let asked_wait = failure
            .retry_after_ms
            .filter(|ms| (1..=retry::MAX_RETRY_AFTER_MS).contains(ms))
            .or_else(|| retry::retry_after_ms(&failure.headers, ctx.now));
        let attempt_failure = AttemptFailure {
            class: verdict.class,
            code,
            message: failure.message,
        };
        let visible = matches!(&g.phase, StreamPhase::Streaming(s) if s.collected.visible);
        if visible || g.compaction.is_some() {
            return self.fail_stream(ctx, g, attempt_failure.into_stream_failure(), verdict);
        }
        if let Some(overflow) = overflow {
            return self.on_context_overflow(ctx, g, overflow, attempt_failure);
        }
        // "Context too long": the model summarizes first, then the round is sent again.
        if verdict.class == ErrorClass::RequestTooLarge && self.can_compact(ctx) {
            return self.start_compaction(ctx, Resume::Round(g.round));
        }
        self.retry_or_fail(ctx, g, "llm_error", attempt_failure, verdict, asked_wait)
    }

    /// The provider says the prompt exceeds the model's window: the window it reports — exactly
    /// that, else three quarters of the one assumed — is learned, and so is how far the estimate
    /// fell short (the prompt's size the provider counted, else a fifth more); the round is sent
    /// once more after the history limit — or compaction, when the history is long enough for
    /// it — fits it.
    pub(super) fn on_context_overflow(
        &mut self,
        ctx: &mut Ctx,
        g: Generating,
        overflow: retry::ContextOverflow,
        failure: AttemptFailure,
    ) -> SessionState {
        if g.overflow_retried {
            if let Some(next) = self.fall_back(ctx, &g, &failure) {
                return next;
            }
            let info = failed("llm_error", failure, false, g.attempt);
            return self.end_with_error(ctx, info);
        }
        let assumed = self.n_ctx(ctx.config);
        let window = overflow.window.unwrap_or(assumed / 4 * 3).max(1);
        self.learned_n_ctx = Some(window);
        if window >= assumed {
            // The window was right: the estimate of the prompt was short.
            self.learn_estimate_scale(ctx, overflow.prompt_tokens);
        }
        if self.can_compact(ctx) {
            return self.start_compaction(ctx, Resume::Round(g.round));
        }
        // When the history cannot fit even the learned window, `send_round` ends the turn in
        // `error` saying so (the history limit's own message).
        let mut next = self.send_round(ctx, g.round, g.attempt + 1, Some(failure));
        if let SessionState::Generating(sent) = &mut next {
            sent.overflow_retried = true;
        }
        next
    }

    /// A stream broke: retried when nothing reached the user, else the partial is kept and
    /// the user may regenerate (never a silent retry after content: SPEC §6.5).
    pub(super) fn fail_stream(
        &mut self,
        ctx: &mut Ctx,
        mut g: Generating,
        failure: StreamFailure,
        verdict: Verdict,
    ) -> SessionState {
        if let Some(job) = g.compaction.take() {
            self.effect(Effect::CancelRequest {
                request_id: g.request_id,
            });
            return self.compaction_failed(ctx, *job);
        }
        let visible = matches!(&g.phase, StreamPhase::Streaming(s) if s.collected.visible);
        let attempt_failure = AttemptFailure {
            class: verdict.class,
            code: failure.code,
            message: failure.message,
        };
        if !visible {
            // A server that opened its stream before it knew the prompt was too long (the model
            // in the page, llama.cpp's server) says so in the stream: the same remedy as a refusal.
            let overflow = retry::context_overflow(
                Some(&attempt_failure.code),
                &attempt_failure.message,
                None,
            );
            if let Some(overflow) = overflow {
                self.effect(Effect::CancelRequest {
                    request_id: g.request_id.clone(),
                });
                return self.on_context_overflow(ctx, g, overflow, attempt_failure);
            }
            return self.retry_or_fail(ctx, g, "stream_error", attempt_failure, verdict, None);
        }
        self.effect(Effect::CancelRequest {
            request_id: g.request_id.clone(),
        });
        if let Some(draft) = self.draft.as_mut() {
            draft.set_stream_error(&attempt_failure.code, &attempt_failure.message);
        }
        let info = failed(
            "stream_error",
            attempt_failure,
            verdict.retryable,
            g.attempt,
        );
        self.end_with_error(ctx, info)
    }

    /// Schedules the next attempt when the failure may pass and attempts remain; otherwise the
    /// turn ends in `error` saying how many attempts were made.
    pub(super) fn retry_or_fail(
        &mut self,
        ctx: &mut Ctx,
        g: Generating,
        kind: &str,
        failure: AttemptFailure,
        verdict: Verdict,
        asked_wait: Option<u64>,
    ) -> SessionState {
        let retrying = verdict.retryable && g.attempt < ctx.config.retry.max_attempts;
        // A failed request is over already; a failed stream may still hold its connection.
        if retrying || kind == "stream_error" {
            self.effect(Effect::CancelRequest {
                request_id: g.request_id.clone(),
            });
        }
        if retrying {
            // The server's own wait wins when it is sane; otherwise exponential backoff.
            let wait = asked_wait.unwrap_or_else(|| {
                retry::backoff_ms(&ctx.config.retry, ctx.config.retry_seed, g.attempt)
            });
            let at_ms = ctx.now + wait;
            self.effect(Effect::WakeAt { at_ms });
            return SessionState::Generating(Generating {
                phase: StreamPhase::Retrying { at_ms },
                last_failure: Some(failure),
                ..g
            });
        }
        if let Some(next) = self.fall_back(ctx, &g, &failure) {
            return next;
        }
        let info = failed(kind, failure, verdict.retryable, g.attempt);
        self.end_with_error(ctx, info)
    }

    /// The preferred model failed for good in a way another model may not (issue 18): the turn
    /// goes on with the next model of the chat's fallback list that has a provider configured,
    /// the request built for its own kind from the same history. Never for quota, auth or a bad
    /// request: those are the user's to fix.
    pub(super) fn fall_back(
        &mut self,
        ctx: &mut Ctx,
        g: &Generating,
        failure: &AttemptFailure,
    ) -> Option<SessionState> {
        if g.compaction.is_some() {
            return None;
        }
        let reason = fallback_reason(failure)?;
        let preferred = self.answering_model(ctx.config);
        while let Some(next) = self
            .fallback_models(ctx.config)
            .get(self.fallbacks_used)
            .cloned()
        {
            self.fallbacks_used += 1;
            let same = next.provider == preferred.provider
                && (next.model == preferred.model || next.model.is_empty());
            if same || ctx.config.provider_for(next.provider).is_none() {
                continue;
            }
            self.turn_model = Some(next);
            let actual = self.answering_model(ctx.config);
            let mut note = self.new_message(
                ctx,
                Role::Event,
                crate::message::Content::Text(String::new()),
            );
            note.set_event(
                "model_fallback",
                "engine",
                json!({"preferred": preferred, "actual": actual, "reason": reason, "message": failure.message}),
            );
            // The user sees it in the turn; the model does not need it.
            note.mark_ui_only();
            self.push_message(note);
            self.emit(Event::ModelFallback {
                preferred,
                actual,
                reason: reason.to_string(),
            });
            return Some(self.send_round(ctx, g.round, 1, None));
        }
        None
    }

    /// The retry shown in the runtime: the countdown while waiting, the attempt while retrying.
    pub(super) fn retry_status(
        &self,
        config: &crate::config::EngineConfig,
    ) -> Option<super::RetryStatus> {
        let SessionState::Generating(g) = &self.state else {
            return None;
        };
        let failure = g.last_failure.as_ref()?;
        let (attempt, at_ms) = match &g.phase {
            StreamPhase::Retrying { at_ms } => (g.attempt + 1, Some(*at_ms)),
            StreamPhase::Streaming(_) => (g.attempt, None),
        };
        Some(super::RetryStatus {
            attempt,
            max_attempts: config.retry.max_attempts,
            at_ms,
            class: failure.class,
            code: failure.code.clone(),
            message: failure.message.clone(),
        })
    }

    /// Ends the turn in `error`: a partial draft is kept with `finish_reason: "error"`, and a
    /// UI-only `error` message says what happened.
    pub(super) fn end_with_error(&mut self, ctx: &mut Ctx, info: ErrorInfo) -> SessionState {
        self.keep_partial_draft(ctx, "error");
        let mut notice = self.new_message(
            ctx,
            Role::Error,
            crate::message::Content::Text(info.message.clone()),
        );
        let class = serde_json::to_value(info.class).unwrap_or_default();
        let source = serde_json::to_value(info.source).unwrap_or_default();
        notice.mark_error_notice(crate::hidden::ErrorNotice {
            code: &info.code,
            kind: &info.kind,
            retryable: info.retryable,
            class: class.as_str().unwrap_or("other"),
            source: source.as_str().unwrap_or("provider"),
        });
        self.push_message(notice);
        SessionState::Error(info)
    }
}

/// An error of the app's own (a check before sending, a limit of the engine's).
pub(super) fn error(kind: &str, code: &str, message: &str, class: ErrorClass) -> ErrorInfo {
    ErrorInfo {
        kind: kind.into(),
        code: code.into(),
        message: message.into(),
        retryable: false,
        class,
        attempts: 0,
        source: ErrorSource::App,
    }
}

/// A request or stream that failed: the provider's words, or what the app saw of it.
pub(super) fn failed(
    kind: &str,
    failure: AttemptFailure,
    retryable: bool,
    attempts: u32,
) -> ErrorInfo {
    let source = match failure.class {
        ErrorClass::Network => ErrorSource::Connection,
        ErrorClass::Truncated
        | ErrorClass::IdleTimeout
        | ErrorClass::FirstByteTimeout
        | ErrorClass::Malformed => ErrorSource::App,
        _ => ErrorSource::Provider,
    };
    ErrorInfo {
        kind: kind.into(),
        code: failure.code,
        message: failure.message,
        retryable,
        class: failure.class,
        attempts,
        source,
    }
}

pub(super) fn first_byte_timeout_ms(ctx: &Ctx) -> u64 {
    ctx.config
        .first_byte_timeout_ms
        .unwrap_or(ctx.config.stall_timeout_ms)
}

impl AttemptFailure {
    pub(super) fn into_stream_failure(self) -> StreamFailure {
        StreamFailure {
            code: self.code,
            message: self.message,
        }
    }
}

/// Why a failure may move the turn to a fallback model, or `None` when it must not.
pub(super) fn fallback_reason(failure: &AttemptFailure) -> Option<&'static str> {
    let code = failure.code.to_ascii_lowercase();
    if code.contains("model_not_found") || code == "404" || code == "not_found_error" {
        return Some("model_not_found");
    }
    match failure.class {
        ErrorClass::Overloaded => Some("overloaded"),
        ErrorClass::RateLimited => Some("rate_limited"),
        ErrorClass::ServerError => Some("server_error"),
        ErrorClass::RequestTooLarge => Some("context_too_long"),
        _ => None,
    }
}
