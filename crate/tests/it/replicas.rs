//! Issue 37: chats on three devices that go offline, edit, append, rename and delete in any order,
//! while the server goes down and comes back. Each device runs the real `Replicator` against an
//! in-memory CouchDB (revision trees, `_revs_diff`, `_bulk_docs` with `new_edits: false`,
//! `_changes` with every leaf, `_bulk_get`), and stores what it pulls with the core's own rules
//! (`message_fate`, `outbox_body`) as the browser host does. After every interleaving, once all
//! are online and synced: every device holds the same chats and messages, and no message is lost
//! that a device added without having seen its chat's deletion.

use palaver::replication::{
    chat_doc_id, local_doc, message_doc_id, message_fate, outbox_body, parse_rev, LocalDoc,
    MessageFate, OutboxEntry, Pulled, Pushed, Replicator, RevInfo, SyncEffect, SyncInput,
};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// One leaf of a document's revision tree: the document as pushed (`_rev`, `_revisions`, …).
#[derive(Clone, Debug)]
struct Leaf {
    generation: u64,
    ids: Vec<String>,
    doc: Value,
}

impl Leaf {
    fn covers(&self, rev: &str) -> bool {
        parse_rev(rev).is_some_and(|(g, h)| {
            g <= self.generation
                && self
                    .ids
                    .get((self.generation - g) as usize)
                    .map(String::as_str)
                    == Some(h)
        })
    }
}

#[derive(Default)]
struct Couch {
    docs: BTreeMap<String, Vec<Leaf>>,
    /// Each document's sequence number (of its last change).
    changed: BTreeMap<String, u64>,
    seq: u64,
    local: HashMap<String, Value>,
    down: bool,
}

impl Couch {
    fn answer(&mut self, path: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.cloned().unwrap_or(Value::Null);
        if path.is_empty() {
            return (200, json!({"db_name": "chats"}));
        }
        if let Some(id) = path.strip_prefix("_local/") {
            return match body {
                Value::Null => match self.local.get(id) {
                    Some(doc) => (200, doc.clone()),
                    None => (404, json!({"error": "not_found"})),
                },
                mut doc => {
                    let rev = format!("0-{}", self.local.len() + 1 + self.seq as usize);
                    doc["_rev"] = json!(rev);
                    self.local.insert(id.to_string(), doc);
                    (201, json!({"ok": true, "rev": rev}))
                }
            };
        }
        if path == "_revs_diff" {
            let mut out = serde_json::Map::new();
            for (id, revs) in body.as_object().into_iter().flatten() {
                let missing: Vec<&Value> = revs
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| !self.knows(id, r.as_str().unwrap_or("")))
                    .collect();
                if !missing.is_empty() {
                    out.insert(id.clone(), json!({ "missing": missing }));
                }
            }
            return (200, Value::Object(out));
        }
        if path == "_bulk_docs" {
            for doc in body["docs"].as_array().into_iter().flatten() {
                self.put(doc);
            }
            return (201, json!([]));
        }
        if path.starts_with("_changes") {
            return (200, self.changes(since_of(path)));
        }
        if path.starts_with("_bulk_get") {
            let results: Vec<Value> = body["docs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|ask| {
                    let (id, rev) = (ask["id"].as_str()?, ask["rev"].as_str()?);
                    let leaf = self.docs.get(id)?.iter().find(|l| l.doc["_rev"] == rev)?;
                    Some(json!({"id": id, "docs": [{"ok": leaf.doc}]}))
                })
                .collect();
            return (200, json!({ "results": results }));
        }
        (404, json!({"error": "not_found", "path": path}))
    }

    fn knows(&self, id: &str, rev: &str) -> bool {
        self.docs
            .get(id)
            .is_some_and(|leaves| leaves.iter().any(|l| l.covers(rev)))
    }

    fn put(&mut self, doc: &Value) {
        let (Some(id), Some(rev)) = (doc["_id"].as_str(), doc["_rev"].as_str()) else {
            return;
        };
        if self.knows(id, rev) {
            return;
        }
        let generation = parse_rev(rev).map_or(0, |(g, _)| g);
        let ids: Vec<String> = doc["_revisions"]["ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        let leaf = Leaf {
            generation,
            ids,
            doc: doc.clone(),
        };
        let leaves = self.docs.entry(id.to_string()).or_default();
        leaves.retain(|old| !leaf.covers(old.doc["_rev"].as_str().unwrap_or("")));
        leaves.push(leaf);
        self.seq += 1;
        self.changed.insert(id.to_string(), self.seq);
    }

    fn changes(&self, since: u64) -> Value {
        let mut listed: Vec<(u64, &String)> = self
            .changed
            .iter()
            .filter(|(_, seq)| **seq > since)
            .map(|(id, seq)| (*seq, id))
            .collect();
        listed.sort();
        let results: Vec<Value> = listed
            .iter()
            .take(200)
            .map(|(seq, id)| {
                let revs: Vec<Value> = self.docs[*id]
                    .iter()
                    .map(|l| json!({"rev": l.doc["_rev"]}))
                    .collect();
                json!({"id": id, "seq": seq, "changes": revs})
            })
            .collect();
        let last = listed
            .iter()
            .take(200)
            .next_back()
            .map_or(since, |(s, _)| *s);
        json!({"results": results, "last_seq": last})
    }
}

fn since_of(path: &str) -> u64 {
    path.split(['?', '&'])
        .find_map(|p| p.strip_prefix("since="))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// An outbox entry: (mark, chat, message, removed with its chat).
type Queued = (f64, String, Option<String>, bool);

/// One browser: its chats and messages as stored, what it knows of each document, its outbox.
struct Device {
    name: String,
    r: Replicator,
    now: u64,
    chats: BTreeMap<String, Value>,
    messages: BTreeMap<(String, String), Value>,
    revs: HashMap<String, RevInfo>,
    outbox: BTreeMap<String, Queued>,
    mark: f64,
    parked: Option<(u64, String)>,
    wake: Option<u64>,
    made: u64,
}

impl Device {
    fn new(name: &str, couch: &mut Couch) -> Device {
        let mut device = Device {
            name: name.to_string(),
            r: Replicator::new(name),
            now: 1_000,
            chats: BTreeMap::new(),
            messages: BTreeMap::new(),
            revs: HashMap::new(),
            outbox: BTreeMap::new(),
            mark: 0.0,
            parked: None,
            wake: None,
            made: 0,
        };
        device.run(couch, SyncInput::Start { checkpoint: None });
        device
    }

    fn queue(&mut self, chat: &str, message: Option<&str>, with_chat: bool) {
        self.mark += 1.0;
        let id = match message {
            Some(m) => message_doc_id(chat, m),
            None => chat_doc_id(chat),
        };
        let entry = (
            self.mark,
            chat.to_string(),
            message.map(str::to_string),
            with_chat,
        );
        self.outbox.insert(id, entry);
    }

    fn touch(&mut self, chat: &str, title: Option<&str>) {
        self.now += 1;
        // Milliseconds differ between devices: a tenth for each (c, d, e).
        let device = self.name.bytes().next().map_or(0, |b| b - b'a');
        let now = self.now as f64 + f64::from(device) / 10.0;
        if let Some(record) = self.chats.get_mut(chat) {
            record["updated_at"] = json!(now);
            if let Some(title) = title {
                record["title"] = json!(title);
            }
            self.queue(chat, None, false);
        }
    }

    /// A turn: the person's message and the answer, after the chat's messages.
    fn append(&mut self, chat: &str) -> Vec<String> {
        if !self.chats.contains_key(chat) {
            return Vec::new();
        }
        let next = self
            .messages
            .iter()
            .filter(|((c, _), _)| c == chat)
            .filter_map(|(_, r)| r["position"].as_f64())
            .fold(0.0, f64::max)
            .floor()
            + 1.0;
        let mut added = Vec::new();
        for (i, role) in ["user", "assistant"].into_iter().enumerate() {
            self.made += 1;
            let id = format!("{}-{}", self.name, self.made);
            let record = json!({"chat_id": chat, "message_id": id, "position": next + i as f64 / 1024.0,
                "message": {"role": role, "content": format!("{role} {id}")}});
            self.messages.insert((chat.to_string(), id.clone()), record);
            self.queue(chat, Some(&id), false);
            added.push(id);
        }
        self.touch(chat, None);
        added
    }

    fn edit(&mut self, chat: &str) {
        let key = self.messages.keys().find(|(c, _)| c == chat).cloned();
        if let Some(key) = key {
            let text = format!("edited on {} at {}", self.name, self.now);
            if let Some(record) = self.messages.get_mut(&key) {
                record["message"]["content"] = json!(text);
            }
            self.queue(&key.0, Some(&key.1), false);
            self.touch(chat, None);
        }
    }

    /// Deletes the chat; returns the messages it had here.
    fn delete(&mut self, chat: &str) -> Vec<String> {
        if self.chats.remove(chat).is_none() {
            return Vec::new();
        }
        let gone: Vec<String> = self
            .messages
            .keys()
            .filter(|(c, _)| c == chat)
            .map(|(_, m)| m.clone())
            .collect();
        for message in &gone {
            self.messages.remove(&(chat.to_string(), message.clone()));
            self.queue(chat, Some(message), true);
        }
        self.queue(chat, None, false);
        gone
    }

    fn outbox_entries(&self, limit: usize) -> Vec<OutboxEntry> {
        let mut rows: Vec<(&String, &Queued)> = self.outbox.iter().collect();
        rows.sort_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
        rows.into_iter()
            .take(limit)
            .map(|(id, (mark, chat, message, with_chat))| {
                let record = match message {
                    Some(m) => self.messages.get(&(chat.clone(), m.clone())),
                    None => self.chats.get(chat),
                };
                let here = self.chats.contains_key(chat);
                OutboxEntry {
                    id: id.clone(),
                    mark: *mark,
                    body: outbox_body(chat, message.is_some(), record, *with_chat, here),
                    known: self.revs.get(id).cloned(),
                }
            })
            .collect()
    }

    /// Stores a pull as `web/sync/records.rs` does: chats first, then messages by their fate.
    fn store(&mut self, pulled: &[Pulled], pushed: &[Pushed]) {
        let mut ordered: Vec<&Pulled> = pulled.iter().collect();
        ordered.sort_by_key(|p| !p.id.starts_with("chat:"));
        let mut deleted = BTreeSet::new();
        for p in ordered {
            self.revs.insert(p.id.clone(), p.info.clone());
            match local_doc(&p.doc) {
                Some(LocalDoc::Chat { chat_id, fields }) => match fields {
                    None => {
                        self.chats.remove(&chat_id);
                        self.messages.retain(|(c, _), _| *c != chat_id);
                        deleted.insert(chat_id);
                    }
                    Some(fields) => {
                        let record =
                            json!({"title": fields["title"], "updated_at": fields["updated_at"]});
                        self.chats.insert(chat_id, record);
                    }
                },
                Some(LocalDoc::Message {
                    chat_id,
                    message_id,
                    record,
                }) => {
                    let here = !deleted.contains(&chat_id) && self.chats.contains_key(&chat_id);
                    match message_fate(record, &p.doc, here) {
                        MessageFate::Put(record) => {
                            self.chats
                                .entry(chat_id.clone())
                                .or_insert_with(|| json!({"title": "", "updated_at": 0.0}));
                            self.messages.insert((chat_id, message_id), record);
                        }
                        MessageFate::KeepAndPushAgain => {
                            self.queue(&chat_id, Some(&message_id), false);
                            self.touch(&chat_id, None);
                        }
                        MessageFate::Remove => {
                            self.messages.remove(&(chat_id, message_id));
                        }
                    }
                }
                None => {}
            }
        }
        for p in pushed {
            self.revs.insert(p.id.clone(), p.info.clone());
            if self.outbox.get(&p.id).map(|e| e.0) == Some(p.mark) {
                self.outbox.remove(&p.id);
            }
        }
    }

    /// Feeds the replicator `input` and performs its effects until it waits (a longpoll, a
    /// backoff), answering its requests from `couch` (or failing them while it is down).
    fn run(&mut self, couch: &mut Couch, input: SyncInput) {
        let mut inputs = VecDeque::from([input]);
        let mut steps = 0;
        while let Some(input) = inputs.pop_front() {
            steps += 1;
            assert!(
                steps < 20_000,
                "{}: the replication never settles",
                self.name
            );
            self.now += 1;
            for effect in self.r.handle(self.now, input) {
                match effect {
                    SyncEffect::Http(request) if request.wait && !couch.down => {
                        self.parked = Some((request.id, request.path));
                    }
                    SyncEffect::Http(request) if couch.down => {
                        inputs.push_back(SyncInput::Failed {
                            id: request.id,
                            reason: "the server is down".into(),
                        })
                    }
                    SyncEffect::Http(request) => {
                        let (status, body) = couch.answer(&request.path, request.body.as_ref());
                        inputs.push_back(SyncInput::Reply {
                            id: request.id,
                            status,
                            body,
                        });
                    }
                    SyncEffect::Abort { id } => {
                        if self.parked.as_ref().is_some_and(|p| p.0 == id) {
                            self.parked = None;
                        }
                    }
                    SyncEffect::ReadOutbox { limit } => inputs.push_back(SyncInput::Outbox {
                        entries: self.outbox_entries(limit),
                    }),
                    SyncEffect::ReadKnown { ids } => {
                        let known = ids
                            .iter()
                            .filter_map(|id| Some((id.clone(), self.revs.get(id)?.clone())))
                            .collect();
                        let pending = ids
                            .into_iter()
                            .filter(|id| self.outbox.contains_key(id))
                            .collect();
                        inputs.push_back(SyncInput::Known { known, pending });
                    }
                    SyncEffect::Store { pulled, pushed } => {
                        self.store(&pulled, &pushed);
                        inputs.push_back(SyncInput::Stored);
                    }
                    SyncEffect::Wake { at } => self.wake = Some(at),
                    SyncEffect::Checkpoint { .. } | SyncEffect::Status(_) => {}
                }
            }
        }
    }

    /// What a browser does when it is online: retries after a failure, pushes its changes,
    /// and answers its waiting `_changes` when the server has news.
    fn sync(&mut self, couch: &mut Couch) {
        if let Some(at) = self.wake.take() {
            self.now = self.now.max(at);
            self.run(couch, SyncInput::Tick);
        }
        if !self.outbox.is_empty() {
            self.run(couch, SyncInput::LocalChange);
        }
        if let Some((id, path)) = self.parked.clone() {
            let news = couch.changed.values().any(|seq| *seq > since_of(&path));
            if couch.down || news {
                self.parked = None;
                let input = if couch.down {
                    SyncInput::Failed {
                        id,
                        reason: "the server is down".into(),
                    }
                } else {
                    let (status, body) = couch.answer(&path, None);
                    SyncInput::Reply { id, status, body }
                };
                self.run(couch, input);
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Append(usize, usize),
    Edit(usize, usize),
    Rename(usize, usize),
    Delete(usize, usize),
    Sync(usize),
    ServerDown,
    ServerUp,
}

fn op(devices: usize, chats: usize) -> impl Strategy<Value = Op> {
    let d = 0..devices;
    let c = 0..chats;
    prop_oneof![
        3 => (d.clone(), c.clone()).prop_map(|(d, c)| Op::Append(d, c)),
        1 => (d.clone(), c.clone()).prop_map(|(d, c)| Op::Edit(d, c)),
        1 => (d.clone(), c.clone()).prop_map(|(d, c)| Op::Rename(d, c)),
        1 => (d.clone(), c).prop_map(|(d, c)| Op::Delete(d, c)),
        4 => d.prop_map(Op::Sync),
        1 => Just(Op::ServerDown),
        1 => Just(Op::ServerUp),
    ]
}

/// Runs `ops` on `n` devices that start with two synced chats; checks the end state.
fn interleave(n: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut couch = Couch::default();
    let names = ["c", "d", "e"];
    let mut devices: Vec<Device> = (0..n).map(|i| Device::new(names[i], &mut couch)).collect();
    let chats = ["chat-x", "chat-y"];
    for chat in chats {
        devices[0]
            .chats
            .insert(chat.into(), json!({"title": chat, "updated_at": 1.0}));
        devices[0].queue(chat, None, false);
        devices[0].append(chat);
    }
    for _ in 0..2 {
        for device in devices.iter_mut() {
            device.sync(&mut couch);
        }
    }
    // Messages added, and those a device deleted knowing them (which may then be gone).
    let mut added: Vec<(String, String)> = Vec::new();
    let mut deleted_knowingly: BTreeSet<(String, String)> = BTreeSet::new();
    for op in ops {
        match *op {
            Op::Append(d, c) => {
                for m in devices[d].append(chats[c]) {
                    added.push((chats[c].to_string(), m));
                }
            }
            Op::Edit(d, c) => devices[d].edit(chats[c]),
            Op::Rename(d, c) => {
                let title = format!("{} by {}", chats[c], devices[d].name);
                devices[d].touch(chats[c], Some(&title));
            }
            Op::Delete(d, c) => {
                for m in devices[d].delete(chats[c]) {
                    deleted_knowingly.insert((chats[c].to_string(), m));
                }
            }
            Op::Sync(d) => devices[d].sync(&mut couch),
            Op::ServerDown => couch.down = true,
            Op::ServerUp => couch.down = false,
        }
    }
    couch.down = false;
    for _ in 0..12 {
        for device in devices.iter_mut() {
            device.sync(&mut couch);
        }
    }
    let first = &devices[0];
    for device in &devices {
        prop_assert!(
            device.outbox.is_empty(),
            "{}: unpushed {:?}",
            device.name,
            device.outbox
        );
        prop_assert_eq!(
            &device.chats,
            &first.chats,
            "chats of {} and {}",
            device.name,
            first.name
        );
        prop_assert_eq!(
            &device.messages,
            &first.messages,
            "messages of {} and {}",
            device.name,
            first.name
        );
        for (chat, _) in device.messages.keys() {
            prop_assert!(
                device.chats.contains_key(chat),
                "{}: a message of a chat not here",
                device.name
            );
        }
    }
    for (chat, message) in &added {
        let key = (chat.clone(), message.clone());
        if !deleted_knowingly.contains(&key) {
            prop_assert!(
                first.messages.contains_key(&key),
                "{message} of {chat} was lost"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn two_devices_end_equal_and_lose_no_message(ops in prop::collection::vec(op(2, 2), 0..40)) {
        interleave(2, &ops)?;
    }

    #[test]
    fn three_devices_end_equal_and_lose_no_message(ops in prop::collection::vec(op(3, 2), 0..60)) {
        interleave(3, &ops)?;
    }
}
