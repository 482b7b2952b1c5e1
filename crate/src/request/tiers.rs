//! The request laid out in seed 002's stability tiers (issue 40), the same for every provider
//! kind: the system message holds L0 (the core prompt, the map's legend, L0's map blocks), then
//! L0's history; L1, L2 and L3 each as a user message with their map blocks and an assistant
//! "Ok.", then their history; then, uncached, the map blocks not yet stable, the file list and
//! the date (one user/"Ok." pair); then the active history. Each non-empty cached tier ends where
//! Anthropic puts a breakpoint; OpenAI's automatic prefix cache and Gemini's implicit one are
//! served by the same stable prefix.
//!
//! The tiers come from the chat's `stability::Tracker` (what the previous requests did); the
//! items this request sent are returned for its next update. History is tiered by exchange (a
//! user message and what answered it): a tier's history ends before a user message, so the
//! blocks written between tiers never split a tool call from its result. The exchange under
//! way is always active.

use crate::linearize::Linear;
use crate::message::{Content, Role};
use crate::prompt::sections;
use crate::stability::{Changes, Item, ItemKind, Tier, Tracker};
use std::borrow::Cow;
use std::hash::{Hash, Hasher};

/// Where a cached tier ends: on the system message, or on a message of the list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TierEnd {
    System,
    Message(usize),
}

pub(super) struct Layout<'a> {
    pub system: Option<Cow<'a, str>>,
    pub messages: Vec<Linear<'a>>,
    /// One per non-empty cached tier, most stable first.
    pub tier_ends: Vec<TierEnd>,
    pub tiers: Option<Box<TiersApplied>>,
}

/// What laying a request out in tiers did: the chat's tracker after this request's items were
/// registered (the session keeps it for the next request), what moved, each tier's size.
#[derive(Clone, Debug)]
pub struct TiersApplied {
    pub tracker: Tracker,
    pub changes: Changes,
    /// Estimated tokens in L0, L1, L2, L3 and active (tools not counted).
    pub tokens: [u64; 5],
}

const SYMBOLS_HEADER: &str = "# Repository Structure (continued)\n\n";
const OK: &str = "Ok.";

/// The untiered layout: the prompt and history as they are (compaction, the CLI, the page's
/// own model).
pub(super) fn plain<'a>(system: Option<&'a str>, messages: Vec<Linear<'a>>) -> Layout<'a> {
    let system = system.filter(|s| !s.is_empty()).map(Cow::Borrowed);
    let tier_ends = system.iter().map(|_| TierEnd::System).collect();
    Layout {
        system,
        messages,
        tier_ends,
        tiers: None,
    }
}

/// The request in tiers: its items registered with (a copy of) the chat's tracker first, so a
/// change moves its item in this very request (one cache miss, not two), then laid out.
pub(super) fn tiered<'a>(
    system: Option<&'a str>,
    history: Vec<Linear<'a>>,
    tracker: &Tracker,
) -> Layout<'a> {
    let parts = sections(system.unwrap_or(""));
    let mut items = Vec::new();
    // L0's text: the core prompt and the legend, then L0's map blocks.
    let mut core = parts.core.join("\n\n");
    if let Some(legend) = parts.map_legend {
        if !core.is_empty() {
            core.push_str("\n\n");
        }
        core.push_str(legend);
    }
    if !core.is_empty() {
        items.push(item("system", ItemKind::System, hash_text(&core), &core));
    }
    let block_keys: Vec<String> = (parts.map_blocks.iter())
        .map(|block| format!("symbols:{}", block.lines().next().unwrap_or("")))
        .collect();
    for (block, key) in parts.map_blocks.iter().zip(&block_keys) {
        items.push(item(key, ItemKind::Symbols, hash_text(block), block));
    }
    let listing = parts.volatile.join("\n\n");
    if !listing.is_empty() {
        items.push(item(
            "listing",
            ItemKind::Listing,
            hash_text(&listing),
            &listing,
        ));
    }
    let (exchanges, history_items) = exchanges(&history);
    items.extend(history_items);
    let mut tracker = tracker.clone();
    let changes = tracker.update(&items);

    let mut tokens = [0u64; 5];
    let mut blocks: [Vec<&str>; 5] = Default::default();
    for (block, key) in parts.map_blocks.iter().zip(&block_keys) {
        blocks[slot(tracker.tier_of(key))].push(block);
    }
    let mut system_text = core;
    if !blocks[0].is_empty() {
        system_text.push_str("\n\n");
        system_text.push_str(&blocks[0].join("\n"));
    }
    tokens[0] += estimate(&system_text);
    let history_tiers: Vec<Tier> = (exchanges.iter())
        .map(|(key, _)| key.as_deref().map_or(Tier::Active, |k| tracker.tier_of(k)))
        .collect();
    // The tiers' few messages go into the history's own vector, which `linear` made with room
    // for them: a second vector of its length, alive beside it while it was filled, was a copy
    // for nothing (issue 41).
    let mut messages = history;
    let mut tier_ends = Vec::new();
    // The first history message not yet placed in a tier.
    let mut next = 0;
    for tier in [Tier::L0, Tier::L1, Tier::L2, Tier::L3] {
        let at = slot(tier);
        if tier != Tier::L0 && !blocks[at].is_empty() {
            let text = format!("{SYMBOLS_HEADER}{}", blocks[at].join("\n"));
            tokens[at] += estimate(&text);
            next = insert_pair(&mut messages, next, text);
        }
        let count: usize = (exchanges.iter().zip(&history_tiers))
            .filter(|(_, t)| **t == tier)
            .map(|((_, len), _)| *len)
            .sum();
        let end = (next + count).min(messages.len());
        tokens[at] += messages[next..end]
            .iter()
            .map(estimate_message)
            .sum::<u64>();
        next = end;
        if tier == Tier::L0 && !system_text.is_empty() {
            tier_ends.push(TierEnd::System);
        }
        if let Some(last) = next.checked_sub(1) {
            let end = TierEnd::Message(last);
            if tokens[at] > 0 && !tier_ends.contains(&end) && (tier != Tier::L0 || count > 0) {
                tier_ends.push(end);
            }
        }
    }
    let mut volatile: Vec<&str> = Vec::new();
    let active_blocks = format!("{SYMBOLS_HEADER}{}", blocks[4].join("\n"));
    if !blocks[4].is_empty() {
        volatile.push(&active_blocks);
    }
    if !listing.is_empty() {
        volatile.push(&listing);
    }
    if !volatile.is_empty() {
        let text = volatile.join("\n\n");
        tokens[4] += estimate(&text);
        next = insert_pair(&mut messages, next, text);
    }
    tokens[4] += messages[next..].iter().map(estimate_message).sum::<u64>();
    Layout {
        system: (!system_text.is_empty()).then_some(Cow::Owned(system_text)),
        messages,
        tier_ends,
        tiers: Some(Box::new(TiersApplied {
            tracker,
            changes,
            tokens,
        })),
    }
}

/// `text` as a user message and the model's short acknowledgement, at `at`; where the next
/// message goes after them.
fn insert_pair<'a>(messages: &mut Vec<Linear<'a>>, at: usize, text: String) -> usize {
    messages.insert(at, Linear::written(Role::User, text));
    messages.insert(at + 1, Linear::written(Role::Assistant, OK.into()));
    at + 2
}

fn slot(tier: Tier) -> usize {
    match tier {
        Tier::L0 => 0,
        Tier::L1 => 1,
        Tier::L2 => 2,
        Tier::L3 => 3,
        Tier::Active => 4,
    }
}

/// The history cut into exchanges (a user message and what followed it): each one's key
/// (`None` for the last, under way, which is always active) and length, and the items of the
/// finished ones.
fn exchanges(history: &[Linear]) -> (Vec<(Option<String>, usize)>, Vec<Item>) {
    let starts: Vec<usize> = (history.iter().enumerate())
        .filter(|(i, m)| *i == 0 || m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    let mut exchanges = Vec::with_capacity(starts.len());
    let mut items = Vec::with_capacity(starts.len());
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(history.len());
        let exchange = &history[start..end];
        if n + 1 == starts.len() {
            exchanges.push((None, end - start));
            break;
        }
        let key = exchange_key(exchange, start);
        let mut hasher = rustc_hash::FxHasher::default();
        exchange.iter().for_each(|m| hash_message(m, &mut hasher));
        items.push(Item {
            key: key.clone(),
            kind: ItemKind::History,
            hash: hasher.finish(),
            tokens: exchange.iter().map(estimate_message).sum(),
        });
        exchanges.push((Some(key), end - start));
    }
    (exchanges, items)
}

/// An exchange is known by its first message's id (a user message folded from several has
/// none: the first id in the exchange, else its position).
fn exchange_key(exchange: &[Linear], start: usize) -> String {
    match exchange.iter().find(|m| !m.message_id.is_empty()) {
        Some(m) => format!("history:{}", m.message_id),
        None => format!("history:#{start}"),
    }
}

fn hash_message(m: &Linear, hasher: &mut rustc_hash::FxHasher) {
    m.role.hash(hasher);
    match m.content.as_ref() {
        Content::Text(text) => text.hash(hasher),
        Content::Parts(parts) => serde_json::to_string(parts)
            .unwrap_or_default()
            .hash(hasher),
    }
    for call in m.tool_calls() {
        call.id.hash(hasher);
        call.function.name.hash(hasher);
        call.function.arguments.hash(hasher);
    }
    m.tool_call_id.hash(hasher);
    m.tool_failed.hash(hasher);
    m.reasoning_content.hash(hasher);
}

fn hash_text(text: &str) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    text.hash(&mut hasher);
    hasher.finish()
}

fn item(key: &str, kind: ItemKind, hash: u64, text: &str) -> Item {
    Item {
        key: key.to_string(),
        kind,
        hash,
        tokens: estimate(text),
    }
}

fn estimate(text: &str) -> u64 {
    text.len().div_ceil(4) as u64
}

/// SPEC §5's estimate, as the history limit counts the message.
fn estimate_message(m: &Linear) -> u64 {
    crate::history_limit::estimate_parts(&m.content, m.tool_calls(), None)
}
