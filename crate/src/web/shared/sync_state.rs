//! The state of sync (`sync`), kept in `Shared`: the replication when configured, its listener,
//! the outbox mark.

use crate::replication::Replicator;
use js_sys::Function;
use std::collections::{BTreeSet, HashMap};
use web_sys::AbortController;

pub(in crate::web) struct SyncState {
    pub(in crate::web) replicator: Replicator,
    /// The database's URL, ending in `/`.
    pub(in crate::web) db_url: String,
    pub(in crate::web) auth: Option<String>,
    pub(in crate::web) aborts: HashMap<u64, AbortController>,
    /// Bumped by each `configure`: what an older replication's futures bring back is dropped.
    pub(in crate::web) generation: u64,
    pub(in crate::web) checkpoint_key: String,
    /// Chats whose pulled changes wait for them to be idle and saved.
    pub(in crate::web) reload_later: BTreeSet<String>,
    /// Long chats pulled here with no packed copy: packed once the replication caught up.
    pub(in crate::web) pack_later: BTreeSet<String>,
}

#[derive(Default)]
pub(in crate::web) struct SyncHost {
    pub(in crate::web) state: Option<SyncState>,
    pub(in crate::web) listener: Option<Function>,
    pub(in crate::web) generation: u64,
    pub(in crate::web) online_hooked: bool,
    pub(in crate::web) mark: f64,
}
