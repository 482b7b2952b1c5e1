//! Stage 3 of the history limit, which always runs: tool calls and their results paired as every
//! provider requires (a call keeps its place only with its result, right after it, once).

use super::*;

/// Repairs tool-call pairing on the copy; returns how many things it changed. Calls whose
/// arguments are not a JSON object are described in a `cd_instruction` instead (a provider
/// rejects them); a call keeps its place only if it has a result; each result goes right after
/// its call; one result per call; results without a call are dropped.
pub fn fix_tool_calls(messages: Vec<ChatMessage>) -> (Vec<ChatMessage>, usize) {
    let (fixed, _, changes) =
        fix_tool_call_list(messages.into_iter().map(LimitedMessage::changed).collect());
    (
        fixed.into_iter().map(LimitedMessage::into_owned).collect(),
        changes,
    )
}

/// Where stage 3 puts a message of its input.
pub(super) enum Placed {
    /// As it is.
    Kept(usize),
    /// An assistant message with only the calls at these positions (the others unanswered or
    /// repeated).
    WithCalls(usize, Vec<usize>),
}

/// Stage 3's order for the list, worked out on borrowed ids (no id is copied or moved), and
/// how many repairs it makes.
pub(super) struct Order {
    placed: Vec<Placed>,
    repairs: usize,
}

/// Stage 3 on the copy: the fixed list, where each message came from in the input when it is
/// unchanged (so its estimate is not computed again), and how many repairs were made. The order
/// is decided first on the borrowed list; then the messages move once, into the output.
#[allow(clippy::type_complexity)]
pub(super) fn fix_tool_call_list(
    messages: Vec<LimitedMessage<'_>>,
) -> (Vec<LimitedMessage<'_>>, Vec<Option<usize>>, usize) {
    let (messages, described) = describe_bad_arguments(messages);
    let order = order_calls_and_results(&messages);
    let same_indices = described == 0;
    let mut slots: Vec<Option<LimitedMessage<'_>>> = messages.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(order.placed.len());
    let mut origins = Vec::with_capacity(order.placed.len());
    for placed in order.placed {
        match placed {
            Placed::Kept(i) => {
                if let Some(message) = slots.get_mut(i).and_then(Option::take) {
                    out.push(message);
                    origins.push(same_indices.then_some(i));
                }
            }
            Placed::WithCalls(i, keep) => {
                if let Some(message) = slots.get_mut(i).and_then(Option::take) {
                    out.push(LimitedMessage::changed(with_calls(message, &keep)));
                    origins.push(None);
                }
            }
        }
    }
    (out, origins, described + order.repairs)
}

/// Each call's result right after it (the first result per call wins), calls without a result
/// dropped, repeated calls dropped, results without a call dropped; everything else in order.
pub(super) fn order_calls_and_results(messages: &[LimitedMessage<'_>]) -> Order {
    let mut repairs = 0;
    let mut result_at: FxHashMap<&str, usize> = FxHashMap::default();
    for (i, message) in messages.iter().enumerate() {
        if message.role != Role::Tool {
            continue;
        }
        match message.tool_call_id.as_deref() {
            Some(id) if !result_at.contains_key(id) => {
                result_at.insert(id, i);
            }
            // A duplicated result (the first is kept), or one naming no call at all.
            _ => repairs += 1,
        }
    }
    let called: FxHashSet<&str> = messages
        .iter()
        .filter(|m| m.role != Role::Tool)
        .flat_map(|m| m.tool_calls().iter().map(|c| c.id.as_str()))
        .collect();
    repairs += result_at.keys().filter(|id| !called.contains(*id)).count();
    let mut taken = vec![false; messages.len()];
    let mut placed = Vec::with_capacity(messages.len());
    for (i, message) in messages.iter().enumerate() {
        if message.role == Role::Tool {
            continue;
        }
        let calls = message.tool_calls();
        if message.role != Role::Assistant || calls.is_empty() {
            placed.push(Placed::Kept(i));
            continue;
        }
        let answered = |id: &str| result_at.get(id).is_some_and(|&r| !taken[r]);
        let keep: Vec<usize> = (0..calls.len())
            .filter(|&c| {
                let id = calls[c].id.as_str();
                answered(id) && !calls[..c].iter().any(|earlier| earlier.id == id)
            })
            .collect();
        repairs += calls.len() - keep.len();
        if keep.len() == calls.len() {
            placed.push(Placed::Kept(i));
        } else if !keep.is_empty()
            || !message.content.is_empty()
            || message.thinking_blocks().is_some()
        {
            placed.push(Placed::WithCalls(i, keep.clone()));
        } else {
            continue;
        }
        for &c in &keep {
            if let Some(&r) = result_at.get(calls[c].id.as_str()) {
                if !taken[r] {
                    taken[r] = true;
                    placed.push(Placed::Kept(r));
                }
            }
        }
    }
    Order { placed, repairs }
}

/// The message with only the calls at positions `keep` (none: no `tool_calls` at all).
pub(super) fn with_calls(message: LimitedMessage<'_>, keep: &[usize]) -> ChatMessage {
    let calls: Vec<ToolCall> = keep
        .iter()
        .filter_map(|&c| message.tool_calls().get(c).cloned())
        .collect();
    let mut message = match message {
        LimitedMessage::Stored(stored) => stored.with_content(stored.content.clone()),
        LimitedMessage::Changed(changed) => *changed,
    };
    message.tool_calls = (!calls.is_empty()).then_some(calls);
    message
}

/// Whether a call's arguments are a JSON object (validated without building a value).
pub(super) fn is_json_object(arguments: &str) -> bool {
    arguments.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(arguments).is_ok()
}

/// Takes calls with non-object arguments out of their message; a `cd_instruction` after it says
/// what the model tried, so it can call again properly. Their results go with them.
pub(super) fn describe_bad_arguments(
    messages: Vec<LimitedMessage<'_>>,
) -> (Vec<LimitedMessage<'_>>, usize) {
    let all_good = messages.iter().all(|m| {
        m.tool_calls()
            .iter()
            .all(|c| is_json_object(&c.function.arguments))
    });
    if all_good {
        return (messages, 0);
    }
    let mut bad_ids = BTreeSet::new();
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        if message.role == Role::Tool
            && message
                .tool_call_id
                .as_ref()
                .is_some_and(|id| bad_ids.contains(id))
        {
            continue;
        }
        if message
            .tool_calls()
            .iter()
            .all(|c| is_json_object(&c.function.arguments))
        {
            out.push(message);
            continue;
        }
        let mut message = message.into_owned();
        let calls = message.tool_calls.take().unwrap_or_default();
        let (good, bad): (Vec<_>, Vec<_>) = calls
            .into_iter()
            .partition(|c| is_json_object(&c.function.arguments));
        message.tool_calls = (!good.is_empty()).then_some(good);
        let id = message.message_id.clone();
        if message.tool_calls.is_some() || !message.content.is_empty() {
            out.push(LimitedMessage::changed(message));
        }
        if bad.is_empty() {
            continue;
        }
        let described: Vec<String> = bad
            .iter()
            .map(|c| {
                bad_ids.insert(c.id.clone());
                let shown: String = c.function.arguments.chars().take(300).collect();
                format!(
                    "- `{}` with arguments that are not a JSON object: {shown}",
                    c.function.name
                )
            })
            .collect();
        out.push(LimitedMessage::changed(ChatMessage::text(
            format!("{id}-bad-args"),
            Role::CdInstruction,
            format!(
                "These tool calls were not run because their arguments are not a JSON object; call the tool again with a JSON object if it is still needed:\n{}",
                described.join("\n")
            ),
        )));
    }
    let changes = bad_ids.len();
    (out, changes)
}
