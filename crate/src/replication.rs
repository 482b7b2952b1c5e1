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
//! local one replaces it; between two branches a message keeps CouchDB's winner (not deleted over
//! deleted, then the longer history, then the greater revision id) — so an edit never loses its
//! message to a removal, and two devices appending while offline keep both sets of messages
//! (distinct ids), ordered by `position` then id; a chat document keeps the newest `updated_at`.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};

/// How many revision ids a document's history keeps (CouchDB's default `_revs_limit` is 1000;
/// a chat's documents change rarely, so a short history is enough to recognise descendants).
pub const HISTORY: usize = 100;
/// Documents per `_changes`, `_bulk_get` and `_bulk_docs` batch.
pub const BATCH: usize = 200;
/// How long a `longpoll` waits on the server before answering empty (ms).
pub const LONGPOLL_MS: u64 = 25_000;
const MAX_BACKOFF_MS: u64 = 60_000;

/// What this replica knows of one document: its current revision, the history behind it, the
/// losing leaves it has seen, and the hash of the body it holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RevInfo {
    pub rev: String,
    /// Revision hashes, newest (this revision's) first.
    pub ancestry: Vec<String>,
    #[serde(default)]
    pub deleted: bool,
    /// Losing leaves already seen (not fetched again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<String>,
    /// For chat documents: `updated_at`, which decides a conflict.
    #[serde(default)]
    pub stamp: f64,
    #[serde(default)]
    pub body_hash: String,
}

impl RevInfo {
    fn generation(&self) -> u64 {
        parse_rev(&self.rev).map_or(0, |(g, _)| g)
    }

    /// Whether `rev` is this revision, one of its ancestors, or a leaf seen and set aside.
    pub fn knows(&self, rev: &str) -> bool {
        self.in_history(rev) || self.seen.iter().any(|s| s == rev)
    }

    /// Whether `rev` is this revision or one of its ancestors.
    fn in_history(&self, rev: &str) -> bool {
        if rev == self.rev {
            return true;
        }
        let (Some((generation, hash)), mine) = (parse_rev(rev), self.generation()) else {
            return false;
        };
        generation <= mine
            && self
                .ancestry
                .get((mine - generation) as usize)
                .is_some_and(|h| h == hash)
    }

    /// Whether this revision descends from (or is) `other`.
    fn descends_from(&self, other: &str) -> bool {
        other.is_empty() || self.in_history(other)
    }
}

/// `"3-abc"` → `(3, "abc")`.
pub fn parse_rev(rev: &str) -> Option<(u64, &str)> {
    let (generation, hash) = rev.split_once('-')?;
    Some((generation.parse().ok()?, hash))
}

/// A stable 128-bit hash (FNV-1a) as 32 hex digits: revision ids and body hashes.
pub fn hash_hex(parts: &[&[u8]]) -> String {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013B;
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for part in parts {
        for byte in *part {
            h = (h ^ u128::from(*byte)).wrapping_mul(PRIME);
        }
        h = (h ^ 0xff).wrapping_mul(PRIME);
    }
    format!("{h:032x}")
}

/// The document id of a chat, and of one of its messages.
pub fn chat_doc_id(chat_id: &str) -> String {
    format!("chat:{chat_id}")
}

pub fn message_doc_id(chat_id: &str, message_id: &str) -> String {
    format!("msg:{chat_id}:{message_id}")
}

/// The document body of a stored message record (`{chat_id, message_id, position, message}`).
pub fn message_doc(record: &Value) -> Value {
    json!({"type": "message", "chat_id": record["chat_id"], "message_id": record["message_id"], "position": record["position"], "message": record["message"]})
}

/// The document body of a chat record: only what syncs (never the draft, the version or the
/// count, which are this browser's).
pub fn chat_doc(chat_id: &str, record: &Value) -> Value {
    json!({"type": "chat", "chat_id": chat_id, "title": record["title"], "thread": record["thread"], "updated_at": record["updated_at"]})
}

/// What a pulled document means for this browser's stores.
#[derive(Debug, Clone, PartialEq)]
pub enum LocalDoc {
    /// The message record to put, or `None`: the message was removed.
    Message {
        chat_id: String,
        message_id: String,
        record: Option<Value>,
    },
    /// The chat's synced fields (`chat_doc`), or `None`: the chat was removed.
    Chat {
        chat_id: String,
        fields: Option<Value>,
    },
}

/// A pulled document (with `_id`, `_deleted`) as `LocalDoc`; `None` for a document not ours.
pub fn local_doc(doc: &Value) -> Option<LocalDoc> {
    let id = doc.get("_id")?.as_str()?;
    let deleted = doc.get("_deleted").and_then(Value::as_bool) == Some(true);
    let body = body_of(doc);
    if let Some(rest) = id.strip_prefix("msg:") {
        // The ids come from the body; the document id is the fallback (an id may hold `:`).
        let (chat_id, message_id) = match (body["chat_id"].as_str(), body["message_id"].as_str()) {
            (Some(chat), Some(message)) => (chat.to_string(), message.to_string()),
            _ => {
                let (chat, message) = rest.split_once(':')?;
                (chat.to_string(), message.to_string())
            }
        };
        let record = (!deleted).then(|| json!({"chat_id": chat_id, "message_id": message_id, "position": body["position"], "message": body["message"]}));
        return Some(LocalDoc::Message {
            chat_id,
            message_id,
            record,
        });
    }
    let chat_id = id.strip_prefix("chat:")?.to_string();
    Some(LocalDoc::Chat {
        chat_id,
        fields: (!deleted).then_some(body),
    })
}

/// A changed document waiting to be pushed, as the host read it: its body (the document's own
/// fields, without `_id`/`_rev`), or `None` when it was removed here; the revision this replica
/// knows; `mark`, which the host compares before it clears the entry (a newer change stays).
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxEntry {
    pub id: String,
    pub mark: f64,
    pub body: Option<Value>,
    pub known: Option<RevInfo>,
}

/// A document pushed: the host records its revision and clears the outbox entry if `mark` is
/// still the entry's.
#[derive(Clone, Debug, PartialEq)]
pub struct Pushed {
    pub id: String,
    pub mark: f64,
    pub info: RevInfo,
}

/// A pulled document to store here (`doc` has `_id`, `_rev`, `_deleted` when removed), or a
/// losing leaf to remember (`doc` null).
#[derive(Clone, Debug, PartialEq)]
pub struct Pulled {
    pub id: String,
    pub doc: Value,
    pub info: RevInfo,
}

/// The next revision of a document this replica changed: generation + 1, its hash from the
/// parent and the body (so equal changes on two devices are one revision).
/// The text a body hashes as (`null` for a removed document).
fn body_text(body: Option<&Value>) -> String {
    body.map_or_else(|| "null".to_string(), Value::to_string)
}

pub fn next_revision(known: Option<&RevInfo>, body: Option<&Value>) -> RevInfo {
    let body_text = body_text(body);
    let body_hash = hash_hex(&[body_text.as_bytes()]);
    let parent = known.map_or("", |k| k.rev.as_str());
    let hash = hash_hex(&[parent.as_bytes(), body_text.as_bytes()]);
    let generation = known.map_or(0, RevInfo::generation) + 1;
    let mut ancestry = vec![hash.clone()];
    if let Some(k) = known {
        ancestry.extend(k.ancestry.iter().take(HISTORY - 1).cloned());
    }
    RevInfo {
        rev: format!("{generation}-{hash}"),
        ancestry,
        deleted: body.is_none(),
        // The losing leaves seen stay leaves on the server after a local change (a conflict is
        // not resolved by editing the winner): forgetting them fetched them again each time.
        seen: known.map(|k| k.seen.clone()).unwrap_or_default(),
        stamp: stamp_of(body),
        body_hash,
    }
}

fn stamp_of(body: Option<&Value>) -> f64 {
    body.and_then(|b| b.get("updated_at"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

/// What a remote document means here (the merge rule of the module's head).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Known already: nothing to do.
    Known,
    /// Store it: it descends from the local revision, or wins the conflict.
    Take,
    /// Keep the local revision; remember the remote leaf as seen.
    Keep,
}

/// Chooses between the local revision (if any) and a remote leaf with its history.
pub fn choose(id: &str, local: Option<&RevInfo>, remote: &RevInfo) -> Choice {
    let Some(local) = local else {
        return Choice::Take;
    };
    if local.knows(&remote.rev) {
        return Choice::Known;
    }
    if remote.descends_from(&local.rev) {
        return Choice::Take;
    }
    let key = |r: &RevInfo| {
        (
            !r.deleted,
            r.generation(),
            parse_rev(&r.rev).map(|(_, h)| h.to_string()),
        )
    };
    let remote_wins = if id.starts_with("chat:") {
        (remote.stamp, key(remote)) > (local.stamp, key(local))
    } else {
        key(remote) > key(local)
    };
    if remote_wins {
        Choice::Take
    } else {
        Choice::Keep
    }
}

/// The revision history of a received document (`_revisions`), as a `RevInfo`.
pub fn info_of(doc: &Value) -> Option<RevInfo> {
    let rev = doc.get("_rev")?.as_str()?.to_string();
    let (generation, hash) = parse_rev(&rev)?;
    let ancestry = doc
        .get("_revisions")
        .and_then(|r| {
            let start = r.get("start")?.as_u64()?;
            let ids: Vec<String> = r
                .get("ids")?
                .as_array()?
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .take(HISTORY)
                .collect();
            (start == generation && ids.first().map(String::as_str) == Some(hash)).then_some(ids)
        })
        .unwrap_or_else(|| vec![hash.to_string()]);
    let deleted = doc.get("_deleted").and_then(Value::as_bool) == Some(true);
    let body = body_of(doc);
    Some(RevInfo {
        rev,
        ancestry,
        deleted,
        seen: Vec::new(),
        stamp: stamp_of(Some(&body)),
        body_hash: hash_hex(&[body_text((!deleted).then_some(&body)).as_bytes()]),
    })
}

/// A document's own fields (no `_id`, `_rev`, `_revisions`, …).
pub fn body_of(doc: &Value) -> Value {
    match doc {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('_'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => Value::Object(Map::new()),
    }
}

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
            Phase::Fetching { known, last_seq } if status == 200 => {
                let pulled = choose_pulled(&known, &body);
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

    fn read_checkpoint(&mut self, out: &mut Vec<SyncEffect>) {
        self.phase = Phase::ReadingCheckpoint;
        let path = self.checkpoint_path();
        out.push(self.request(Method::Get, path, None, false));
    }

    fn read_outbox(&mut self, out: &mut Vec<SyncEffect>) {
        self.local_changed = false;
        self.phase = Phase::ReadingOutbox;
        self.set_state("pushing");
        out.push(SyncEffect::ReadOutbox { limit: BATCH });
    }

    /// The outbox read: each changed doc gets its next revision (unless its body is the one the
    /// replica already holds), and `_revs_diff` asks what the server lacks.
    fn push(&mut self, entries: Vec<OutboxEntry>, out: &mut Vec<SyncEffect>) {
        if entries.is_empty() {
            return self.list(out);
        }
        let docs: Vec<(OutboxEntry, RevInfo)> = entries
            .into_iter()
            .map(|entry| {
                let fresh = next_revision(entry.known.as_ref(), entry.body.as_ref());
                let info = match &entry.known {
                    Some(known) if known.body_hash == fresh.body_hash => known.clone(),
                    _ => fresh,
                };
                (entry, info)
            })
            .collect();
        let mut diff = Map::new();
        for (entry, info) in &docs {
            diff.insert(entry.id.clone(), json!([info.rev]));
        }
        self.phase = Phase::Diffing { docs };
        out.push(self.request(
            Method::Post,
            "_revs_diff".into(),
            Some(Value::Object(diff)),
            false,
        ));
    }

    fn send(
        &mut self,
        all: Vec<(OutboxEntry, RevInfo)>,
        missing: Vec<String>,
        out: &mut Vec<SyncEffect>,
    ) {
        let docs: Vec<Value> = all
            .iter()
            .filter(|(entry, _)| missing.contains(&entry.id))
            .map(|(entry, info)| outgoing_doc(entry, info))
            .collect();
        if docs.is_empty() {
            // The server has every revision already (another device made the same changes).
            return self.record_push(all, out);
        }
        self.phase = Phase::Sending { all, missing };
        out.push(self.request(
            Method::Post,
            "_bulk_docs".into(),
            Some(json!({"new_edits": false, "docs": docs})),
            false,
        ));
    }

    /// The pushed docs' revisions are recorded (and their outbox entries cleared); then the
    /// outbox again.
    fn record_push(&mut self, all: Vec<(OutboxEntry, RevInfo)>, out: &mut Vec<SyncEffect>) {
        let pushed = all
            .into_iter()
            .map(|(entry, info)| Pushed {
                id: entry.id,
                mark: entry.mark,
                info,
            })
            .collect();
        self.phase = Phase::RecordingPush;
        out.push(SyncEffect::Store {
            pulled: Vec::new(),
            pushed,
        });
    }

    fn list(&mut self, out: &mut Vec<SyncEffect>) {
        if self.local_changed {
            return self.read_outbox(out);
        }
        self.phase = Phase::Listing { wait: false };
        self.set_state("pulling");
        let path = format!(
            "_changes?style=all_docs&limit={BATCH}&since={}",
            encode(&seq_text(&self.since))
        );
        out.push(self.request(Method::Get, path, None, false));
    }

    fn listen(&mut self, out: &mut Vec<SyncEffect>) {
        self.phase = Phase::Listing { wait: true };
        self.set_state("live");
        self.status.error = None;
        self.failures = 0;
        let path = format!(
            "_changes?style=all_docs&limit={BATCH}&feed=longpoll&timeout={LONGPOLL_MS}&since={}",
            encode(&seq_text(&self.since))
        );
        out.push(self.request(Method::Get, path, None, true));
    }

    /// A `_changes` page: nothing new → wait on the feed; else ask what is known of its docs.
    fn listed(&mut self, body: Value, out: &mut Vec<SyncEffect>) {
        let last_seq = body
            .get("last_seq")
            .cloned()
            .unwrap_or_else(|| self.since.clone());
        let results = body
            .get("results")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let changes: Vec<(String, Vec<String>)> = results
            .iter()
            .filter_map(|r| {
                let id = r.get("id")?.as_str()?;
                if !(id.starts_with("chat:") || id.starts_with("msg:")) {
                    return None;
                }
                let revs = r
                    .get("changes")?
                    .as_array()?
                    .iter()
                    .filter_map(|c| c.get("rev")?.as_str().map(str::to_string))
                    .collect();
                Some((id.to_string(), revs))
            })
            .collect();
        if results.is_empty() {
            if last_seq != self.since {
                return self.checkpoint(last_seq, out);
            }
            if self.local_changed {
                return self.read_outbox(out);
            }
            return self.listen(out);
        }
        if changes.is_empty() {
            return self.checkpoint(last_seq, out);
        }
        self.set_state("pulling");
        let ids = changes.iter().map(|(id, _)| id.clone()).collect();
        self.phase = Phase::Comparing { changes, last_seq };
        out.push(SyncEffect::ReadKnown { ids });
    }

    /// The revisions not known here (of docs without unpushed changes: those are pushed first,
    /// and the push makes the server list them again with every leaf) are fetched.
    fn fetch(
        &mut self,
        changes: Vec<(String, Vec<String>)>,
        last_seq: Value,
        known: HashMap<String, RevInfo>,
        pending: Vec<String>,
        out: &mut Vec<SyncEffect>,
    ) {
        if !pending.is_empty() {
            // Local changes first: their push lists these docs again with every leaf.
            self.local_changed = true;
        }
        let wanted: Vec<Value> = changes
            .iter()
            .filter(|(id, _)| !pending.contains(id))
            .flat_map(|(id, revs)| {
                let local = known.get(id);
                revs.iter()
                    .filter(move |rev| !local.is_some_and(|l| l.knows(rev)))
                    .map(move |rev| json!({"id": id, "rev": rev}))
            })
            .collect();
        if wanted.is_empty() {
            if pending.is_empty() {
                return self.checkpoint(last_seq, out);
            }
            return self.read_outbox(out);
        }
        let last_seq = if pending.is_empty() {
            last_seq
        } else {
            self.since.clone()
        };
        self.phase = Phase::Fetching { known, last_seq };
        out.push(self.request(
            Method::Post,
            "_bulk_get?revs=true".into(),
            Some(json!({"docs": wanted})),
            false,
        ));
    }

    fn checkpoint(&mut self, last_seq: Value, out: &mut Vec<SyncEffect>) {
        if last_seq == self.since {
            return self.list_or_push(out);
        }
        let mut doc = json!({"last_seq": last_seq, "replicator": "palaver"});
        if let Some(rev) = &self.checkpoint_rev {
            doc["_rev"] = json!(rev);
        }
        self.phase = Phase::Checkpointing { last_seq };
        let path = self.checkpoint_path();
        out.push(self.request(Method::Put, path, Some(doc), false));
    }

    fn list_or_push(&mut self, out: &mut Vec<SyncEffect>) {
        if self.local_changed {
            self.read_outbox(out)
        } else {
            self.list(out)
        }
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

/// The document sent for a pushed entry: its body with `_id`, `_rev` and `_revisions`.
fn outgoing_doc(entry: &OutboxEntry, info: &RevInfo) -> Value {
    let mut doc = match &entry.body {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    doc.insert("_id".into(), json!(entry.id));
    doc.insert("_rev".into(), json!(info.rev));
    let generation = parse_rev(&info.rev).map_or(1, |(g, _)| g);
    doc.insert(
        "_revisions".into(),
        json!({"start": generation, "ids": info.ancestry}),
    );
    if entry.body.is_none() {
        doc.insert("_deleted".into(), json!(true));
    }
    Value::Object(doc)
}

/// `_bulk_get`'s answer → what to store: per document, the winning leaf among the local
/// revision and the fetched ones (`choose`), and the losers remembered as seen.
fn choose_pulled(known: &HashMap<String, RevInfo>, body: &Value) -> Vec<Pulled> {
    let mut leaves: BTreeMap<String, Vec<(Value, RevInfo)>> = BTreeMap::new();
    for result in body
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for doc in result
            .get("docs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(doc) = doc.get("ok") else { continue };
            let (Some(id), Some(info)) = (doc.get("_id").and_then(Value::as_str), info_of(doc))
            else {
                continue;
            };
            leaves
                .entry(id.to_string())
                .or_default()
                .push((doc.clone(), info));
        }
    }
    let mut out = Vec::new();
    for (id, docs) in leaves {
        let mut current = known.get(&id).cloned();
        let mut taken: Option<Value> = None;
        let mut seen: Vec<String> = Vec::new();
        for (doc, info) in docs {
            match choose(&id, current.as_ref(), &info) {
                Choice::Known => {}
                Choice::Take => {
                    if let Some(old) = &current {
                        if !info.descends_from(&old.rev) {
                            seen.push(old.rev.clone());
                        }
                        seen.extend(old.seen.iter().cloned());
                    }
                    current = Some(info);
                    taken = Some(doc);
                }
                Choice::Keep => seen.push(info.rev),
            }
        }
        let Some(mut info) = current else { continue };
        for s in seen {
            if !info.knows(&s) {
                info.seen.push(s);
            }
        }
        info.seen.truncate(HISTORY);
        if taken.is_none() && known.get(&id) == Some(&info) {
            continue;
        }
        out.push(Pulled {
            id,
            doc: taken.unwrap_or(Value::Null),
            info,
        });
    }
    out
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
