//! The history limit (SPEC §5), run on a copy before every request; the stored trajectory keeps
//! everything. This module holds stage 3, **fix tool calls**, which always runs: a call keeps
//! its place only if it has a result; each result goes right after its call; one result per call;
//! results without a call are dropped. (Stages 1, 2 and 4 and the compression strength come with
//! the context pipeline.)

use crate::message::{ChatMessage, Role};
use std::collections::{BTreeMap, BTreeSet};

/// Repairs tool-call pairing on a linearized list; returns how many things it changed.
pub fn fix_tool_calls(messages: Vec<ChatMessage>) -> (Vec<ChatMessage>, usize) {
    let mut results: BTreeMap<String, ChatMessage> = BTreeMap::new();
    let mut changes = 0;
    for message in messages.iter().filter(|m| m.role == Role::Tool) {
        let Some(id) = &message.tool_call_id else {
            continue;
        };
        if results.contains_key(id) {
            changes += 1; // a duplicated result: the first one is kept
        } else {
            results.insert(id.clone(), message.clone());
        }
    }
    let called: BTreeSet<String> = messages
        .iter()
        .flat_map(|m| m.tool_calls().iter().map(|c| c.id.clone()))
        .collect();
    changes += results.keys().filter(|id| !called.contains(*id)).count();
    changes += messages
        .iter()
        .filter(|m| m.role == Role::Tool && m.tool_call_id.is_none())
        .count();
    let mut out = Vec::with_capacity(messages.len());
    let mut placed = BTreeSet::new();
    for message in messages {
        match message.role {
            Role::Tool => {}
            Role::Assistant if !message.tool_calls().is_empty() => {
                let (kept, dropped) = keep_answered_calls(message, &results, &placed);
                changes += dropped;
                let Some(message) = kept else { continue };
                let ids: Vec<String> = message.tool_calls().iter().map(|c| c.id.clone()).collect();
                out.push(message);
                for id in ids {
                    if let Some(result) = results.get(&id) {
                        out.push(result.clone());
                        placed.insert(id);
                    }
                }
            }
            _ => out.push(message),
        }
    }
    (out, changes)
}

/// The message with only its answered, not yet placed calls; `None` when nothing is left of it.
fn keep_answered_calls(
    mut message: ChatMessage,
    results: &BTreeMap<String, ChatMessage>,
    placed: &BTreeSet<String>,
) -> (Option<ChatMessage>, usize) {
    let calls = message.tool_calls.take().unwrap_or_default();
    let before = calls.len();
    let mut seen = BTreeSet::new();
    let kept: Vec<_> = calls
        .into_iter()
        .filter(|c| {
            results.contains_key(&c.id) && !placed.contains(&c.id) && seen.insert(c.id.clone())
        })
        .collect();
    let dropped = before - kept.len();
    message.tool_calls = (!kept.is_empty()).then_some(kept);
    let empty = message.tool_calls.is_none()
        && message.content.is_empty()
        && message.thinking_blocks.is_none();
    (if empty { None } else { Some(message) }, dropped)
}
