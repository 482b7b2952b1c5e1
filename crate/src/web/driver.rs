//! The driver of the browser host: the only place that feeds the engine and performs its effects.
//! An input goes in (`handle`), the step's events go to the page's subscribers and the other tabs
//! (`subscribers`), and each effect is performed by the part that knows how: provider requests
//! (`streams`), workspace and host tools (`tool_calls`), saves (`storage`, then the workspace copy,
//! sync and the chat list hear of it), timers. Parts hand their inputs back through `shared::feed`,
//! which leads here, so no part depends on the driver and the driver depends on them all.

use super::browser::*;
use super::shared::*;
use super::storage::save_trajectory;
use super::streams::{remember_request, start_request};
use super::subscribers::deliver;
use super::tool_calls::{run_host_tool, run_tool};
use crate::engine::{Effect, EngineConfig, Input, Step};

/// Feeds one input to the engine, then delivers its events and performs its effects.
pub(super) fn handle(shared: &Handle, input: Input) -> Step {
    if shared.borrow().closed {
        return Step::default();
    }
    let step = shared.borrow_mut().engine.handle(now(), input);
    run_step(shared, step)
}

/// New settings for the engine: what they change (a queued message now sendable, say) goes on
/// like any step.
pub(super) fn reconfigure(shared: &Handle, config: EngineConfig) {
    let step = shared.borrow_mut().engine.reconfigure(now(), config);
    run_step(shared, step);
}

/// Delivers a step's events and performs its effects.
/// The effects are taken, not copied: a request's body is the whole history sent, and each copy
/// alive at once raised the wasm memory's high-water mark, which it never gives back (issue 41).
fn run_step(shared: &Handle, mut step: Step) -> Step {
    deliver(shared, &step);
    for effect in std::mem::take(&mut step.effects) {
        perform(shared, effect);
    }
    step
}

fn perform(shared: &Handle, effect: Effect) {
    match effect {
        Effect::StartRequest {
            chat_id,
            request_id,
            mut request,
            ..
        } => {
            // The body crosses to JS once, for the fetch, a piece at a time, each dropped once
            // it has crossed; the chat's last request (what `lastRequest` shows) keeps the JS
            // string.
            let body = std::mem::take(&mut request.body);
            let sent = super::crossing::joined(body.into_pieces());
            remember_request(shared, &chat_id, &request, sent.clone());
            start_request(shared, request_id, request, sent)
        }
        Effect::CancelRequest { request_id } => {
            if let Some(controller) = shared.borrow_mut().requests.remove(&request_id) {
                controller.abort();
            }
        }
        Effect::RunTool {
            chat_id,
            tool_call_id,
            name,
            args,
        } => run_tool(shared, chat_id, tool_call_id, name, args),
        Effect::RunHostTool {
            chat_id,
            tool_call_id,
            name,
            args,
        } => run_host_tool(shared, &chat_id, &tool_call_id, &name, &args),
        Effect::CancelTool { tool_call_id, .. } => {
            if let Some(controller) = shared.borrow_mut().tools.remove(&tool_call_id) {
                controller.abort();
            }
        }
        Effect::SaveTrajectory { save } => save_trajectory(shared, save, after_save),
        Effect::WakeAt { at_ms } => wake_at(shared, at_ms),
    }
}

/// A save that changed the chat itself was acknowledged: the workspace copy follows it, sync
/// pushes it, the chat list shows it.
fn after_save(shared: &Handle, chat_id: &str) {
    super::chat_files::saved(shared, chat_id);
    super::sync::local_change(shared);
    let record = shared.borrow().chats.get(chat_id).cloned();
    if let Some(record) = record {
        super::chat_list::changed(shared, &[record], &[]);
    }
}

fn wake_at(shared: &Handle, at_ms: u64) {
    let shared = shared.clone();
    let delay = at_ms.saturating_sub(now()).min(i32::MAX as u64) as i32;
    let delay = u32::try_from(delay).unwrap_or(0);
    gloo_timers::callback::Timeout::new(delay, move || {
        handle(&shared, Input::Tick {});
    })
    .forget();
}
