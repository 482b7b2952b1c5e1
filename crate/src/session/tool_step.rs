//! The turn loop's tool side (SPEC §8): classify the round's calls, pause for approval, run them
//! (engine tools inline, workspace tools by effect, host tools by `ide_tool_required`), add the
//! results in call order, then inject steering messages and start the next round. Also `abort`.

use super::state::{Paused, SessionState};
use super::{ChatSession, Ctx};
use crate::effect::Effect;
use crate::event::{Event, PauseReason};
use crate::message::{ChatMessage, Content, Role, ToolCall};
use crate::plan;
use crate::thread::ToolRule;
use crate::tools::AgentRequest;
use crate::tools::{
    parse_arguments, run_engine_tool, EngineTool, StepStop, ToolKind, ToolOutcome, ToolStep,
    DENIED_BY_USER, MAX_PARALLEL_TOOLS, SKIPPED_AFTER_REJECT, WORKSPACE_TOOLS,
};
use serde_json::{json, Value};

impl ChatSession {
    fn tool_kind(&self, ctx: &Ctx, name: &str) -> Option<ToolKind> {
        if let Some(tool) = EngineTool::from_name(name) {
            return Some(ToolKind::Engine(tool));
        }
        if ctx.config.host_tools.iter().any(|t| t.name == name) {
            return Some(ToolKind::Host);
        }
        let workspace = WORKSPACE_TOOLS.contains(&name)
            || ctx.config.workspace_tools.iter().any(|t| t.name == name);
        workspace.then_some(ToolKind::Workspace)
    }

    pub(super) fn begin_tool_step(
        &mut self,
        ctx: &mut Ctx,
        round: u32,
        message_id: String,
        calls: Vec<ToolCall>,
    ) -> SessionState {
        let mut step = ToolStep {
            round,
            assistant_message_id: message_id,
            calls: calls.clone(),
            ..ToolStep::default()
        };
        let mut reasons = Vec::new();
        for call in &calls {
            self.classify_call(ctx, &mut step, &mut reasons, call);
        }
        if reasons.is_empty() {
            return self.dispatch(ctx, step);
        }
        self.emit(Event::PauseRequired {
            reasons: reasons.clone(),
        });
        SessionState::Paused(Paused { step, reasons })
    }

    fn classify_call(
        &mut self,
        ctx: &mut Ctx,
        step: &mut ToolStep,
        reasons: &mut Vec<PauseReason>,
        call: &ToolCall,
    ) {
        let args = match parse_arguments(call) {
            Ok(args) => args,
            Err(message) => return step.record(&call.id, ToolOutcome::failed(message)),
        };
        let Some(kind) = self.tool_kind(ctx, &call.function.name) else {
            return step.record(
                &call.id,
                ToolOutcome::failed(format!("Unknown tool `{}`.", call.function.name)),
            );
        };
        if !matches!(kind, ToolKind::Engine(_)) && !self.thread.allows_tool(&call.function.name) {
            return step.record(
                &call.id,
                ToolOutcome::failed(format!(
                    "`{}` is not among the tools this agent was given.",
                    call.function.name
                )),
            );
        }
        let rule = match kind {
            ToolKind::Engine(_) => ToolRule::Auto,
            _ => {
                let name = &call.function.name;
                let read_only = ctx
                    .config
                    .workspace_tools
                    .iter()
                    .any(|t| &t.name == name && t.is_read_only());
                self.thread
                    .rule_for(&ctx.config.tool_rules, name, read_only)
            }
        };
        if !matches!(kind, ToolKind::Engine(_)) && rule == ToolRule::Auto {
            self.emit(Event::ToolDecision {
                tool_call_id: call.id.clone(),
                tool_name: call.function.name.clone(),
                decision: "approved".into(),
                source: "policy".into(),
            });
        }
        match rule {
            ToolRule::Auto => step.to_run.push_back(call.id.clone()),
            ToolRule::Deny => {
                step.record(
                    &call.id,
                    ToolOutcome::failed(crate::tools::DENIED_BY_POLICY),
                );
                step.hidden.push(decision_event(
                    self.next_message_id(ctx),
                    ctx.now,
                    call,
                    "denied",
                    "policy",
                ));
            }
            ToolRule::Ask => {
                step.awaiting_approval.insert(call.id.clone());
                reasons.push(PauseReason {
                    tool_call_id: call.id.clone(),
                    tool_name: call.function.name.clone(),
                    args,
                    rule: "ask".into(),
                });
            }
        }
    }

    /// Starts what may start now (engine tools inline, at most 8 workspace tools at once, host
    /// tools announced) and moves on when every call has its result.
    fn dispatch(&mut self, ctx: &mut Ctx, mut step: ToolStep) -> SessionState {
        while let Some(id) = step.to_run.front().cloned() {
            let Some(call) = step.call(&id).cloned() else {
                step.to_run.pop_front();
                continue;
            };
            let args = parse_arguments(&call).unwrap_or_else(|_| json!({}));
            match self.tool_kind(ctx, &call.function.name) {
                Some(ToolKind::Engine(
                    tool @ (EngineTool::SetPlan | EngineTool::UpdatePlan | EngineTool::GetPlan),
                )) => {
                    let outcome = self.run_plan_tool(ctx, tool, &args, &mut step.hidden);
                    step.record(&id, outcome);
                }
                Some(ToolKind::Engine(
                    tool @ (EngineTool::SpawnAgent | EngineTool::WaitAgents),
                )) => {
                    let request = match tool {
                        EngineTool::SpawnAgent => AgentRequest::spawn(&id, &args),
                        _ => AgentRequest::wait(&id, &args),
                    };
                    match request {
                        Ok(request) => {
                            step.awaiting_agents.insert(id.clone());
                            self.agent_requests.push(request);
                        }
                        Err(reason) => step.record(&id, ToolOutcome::failed(reason)),
                    }
                }
                Some(ToolKind::Engine(tool)) => {
                    let (outcome, stop) = run_engine_tool(tool, &args);
                    step.record(&id, outcome);
                    step.stop = step.stop.or(stop);
                }
                Some(ToolKind::Host) => {
                    step.waiting_host.insert(id.clone());
                    self.emit(Event::IdeToolRequired {
                        tool_call_id: id.clone(),
                        tool_name: call.function.name.clone(),
                        args: args.clone(),
                    });
                    self.effect(Effect::RunHostTool {
                        chat_id: self.chat_id.clone(),
                        tool_call_id: id.clone(),
                        name: call.function.name.clone(),
                        args,
                    });
                }
                Some(ToolKind::Workspace) if step.in_flight.len() >= MAX_PARALLEL_TOOLS => break,
                Some(ToolKind::Workspace) => {
                    step.in_flight.insert(id.clone());
                    self.effect(Effect::RunTool {
                        chat_id: self.chat_id.clone(),
                        tool_call_id: id.clone(),
                        name: call.function.name.clone(),
                        args,
                    });
                }
                None => step.record(&id, ToolOutcome::failed("Unknown tool.")),
            }
            step.to_run.pop_front();
        }
        self.after_tool_progress(ctx, step)
    }

    /// Plan tools read the history and the step's own pending messages (a `set_plan` then an
    /// `update_plan` in one step work); what they add waits in `hidden`, after the results.
    fn run_plan_tool(
        &self,
        ctx: &mut Ctx,
        tool: EngineTool,
        args: &Value,
        hidden: &mut Vec<ChatMessage>,
    ) -> ToolOutcome {
        let existing = plan::current_plan(&self.messages, hidden);
        let outcome = match tool {
            EngineTool::SetPlan => plan::set_plan(
                args,
                existing.as_ref(),
                &self.thread.mode,
                self.next_message_id(ctx),
                ctx.now,
            ),
            EngineTool::UpdatePlan => {
                plan::update_plan(args, existing.as_ref(), self.next_message_id(ctx), ctx.now)
            }
            _ => plan::get_plan(existing.as_ref()),
        };
        hidden.extend(outcome.message);
        match outcome.result {
            Ok(text) => ToolOutcome::ok(text),
            Err(reason) => ToolOutcome::failed(reason),
        }
    }

    fn after_tool_progress(&mut self, ctx: &mut Ctx, step: ToolStep) -> SessionState {
        if step.is_complete() {
            return self.complete_step(ctx, step);
        }
        if step.waiting_host.is_empty() {
            SessionState::ExecutingTools(step)
        } else {
            SessionState::WaitingIde(step)
        }
    }

    pub(super) fn on_tool_result(
        &mut self,
        ctx: &mut Ctx,
        mut step: ToolStep,
        id: &str,
        outcome: ToolOutcome,
    ) -> SessionState {
        if !step.in_flight.contains(id)
            && !step.waiting_host.contains(id)
            && !step.awaiting_agents.contains(id)
        {
            return self.after_tool_progress(ctx, step);
        }
        step.record(id, outcome);
        self.dispatch(ctx, step)
    }

    /// All results are in: add them in call order, then the step's hidden messages; then the
    /// turn ends, waits, or goes on with the next round (after any "steer now" message).
    fn complete_step(&mut self, ctx: &mut Ctx, step: ToolStep) -> SessionState {
        self.add_step_results(ctx, &step);
        match step.stop {
            Some(StepStop::Completed) => SessionState::Completed,
            Some(StepStop::AskUser) => SessionState::WaitingUserInput,
            Some(StepStop::WaitAgents) => {
                self.waiting_for_agents.clone_from(&step.waiting_agents);
                SessionState::WaitingUserInput
            }
            None => {
                self.inject_priority_messages(ctx);
                self.start_round(ctx, step.round + 1, 1, None)
            }
        }
    }

    fn add_step_results(&mut self, ctx: &mut Ctx, step: &ToolStep) {
        for call in &step.calls {
            if let Some(outcome) = step.results.get(&call.id) {
                let mut message = ChatMessage::tool_result(
                    self.next_message_id(ctx),
                    &call.id,
                    &outcome.content,
                    outcome.failed,
                );
                if !outcome.parts.is_empty() {
                    message.content = tool_result_parts(&outcome.content, &outcome.parts);
                }
                message.created_at_ms = Some(ctx.now);
                if let Some(data) = &outcome.data {
                    message.set_tool_data(data.clone());
                }
                self.push_message(message);
            }
        }
        for hidden in &step.hidden {
            self.push_message(hidden.clone());
        }
        self.merge_session_metadata(step);
    }

    /// SPEC §8.3: a tool's `session_metadata` is merged into the thread, in call order — but
    /// never the params that steer the agent (its tool rules, provider, model, prompt, limits,
    /// links): a tool must not be able to approve itself or change who answers.
    fn merge_session_metadata(&mut self, step: &ToolStep) {
        let mut patch = serde_json::Map::new();
        for call in &step.calls {
            let metadata = step
                .results
                .get(&call.id)
                .and_then(|outcome| outcome.session_metadata.as_ref());
            for (key, value) in metadata.into_iter().flatten() {
                if !crate::thread::STEERING_PARAMS.contains(&key.as_str()) {
                    patch.insert(key.clone(), value.clone());
                }
            }
        }
        if patch.is_empty() {
            return;
        }
        if let Ok(next) = self.thread.patched(&patch) {
            self.patch_thread(patch, next);
        }
    }

    /// `wait_agents` with subagents still working: the call is answered, and once the round's
    /// other calls are in the turn waits for them (seed 000: `WaitingUserInput`).
    pub(super) fn on_agents_pending(
        &mut self,
        ctx: &mut Ctx,
        mut step: ToolStep,
        id: &str,
        content: String,
        agents: Vec<String>,
    ) -> SessionState {
        if !step.awaiting_agents.contains(id) {
            return self.after_tool_progress(ctx, step);
        }
        step.record(id, ToolOutcome::ok(content));
        step.stop = Some(StepStop::WaitAgents);
        step.waiting_agents = agents;
        self.after_tool_progress(ctx, step)
    }

    /// The subagents waited for are over: their answers join as a message and the turn goes on.
    pub(super) fn on_agents_answered(&mut self, ctx: &mut Ctx, text: String) -> SessionState {
        self.waiting_for_agents.clear();
        let mut message = self.new_message(ctx, Role::User, Content::Text(text));
        message.mark_subagent_answers();
        self.push_message(message);
        self.start_turn(ctx)
    }

    /// The "AI interrupt": priority user messages join at a safe point, after the results.
    fn inject_priority_messages(&mut self, ctx: &mut Ctx) {
        for envelope in self.queue.pop_priority_user_messages() {
            self.add_user_message(ctx, envelope.command);
        }
    }

    pub(super) fn on_approve(
        &mut self,
        ctx: &mut Ctx,
        mut paused: Paused,
        ids: &[String],
    ) -> SessionState {
        for id in ids {
            if paused.step.awaiting_approval.remove(id) {
                if let Some(call) = paused.step.call(id).cloned() {
                    paused.step.hidden.push(decision_event(
                        self.next_message_id(ctx),
                        ctx.now,
                        &call,
                        "approved",
                        "user",
                    ));
                }
            }
        }
        paused
            .reasons
            .retain(|r| paused.step.awaiting_approval.contains(&r.tool_call_id));
        if !paused.step.awaiting_approval.is_empty() {
            return SessionState::Paused(paused);
        }
        self.emit(Event::PauseCleared {});
        let mut step = paused.step;
        // Approved calls run in call order, after the auto ones already queued.
        let approved: Vec<String> = step
            .calls
            .iter()
            .filter(|c| !step.results.contains_key(&c.id) && !step.to_run.contains(&c.id))
            .map(|c| c.id.clone())
            .collect();
        step.to_run.extend(approved);
        self.dispatch(ctx, step)
    }

    /// A rejection ends the turn: rejected calls are denied, every other open call is skipped.
    pub(super) fn on_reject(
        &mut self,
        ctx: &mut Ctx,
        paused: Paused,
        ids: &[String],
        reason: Option<&str>,
    ) -> SessionState {
        let mut step = paused.step;
        // The user's reason goes to the model with the refusal: it is the point of giving one.
        let denied = match reason.map(str::trim).filter(|r| !r.is_empty()) {
            Some(reason) => format!("{DENIED_BY_USER} The user said: {reason}"),
            None => DENIED_BY_USER.to_string(),
        };
        for id in ids {
            if step.awaiting_approval.contains(id) {
                step.record(id, ToolOutcome::failed(denied.clone()));
                if let Some(call) = step.call(id).cloned() {
                    step.hidden.push(decision_event(
                        self.next_message_id(ctx),
                        ctx.now,
                        &call,
                        "rejected",
                        "user",
                    ));
                }
            }
        }
        step.settle_remaining(&ToolOutcome::failed(SKIPPED_AFTER_REJECT));
        self.emit(Event::PauseCleared {});
        self.add_step_results(ctx, &step);
        SessionState::Idle
    }

    /// Abort works in every state and at once (SPEC §2.5).
    pub(super) fn abort(&mut self, ctx: &mut Ctx, state: SessionState) -> SessionState {
        self.hold_queue = true;
        match state {
            SessionState::Generating(g) => self.abort_generating(ctx, g),
            SessionState::ExecutingTools(step) | SessionState::WaitingIde(step) => {
                self.abort_step(ctx, step)
            }
            SessionState::Paused(paused) => {
                self.emit(Event::PauseCleared {});
                self.abort_step(ctx, paused.step);
            }
            SessionState::Idle | SessionState::Completed => return state,
            SessionState::WaitingUserInput | SessionState::Error(_) => {}
        }
        SessionState::Idle
    }

    /// Tools in flight are cancelled and their results discarded; results already in are kept;
    /// the calls left without a result leave what is sent (a provider needs a result for each)
    /// but stay on the message for the person (`incomplete_tool_calls`: shown as stopped, with
    /// their arguments); the message is marked stopped.
    fn abort_step(&mut self, ctx: &mut Ctx, mut step: ToolStep) {
        for id in std::mem::take(&mut step.in_flight) {
            self.effect(Effect::CancelTool {
                chat_id: self.chat_id.clone(),
                tool_call_id: id,
            });
        }
        let (answered, stopped): (Vec<_>, Vec<_>) = std::mem::take(&mut step.calls)
            .into_iter()
            .partition(|call| step.results.contains_key(&call.id));
        step.calls = answered;
        if let Some(index) = self.message_index(&step.assistant_message_id) {
            let mut message = self.messages[index].clone();
            if !stopped.is_empty() {
                message.set_incomplete_tool_calls(json!(stopped));
            }
            message.tool_calls = (!step.calls.is_empty()).then(|| step.calls.clone());
            message.mark_stopped();
            self.replace_message(index, message);
        }
        self.add_step_results(ctx, &step);
    }
}

/// An `event(tool_decision)` recording who decided what about a call (SPEC §8.4).
fn decision_event(id: String, now: u64, call: &ToolCall, decision: &str, by: &str) -> ChatMessage {
    let mut message = ChatMessage::new(id, Role::Event, Content::Text(String::new()));
    message.created_at_ms = Some(now);
    let payload =
        json!({"tool_call_id": call.id, "tool_name": call.function.name, "decision": decision});
    message.set_event("tool_decision", by, payload);
    message
}

/// A result with images: its text first, then the image parts (anything else is left out).
fn tool_result_parts(text: &str, parts: &[Value]) -> Content {
    let mut all = vec![json!({"type": "text", "text": text})];
    all.extend(
        parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("image_url"))
            .cloned(),
    );
    Content::Parts(all)
}
