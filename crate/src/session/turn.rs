//! The turn loop's provider side (SPEC §2.4, §2.5, §6.5): start a round, feed stream bytes to the
//! decoder and the draft, end the round, retry what may be retried, watch for stalls, abort.

use super::failure::{error, first_byte_timeout_ms};
use super::state::{AttemptFailure, Generating, Resume, SessionState, StreamPhase, Streaming};
use super::{ChatSession, Ctx};
use crate::delta::{DeltaOp, Draft, StreamFailure};
use crate::effect::{Effect, RequestPurpose};
use crate::event::{ErrorInfo, Event};
use crate::message::ChatMessage;
use crate::provider::{DecodeItem, StreamDecoder};
use crate::request::{build_request, RequestInput};
use crate::retry::{self, ErrorClass};
use serde_json::{json, Value};

impl ChatSession {
    pub(super) fn start_turn(&mut self, ctx: &mut Ctx) -> SessionState {
        self.waiting_for_agents.clear();
        self.turn_model = None;
        self.fallbacks_used = 0;
        self.start_round(ctx, 1, 1, None)
    }

    /// The thread this turn's requests are built from: the chat's, on the fallback model once
    /// the preferred one failed (issue 18).
    pub(crate) fn answering_thread(
        &self,
        config: &crate::config::EngineConfig,
    ) -> std::borrow::Cow<'_, crate::thread::ThreadParams> {
        match self.answering_override(config) {
            None => std::borrow::Cow::Borrowed(&self.thread),
            Some((provider, model)) => {
                let mut thread = self.thread.clone();
                thread.provider = provider;
                thread.model = model.to_string();
                std::borrow::Cow::Owned(thread)
            }
        }
    }

    /// Which provider and model this turn asks in place of the chat's own, if any: the fallback
    /// model once the preferred one failed, else Settings' active provider with its configured
    /// model (the chat pinned none). Read without copying the thread: the runtime asks it on
    /// every streamed chunk.
    fn answering_override<'a>(
        &'a self,
        config: &crate::config::EngineConfig,
    ) -> Option<(crate::provider::ProviderKind, &'a str)> {
        match (&self.turn_model, config.active_provider) {
            (Some(model), _) => Some((model.provider, model.model.as_str())),
            (None, Some(provider)) if !self.thread.pinned_model => Some((provider, "")),
            _ => None,
        }
    }

    /// The provider this turn asks (see `answering_thread`).
    pub(crate) fn answering_provider(
        &self,
        config: &crate::config::EngineConfig,
    ) -> crate::provider::ProviderKind {
        self.answering_override(config)
            .map_or(self.thread.provider, |(provider, _)| provider)
    }

    /// The fallback models of this turn: the chat's own list, else Settings'.
    pub(crate) fn fallback_models<'a>(
        &'a self,
        config: &'a crate::config::EngineConfig,
    ) -> &'a [crate::thread::ModelRef] {
        if self.thread.fallback_models.is_empty() {
            &config.fallback_models
        } else {
            &self.thread.fallback_models
        }
    }

    /// The provider kind and model that answer now (every assistant message records them; a
    /// parent's subagent tree shows them).
    pub fn answering_model(&self, config: &crate::config::EngineConfig) -> crate::thread::ModelRef {
        let (provider, model) = self
            .answering_override(config)
            .unwrap_or((self.thread.provider, self.thread.model.as_str()));
        let model = if model.is_empty() {
            config
                .provider_for(provider)
                .map(|p| p.model.clone())
                .unwrap_or_default()
        } else {
            model.to_string()
        };
        crate::thread::ModelRef { provider, model }
    }

    /// Starts a round: compaction first when the history is over `compact_at` (SPEC §5).
    pub(super) fn start_round(
        &mut self,
        ctx: &mut Ctx,
        round: u32,
        attempt: u32,
        last_failure: Option<AttemptFailure>,
    ) -> SessionState {
        if attempt == 1 && self.should_compact(ctx) {
            return self.start_compaction(ctx, Resume::Round(round));
        }
        self.send_round(ctx, round, attempt, last_failure)
    }

    /// Sends the round's request; `last_failure` is why the previous attempt is being retried.
    pub(super) fn send_round(
        &mut self,
        ctx: &mut Ctx,
        round: u32,
        attempt: u32,
        last_failure: Option<AttemptFailure>,
    ) -> SessionState {
        if round > self.thread.max_tool_rounds {
            let message = format!(
                "stopped after {} tool rounds (max_tool_rounds)",
                self.thread.max_tool_rounds
            );
            return self.end_with_error(
                ctx,
                error(
                    "max_tool_rounds",
                    "max_tool_rounds",
                    &message,
                    ErrorClass::Other,
                ),
            );
        }
        let mut request = match self.build_provider_request(ctx) {
            Ok(request) => request,
            Err(info) => return self.end_with_error(ctx, info),
        };
        let Some(decoder) = StreamDecoder::for_kind(request.provider) else {
            let message = format!("no stream decoder for {}", request.provider.name());
            return self.end_with_error(
                ctx,
                error(
                    "llm_error",
                    "unsupported_provider",
                    &message,
                    ErrorClass::Other,
                ),
            );
        };
        self.reported_model = None;
        if let Some(tiers) = request.tiers.take() {
            self.prompt_tiers = Some(crate::event::PromptTiers::of(tiers.tokens, &tiers.changes));
            self.stability = tiers.tracker;
        }
        self.show_left_out(ctx, &request.left_out);
        if self.draft.is_none() {
            let message_id = self.next_message_id(ctx);
            self.draft = Some(Draft::new(message_id.clone()));
            self.draft_chars = 0;
            self.draft_checkpoint_at = ctx.now;
            self.emit(Event::StreamStarted { message_id });
        }
        let request_id = ctx.ids.next("r");
        self.last_strength = Some(request.compression_strength);
        self.effect(Effect::StartRequest {
            chat_id: self.chat_id.clone(),
            request_id: request_id.clone(),
            purpose: RequestPurpose::Chat,
            request,
        });
        self.effect(Effect::WakeAt {
            at_ms: ctx.now + first_byte_timeout_ms(ctx),
        });
        SessionState::Generating(Generating {
            round,
            attempt,
            request_id,
            phase: StreamPhase::Streaming(Box::new(Streaming::new(decoder, ctx.now))),
            last_failure,
            compaction: None,
            overflow_retried: false,
        })
    }

    /// Whether this chat's requests are laid out in stability tiers (seed 002): the agent's,
    /// for every provider kind. A model without tools (plain chat, edit blocks — small and
    /// local models mostly) gets its prompt whole in one system message: SmolLM2 on llama-server
    /// read the tiers' user/"Ok." pairs as a conversation to go on with and answered with the
    /// file list.
    fn tiered(&self, config: &crate::config::EngineConfig) -> bool {
        self.prompt_profile(config) == crate::thread::PromptProfile::Agent
    }

    pub(super) fn build_provider_request(
        &self,
        ctx: &Ctx,
    ) -> Result<crate::request::ProviderRequest, ErrorInfo> {
        let answering = self.answering_thread(ctx.config);
        let Some(provider) = ctx.config.provider_for(answering.provider) else {
            let message = format!(
                "no provider of kind {} is configured",
                answering.provider.name()
            );
            return Err(error(
                "llm_error",
                "request_not_built",
                &message,
                ErrorClass::Other,
            ));
        };
        if !provider.takes_images() {
            if let Some(refusal) = images_for_text_only(&self.messages) {
                return Err(error(
                    "llm_error",
                    "images_not_read",
                    &refusal,
                    ErrorClass::Unsupported,
                ));
            }
        }
        let tools = self.offered_tools(ctx.config);
        let system_prompt = self.system_prompt(ctx.config);
        // Every request says how long the answer may be: what is kept free for it in the window.
        let mut thread = provider.effective(&answering).into_owned();
        thread.max_tokens = Some(self.output_tokens(ctx.config));
        let history = foreign_thinking_dropped(&self.messages, answering.provider);
        build_request(&RequestInput {
            provider,
            thread: &thread,
            system_prompt,
            tools: &tools,
            history: &history[..],
            budget: Some(self.history_budget(ctx, system_prompt, &tools)),
            tiers: self.tiered(ctx.config).then_some(&self.stability),
        })
        .map_err(|e| {
            let crate::history_limit::HistoryLimitError::TooLarge { estimated, budget } = e;
            let sentence =
                self.too_large_sentence(ctx.config, estimated, budget, system_prompt, &tools);
            error(
                "llm_error",
                "history_too_large",
                &sentence,
                ErrorClass::RequestTooLarge,
            )
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
        if streaming.collected.failure.is_some() || streaming.collected.done {
            return SessionState::Generating(g);
        }
        streaming.last_bytes_at = ctx.now;
        streaming.got_bytes = true;
        let decoded = streaming.decoder.feed(bytes);
        self.after_decode(ctx, g, decoded)
    }

    pub(super) fn on_stream_end(&mut self, ctx: &mut Ctx, mut g: Generating) -> SessionState {
        let StreamPhase::Streaming(streaming) = &mut g.phase else {
            return SessionState::Generating(g);
        };
        let decoded = if streaming.collected.failure.is_some() {
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
    pub(super) fn after_decode(
        &mut self,
        ctx: &mut Ctx,
        mut g: Generating,
        decoded: Result<Vec<DecodeItem>, crate::error::StreamDecodeError>,
    ) -> SessionState {
        let items = match decoded {
            Ok(items) => items,
            Err(e) => {
                let failure = StreamFailure {
                    code: e.code().into(),
                    message: e.to_string(),
                };
                let verdict = retry::classify_stream(&failure.code);
                return self.fail_stream(ctx, g, failure, verdict);
            }
        };
        let StreamPhase::Streaming(streaming) = &mut g.phase else {
            return SessionState::Generating(g);
        };
        let ops = streaming.collected.collect(items);
        if g.compaction.is_none() && self.reported_model != streaming.collected.model {
            self.reported_model.clone_from(&streaming.collected.model);
        }
        match g.compaction.as_mut() {
            Some(job) => ops.into_iter().for_each(|op| job.draft.apply_owned(op)),
            None if !ops.is_empty() => {
                self.apply_ops(ops);
                self.checkpoint_draft(ctx.now);
            }
            None => {}
        }
        let failure = streaming.collected.failure.clone();
        match failure {
            Some(failure) => {
                let verdict = retry::classify_stream(&failure.code);
                self.fail_stream(ctx, g, failure, verdict)
            }
            None => SessionState::Generating(g),
        }
    }

    pub(super) fn apply_ops(&mut self, ops: Vec<DeltaOp>) {
        let Some(draft) = self.draft.as_mut() else {
            return;
        };
        for op in &ops {
            draft.apply(op);
            self.draft_chars += op_chars(op);
        }
        let message_id = draft.message_id.clone();
        // Only a reply's stream has ops, so the phase is the reply's (the state itself is out
        // of its slot while `transition` runs).
        let text = !draft.content.is_empty() || !draft.reasoning_content.is_empty();
        let phase = if text { "streaming" } else { "thinking" }.to_string();
        let draft_tokens = self.draft_chars / 4;
        self.emit(Event::StreamDelta {
            message_id,
            ops,
            phase,
            draft_tokens,
        });
    }

    /// The stream ended cleanly: the draft becomes a message; tool calls start the tool step.
    pub(super) fn close_round(&mut self, ctx: &mut Ctx, mut g: Generating) -> SessionState {
        let StreamPhase::Streaming(streaming) = g.phase else {
            return self.send_round(ctx, g.round, g.attempt, g.last_failure);
        };
        if let Some(job) = g.compaction.take() {
            let complete = streaming.collected.completion(streaming.decoder.kind());
            return match complete {
                Some(_) => self.finish_compaction(ctx, *job),
                None => self.compaction_failed(ctx, *job),
            };
        }
        let Some(finish_reason) = streaming.collected.completion(streaming.decoder.kind()) else {
            // A 200 with no bytes at all is what llama-cpp-python's server sends when the prompt
            // exceeds its window (found with a real server): say so, it is the likely cause.
            let message = if streaming.got_bytes {
                "the stream ended before the provider finished"
            } else {
                "the provider answered with an empty stream; a local server does this when the prompt is longer than its context window (lower the window in Settings)"
            };
            let failure = StreamFailure {
                code: "truncated".into(),
                message: message.into(),
            };
            let g = Generating {
                phase: StreamPhase::Streaming(streaming),
                ..g
            };
            let verdict = retry::classify_stream(&failure.code);
            return self.fail_stream(ctx, g, failure, verdict);
        };
        let Some(draft) = self.draft.take() else {
            return SessionState::Idle;
        };
        self.clear_draft_checkpoint();
        let mut message = draft.into_message(Some(finish_reason.clone()), ctx.now);
        if set_aside_cut_calls(&mut message, &finish_reason) {
            // Cut: by the answer's limit, or by the window running out before it?
            let limit = self.output_tokens(ctx.config);
            let written = message.usage.as_ref().and_then(|u| u.completion_tokens);
            let by_window = written.is_some_and(|w| w + 16 < limit);
            message.set_cut_by(if by_window { "window" } else { "output_limit" });
        }
        self.record_model(ctx, &mut message);
        self.emit(Event::StreamFinished {
            message_id: message.message_id.clone(),
            finish_reason,
        });
        let calls = message.tool_calls().to_vec();
        let message_id = message.message_id.clone();
        self.push_message(message);
        if calls.is_empty() {
            if self.should_compact(ctx) {
                return self.start_compaction(ctx, Resume::Idle);
            }
            return SessionState::Idle;
        }
        self.begin_tool_step(ctx, g.round, message_id, calls)
    }

    /// Every assistant message records the provider kind and the model that produced it: the
    /// one the provider said answered (`reported`), else the one asked for.
    pub(super) fn record_model(&self, ctx: &Ctx, message: &mut ChatMessage) {
        let model = self.answering_model(ctx.config);
        let name = self.reported_model.as_deref().unwrap_or(&model.model);
        message.set_answered_by(json!(model.provider), name);
    }

    pub(super) fn on_generating_tick(&mut self, ctx: &mut Ctx, g: Generating) -> SessionState {
        match &g.phase {
            StreamPhase::Retrying { at_ms } if ctx.now >= *at_ms => {
                self.send_round(ctx, g.round, g.attempt + 1, g.last_failure)
            }
            StreamPhase::Retrying { at_ms } => {
                self.effect(Effect::WakeAt { at_ms: *at_ms });
                SessionState::Generating(g)
            }
            StreamPhase::Streaming(s) => {
                let (timeout, code) = if s.got_bytes {
                    (ctx.config.stall_timeout_ms, "stalled")
                } else {
                    (first_byte_timeout_ms(ctx), "first_byte_timeout")
                };
                let deadline = s.last_bytes_at + timeout;
                if ctx.now < deadline {
                    self.effect(Effect::WakeAt { at_ms: deadline });
                    return SessionState::Generating(g);
                }
                let failure = StreamFailure {
                    code: code.into(),
                    message: format!("no stream bytes for {timeout} ms"),
                };
                let verdict = retry::classify_stream(code);
                self.fail_stream(ctx, g, failure, verdict)
            }
        }
    }

    /// Closes the draft: `stream_finished`, and the partial message if anything streamed.
    pub(super) fn keep_partial_draft(&mut self, ctx: &mut Ctx, finish_reason: &str) {
        let Some(draft) = self.draft.take() else {
            return;
        };
        self.clear_draft_checkpoint();
        self.emit(Event::StreamFinished {
            message_id: draft.message_id.clone(),
            finish_reason: finish_reason.into(),
        });
        if draft.is_empty() {
            return;
        }
        let mut message = partial_message(draft, finish_reason, ctx.now);
        self.record_model(ctx, &mut message);
        self.push_message(message);
    }

    pub(super) fn abort_generating(&mut self, ctx: &mut Ctx, g: Generating) {
        self.effect(Effect::CancelRequest {
            request_id: g.request_id,
        });
        self.keep_partial_draft(ctx, "abort");
    }
}

/// A round cut by the token limit may end inside a tool call's arguments. Such a call is never
/// run and never sent back (no `tool_use` without its result, SECURITY D6): it moves to
/// `incomplete_tool_calls`, kept for the UI only.
/// Returns whether the round was cut by a token limit.
pub(super) fn set_aside_cut_calls(message: &mut ChatMessage, finish_reason: &str) -> bool {
    const LENGTH_REASONS: [&str; 4] = ["length", "max_tokens", "max_output_tokens", "MAX_TOKENS"];
    if !LENGTH_REASONS.contains(&finish_reason) {
        return false;
    }
    let Some(calls) = message.tool_calls.take() else {
        return true;
    };
    let (whole, cut): (Vec<_>, Vec<_>) = calls.into_iter().partition(|call| {
        serde_json::from_str::<Value>(&call.function.arguments).is_ok_and(|v| v.is_object())
    });
    if !cut.is_empty() {
        message.set_incomplete_tool_calls(json!(cut));
    }
    message.tool_calls = (!whole.is_empty()).then_some(whole);
    true
}

/// A partial keeps what streamed but never its incomplete tool calls; it is marked stopped.
pub(super) fn partial_message(draft: Draft, finish_reason: &str, now: u64) -> ChatMessage {
    let mut message = draft.into_message(Some(finish_reason.to_string()), now);
    message.tool_calls = None;
    if finish_reason == "abort" {
        message.mark_stopped();
    }
    message
}

/// The refusal before sending images to a model that reads text only (as its provider says).
pub(super) fn images_for_text_only(messages: &[ChatMessage]) -> Option<String> {
    let images: usize = messages.iter().map(|m| m.content.image_count()).sum();
    (images > 0).then(|| {
        let last = messages.iter().rev().find(|m| m.role == crate::message::Role::User);
        let here = last.is_some_and(|m| m.content.image_count() > 0);
        format!(
            "This model reads text only (its server says so), and {} {} {} image{}. Remove {}, or pick a model that reads images.",
            if here { "your message" } else { "the chat" },
            if here { "has" } else { "holds" },
            images,
            if images == 1 { "" } else { "s" },
            if images == 1 { "it" } else { "them" },
        )
    })
}

/// Thinking blocks are signed by the provider that wrote them; another provider refuses them
/// (SPEC §7), so after a fallback across kinds they stay home.
pub(super) fn foreign_thinking_dropped(
    messages: &[ChatMessage],
    provider: crate::provider::ProviderKind,
) -> std::borrow::Cow<'_, [ChatMessage]> {
    let ours = json!(provider);
    let foreign = |m: &ChatMessage| {
        m.thinking_blocks().is_some() && m.answered_by().is_some_and(|p| *p != ours)
    };
    if !messages.iter().any(foreign) {
        return std::borrow::Cow::Borrowed(messages);
    }
    std::borrow::Cow::Owned(
        messages
            .iter()
            .map(|m| {
                let mut m = m.clone();
                if foreign(&m) {
                    m.set_thinking_blocks(None);
                }
                m
            })
            .collect(),
    )
}

/// The characters an op adds to the answer (what `draft_tokens` counts, as the history does).
pub(super) fn op_chars(op: &DeltaOp) -> u64 {
    match op {
        DeltaOp::AppendContent { text } | DeltaOp::AppendReasoning { text } => {
            text.chars().count() as u64
        }
        _ => 0,
    }
}
