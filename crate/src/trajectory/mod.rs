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

mod load;

pub use load::*;

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
                .or_else(|| spread(below, above, &messages[first..=last]));
            let spread = match spread {
                Some(spread) => spread,
                None => {
                    last = n - 1;
                    next = touched.len();
                    spread_after(below, &messages[first..=last])
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

/// Increasing positions for `run` strictly between `below` and `above` (either may be open), or
/// `None` when the numbers between them are too close to tell apart.
fn spread(below: Option<f64>, above: Option<f64>, run: &[ChatMessage]) -> Option<Vec<f64>> {
    let count = run.len();
    let out: Vec<f64> = match (below, above) {
        (_, None) => return Some(spread_after(below, run)),
        (None, Some(above)) => (0..count).map(|j| above - (count - j) as f64).collect(),
        (Some(below), Some(above)) => {
            let step = (above - below) / (count as f64 + 1.0);
            (1..=count).map(|j| below + step * j as f64).collect()
        }
    };
    fits(below, &out, above).then_some(out)
}

/// How far apart the messages of one turn are: a turn of thousands of messages stays below the
/// next whole number.
const TURN_STEP: f64 = 1.0 / 1_048_576.0;

/// Positions after `below` for `run`, appended at the end of the chat. A turn stays together when
/// two devices append to a chat at once (the merge orders by position): a user message starts a
/// turn at the next whole number plus a fraction of its own, taken from its id (another device's
/// turn starting there gets another fraction), and the rest of its turn follows it closely.
fn spread_after(below: Option<f64>, run: &[ChatMessage]) -> Vec<f64> {
    let mut last = below;
    run.iter()
        .map(|message| {
            let position = match last {
                Some(previous) if message.role != Role::User => previous + TURN_STEP,
                _ => last.map_or(0.0, |b| b.floor() + 1.0) + turn_fraction(&message.message_id),
            };
            last = Some(position);
            position
        })
        .collect()
}

/// A fraction in [0.05, 0.95) from a message id (FNV-1a): the same on every device.
fn turn_fraction(message_id: &str) -> f64 {
    let hash = message_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    0.05 + (hash % 900) as f64 / 1000.0
}

/// A trajectory as JSON text, as a host reads it from storage: the engine reads it once, straight
/// into the message model (`load_text`), instead of through a `Value` tree (issue 20). The text
/// is not checked when it is made: `load_text` reads it once, and says so when it is not JSON
/// (checking it first was a whole extra pass over a long chat's text as it opened; issue 41).
#[derive(Clone, Debug)]
pub struct TrajectoryText(Box<str>);

impl TrajectoryText {
    pub fn get(&self) -> &str {
        &self.0
    }

    /// A trajectory given as text, as a host read it.
    pub fn from_text(text: String) -> Self {
        TrajectoryText(text.into_boxed_str())
    }

    /// A trajectory given as a value (tests, the facade's callers).
    pub fn from_value(value: &Value) -> Self {
        TrajectoryText::from_text(serde_json::to_string(value).unwrap_or_else(|_| "null".into()))
    }

    /// A stored chat's trajectory text from its parts, as `serde_json` would write the object
    /// `{…thread, "id", "messages", "draft"}` (the thread's own `id`, `messages` and `draft` left
    /// out, the draft only when it is an object): the messages' texts are copied as they are,
    /// into one buffer of the text's size (issue 41: a buffer grown by doubling left a 4 MB and
    /// an 8 MB one alive at once as a 5 MB chat opened, and linear memory never shrinks).
    pub fn of_parts(
        thread: &Value,
        id: &str,
        messages: &[&RawValue],
        draft: &Value,
    ) -> Result<Self, serde_json::Error> {
        let mut head = String::from("{");
        let reserved = |key: &str| matches!(key, "id" | "messages" | "draft");
        for (key, value) in thread.as_object().into_iter().flatten() {
            if !reserved(key) {
                head.push_str(&serde_json::to_string(key)?);
                head.push(':');
                head.push_str(&serde_json::to_string(value)?);
                head.push(',');
            }
        }
        head.push_str("\"id\":");
        head.push_str(&serde_json::to_string(id)?);
        head.push_str(",\"messages\":[");
        let tail = match draft.is_object() {
            true => format!("],\"draft\":{}}}", serde_json::to_string(draft)?),
            false => "]}".to_string(),
        };
        let body: usize = messages.iter().map(|m| m.get().len() + 1).sum();
        let mut text = String::with_capacity(head.len() + body + tail.len());
        text.push_str(&head);
        for (i, message) in messages.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(message.get());
        }
        text.push_str(&tail);
        Ok(TrajectoryText::from_text(text))
    }
}

/// Written as the JSON value it is (a step recorded, the facade).
impl Serialize for TrajectoryText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = RawValue::from_string(self.0.to_string()).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for TrajectoryText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Ok(TrajectoryText(Box::<str>::from(raw)))
    }
}

impl PartialEq for TrajectoryText {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}
