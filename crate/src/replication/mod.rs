//! Sync between devices through the CouchDB replication protocol (issue 21), sans-IO.
//!
//! A `Replicator` is one continuous, two-way replication between this browser's chats and one
//! CouchDB database. It performs nothing: it answers each input (a reply, the local docs the host
//! read, the time) with effects — HTTP requests relative to the database URL, reads and writes of
//! the local store, a timer, the status — and the host performs them (`web/sync.rs`).
//!
//! The documents: `chat:{chat_id}` (the thread and `updated_at`) and `msg:{chat_id}:{message_id}`
//! (the stored message record: chat, id, `position`, message). A removed message or chat is a
//! deleted document. Each local change is an outbox entry; pushing gives it the next revision —
//! content addressed, so two devices making the same change make the same revision — asks
//! `_revs_diff` what the server lacks and sends that with `_bulk_docs` (`new_edits: false`, the
//! revision history in `_revisions`). Pulling reads `_changes` (`style=all_docs`: every leaf of
//! the revision tree) since the checkpoint kept in the `_local` document of this replication,
//! fetches the revisions not known here with `_bulk_get?revs=true`, chooses by `choose`, and
//! checkpoints. Caught up, it waits on a `longpoll` feed; a local change cuts the wait short.
//!
//! The merge rule, the same on every device (ARCHITECTURE.md): a revision that descends from the
//! local one replaces it; a document in conflict keeps the winner among all its leaves (`beats`:
//! a message CouchDB's winner — not deleted over deleted, then the longer history, then the greater
//! revision id; a chat document the newest `updated_at` first), so an edit never loses its message
//! to a removal, two devices appending while offline keep both sets of messages (distinct ids),
//! ordered by `position` then id, and every device keeps the same leaf.

use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};

mod documents;
mod exchange;
mod revisions;

pub use documents::*;
use exchange::choose_pulled;
pub use revisions::*;

/// How many revision ids a document's history keeps (CouchDB's default `_revs_limit` is 1000;
/// a chat's documents change rarely, so a short history is enough to recognise descendants).
pub const HISTORY: usize = 100;
/// Documents per `_changes`, `_bulk_get` and `_bulk_docs` batch.
pub const BATCH: usize = 200;
/// How long a `longpoll` waits on the server before answering empty (ms).
pub const LONGPOLL_MS: u64 = 25_000;
const MAX_BACKOFF_MS: u64 = 60_000;

/// Why replication stopped (until the settings change or the user asks again).
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum SyncError {
    /// 401: the name or password is wrong.
    Unauthorized { message: String },
    /// 403: the server refused this user.
    Forbidden { message: String },
    /// The URL answers, but not as a CouchDB database.
    NotCouchDb { message: String },
    /// The database is missing and could not be created.
    NoDatabase { message: String },
    /// A reply this replicator cannot use (kept trying, with backoff).
    Server { message: String },
    /// The server could not be reached (offline, refused, CORS).
    Network { message: String },
    /// This browser's store failed (retried with backoff).
    Storage { message: String },
}

/// The replication as the page shows it.
#[derive(Serialize, Clone, Debug, PartialEq, Default)]
pub struct SyncStatus {
    /// `off`, `connecting`, `pushing`, `pulling`, `live` (caught up, listening), `retrying`,
    /// `offline` or `stopped`.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<SyncError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<u64>,
    pub pushed: u64,
    pub pulled: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synced_at: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Put,
    Post,
}

/// One HTTP request, relative to the database URL (`""` is the database itself).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    pub id: u64,
    pub method: Method,
    pub path: String,
    pub body: Option<Value>,
    /// A `longpoll` wait: the host may abort it when a local change comes.
    pub wait: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SyncEffect {
    Http(HttpRequest),
    /// Abort the `longpoll` request `id` (a local change came).
    Abort {
        id: u64,
    },
    /// Read up to `limit` outbox entries; answer `Outbox`.
    ReadOutbox {
        limit: usize,
    },
    /// Read what is known of these documents (and whether each is in the outbox); answer `Known`.
    ReadKnown {
        ids: Vec<String>,
    },
    /// Store pulled documents, or record pushed ones; answer `Stored`.
    Store {
        pulled: Vec<Pulled>,
        pushed: Vec<Pushed>,
    },
    /// Keep the checkpoint locally too (the protocol keeps it on both sides).
    Checkpoint {
        last_seq: Value,
    },
    /// Send `Tick` at `at`.
    Wake {
        at: u64,
    },
    Status(SyncStatus),
}

#[derive(Debug, Clone, PartialEq)]
pub enum SyncInput {
    /// Begin (or begin again) with the locally kept checkpoint.
    Start {
        checkpoint: Option<Value>,
    },
    Stop,
    /// The reply of request `id`: its status and its body as JSON (`null` when it is not JSON).
    Reply {
        id: u64,
        status: u16,
        body: Value,
    },
    /// Request `id` failed before a reply (network, CORS, aborted).
    Failed {
        id: u64,
        reason: String,
    },
    /// A read or write of this browser's store failed.
    LocalFailed {
        reason: String,
    },
    Outbox {
        entries: Vec<OutboxEntry>,
    },
    /// What is known of the asked documents; `pending` lists those with unpushed changes.
    Known {
        known: HashMap<String, RevInfo>,
        pending: Vec<String>,
    },
    Stored,
    /// Something changed locally: push soon.
    LocalChange,
    Tick,
    Online {
        online: bool,
    },
}

/// Where the replication is; each variant holds what its next input needs.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Off,
    /// `GET` the database: is it a CouchDB database?
    Probing,
    /// `PUT` the database, which did not exist.
    Creating,
    /// `GET _local/{id}`: the checkpoint.
    ReadingCheckpoint,
    ReadingOutbox,
    /// `POST _revs_diff` for the docs to push.
    Diffing {
        docs: Vec<(OutboxEntry, RevInfo)>,
    },
    /// `POST _bulk_docs` of what the server lacks; `all` includes what it had.
    Sending {
        all: Vec<(OutboxEntry, RevInfo)>,
        missing: Vec<String>,
    },
    /// Recording pushed docs; then the outbox again.
    RecordingPush,
    /// `GET _changes` (`wait`: longpoll).
    Listing {
        wait: bool,
    },
    /// Waiting for `Known` of the listed changes.
    Comparing {
        changes: Vec<(String, Vec<String>)>,
        last_seq: Value,
    },
    /// `POST _bulk_get` of the unknown revisions.
    Fetching {
        known: HashMap<String, RevInfo>,
        /// Each document's leaves as `_changes` listed them.
        listed: HashMap<String, Vec<String>>,
        last_seq: Value,
    },
    StoringPull {
        last_seq: Value,
        count: u64,
    },
    /// `PUT _local/{id}` with the new checkpoint.
    Checkpointing {
        last_seq: Value,
    },
    /// A failure: try again at `until` (or when back online).
    Backoff {
        until: u64,
    },
    Offline,
    Stopped,
}

pub struct Replicator {
    replication_id: String,
    phase: Phase,
    now: u64,
    /// The request whose reply is awaited; any other reply is stale.
    request: u64,
    next_request: u64,
    since: Value,
    checkpoint_rev: Option<String>,
    local_checkpoint: Option<Value>,
    local_changed: bool,
    failures: u32,
    status: SyncStatus,
    last_sent: Option<SyncStatus>,
}

impl Replicator {
    /// A replication known by `replication_id` (the host derives it from this device and the
    /// database, so a checkpoint is never another device's).
    pub fn new(replication_id: &str) -> Self {
        Replicator {
            replication_id: replication_id.to_string(),
            phase: Phase::Off,
            now: 0,
            request: 0,
            next_request: 0,
            since: json!(0),
            checkpoint_rev: None,
            local_checkpoint: None,
            local_changed: false,
            failures: 0,
            status: SyncStatus {
                state: "off".into(),
                ..SyncStatus::default()
            },
            last_sent: None,
        }
    }

    pub fn status(&self) -> &SyncStatus {
        &self.status
    }

    /// The one transition function: an input (at `now`) → the next phase and its effects.
    pub fn handle(&mut self, now: u64, input: SyncInput) -> Vec<SyncEffect> {
        self.now = now;
        let mut out = Vec::new();
        match input {
            SyncInput::Start { checkpoint } => {
                if self.request != 0 {
                    out.push(SyncEffect::Abort { id: self.request });
                }
                self.local_checkpoint = checkpoint;
                self.failures = 0;
                self.status.error = None;
                self.probe(&mut out);
            }
            SyncInput::Stop => {
                if let Phase::Listing { wait: true } = self.phase {
                    out.push(SyncEffect::Abort { id: self.request });
                }
                self.phase = Phase::Off;
                self.request = 0;
            }
            SyncInput::Reply { id, status, body } if id == self.request && id != 0 => {
                self.request = 0;
                self.reply(status, body, &mut out);
            }
            SyncInput::Failed { id, reason } if id == self.request && id != 0 => {
                self.request = 0;
                self.retry_later(SyncError::Network { message: reason }, &mut out);
            }
            SyncInput::Reply { .. } | SyncInput::Failed { .. } => {}
            SyncInput::LocalFailed { reason } => {
                if !matches!(self.phase, Phase::Off | Phase::Stopped) {
                    self.retry_later(
                        SyncError::Storage {
                            message: format!("this browser's storage: {reason}"),
                        },
                        &mut out,
                    );
                }
            }
            SyncInput::Outbox { entries } if self.phase == Phase::ReadingOutbox => {
                self.push(entries, &mut out);
            }
            SyncInput::Known { known, pending } => {
                if let Phase::Comparing { changes, last_seq } = &self.phase {
                    let (changes, last_seq) = (changes.clone(), last_seq.clone());
                    self.fetch(changes, last_seq, known, pending, &mut out);
                }
            }
            SyncInput::Stored => match std::mem::replace(&mut self.phase, Phase::Off) {
                Phase::RecordingPush => self.read_outbox(&mut out),
                Phase::StoringPull { last_seq, count } => {
                    self.status.pulled += count;
                    self.checkpoint(last_seq, &mut out);
                }
                other => self.phase = other,
            },
            SyncInput::Outbox { .. } => {}
            SyncInput::LocalChange => {
                self.local_changed = true;
                if let Phase::Listing { wait: true } = self.phase {
                    out.push(SyncEffect::Abort { id: self.request });
                    self.request = 0;
                    self.read_outbox(&mut out);
                }
            }
            SyncInput::Tick => {
                if matches!(self.phase, Phase::Backoff { until } if now >= until) {
                    self.probe(&mut out);
                }
            }
            SyncInput::Online { online } => match (&self.phase, online) {
                (Phase::Off | Phase::Stopped, _) => {}
                (_, false) => {
                    if self.request != 0 {
                        out.push(SyncEffect::Abort { id: self.request });
                    }
                    self.request = 0;
                    self.phase = Phase::Offline;
                    self.set_state("offline");
                }
                (Phase::Offline | Phase::Backoff { .. }, true) => self.probe(&mut out),
                (_, true) => {}
            },
        }
        self.status_effect(&mut out);
        out
    }

    fn request(
        &mut self,
        method: Method,
        path: String,
        body: Option<Value>,
        wait: bool,
    ) -> SyncEffect {
        self.next_request += 1;
        self.request = self.next_request;
        SyncEffect::Http(HttpRequest {
            id: self.request,
            method,
            path,
            body,
            wait,
        })
    }

    fn set_state(&mut self, state: &str) {
        self.status.state = state.to_string();
        if state != "retrying" {
            self.status.retry_at = None;
        }
    }

    fn status_effect(&mut self, out: &mut Vec<SyncEffect>) {
        if self.last_sent.as_ref() != Some(&self.status) {
            self.last_sent = Some(self.status.clone());
            out.push(SyncEffect::Status(self.status.clone()));
        }
    }

    fn checkpoint_path(&self) -> String {
        format!("_local/{}", encode(&self.replication_id))
    }

    fn probe(&mut self, out: &mut Vec<SyncEffect>) {
        self.phase = Phase::Probing;
        self.set_state("connecting");
        out.push(self.request(Method::Get, String::new(), None, false));
    }

    fn reply(&mut self, status: u16, body: Value, out: &mut Vec<SyncEffect>) {
        let phase = std::mem::replace(&mut self.phase, Phase::Off);
        if let Some(error) = refusal(status, &body) {
            return self.stop(error);
        }
        match phase {
            Phase::Probing if status == 404 && body["error"].as_str() == Some("not_found") => {
                self.phase = Phase::Creating;
                out.push(self.request(Method::Put, String::new(), None, false));
            }
            Phase::Probing if status == 200 && body.get("db_name").is_some() => {
                self.read_checkpoint(out)
            }
            Phase::Probing if !(500..600).contains(&status) => self.stop(SyncError::NotCouchDb {
                message: format!("the URL answered {status}, not as a CouchDB database would"),
            }),
            Phase::Creating if matches!(status, 201 | 202 | 412) => self.read_checkpoint(out),
            Phase::Creating if !(500..600).contains(&status) => self.stop(SyncError::NoDatabase {
                message: format!("the database does not exist and creating it answered {status}"),
            }),
            Phase::ReadingCheckpoint if status == 200 || status == 404 => {
                self.checkpoint_rev = body.get("_rev").and_then(Value::as_str).map(str::to_string);
                let remote = body.get("last_seq").cloned();
                // The protocol's rule: resume only where both sides agree; else from the start
                // (nothing is fetched twice: known revisions are compared first).
                self.since = match (&remote, &self.local_checkpoint) {
                    (Some(r), Some(l)) if r == l => r.clone(),
                    _ => json!(0),
                };
                self.failures = 0;
                self.read_outbox(out);
            }
            Phase::Diffing { docs } if status == 200 => {
                let missing: Vec<String> = docs
                    .iter()
                    .filter(|(entry, info)| {
                        body.get(&entry.id)
                            .and_then(|d| d.get("missing"))
                            .and_then(Value::as_array)
                            .is_some_and(|m| m.iter().any(|r| r.as_str() == Some(&info.rev)))
                    })
                    .map(|(entry, _)| entry.id.clone())
                    .collect();
                self.send(docs, missing, out);
            }
            Phase::Sending { all, missing } if status == 201 || status == 200 => {
                let failed: Vec<String> = body
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter(|r| r.get("error").is_some())
                            .filter_map(|r| r.get("id").and_then(Value::as_str).map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                if !failed.is_empty() {
                    return self.retry_later(
                        SyncError::Server {
                            message: format!(
                                "the server refused {} document(s): {}",
                                failed.len(),
                                failed.join(", ")
                            ),
                        },
                        out,
                    );
                }
                self.status.pushed += missing.len() as u64;
                self.status.synced_at = Some(self.now);
                self.record_push(all, out);
            }
            Phase::Listing { .. } if status == 200 => self.listed(body, out),
            Phase::Fetching {
                known,
                listed,
                last_seq,
            } if status == 200 => {
                let (pulled, again) = choose_pulled(&known, &listed, &body);
                // A leaf seen before won: the same changes are listed again to fetch it.
                let last_seq = if again { self.since.clone() } else { last_seq };
                self.phase = Phase::StoringPull {
                    last_seq,
                    count: pulled.iter().filter(|p| !p.doc.is_null()).count() as u64,
                };
                out.push(SyncEffect::Store {
                    pulled,
                    pushed: Vec::new(),
                });
            }
            Phase::Checkpointing { last_seq } if status == 201 || status == 200 => {
                self.checkpoint_rev = body.get("rev").and_then(Value::as_str).map(str::to_string);
                self.since = last_seq.clone();
                self.status.synced_at = Some(self.now);
                out.push(SyncEffect::Checkpoint { last_seq });
                self.list(out);
            }
            Phase::Checkpointing { .. } if status == 409 => {
                // Another writer moved the checkpoint: read it again and go on from there.
                self.read_checkpoint(out);
            }
            other => {
                let what = phase_name(&other);
                self.retry_later(
                    SyncError::Server {
                        message: format!("{what} answered {status}"),
                    },
                    out,
                );
            }
        }
    }

    fn stop(&mut self, error: SyncError) {
        self.phase = Phase::Stopped;
        self.set_state("stopped");
        self.status.error = Some(error);
    }

    fn retry_later(&mut self, error: SyncError, out: &mut Vec<SyncEffect>) {
        self.failures += 1;
        let delay = (1000u64 << self.failures.min(6)).min(MAX_BACKOFF_MS);
        let until = self.now + delay;
        self.phase = Phase::Backoff { until };
        self.set_state("retrying");
        self.status.retry_at = Some(until);
        self.status.error = Some(error);
        out.push(SyncEffect::Wake { at: until });
    }
}

/// 401/403 stop the replication: trying again cannot help until the settings change.
fn refusal(status: u16, body: &Value) -> Option<SyncError> {
    let reason = body
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    match status {
        401 => Some(SyncError::Unauthorized {
            message: format!("the server did not accept the name and password ({reason})"),
        }),
        403 => Some(SyncError::Forbidden {
            message: format!("the server refused this user ({reason})"),
        }),
        _ => None,
    }
}

fn phase_name(phase: &Phase) -> &'static str {
    match phase {
        Phase::Probing => "the database",
        Phase::Creating => "creating the database",
        Phase::ReadingCheckpoint => "the checkpoint",
        Phase::Diffing { .. } => "_revs_diff",
        Phase::Sending { .. } => "_bulk_docs",
        Phase::Listing { .. } => "_changes",
        Phase::Fetching { .. } => "_bulk_get",
        Phase::Checkpointing { .. } => "saving the checkpoint",
        _ => "the server",
    }
}

fn seq_text(seq: &Value) -> String {
    match seq {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Percent-encodes a path segment or query value (RFC 3986 unreserved characters kept).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
