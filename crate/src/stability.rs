//! Stability tiers (seed 002, issue 40): every item of a prompt — the system prompt, each block of
//! the repository map, each finished exchange of the history — is tracked with its content hash,
//! and sits in one of five tiers: L0 (the system message), L1–L3 (cached user/"Ok." blocks, each
//! ending where a cache breakpoint can go) and Active (after them). An item climbs as it stays
//! unchanged, so what has not changed for long sits early in the prompt and stays cached; an item
//! that changes drops to Active; an item gone from the prompt (its file deleted, the map no
//! longer showing it, the history compacted) is dropped.
//!
//! Moving content into a tier rewrites that tier and every later one (the prefix changes), so the
//! algorithm moves items only when it pays: into a tier that this request breaks anyway (an item
//! of it changed or left — the ripple), or when what waits to move is large enough
//! (`promotion_tokens`). Finished history never changes, so it moves ahead of the map blocks: when
//! a tier is rewritten, every exchange from it on joins the end of the tier before it; otherwise
//! active exchanges join L3 only when what follows L3 changed anyway or past
//! `HISTORY_GRADUATION_TOKENS`, never simply for being old — else every turn would rewrite L3.
//!
//! Pure data: the request builder lists the items of the request it is building, registers them
//! with `Tracker::update` (on a copy of the chat's tracker, which the session keeps), and lays
//! that same request out from the tiers the update leaves — so a change moves its item at once.

use serde::Serialize;

/// The five tiers, most stable first (their order in the prompt).
#[derive(
    Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
pub enum Tier {
    L0,
    L1,
    L2,
    L3,
    #[serde(rename = "active")]
    Active,
}

impl Tier {
    pub const CACHED: [Tier; 4] = [Tier::L0, Tier::L1, Tier::L2, Tier::L3];

    /// Unchanged requests an item needs before it may enter this tier.
    pub fn entry_n(self) -> u32 {
        match self {
            Tier::L0 => 12,
            Tier::L1 => 9,
            Tier::L2 => 6,
            Tier::L3 => 3,
            Tier::Active => 0,
        }
    }

    /// The next more stable tier (L0 for L0).
    fn above(self) -> Tier {
        match self {
            Tier::L0 | Tier::L1 => Tier::L0,
            Tier::L2 => Tier::L1,
            Tier::L3 => Tier::L2,
            Tier::Active => Tier::L3,
        }
    }

    /// The next less stable tier, whose items may enter this one.
    fn below(self) -> Option<Tier> {
        match self {
            Tier::L0 => Some(Tier::L1),
            Tier::L1 => Some(Tier::L2),
            Tier::L2 => Some(Tier::L3),
            Tier::L3 => Some(Tier::Active),
            Tier::Active => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tier::L0 => "L0",
            Tier::L1 => "L1",
            Tier::L2 => "L2",
            Tier::L3 => "L3",
            Tier::Active => "active",
        }
    }
}

/// About the least a provider caches (Anthropic: 1 024 tokens).
const CACHE_TARGET: u64 = 1024;

/// Tokens of waiting content that justify rewriting a tier nothing else breaks: the more
/// stable the tier, the more (a move rewrites it and every tier after it, and the last turn's
/// breakpoint already keeps an unchanged prompt cached — a move pays only when a later change
/// would otherwise lose what moved).
pub fn promotion_tokens(into: Tier) -> u64 {
    match into {
        Tier::L0 => 64 * CACHE_TARGET,
        Tier::L1 => 32 * CACHE_TARGET,
        Tier::L2 => 16 * CACHE_TARGET,
        Tier::L3 | Tier::Active => 2 * CACHE_TARGET,
    }
}

/// Finished exchanges in Active graduate to L3 past this many tokens, without an L3 break.
pub const HISTORY_GRADUATION_TOKENS: u64 = 8 * CACHE_TARGET;

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    /// The system prompt: always L0 (seed 002), its change breaks every tier.
    System,
    /// One file's block of the repository map.
    Symbols,
    /// One finished exchange of the history (a user message and what answered it).
    History,
    /// What is sent uncached before the active history (the file list, the date): always
    /// active; its change is a free moment to move history and map blocks up.
    Listing,
}

/// One item of a request, as the builder saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    pub key: String,
    pub kind: ItemKind,
    pub hash: u64,
    pub tokens: u64,
}

#[derive(Clone, Debug)]
struct Entry {
    key: String,
    kind: ItemKind,
    hash: u64,
    tokens: u64,
    tier: Tier,
    /// Requests in a row this item came unchanged.
    n: u32,
}

/// One item's move, for the page's tier notifications (📈 / 📉).
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub key: String,
    pub from: Tier,
    /// `None`: dropped (gone from the prompt).
    pub to: Option<Tier>,
}

/// What one update did.
#[derive(Serialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub promoted: Vec<Move>,
    pub demoted: Vec<Move>,
    pub removed: Vec<Move>,
    /// The most stable tier whose content changed (its cache and every later one rewritten).
    pub broken: Option<Tier>,
    /// Whether what precedes the active history changed (an active map block or the listing):
    /// the active history is sent anew either way, so it may graduate for free.
    pub active_changed: bool,
}

/// The tiers of one chat's prompt items. Not stored: after a reload every item starts again in
/// Active (the provider's cache has expired by then more often than not).
#[derive(Clone, Debug, Default)]
pub struct Tracker {
    /// In the order the last request listed them (history chronological).
    entries: Vec<Entry>,
    /// Key → position in `entries`.
    index: rustc_hash::FxHashMap<String, usize>,
}

impl Tracker {
    /// The tier of an item (`Active` when not tracked).
    pub fn tier_of(&self, key: &str) -> Tier {
        self.entry(key).map_or(Tier::Active, |e| e.tier)
    }

    fn entry(&self, key: &str) -> Option<&Entry> {
        self.index.get(key).and_then(|&i| self.entries.get(i))
    }

    /// Registers the items of the request being built and moves them; the request is laid out
    /// from the tiers this leaves.
    pub fn update(&mut self, items: &[Item]) -> Changes {
        let mut changes = Changes::default();
        self.index.clear();
        let mut old: rustc_hash::FxHashMap<String, Entry> = std::mem::take(&mut self.entries)
            .into_iter()
            .map(|e| (e.key.clone(), e))
            .collect();
        let mut seen: rustc_hash::FxHashSet<&str> = Default::default();
        for item in items.iter().filter(|i| seen.insert(i.key.as_str())) {
            let entry = match old.remove(&item.key) {
                None => {
                    if item.kind != ItemKind::History {
                        changes.break_tier(Tier::Active);
                    }
                    Entry {
                        key: item.key.clone(),
                        kind: item.kind,
                        hash: item.hash,
                        tokens: item.tokens,
                        tier: Tier::Active,
                        n: 0,
                    }
                }
                Some(mut e) if e.hash != item.hash || e.kind != item.kind => {
                    if e.tier != Tier::Active && item.kind != ItemKind::System {
                        changes
                            .demoted
                            .push(moved(&e.key, e.tier, Some(Tier::Active)));
                    }
                    changes.break_tier(e.tier);
                    e.hash = item.hash;
                    e.kind = item.kind;
                    e.tokens = item.tokens;
                    e.tier = Tier::Active;
                    e.n = 0;
                    e
                }
                Some(mut e) => {
                    e.n = e.n.saturating_add(1);
                    e.tokens = item.tokens;
                    e
                }
            };
            self.entries.push(entry);
        }
        // Stale: tracked items this request no longer holds.
        let mut stale: Vec<Entry> = old.into_values().collect();
        stale.sort_by(|a, b| a.key.cmp(&b.key));
        for gone in stale
            .into_iter()
            .filter(|e| e.kind != ItemKind::History || e.tier != Tier::Active)
        {
            changes.break_tier(gone.tier);
            changes.removed.push(moved(&gone.key, gone.tier, None));
        }
        self.pin_system(&mut changes);
        self.keep_history_in_order(&mut changes);
        for into in Tier::CACHED {
            self.promote(into, &mut changes);
        }
        self.settle_history(&mut changes);
        self.index = (self.entries.iter().enumerate())
            .map(|(i, e)| (e.key.clone(), i))
            .collect();
        changes
    }

    /// The system prompt is L0 from its first request on.
    fn pin_system(&mut self, changes: &mut Changes) {
        for e in self
            .entries
            .iter_mut()
            .filter(|e| e.kind == ItemKind::System)
        {
            if e.tier != Tier::L0 {
                e.tier = Tier::L0;
                changes.break_tier(Tier::L0);
            }
        }
    }

    /// History is sent in order, so no exchange may sit in a more stable tier than one before
    /// it: after a changed (demoted) exchange, the later ones follow it down.
    fn keep_history_in_order(&mut self, changes: &mut Changes) {
        let mut floor = Tier::L0;
        for e in self
            .entries
            .iter_mut()
            .filter(|e| e.kind == ItemKind::History)
        {
            if e.tier < floor {
                changes.demoted.push(moved(&e.key, e.tier, Some(floor)));
                changes.break_tier(e.tier);
                e.tier = floor;
            }
            floor = e.tier;
        }
    }

    /// Map blocks of the tier below `into` that stayed unchanged long enough move up (into
    /// `into`'s block, which comes first in the tier), when `into` is rewritten this request
    /// anyway, or when what waits is worth rewriting it (`promotion_tokens`).
    fn promote(&mut self, into: Tier, changes: &mut Changes) {
        let Some(from) = into.below() else { return };
        let n = into.entry_n();
        let symbols: Vec<(String, u64)> = (self.entries.iter())
            .filter(|e| e.kind == ItemKind::Symbols && e.tier == from && e.n >= n)
            .map(|e| (e.key.clone(), e.tokens))
            .collect();
        if worth(&symbols, changes.free(into), into) {
            self.move_keys(&keys(symbols), into, changes);
            changes.break_tier(into);
        }
    }

    /// History never changes once finished, so it belongs before the map blocks, which may.
    /// When a tier is rewritten this request, every finished exchange from that tier on joins
    /// the end of the tier before it — right where the rewrite starts, so it costs nothing —
    /// and a later change to a map block no longer takes the history with it. Otherwise the
    /// finished exchanges still active join L3's end when what follows L3 changed anyway or
    /// they passed `HISTORY_GRADUATION_TOKENS` (seed 002: "piggyback on L3 invalidation or meet
    /// token threshold").
    fn settle_history(&mut self, changes: &mut Changes) {
        let (from, into) = match changes.broken {
            Some(broken) => (broken, broken.above()),
            None => (Tier::Active, Tier::L3),
        };
        let moving: Vec<(String, u64)> = (self.entries.iter())
            .filter(|e| e.kind == ItemKind::History && e.tier >= from && e.tier > into)
            .map(|e| (e.key.clone(), e.tokens))
            .collect();
        let tokens: u64 = moving.iter().map(|(_, t)| t).sum();
        let free = changes.broken.is_some() || changes.active_changed;
        if moving.is_empty() || !(free || tokens >= HISTORY_GRADUATION_TOKENS) {
            return;
        }
        self.move_keys(&keys(moving), into, changes);
        if changes.broken.is_none() {
            changes.break_tier(Tier::Active);
        }
    }

    fn move_keys(&mut self, keys: &[String], into: Tier, changes: &mut Changes) {
        let keys: rustc_hash::FxHashSet<&str> = keys.iter().map(String::as_str).collect();
        for e in self
            .entries
            .iter_mut()
            .filter(|e| keys.contains(e.key.as_str()))
        {
            changes.promoted.push(moved(&e.key, e.tier, Some(into)));
            e.tier = into;
        }
    }
}

impl Changes {
    fn break_tier(&mut self, tier: Tier) {
        if tier == Tier::Active {
            self.active_changed = true;
        } else {
            self.broken = Some(self.broken.map_or(tier, |b| b.min(tier)));
        }
    }

    /// Whether moving content into `tier` rewrites nothing that is not rewritten anyway.
    fn free(&self, tier: Tier) -> bool {
        self.broken.is_some_and(|b| b <= tier)
    }
}

/// Whether items waiting to move should: some wait, and the move is free or large enough.
fn worth(waiting: &[(String, u64)], free: bool, into: Tier) -> bool {
    let tokens: u64 = waiting.iter().map(|(_, t)| t).sum();
    !waiting.is_empty() && (free || tokens >= promotion_tokens(into))
}

fn keys(items: Vec<(String, u64)>) -> Vec<String> {
    items.into_iter().map(|(k, _)| k).collect()
}

fn moved(key: &str, from: Tier, to: Option<Tier>) -> Move {
    Move {
        key: key.to_string(),
        from,
        to,
    }
}
