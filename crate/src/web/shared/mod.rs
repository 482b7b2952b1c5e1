//! What the browser host's parts share, as plain state: the engine and its IndexedDB, the
//! subscribers, the requests and tool calls in flight, the keys and the server (`Shared`, behind one
//! `Rc<RefCell>`), and the `feed` port through which a part hands an input to the driver without
//! depending on it (`driver.rs` feeds the engine and performs its effects).

use super::browser::origin_of;
use super::tabs::ChatRole;
use crate::engine::{Engine, Input, Step};
use js_sys::Function;
use litemap::LiteMap;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use web_sys::AbortController;

mod chat_files_state;
mod sent_request;
mod sync_state;

pub(super) use chat_files_state::{ChatFilesState, CopyState};
pub(super) use sent_request::{SentHead, SentRequest};
pub(super) use sync_state::{SyncHost, SyncState};

/// An API key and the one origin it may be sent to.
pub(super) struct BoundKey {
    pub(super) key: String,
    pub(super) origin: String,
}

impl Shared {
    /// The key of `kind` for a request to `url`: empty unless `url` is on the origin the key was
    /// given for. A settings change that points a kind elsewhere never carries its key along.
    pub(super) fn key_for(&self, kind: &str, url: &str) -> String {
        match (self.keys.get(kind), origin_of(url)) {
            (Some(bound), Some(origin)) if bound.origin == origin => bound.key.clone(),
            _ => String::new(),
        }
    }
}

pub(super) struct Shared {
    pub(super) engine: Engine,
    pub(super) db: web_sys::IdbDatabase,
    pub(super) subscribers: LiteMap<String, Vec<(u32, Function)>>,
    pub(super) next_subscriber: u32,
    pub(super) requests: HashMap<String, AbortController>,
    pub(super) tools: HashMap<String, AbortController>,
    /// Each provider kind's API key with the origin it was given for (SECURITY E1).
    pub(super) keys: HashMap<String, BoundKey>,
    pub(super) proxy: Option<(String, String)>,
    pub(super) host_tools: HashMap<String, Function>,
    /// The `local` kind's transport, set by the page: `fetch`'s shape, answered by the model in
    /// the page (see `setLocalTransport`).
    pub(super) local_transport: Option<Function>,
    /// Chat records as stored (title, thread), updated by each save.
    pub(super) chats: LiteMap<String, Value>,
    pub(super) next_command: u64,
    /// IndexedDB records written so far (for tests and the bench page).
    pub(super) records_written: u64,
    /// Bytes of JSON those records held.
    pub(super) bytes_written: u64,
    /// This tab's role in each chat it opened (owner or follower, SPEC §4).
    pub(super) roles: HashMap<String, ChatRole>,
    /// Follower `openChat` calls waiting for the owner's snapshot.
    pub(super) snapshot_waiters: HashMap<String, Vec<Function>>,
    /// Saves started and not yet acknowledged or failed, per chat (`flush` waits for them).
    pub(super) saves_in_flight: HashMap<String, u32>,
    /// Chats an `openChat` is under way for: a second call waits for the first.
    pub(super) opening: std::collections::HashSet<String>,
    /// Why several tabs cannot coordinate here, when they cannot.
    pub(super) tabs_note: Option<String>,
    /// The out-of-band marker saying this database has held data.
    pub(super) marker: String,
    pub(super) marker_set: bool,
    /// The browser dropped this origin's data since the last visit.
    pub(super) data_lost: bool,
    /// When set, saves fail with this reason (tests simulate a quota error).
    pub(super) fail_saves: Option<String>,
    /// The last provider request of each chat as sent, the key redacted ("what the model sees").
    pub(super) last_requests: HashMap<String, SentRequest>,
    /// The chats' workspace copies (issue 21).
    pub(super) chat_files: ChatFilesState,
    /// Sync through CouchDB (issue 21): the replication when configured, its listener.
    pub(super) sync: SyncHost,
    /// The page's `onChatsChanged` listener (`chat_list`).
    pub(super) chats_listener: Option<Function>,
    /// Set by `close`: late inputs (a tool's answer, a timer) are dropped instead of reaching an
    /// engine whose database is closed.
    pub(super) closed: bool,
    /// The driver's entry (`feed`).
    pub(super) feed: Feed,
}

pub(super) type Handle = Rc<RefCell<Shared>>;

/// How a part hands an input to the driver: the engine handles it, its events are delivered and
/// its effects performed (`driver::handle`, set when the host is made).
pub(super) type Feed = fn(&Handle, Input) -> Step;

/// Hands `input` to the driver (see `Feed`).
pub(super) fn feed(shared: &Handle, input: Input) -> Step {
    let feed = shared.borrow().feed;
    feed(shared, input)
}
