//! The turn loop's provider side (SPEC §2.4, §2.5, §6.5): start a round, feed stream bytes to the
//! decoder and the draft, end the round, retry what may be retried, watch for stalls, abort.

use super::state::{ErrorInfo, Generating, SessionState, StreamPhase, Streaming};
use super::{ChatSession, Ctx, RequestFailure};
use crate::delta::{DeltaOp, Draft, StreamFailure};
use crate::engine::{Effect, RequestPurpose};
use crate::event::Event;
use crate::message::{ChatMessage, Role};
use crate::provider::{DecodeItem, StreamDecoder};
use crate::request::{build_request, RequestInput};
use crate::tools::engine_tool_specs;
use serde_json::{json, Value};

/// At most this many attempts of one request (SPEC §6.5).
pub const MAX_ATTEMPTS: u32 = 4;
const RETRYABLE_STATUSES: [u16; 9] = [408, 409, 429, 500, 501, 502, 503, 504, 529];
/// Error types that no wait will fix: retrying only burns attempts (SECURITY D5).
const QUOTA_TYPES: [&str; 4] = [
    "insufficient_quota",
    "billing_error",
    "enforced_spend_limit_reached",
    "quota_exceeded",
];
const RETRYABLE_TYPES: [&str; 3] = ["overloaded_error", "server_error", "rate_limit_error"];

impl ChatSession {
    pub(super) fn start_turn(&mut self, ctx: &mut Ctx) -> SessionState {
        self.start_round(ctx, 1, 1)
    }

    pub(super) fn start_round(&mut self, ctx: &mut Ctx, round: u32, attempt: u32) -> SessionState {
        if round > self.thread.max_tool_rounds {
            let message = format!(
                "stopped after {} tool rounds (max_tool_rounds)",
                self.thread.max_tool_rounds
            );
            return self.end_with_error(
                ctx,
                error("max_tool_rounds", "max_tool_rounds", &message, false),
            );
        }
        let request = match self.build_provider_request(ctx) {
            Ok(request) => request,
            Err(message) => {
                return self.end_with_error(
                    ctx,
                    error("llm_error", "request_not_built", &message, false),
                )
            }
        };
        let Some(decoder) = StreamDecoder::for_kind(request.provider) else {
            let message = format!("no stream decoder for {}", request.provider.name());
            return self.end_with_error(
                ctx,
                error("llm_error", "unsupported_provider", &message, false),
            );
        };
        if self.draft.is_none() {
            let message_id = ctx.ids.next("m");
            self.draft = Some(Draft::new(message_id.clone()));
            self.emit(Event::StreamStarted { message_id });
        }
        let request_id = ctx.ids.next("r");
        self.effect(Effect::StartRequest {
            chat_id: self.chat_id.clone(),
            request_id: request_id.clone(),
            purpose: RequestPurpose::Chat,
            request,
        });
        self.effect(Effect::WakeAt {
            at_ms: ctx.now + ctx.config.stall_timeout_ms,
        });
        let streaming = Streaming {
            decoder,
            last_bytes_at: ctx.now,
            visible: false,
            finish_reason: None,
            failure: None,
            done: false,
        };
        SessionState::Generating(Generating {
            round,
            attempt,
            request_id,
            phase: StreamPhase::Streaming(Box::new(streaming)),
        })
    }

    fn build_provider_request(&self, ctx: &Ctx) -> Result<crate::request::ProviderRequest, String> {
        let provider = ctx
            .config
            .provider_for(self.thread.provider)
            .ok_or_else(|| {
                format!(
                    "no provider of kind {} is configured",
                    self.thread.provider.name()
                )
            })?;
        let mut tools = engine_tool_specs();
        tools.extend(ctx.config.workspace_tools.iter().cloned());
        tools.extend(ctx.config.host_tools.iter().cloned());
        build_request(&RequestInput {
            provider,
            thread: &self.thread,
            system_prompt: ctx.config.system_prompt.as_deref(),
            tools: &tools,
            history: &self.messages,
        })
    }

    pub(super) fn on_stream_bytes(
        &mut self,
        ctx: &mut Ctx,
        mut g: Generating,
        bytes: &[u8],
    ) -> SessionState {
        let StreamPhase::Streaming(streaming) = &mut g.phase else {
            return SessionState::Generating(g);
        };
        if streaming.failure.is_some() || streaming.done {
            return SessionState::Generating(g);
        }
        streaming.last_bytes_at = ctx.now;
        let decoded = streaming.decoder.feed(bytes);
        self.after_decode(ctx, g, decoded)
    }

    pub(super) fn on_stream_end(&mut self, ctx: &mut Ctx, mut g: Generating) -> SessionState {
        let StreamPhase::Streaming(streaming) = &mut g.phase else {
            return SessionState::Generating(g);
        };
        let decoded = if streaming.failure.is_some() {
            Ok(Vec::new())
        } else {
            streaming.decoder.finish()
        };
        match self.after_decode(ctx, g, decoded) {
            SessionState::Generating(g) => self.close_round(ctx, g),
            other => other,
        }
    }

    /// Applies decoded items; a decode error or a provider failure ends or retries the round.
    fn after_decode(
        &mut self,
        ctx: &mut Ctx,
        mut g: Generating,
        decoded: Result<Vec<DecodeItem>, crate::error::StreamDecodeError>,
    ) -> SessionState {
        let items = match decoded {
            Ok(items) => items,
            Err(e) => {
                return self.fail_stream(
                    ctx,
                    g,
                    StreamFailure {
                        code: e.code().into(),
                        message: e.to_string(),
                    },
                    false,
                )
            }
        };
        let StreamPhase::Streaming(streaming) = &mut g.phase else {
            return SessionState::Generating(g);
        };
        let ops = collect_ops(items, streaming);
        if !ops.is_empty() {
            self.apply_ops(ops);
        }
        let failure = streaming.failure.clone();
        match failure {
            Some(failure) => {
                let retryable = RETRYABLE_TYPES.contains(&failure.code.as_str());
                self.fail_stream(ctx, g, failure, retryable)
            }
            None => SessionState::Generating(g),
        }
    }

    fn apply_ops(&mut self, ops: Vec<DeltaOp>) {
        let Some(draft) = self.draft.as_mut() else {
            return;
        };
        for op in &ops {
            draft.apply(op);
        }
        let message_id = draft.message_id.clone();
        self.emit(Event::StreamDelta { message_id, ops });
    }

    /// The stream ended cleanly: the draft becomes a message; tool calls start the tool step.
    fn close_round(&mut self, ctx: &mut Ctx, g: Generating) -> SessionState {
        let StreamPhase::Streaming(streaming) = g.phase else {
            return self.start_round(ctx, g.round, g.attempt);
        };
        let Some(finish_reason) = streaming
            .finish_reason
            .clone()
            .or(streaming.done.then(|| "stop".to_string()))
        else {
            let failure = StreamFailure {
                code: "truncated".into(),
                message: "the stream ended before the provider finished".into(),
            };
            let g = Generating {
                phase: StreamPhase::Streaming(streaming),
                ..g
            };
            return self.fail_stream(ctx, g, failure, false);
        };
        let Some(draft) = self.draft.take() else {
            return SessionState::Idle;
        };
        let message = draft.into_message(Some(finish_reason.clone()), ctx.now);
        self.emit(Event::StreamFinished {
            message_id: message.message_id.clone(),
            finish_reason,
        });
        let calls = message.tool_calls().to_vec();
        let message_id = message.message_id.clone();
        self.push_message(message);
        if calls.is_empty() {
            return SessionState::Idle;
        }
        self.begin_tool_step(ctx, g.round, message_id, calls)
    }

    pub(super) fn on_request_failed(
        &mut self,
        ctx: &mut Ctx,
        g: Generating,
        failure: RequestFailure,
    ) -> SessionState {
        let visible = matches!(&g.phase, StreamPhase::Streaming(s) if s.visible);
        let code = failure
            .error_type
            .clone()
            .or(failure.status.map(|s| s.to_string()))
            .unwrap_or_else(|| "network_error".into());
        let quota = failure
            .error_type
            .as_deref()
            .is_some_and(|t| QUOTA_TYPES.contains(&t));
        let retryable = !quota
            && (failure
                .status
                .is_some_and(|s| RETRYABLE_STATUSES.contains(&s))
                || failure
                    .error_type
                    .as_deref()
                    .is_some_and(|t| RETRYABLE_TYPES.contains(&t)));
        if visible {
            let stream_failure = StreamFailure {
                code,
                message: failure.message,
            };
            return self.fail_stream(ctx, g, stream_failure, retryable);
        }
        if retryable && g.attempt < MAX_ATTEMPTS {
            return self.schedule_retry(ctx, g, failure.retry_after_ms);
        }
        self.end_with_error(ctx, error("llm_error", &code, &failure.message, retryable))
    }

    /// A stream broke: retried when nothing reached the user, else the partial is kept.
    fn fail_stream(
        &mut self,
        ctx: &mut Ctx,
        g: Generating,
        failure: StreamFailure,
        retryable: bool,
    ) -> SessionState {
        let visible = matches!(&g.phase, StreamPhase::Streaming(s) if s.visible);
        if !visible && retryable && g.attempt < MAX_ATTEMPTS {
            return self.schedule_retry(ctx, g, None);
        }
        self.effect(Effect::CancelRequest {
            request_id: g.request_id.clone(),
        });
        if let Some(draft) = self.draft.as_mut() {
            draft.extra.insert(
                "error".into(),
                json!({"code": failure.code, "message": failure.message}),
            );
        }
        self.end_with_error(
            ctx,
            error("stream_error", &failure.code, &failure.message, retryable),
        )
    }

    fn schedule_retry(
        &mut self,
        ctx: &mut Ctx,
        g: Generating,
        retry_after_ms: Option<u64>,
    ) -> SessionState {
        self.effect(Effect::CancelRequest {
            request_id: g.request_id.clone(),
        });
        let at_ms =
            ctx.now + backoff_ms(ctx.config.retry_seed, g.attempt).max(retry_after_ms.unwrap_or(0));
        self.effect(Effect::WakeAt { at_ms });
        SessionState::Generating(Generating {
            phase: StreamPhase::Retrying { at_ms },
            ..g
        })
    }

    pub(super) fn on_generating_tick(&mut self, ctx: &mut Ctx, g: Generating) -> SessionState {
        match &g.phase {
            StreamPhase::Retrying { at_ms } if ctx.now >= *at_ms => {
                self.start_round(ctx, g.round, g.attempt + 1)
            }
            StreamPhase::Retrying { at_ms } => {
                self.effect(Effect::WakeAt { at_ms: *at_ms });
                SessionState::Generating(g)
            }
            StreamPhase::Streaming(s) => {
                let deadline = s.last_bytes_at + ctx.config.stall_timeout_ms;
                if ctx.now < deadline {
                    self.effect(Effect::WakeAt { at_ms: deadline });
                    return SessionState::Generating(g);
                }
                let message = format!("no stream bytes for {} ms", ctx.config.stall_timeout_ms);
                self.fail_stream(
                    ctx,
                    g,
                    StreamFailure {
                        code: "stalled".into(),
                        message,
                    },
                    false,
                )
            }
        }
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
        notice.extra.insert("ui_only".into(), Value::Bool(true));
        notice.extra.insert("code".into(), info.code.clone().into());
        notice.extra.insert("kind".into(), info.kind.clone().into());
        notice
            .extra
            .insert("retryable".into(), info.retryable.into());
        self.push_message(notice);
        SessionState::Error(info)
    }

    /// Closes the draft: `stream_finished`, and the partial message if anything streamed.
    pub(super) fn keep_partial_draft(&mut self, ctx: &mut Ctx, finish_reason: &str) {
        let Some(draft) = self.draft.take() else {
            return;
        };
        self.emit(Event::StreamFinished {
            message_id: draft.message_id.clone(),
            finish_reason: finish_reason.into(),
        });
        if draft.is_empty() {
            return;
        }
        let message = partial_message(draft, finish_reason, ctx.now);
        self.push_message(message);
    }

    pub(super) fn abort_generating(&mut self, ctx: &mut Ctx, g: Generating) {
        self.effect(Effect::CancelRequest {
            request_id: g.request_id,
        });
        self.keep_partial_draft(ctx, "abort");
    }
}

/// A partial keeps what streamed but never its incomplete tool calls; it is marked stopped.
fn partial_message(draft: Draft, finish_reason: &str, now: u64) -> ChatMessage {
    let mut message = draft.into_message(Some(finish_reason.to_string()), now);
    message.tool_calls = None;
    if finish_reason == "abort" {
        message.extra.insert("stopped".into(), Value::Bool(true));
    }
    message
}

/// Turns decoder items into ops (adjacent appends batched) and records the rest on `streaming`.
fn collect_ops(items: Vec<DecodeItem>, streaming: &mut Streaming) -> Vec<DeltaOp> {
    let mut ops: Vec<DeltaOp> = Vec::new();
    for item in items {
        match item {
            DecodeItem::Op(op) => {
                streaming.visible |= op.is_visible_content();
                push_batched(&mut ops, op);
            }
            DecodeItem::Finish(reason) => streaming.finish_reason = Some(reason),
            DecodeItem::Done => streaming.done = true,
            DecodeItem::Failure(failure) => {
                streaming.failure = Some(failure);
                break;
            }
        }
    }
    ops
}

fn push_batched(ops: &mut Vec<DeltaOp>, op: DeltaOp) {
    match (ops.last_mut(), op) {
        (Some(DeltaOp::AppendContent { text }), DeltaOp::AppendContent { text: more }) => {
            text.push_str(&more)
        }
        (Some(DeltaOp::AppendReasoning { text }), DeltaOp::AppendReasoning { text: more }) => {
            text.push_str(&more)
        }
        (Some(last @ DeltaOp::SetToolCalls { .. }), op @ DeltaOp::SetToolCalls { .. }) => {
            *last = op
        }
        (_, op) => ops.push(op),
    }
}

fn error(kind: &str, code: &str, message: &str, retryable: bool) -> ErrorInfo {
    ErrorInfo {
        kind: kind.into(),
        code: code.into(),
        message: message.into(),
        retryable,
    }
}

/// Exponential backoff from 1 s (×2 per attempt), jittered ±20% by the host's seed.
pub fn backoff_ms(seed: u64, attempt: u32) -> u64 {
    let base = 1000u64.saturating_mul(1 << attempt.saturating_sub(1).min(16));
    let mut x = seed ^ (u64::from(attempt).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    let jitter_permille = (x % 401) as i64 - 200; // −200‰ … +200‰
    (base as i64 + base as i64 * jitter_permille / 1000).max(1) as u64
}
