//! Trajectories (SPEC §4): save bookkeeping and tolerant loading.
//!
//! Saving: each mutation bumps the version and marks what changed; at most one save is in flight
//! and the next one waits; only an acknowledged version is clean; a failed save stays dirty, is
//! retried with backoff and shown in `runtime.storage_error`. A save carries only the changed
//! messages (with their index and stored position) and the removed ids: its cost grows with the
//! change. Stored records are keyed by message id and ordered by `position`, a number that stays
//! put when others are removed and is chosen between the neighbours' when one is inserted, so an
//! edit, a removal or an insertion early in a long chat writes one record, not every later one.
//!
//! Loading: unknown keys are kept, missing ids get deterministic ones, a message that does not
//! parse is kept as a `system_notice` event holding its raw JSON, and every repair is reported.

use crate::error::Refusal;
use crate::message::{ChatMessage, Content, Role};
use crate::thread::ThreadParams;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct IndexedMessage {
    pub index: usize,
    /// The stored order field: increasing along the chat, not necessarily dense.
    pub position: f64,
    pub message: ChatMessage,
}

/// A stored message record as the host read it, in stored order: its key and its position.
/// Given with a loaded trajectory so the engine knows where every message already sits.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct StoredMessage {
    pub message_id: String,
    pub position: f64,
}

/// What one save writes: changed messages, removed ids, the thread when it changed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TrajectorySave {
    pub chat_id: String,
    pub version: u64,
    pub message_count: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<Value>,
    pub upserts: Vec<IndexedMessage>,
    pub removed: Vec<String>,
    /// The streaming reply so far, checkpointed (SECURITY decision 5): a message to keep beside
    /// the trajectory, or `null` to clear it once the reply is committed. Absent: unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<Value>,
}

#[derive(Debug, Clone, Default)]
struct Changes {
    touched: BTreeSet<String>,
    removed: BTreeSet<String>,
    thread: bool,
    draft: bool,
}

impl Changes {
    fn is_empty(&self) -> bool {
        self.touched.is_empty() && self.removed.is_empty() && !self.thread && !self.draft
    }

    fn absorb(&mut self, older: Changes) {
        for id in older.touched {
            if !self.removed.contains(&id) {
                self.touched.insert(id);
            }
        }
        for id in older.removed {
            if !self.touched.contains(&id) {
                self.removed.insert(id);
            }
        }
        self.thread |= older.thread;
        self.draft |= older.draft;
    }
}

#[derive(Debug, Default)]
pub struct TrajectoryBook {
    version: u64,
    acked_version: u64,
    /// Changes not saved yet: the next save (SPEC §2 `save_queued`).
    save_queued: Changes,
    /// The save under way, its version and changes (SPEC §2 `save_in_flight`).
    save_in_flight: Option<(u64, Changes)>,
    storage_error: Option<String>,
    failures: u32,
    retry_at: Option<u64>,
    /// The stored position of every message that has one (saved, or being saved).
    positions: HashMap<String, f64>,
}

impl TrajectoryBook {
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn storage_error(&self) -> Option<&str> {
        self.storage_error.as_deref()
    }

    pub fn is_dirty(&self) -> bool {
        !self.save_queued.is_empty() || self.save_in_flight.is_some()
    }

    pub fn touch(&mut self, message_id: &str) {
        self.version += 1;
        self.save_queued.removed.remove(message_id);
        self.save_queued.touched.insert(message_id.to_string());
    }

    pub fn remove(&mut self, message_id: &str) {
        self.version += 1;
        self.save_queued.touched.remove(message_id);
        self.save_queued.removed.insert(message_id.to_string());
        self.positions.remove(message_id);
    }

    /// Learns where the loaded messages are stored (`stored`, in stored order, from the host),
    /// or — without it — takes their indexes as positions. A message whose record does not match
    /// (its id was repaired on load, or it has no record) is saved again under its id, and a
    /// record no message has any more is removed: the store converges on what was loaded.
    pub fn restore(&mut self, messages: &[ChatMessage], stored: Option<&[StoredMessage]>) {
        let Some(stored) = stored else {
            self.positions = messages
                .iter()
                .enumerate()
                .map(|(i, m)| (m.message_id.clone(), i as f64))
                .collect();
            return;
        };
        let loaded: HashSet<&str> = messages.iter().map(|m| m.message_id.as_str()).collect();
        for record in stored {
            if !loaded.contains(record.message_id.as_str()) {
                self.remove(&record.message_id);
            }
        }
        let mut last = f64::NEG_INFINITY;
        for (i, message) in messages.iter().enumerate() {
            match stored.get(i) {
                Some(record)
                    if record.message_id == message.message_id
                        && record.position.is_finite()
                        && record.position > last =>
                {
                    last = record.position;
                    self.positions
                        .insert(message.message_id.clone(), record.position);
                }
                _ => self.touch(&message.message_id),
            }
        }
    }

    /// Positions for the touched messages (indexes sorted): each run of touched messages is spread
    /// between the stored neighbours around it, keeping positions that already fit. When no
    /// number fits between two neighbours (after many insertions at one place), the run extends
    /// to the end of the chat and those records are renumbered. Returns `(index, position)` for
    /// every message to write, which may include untouched ones so renumbered.
    fn assign_positions(
        &mut self,
        touched: &[usize],
        messages: &[ChatMessage],
    ) -> Vec<(usize, f64)> {
        let n = messages.len();
        let known = |positions: &HashMap<String, f64>, i: usize| {
            positions.get(messages[i].message_id.as_str()).copied()
        };
        let mut out = Vec::with_capacity(touched.len());
        let mut next = 0;
        while next < touched.len() {
            let mut first = touched[next];
            let mut last = first;
            // The run: consecutive touched messages, and neighbours without a position.
            loop {
                while next < touched.len() && touched[next] <= last + 1 {
                    last = last.max(touched[next]);
                    next += 1;
                }
                if last + 1 < n && known(&self.positions, last + 1).is_none() {
                    last += 1;
                    continue;
                }
                break;
            }
            while first > 0 && known(&self.positions, first - 1).is_none() {
                first -= 1;
            }
            let below = first.checked_sub(1).and_then(|i| known(&self.positions, i));
            let above = (last + 1 < n)
                .then(|| known(&self.positions, last + 1))
                .flatten();
            let current: Option<Vec<f64>> =
                (first..=last).map(|i| known(&self.positions, i)).collect();
            let spread = current
                .filter(|c| fits(below, c, above))
                .or_else(|| spread(below, above, last - first + 1));
            let spread = match spread {
                Some(spread) => spread,
                None => {
                    last = n - 1;
                    next = touched.len();
                    spread_after(below, last - first + 1)
                }
            };
            for (i, position) in (first..=last).zip(spread) {
                self.positions
                    .insert(messages[i].message_id.clone(), position);
                out.push((i, position));
            }
        }
        out
    }

    pub fn touch_thread(&mut self) {
        self.version += 1;
        self.save_queued.thread = true;
    }

    /// The streaming draft changed (a checkpoint) or went away (committed or dropped).
    pub fn touch_draft(&mut self) {
        self.version += 1;
        self.save_queued.draft = true;
    }

    /// The next save to perform, if one is due and none is in flight.
    pub fn next_save(
        &mut self,
        now: u64,
        chat_id: &str,
        thread: &ThreadParams,
        messages: &[ChatMessage],
        draft: Option<&ChatMessage>,
    ) -> Option<TrajectorySave> {
        if self.save_in_flight.is_some()
            || self.save_queued.is_empty()
            || self.retry_at.is_some_and(|at| now < at)
        {
            return None;
        }
        self.retry_at = None;
        let changes = std::mem::take(&mut self.save_queued);
        let indexes: HashMap<&str, usize> = messages
            .iter()
            .enumerate()
            .map(|(i, m)| (m.message_id.as_str(), i))
            .collect();
        let mut touched: Vec<usize> = changes
            .touched
            .iter()
            .filter_map(|id| indexes.get(id.as_str()).copied())
            .collect();
        touched.sort_unstable();
        let upserts = self
            .assign_positions(&touched, messages)
            .into_iter()
            .map(|(index, position)| IndexedMessage {
                index,
                position,
                message: messages[index].clone(),
            })
            .collect();
        let save = TrajectorySave {
            chat_id: chat_id.to_string(),
            version: self.version,
            message_count: messages.len(),
            thread: changes.thread.then(|| thread.to_json()),
            upserts,
            removed: changes.removed.iter().cloned().collect(),
            draft: changes
                .draft
                .then(|| draft.map_or(Value::Null, |d| json!(d))),
        };
        self.save_in_flight = Some((self.version, changes));
        Some(save)
    }

    pub fn acked(&mut self, version: u64) {
        if self
            .save_in_flight
            .as_ref()
            .is_some_and(|(v, _)| *v == version)
        {
            self.save_in_flight = None;
            self.acked_version = version;
            self.storage_error = None;
            self.failures = 0;
        }
    }

    /// A failed save: its changes go back to pending; returns when to try again.
    pub fn failed(&mut self, now: u64, version: u64, reason: &str) -> Option<u64> {
        let (v, changes) = self.save_in_flight.take()?;
        if v != version {
            self.save_in_flight = Some((v, changes));
            return None;
        }
        self.save_queued.absorb(changes);
        self.storage_error = Some(reason.to_string());
        self.failures += 1;
        let at = now + (1000u64 << self.failures.min(6)).min(60_000);
        self.retry_at = Some(at);
        Some(at)
    }
}

/// Whether `current` is strictly increasing and strictly between `below` and `above`.
fn fits(below: Option<f64>, current: &[f64], above: Option<f64>) -> bool {
    let mut last = below.unwrap_or(f64::NEG_INFINITY);
    for &p in current {
        if !(p.is_finite() && p > last) {
            return false;
        }
        last = p;
    }
    above.is_none_or(|above| last < above)
}

/// `count` increasing positions strictly between `below` and `above` (either may be open), or
/// `None` when the numbers between them are too close to tell apart.
fn spread(below: Option<f64>, above: Option<f64>, count: usize) -> Option<Vec<f64>> {
    let out: Vec<f64> = match (below, above) {
        (_, None) => return Some(spread_after(below, count)),
        (None, Some(above)) => (0..count).map(|j| above - (count - j) as f64).collect(),
        (Some(below), Some(above)) => {
            let step = (above - below) / (count as f64 + 1.0);
            (1..=count).map(|j| below + step * j as f64).collect()
        }
    };
    fits(below, &out, above).then_some(out)
}

/// `count` positions after `below` (from 0 when there is nothing before), one apart.
fn spread_after(below: Option<f64>, count: usize) -> Vec<f64> {
    let start = below.map_or(0.0, |b| b.floor() + 1.0);
    (0..count).map(|j| start + j as f64).collect()
}

/// A trajectory as JSON text, as a host reads it from storage: the engine reads it once, straight
/// into the message model (`load_text`), instead of through a `Value` tree (issue 20).
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(transparent)]
pub struct TrajectoryText(pub Box<RawValue>);

impl TrajectoryText {
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// A trajectory given as a value (tests, the facade's callers).
    pub fn from_value(value: &Value) -> Self {
        TrajectoryText(
            serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned()),
        )
    }
}

impl PartialEq for TrajectoryText {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// A loaded trajectory: thread, messages (repaired) and notes on what was repaired.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub thread: ThreadParams,
    pub messages: Vec<ChatMessage>,
    pub notes: Vec<String>,
    /// The id of a checkpointed streaming reply recovered as an interrupted message (the page
    /// went away mid-stream): it must be saved as a message and its checkpoint cleared.
    pub recovered_draft: Option<String>,
}

/// Loads a Refact-style trajectory (`{id, title, model, messages, …}`) or a bare message array.
pub fn load(chat_id: &str, value: &Value) -> Result<Loaded, Refusal> {
    match value {
        Value::Array(items) => Ok(assemble(
            chat_id,
            items.iter().map(read_value),
            ThreadParams::default(),
            None,
        )),
        Value::Object(map) => {
            let items = map
                .get("messages")
                .and_then(Value::as_array)
                .ok_or_else(no_messages)?;
            Ok(assemble(
                chat_id,
                items.iter().map(read_value),
                thread_from(map),
                map.get("draft"),
            ))
        }
        _ => Err(not_a_trajectory()),
    }
}

/// `load` from JSON text, typed: each message is read straight into the message model, with no
/// `Value` built for it. The common case is one pass: the whole text read with its messages
/// typed in place. A trajectory with a message that does not read (or nested too deep to read in
/// place) is read again tolerantly: its messages kept as texts, each read on its own, so one bad
/// message cannot fail the others (a message that still does not read is parsed once more, to
/// keep it raw). The trajectory's other keys (thread params, the draft) are few and small and go
/// through `Value`. The result equals `load` of the parsed text.
pub fn load_text(chat_id: &str, text: &str) -> Result<Loaded, Refusal> {
    let top = read_top(text, Reading::Typed)
        .or_else(|_| read_top(text, Reading::Tolerant))
        .map_err(|e| Refusal::BadTrajectory {
            reason: format!("the trajectory is not JSON: {e}"),
        })?;
    let (items, rest) = match top {
        TopLevel::Messages(items) => (Some(items), None),
        TopLevel::Trajectory { messages, rest } => (messages, Some(rest)),
        TopLevel::Other => return Err(not_a_trajectory()),
    };
    let items = items.ok_or_else(no_messages)?;
    let thread = rest.as_ref().map(thread_from).unwrap_or_default();
    let draft = rest.as_ref().and_then(|rest| rest.get("draft"));
    Ok(match items {
        Items::Typed(messages) => assemble(chat_id, messages.into_iter().map(Ok), thread, draft),
        Items::Texts(texts) => assemble(chat_id, texts.into_iter().map(read_raw), thread, draft),
    })
}

fn read_top(text: &str, reading: Reading) -> serde_json::Result<TopLevel<'_>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let top = de.deserialize_any(TopLevelVisitor {
        reading,
        text: std::marker::PhantomData,
    })?;
    de.end()?;
    Ok(top)
}

fn no_messages() -> Refusal {
    Refusal::BadTrajectory {
        reason: "a trajectory needs a `messages` array".into(),
    }
}

fn not_a_trajectory() -> Refusal {
    Refusal::BadTrajectory {
        reason: "a trajectory is an object or an array of messages".into(),
    }
}

/// How the messages array is read: typed in place (one pass; any message that does not read
/// fails the whole read), or as texts borrowed from the trajectory, read one by one afterwards.
#[derive(Clone, Copy)]
enum Reading {
    Typed,
    Tolerant,
}

/// The messages of a trajectory as `Reading` left them.
enum Items<'a> {
    Typed(Vec<ChatMessage>),
    Texts(Vec<&'a RawValue>),
}

/// The top of a trajectory's text. `messages` is `None` when the key is missing or not an array.
enum TopLevel<'a> {
    Messages(Items<'a>),
    Trajectory {
        messages: Option<Items<'a>>,
        rest: Map<String, Value>,
    },
    Other,
}

struct TopLevelVisitor<'a> {
    reading: Reading,
    text: std::marker::PhantomData<&'a ()>,
}

fn read_items<'de, A: SeqAccess<'de>>(
    mut seq: A,
    reading: Reading,
) -> Result<Items<'de>, A::Error> {
    let capacity = seq.size_hint().unwrap_or(0);
    Ok(match reading {
        Reading::Typed => {
            let mut messages = Vec::with_capacity(capacity);
            while let Some(message) = seq.next_element::<ChatMessage>()? {
                messages.push(message);
            }
            Items::Typed(messages)
        }
        Reading::Tolerant => {
            let mut texts = Vec::with_capacity(capacity);
            while let Some(text) = seq.next_element::<&'de RawValue>()? {
                texts.push(text);
            }
            Items::Texts(texts)
        }
    })
}

impl<'de: 'a, 'a> Visitor<'de> for TopLevelVisitor<'a> {
    type Value = TopLevel<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trajectory object or an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<TopLevel<'a>, A::Error> {
        Ok(TopLevel::Messages(read_items(seq, self.reading)?))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel<'a>, A::Error> {
        let mut messages = None;
        let mut rest = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "messages" {
                messages = map.next_value_seed(MessagesSeed(self.reading))?;
            } else {
                let value = map.next_value()?;
                rest.insert(key, value);
            }
        }
        Ok(TopLevel::Trajectory { messages, rest })
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
}

/// A trajectory's `messages` value: its items when it is an array, `None` for anything else
/// (read past, so the keys after it still count).
struct MessagesSeed(Reading);

impl<'de> de::DeserializeSeed<'de> for MessagesSeed {
    type Value = Option<Items<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MessagesSeed {
    type Value = Option<Items<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the messages of a trajectory")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        read_items(seq, self.0).map(Some)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// A message that did not read: why, and its JSON as found.
type Unread = (String, Value);

fn read_value(raw: &Value) -> Result<ChatMessage, Unread> {
    ChatMessage::deserialize(raw).map_err(|e| (e.to_string(), raw.clone()))
}

/// Reads one message from its text; one that does not read is read again as a `Value` so the
/// note says the same as `load`'s (no text positions) and the raw JSON is kept.
fn read_raw(raw: &RawValue) -> Result<ChatMessage, Unread> {
    serde_json::from_str(raw.get()).or_else(|_| {
        let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
        read_value(&value)
    })
}

fn assemble(
    chat_id: &str,
    read: impl Iterator<Item = Result<ChatMessage, Unread>>,
    thread: ThreadParams,
    draft: Option<&Value>,
) -> Loaded {
    let mut notes = Vec::new();
    let mut seen = HashSet::new();
    let mut messages: Vec<ChatMessage> = read
        .enumerate()
        .map(|(index, read)| load_message(chat_id, index, read, &mut seen, &mut notes))
        .collect();
    let recovered_draft = recover_draft(draft, &mut messages, &mut notes);
    Loaded {
        thread,
        messages,
        notes,
        recovered_draft,
    }
}

/// A checkpointed draft (`draft` beside the messages) becomes the last message, marked
/// `interrupted`: the reply stopped where the last checkpoint was (SECURITY D21, B3).
fn recover_draft(
    draft: Option<&Value>,
    messages: &mut Vec<ChatMessage>,
    notes: &mut Vec<String>,
) -> Option<String> {
    let raw = draft.filter(|d| d.is_object())?;
    let mut draft = ChatMessage::deserialize(raw).ok()?;
    if draft.message_id.is_empty() || messages.iter().any(|m| m.message_id == draft.message_id) {
        return None;
    }
    draft.tool_calls = None;
    draft.finish_reason = Some("interrupted".into());
    draft.mark_interrupted();
    notes.push(format!(
        "the reply {} was interrupted mid-stream; kept up to its last checkpoint",
        draft.message_id
    ));
    let id = draft.message_id.clone();
    messages.push(draft);
    Some(id)
}

fn thread_from(map: &Map<String, Value>) -> ThreadParams {
    let mut params = map.clone();
    params.remove("messages");
    params.remove("id");
    params.remove("chat_id");
    params.remove("draft");
    let thread: Result<ThreadParams, _> = serde_json::from_value(Value::Object(params.clone()));
    thread.unwrap_or_else(|_| {
        let title = params
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        ThreadParams {
            title,
            ..ThreadParams::default()
        }
    })
}

fn load_message(
    chat_id: &str,
    index: usize,
    read: Result<ChatMessage, Unread>,
    seen: &mut HashSet<String>,
    notes: &mut Vec<String>,
) -> ChatMessage {
    let mut message = match read {
        Ok(message) => message,
        Err((e, raw)) => {
            notes.push(format!(
                "message {index} could not be read ({e}); kept as a system_notice event"
            ));
            unreadable(raw)
        }
    };
    if message.message_id.is_empty() || seen.contains(&message.message_id) {
        let id = format!("{chat_id}-m{index}");
        if !message.message_id.is_empty() {
            notes.push(format!(
                "message {index} repeated id {}; renamed {id}",
                message.message_id
            ));
        }
        message.message_id = id;
    }
    seen.insert(message.message_id.clone());
    message
}

fn unreadable(raw: Value) -> ChatMessage {
    let mut message = ChatMessage::new(String::new(), Role::Event, Content::Text(raw.to_string()));
    message.set_event("system_notice", "load", json!({"raw": raw}));
    message
}
