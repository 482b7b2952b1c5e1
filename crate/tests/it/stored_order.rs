//! Issue 20: message records keyed by message id with an order field. Whatever a chat goes
//! through (appends, removals and insertions anywhere, edits, failed saves, reloads), the store
//! that applies each save — upserts by id, deletes of removed ids — read back in position order
//! is the chat; and an early removal or edit writes one record, not every later one.

use palaver::message::{ChatMessage, Content, Role};
use palaver::thread::ThreadParams;
use palaver::trajectory::TrajectoryText;
use palaver::trajectory::{StoredMessage, TrajectoryBook, TrajectorySave};
use proptest::prelude::*;
use std::collections::HashMap;

/// A store as IndexedDB keeps it: id → (position, message id); order comes from positions.
#[derive(Default)]
struct Store(HashMap<String, f64>);

impl Store {
    fn apply(&mut self, save: &TrajectorySave) {
        for upsert in &save.upserts {
            self.0
                .insert(upsert.message.message_id.clone(), upsert.position);
        }
        for id in &save.removed {
            self.0.remove(id);
        }
    }

    /// The records in position order, as the `position` index lists them.
    fn ordered(&self) -> Vec<StoredMessage> {
        let mut rows: Vec<StoredMessage> = self
            .0
            .iter()
            .map(|(id, p)| StoredMessage {
                message_id: id.clone(),
                position: *p,
            })
            .collect();
        rows.sort_by(|a, b| a.position.total_cmp(&b.position));
        rows
    }

    fn ids(&self) -> Vec<String> {
        self.ordered().into_iter().map(|r| r.message_id).collect()
    }
}

fn message(id: &str) -> ChatMessage {
    ChatMessage::new(id, Role::User, Content::Text(id.into()))
}

/// A chat's messages and its book, driven as the session drives them.
struct Chat {
    messages: Vec<ChatMessage>,
    book: TrajectoryBook,
    next_id: usize,
}

impl Chat {
    fn new() -> Self {
        Chat {
            messages: Vec::new(),
            book: TrajectoryBook::default(),
            next_id: 0,
        }
    }

    fn fresh_id(&mut self) -> String {
        self.next_id += 1;
        format!("m{}", self.next_id)
    }

    fn insert(&mut self, at: usize) {
        let id = self.fresh_id();
        let at = at.min(self.messages.len());
        self.book.touch(&id);
        self.messages.insert(at, message(&id));
    }

    fn remove(&mut self, at: usize) {
        if at < self.messages.len() {
            let gone = self.messages.remove(at);
            self.book.remove(&gone.message_id);
        }
    }

    fn edit(&mut self, at: usize) {
        if let Some(m) = self.messages.get_mut(at) {
            m.content = Content::Text(format!("{} edited", m.message_id));
            let id = m.message_id.clone();
            self.book.touch(&id);
        }
    }

    fn save(&mut self) -> Option<TrajectorySave> {
        self.book
            .next_save(0, "c", &ThreadParams::default(), &self.messages, None)
    }

    fn ids(&self) -> Vec<String> {
        self.messages.iter().map(|m| m.message_id.clone()).collect()
    }
}

/// Saves and acknowledges until nothing is pending, applying each save to `store`.
fn settle(chat: &mut Chat, store: &mut Store) {
    while let Some(save) = chat.save() {
        store.apply(&save);
        chat.book.acked(save.version);
    }
}

#[test]
fn an_early_removal_or_edit_writes_one_record_in_a_long_chat() {
    let mut chat = Chat::new();
    let mut store = Store::default();
    for i in 0..5000 {
        chat.insert(i);
    }
    settle(&mut chat, &mut store);
    chat.remove(10);
    let save = chat.save().expect("a save");
    assert!(save.upserts.is_empty(), "no later record rewritten");
    assert_eq!(save.removed.len(), 1);
    store.apply(&save);
    chat.book.acked(save.version);
    chat.edit(10);
    let save = chat.save().expect("a save");
    assert_eq!(save.upserts.len(), 1);
    store.apply(&save);
    chat.book.acked(save.version);
    chat.insert(10);
    let save = chat.save().expect("a save");
    assert_eq!(
        save.upserts.len(),
        1,
        "an insertion takes a position between its neighbours"
    );
    store.apply(&save);
    chat.book.acked(save.version);
    assert_eq!(store.ids(), chat.ids());
}

#[test]
fn repeated_edits_keep_their_position_and_many_insertions_at_one_place_renumber_in_order() {
    let mut chat = Chat::new();
    let mut store = Store::default();
    for i in 0..20 {
        chat.insert(i);
    }
    settle(&mut chat, &mut store);
    let before = store.0.clone();
    for _ in 0..500 {
        chat.edit(5);
        settle(&mut chat, &mut store);
    }
    assert_eq!(
        store.0, before,
        "an edit keeps the message where it is stored"
    );
    // Halving the gap at one place runs out of numbers after ~50 insertions: then the records
    // from there on are renumbered, and the order stays right throughout.
    for _ in 0..200 {
        chat.insert(6);
        settle(&mut chat, &mut store);
        assert_eq!(store.ids(), chat.ids());
    }
}

#[test]
fn a_failed_save_keeps_its_changes_and_the_retry_lands_in_order() {
    let mut chat = Chat::new();
    let mut store = Store::default();
    for i in 0..5 {
        chat.insert(i);
    }
    settle(&mut chat, &mut store);
    chat.insert(2);
    chat.remove(0);
    let failed = chat.save().expect("a save");
    chat.book.failed(0, failed.version, "QuotaExceededError");
    chat.insert(1);
    while let Some(save) = chat.book.next_save(
        u64::MAX,
        "c",
        &ThreadParams::default(),
        &chat.messages,
        None,
    ) {
        store.apply(&save);
        chat.book.acked(save.version);
    }
    assert_eq!(store.ids(), chat.ids());
}

#[test]
fn restore_rewrites_what_does_not_match_the_store_and_removes_strays() {
    let messages: Vec<ChatMessage> = ["a", "b-repaired", "c"]
        .iter()
        .map(|id| message(id))
        .collect();
    let stored = vec![
        StoredMessage {
            message_id: "a".into(),
            position: 0.0,
        },
        StoredMessage {
            message_id: "b".into(),
            position: 1.0,
        },
        StoredMessage {
            message_id: "c".into(),
            position: 5.0,
        },
    ];
    let mut book = TrajectoryBook::default();
    book.restore(&messages, Some(&stored));
    let save = book
        .next_save(0, "c", &ThreadParams::default(), &messages, None)
        .expect("the repair is saved");
    assert_eq!(save.removed, vec!["b".to_string()]);
    assert_eq!(save.upserts.len(), 1);
    assert_eq!(save.upserts[0].message.message_id, "b-repaired");
    assert!(save.upserts[0].position > 0.0 && save.upserts[0].position < 5.0);
}

#[derive(Debug, Clone)]
enum Op {
    Insert(usize),
    Remove(usize),
    Edit(usize),
    Save,
    FailSave,
    Reload,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..40).prop_map(Op::Insert),
        2 => (0usize..40).prop_map(Op::Remove),
        2 => (0usize..40).prop_map(Op::Edit),
        2 => Just(Op::Save),
        1 => Just(Op::FailSave),
        1 => Just(Op::Reload),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn the_store_read_in_position_order_is_the_chat(ops in prop::collection::vec(op(), 1..80)) {
        let mut chat = Chat::new();
        let mut store = Store::default();
        for op in ops {
            match op {
                Op::Insert(at) => chat.insert(at),
                Op::Remove(at) => chat.remove(at),
                Op::Edit(at) => chat.edit(at),
                Op::Save => settle(&mut chat, &mut store),
                Op::FailSave => {
                    if let Some(save) = chat.save() {
                        chat.book.failed(0, save.version, "failed");
                        // The retry waits for its time; let it come.
                        if let Some(save) = chat.book.next_save(u64::MAX, "c", &ThreadParams::default(), &chat.messages, None) {
                            store.apply(&save);
                            chat.book.acked(save.version);
                        }
                    }
                }
                Op::Reload => {
                    settle(&mut chat, &mut store);
                    let mut book = TrajectoryBook::default();
                    let ordered = store.ordered();
                    let messages: Vec<ChatMessage> = ordered.iter().map(|r| message(&r.message_id)).collect();
                    book.restore(&messages, Some(&ordered));
                    prop_assert!(!book.is_dirty(), "a clean store reloads clean");
                    chat.messages = messages;
                    chat.book = book;
                }
            }
        }
        settle(&mut chat, &mut store);
        prop_assert_eq!(store.ids(), chat.ids());
    }
}

/// A chat continued by an engine whose ids start again (a reload without an id prefix) never gives
/// a new message an id the chat already has: records are keyed by it, so a repeat would overwrite
/// an earlier message. And `ReloadChat` gives an idle chat the stored history as a snapshot.
#[test]
fn a_continued_chat_never_reuses_a_message_id_and_reload_chat_takes_the_store() {
    use palaver::engine::{Engine, Input};
    use palaver::event::Event;
    use serde_json::json;
    let mut engine = Engine::new(Default::default());
    let trajectory = json!({"messages": [
        {"role": "user", "content": "first", "message_id": "m1"},
        {"role": "assistant", "content": "answer", "message_id": "m2"},
    ]});
    engine.handle(
        1,
        Input::OpenChat {
            chat_id: "c".into(),
            trajectory: Some(TrajectoryText::from_value(&trajectory)),
            stored: None,
        },
    );
    let step = engine.handle(
        2,
        Input::Command {
            chat_id: "c".into(),
            command: json!({"type": "user_message", "content": "again", "client_request_id": "u1"}),
        },
    );
    let added: Vec<String> = step
        .events
        .iter()
        .filter_map(|e| match &e.event {
            Event::MessageAdded { message, .. } if message.role == Role::User => {
                Some(message.message_id.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(added.len(), 1, "{:?}", step.events);
    assert!(
        added[0] != "m1" && added[0] != "m2",
        "a new id, not {}",
        added[0]
    );

    // Not saved yet (no save acknowledged): the stored history waits.
    let synced = json!({"messages": [
        {"role": "user", "content": "first", "message_id": "m1"},
        {"role": "user", "content": "from another device", "message_id": "x-m9"},
    ]});
    let refused = engine.handle(
        3,
        Input::ReloadChat {
            chat_id: "c".into(),
            trajectory: TrajectoryText::from_value(&synced),
            stored: None,
        },
    );
    assert_eq!(
        refused.errors.len(),
        1,
        "a busy chat refuses: {:?}",
        refused.events
    );
    let mut other = Engine::new(Default::default());
    other.handle(
        1,
        Input::OpenChat {
            chat_id: "d".into(),
            trajectory: Some(TrajectoryText::from_value(&json!({"messages": []}))),
            stored: None,
        },
    );
    let before = other.snapshot("d").map(|s| s.seq).unwrap_or_default();
    let step = other.handle(
        2,
        Input::ReloadChat {
            chat_id: "d".into(),
            trajectory: TrajectoryText::from_value(&synced),
            stored: None,
        },
    );
    let snapshot = step
        .events
        .iter()
        .find(|e| matches!(e.event, Event::Snapshot { .. }))
        .expect("a snapshot");
    assert_eq!(
        snapshot.seq,
        before + 1,
        "in the event stream, in seq order"
    );
    let Event::Snapshot { messages, .. } = &snapshot.event else {
        unreachable!()
    };
    assert_eq!(
        messages
            .iter()
            .map(|m| m.message_id.as_str())
            .collect::<Vec<_>>(),
        vec!["m1", "x-m9"]
    );
}

/// Two devices append a turn each to the same chat while apart (a question, then its answer
/// and tool messages, saved one by one): merged by position — the order every device reads —
/// each turn stays whole, so the model never gets two questions in a row.
#[test]
fn turns_appended_on_two_devices_stay_whole_when_merged() {
    let mut base = Chat::new();
    let mut store = Store::default();
    base.insert(0);
    base.insert(1);
    settle(&mut base, &mut store);
    let stored = store.ordered();
    let device = |prefix: &str| {
        let mut chat = Chat::new();
        chat.messages = base.messages.clone();
        chat.book.restore(&chat.messages, Some(&stored));
        let mut merged = Store::default();
        let roles = [Role::User, Role::Assistant, Role::Tool, Role::Assistant];
        for (i, role) in roles.into_iter().enumerate() {
            let id = format!("{prefix}-{i}");
            chat.book.touch(&id);
            chat.messages
                .push(ChatMessage::new(&id, role, Content::Text(id.clone())));
            settle(&mut chat, &mut merged);
        }
        merged
    };
    for (c, d) in [("c", "d"), ("dev-7", "dev-2"), ("x1", "x10")] {
        let mut all = Store(store.0.clone());
        all.0.extend(device(c).0);
        all.0.extend(device(d).0);
        let ids = all.ids();
        let turn_of = |id: &String| id.rsplit_once('-').map(|(turn, _)| turn.to_string());
        let tail: Vec<_> = ids[2..].iter().map(turn_of).collect();
        let whole = tail.windows(2).filter(|w| w[0] != w[1]).count() == 1;
        assert!(whole, "{c} and {d}: the turns interleave: {ids:?}");
    }
}
