//! Stage 4 of the history limit: aged and surplus events by their exemptions, then the oldest
//! whole turns outside the protected tail, and only then the tail itself.

use super::*;

/// Drops aged `DropOnAge` events, surplus `KeepRecentN` events, then the oldest whole turns
/// outside the protected tail — never the system prompt, never a `Never` message.
pub(super) fn limit_turns(work: &mut Work) -> bool {
    let mut changed = drop_exempt_by_rule(work);
    let tail = work.tail_start();
    let turn_starts: Vec<usize> = work
        .messages
        .iter()
        .enumerate()
        .filter(|(i, m)| m.role == Role::User && *i < tail)
        .map(|(i, _)| i)
        .collect();
    let mut drop = BTreeSet::new();
    let mut dropped_tokens = 0u64;
    // A turn runs from one user message to the next; what precedes the first user message is a
    // turn too (the system prompt in it stays).
    let mut bounds: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for &s in turn_starts.iter().chain(std::iter::once(&tail)) {
        if s > start {
            bounds.push((start, s));
        }
        start = s;
    }
    for (from, to) in bounds {
        if (work.total - dropped_tokens) as f64 * work.calibration <= work.budget as f64 {
            break;
        }
        for i in from..to {
            let message = &work.messages[i];
            if message.role == Role::System || exemption(message) == Exemption::Never {
                continue;
            }
            drop.insert(i);
            dropped_tokens += work.tokens[i];
        }
    }
    changed |= !drop.is_empty();
    work.remove(&drop);
    changed
}

pub(super) fn drop_exempt_by_rule(work: &mut Work) -> bool {
    let user_turns: Vec<usize> = work
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    let age_limit = user_turns
        .len()
        .checked_sub(DROP_ON_AGE_USER_TURNS)
        .and_then(|k| user_turns.get(k).copied())
        .unwrap_or(0);
    let mut seen_per_subkind: BTreeMap<String, usize> = BTreeMap::new();
    let mut drop = BTreeSet::new();
    for (i, message) in work.messages.iter().enumerate().rev() {
        match exemption(message) {
            Exemption::DropOnAge if i < age_limit => {
                drop.insert(i);
            }
            Exemption::KeepRecentN => {
                let subkind = message.event_subkind().unwrap_or("").to_string();
                let seen = seen_per_subkind.entry(subkind).or_insert(0);
                *seen += 1;
                if *seen > KEEP_RECENT_N {
                    drop.insert(i);
                }
            }
            _ => {}
        }
    }
    let changed = !drop.is_empty();
    work.remove(&drop);
    changed
}

/// The last resort: compress the tail's tool results, then drop its oldest messages after the
/// last user message (a call together with its results), never that user message or a plan.
pub(super) fn cut_protected_tail(work: &mut Work) -> bool {
    let mut changed = compress_tool_results(work, true);
    let tail = work.tail_start();
    let mut drop = BTreeSet::new();
    let mut dropped_tokens = 0u64;
    // After the last user message, which stays; from the start when there is none.
    let mut i = match work.messages.get(tail) {
        Some(m) if m.role == Role::User => tail + 1,
        _ => tail,
    };
    while i < work.messages.len() {
        if (work.total - dropped_tokens) as f64 * work.calibration <= work.budget as f64 {
            break;
        }
        // A call and its results go together (stage 3 placed them right after it).
        let mut end = i + 1;
        if !work.messages[i].tool_calls().is_empty() {
            while end < work.messages.len() && work.messages[end].role == Role::Tool {
                end += 1;
            }
        }
        for j in i..end {
            if exemption(&work.messages[j]) != Exemption::Never {
                drop.insert(j);
                dropped_tokens += work.tokens[j];
            }
        }
        i = end;
    }
    changed |= !drop.is_empty();
    work.remove(&drop);
    changed
}
