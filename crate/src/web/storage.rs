//! Chats in IndexedDB: one transaction per save, acknowledged to the engine (or failed, kept dirty and
//! retried); loading a chat's trajectory; waiting for saves; asking the browser to persist storage.

use super::browser::*;
use super::crossing::JsText;
use super::idb;
use super::packed;
use super::shared::*;
use crate::engine::Input;
use crate::event::Event;
use crate::trajectory::{StoredMessage, TrajectorySave, TrajectoryText};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::spawn_local;

/// Asks the browser not to evict our storage; the answer is informational.
pub(super) fn request_persistence() {
    let navigator = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .map(|w| w.navigator());
    if let Some(storage) = navigator.map(|n| n.storage()) {
        let _ = storage.persist();
    }
}

/// The trajectory JSON of a snapshot: the thread's keys, the id and the messages.
pub(super) fn trajectory_of(
    chat_id: &str,
    snapshot: &crate::event::EventEnvelope,
) -> Option<Value> {
    let Event::Snapshot {
        thread, messages, ..
    } = &snapshot.event
    else {
        return None;
    };
    let mut out = match thread {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    out.insert("id".into(), json!(chat_id));
    out.insert("messages".into(), json!(messages));
    Some(Value::Object(out))
}

/// One stored message record as read back (tolerantly: a damaged key or position makes the
/// engine write the message again, see `TrajectoryBook::restore`). The message stays the text
/// it was stored as, borrowed, until the engine reads it straight into its model (issue 20).
#[derive(serde::Deserialize)]
struct Row<'a> {
    #[serde(default)]
    message_id: Value,
    #[serde(default)]
    position: Value,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
}

/// Reads a chat's record and messages back into trajectory JSON text (messages in stored
/// order) and where each message is stored. The rows cross from JS as text — the chat's packed
/// copy and the few records written since when it has one (`packed.rs`), else every record
/// `JSON.stringify`d at once — and no message is parsed here: the engine reads the text once, typed.
pub(super) async fn load_trajectory(
    shared: &Handle,
    chat_id: &str,
) -> Result<(TrajectoryText, Vec<StoredMessage>), JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::read_transaction(&db)?;
    let record =
        idb::request_done(&idb::store(&tx, idb::CHATS)?.get(&JsValue::from_str(chat_id))?).await?;
    let mut record = idb::from_js(&record).ok_or_else(|| error("UnknownChat", chat_id))?;
    let copy = packed::read_copy(&tx, chat_id, &record).await?;
    let records_text;
    let rows = match copy.as_ref().and_then(rows_of_copy) {
        Some(rows) => rows,
        None => {
            records_text =
                if record["message_count"].as_f64().unwrap_or(0.0) >= packed::PACK_FROM as f64 {
                    // A long chat without a copy (or with one that does not read): its records, and
                    // a copy of them for the next time.
                    let (again, text) = packed::read_and_pack(&db, chat_id).await?;
                    record = idb::from_js(&again).ok_or_else(|| error("UnknownChat", chat_id))?;
                    text
                } else {
                    let (_, text) = packed::read_records(&tx, chat_id).await?;
                    super::text_of(&text.into()).unwrap_or_default()
                };
            serde_json::from_str(&records_text).map_err(|e| {
                error(
                    "StorageError",
                    &format!("a stored message record is malformed: {e}"),
                )
            })?
        }
    };
    let mut stored = Vec::with_capacity(rows.len());
    let mut messages = Vec::with_capacity(rows.len());
    let null = RawValue::NULL;
    for row in rows {
        stored.push(StoredMessage {
            message_id: row_id(&row),
            position: row.position.as_f64().unwrap_or(f64::NAN),
        });
        messages.push(row.message.unwrap_or(null));
    }
    let trajectory =
        TrajectoryText::of_parts(&record["thread"], chat_id, &messages, &record["draft"])
            .map_err(|e| error("StorageError", &format!("cannot read chat {chat_id}: {e}")))?;
    shared
        .borrow_mut()
        .chats
        .insert(chat_id.to_string(), record);
    Ok((trajectory, stored))
}

fn row_id(row: &Row) -> String {
    match &row.message_id {
        Value::String(id) => id.clone(),
        other => other.to_string(),
    }
}

/// The rows of a packed copy with the records written since put in: a removed one (`null`) out,
/// a written one in place of its old row or added, all in the order the position index gives
/// (position, then id). `None` when the copy does not read.
fn rows_of_copy(copy: &packed::Copy) -> Option<Vec<Row<'_>>> {
    let mut rows: Vec<Row> = serde_json::from_str(&copy.base).ok()?;
    if copy.changed_ids.is_empty() {
        return Some(rows);
    }
    let changed: Vec<Option<Row>> = serde_json::from_str(&copy.changed).ok()?;
    let ids: std::collections::HashSet<&str> =
        copy.changed_ids.iter().map(String::as_str).collect();
    rows.retain(|row| !row.message_id.as_str().is_some_and(|id| ids.contains(id)));
    // The index lists only records whose position is a valid key (a number, not NaN).
    rows.extend(
        changed
            .into_iter()
            .flatten()
            .filter(|row| row.position.as_f64().is_some_and(|p| !p.is_nan())),
    );
    let position = |row: &Row| row.position.as_f64().unwrap_or(f64::NAN);
    rows.sort_by(|a, b| {
        position(a)
            .total_cmp(&position(b))
            .then_with(|| row_id(a).cmp(&row_id(b)))
    });
    Some(rows)
}

/// The last screen of a chat, straight from storage, for the first frame while the whole chat
/// loads (issue 20): `{chat_id, title, message_count, messages}` with the newest `count`
/// messages in order. Nothing is parsed or checked here: the page draws them as stored, and
/// replaces them with the engine's snapshot once `openChat` resolves.
pub(super) async fn peek_trajectory(
    shared: &Handle,
    chat_id: &str,
    count: usize,
) -> Result<JsValue, JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::read_transaction(&db)?;
    let record =
        idb::request_done(&idb::store(&tx, idb::CHATS)?.get(&JsValue::from_str(chat_id))?).await?;
    if record.is_undefined() || record.is_null() {
        return Err(error("UnknownChat", chat_id));
    }
    let index = idb::store(&tx, idb::MESSAGES)?.index(idb::BY_POSITION)?;
    let rows = idb::last_values(&index, &idb::positions_of(chat_id)?, count).await?;
    let messages: js_sys::Array = rows
        .iter()
        .map(|row| js_sys::Reflect::get(row, &"message".into()).unwrap_or(JsValue::NULL))
        .collect();
    let out = js_sys::Object::new();
    js_sys::Reflect::set(&out, &"chat_id".into(), &JsValue::from_str(chat_id))?;
    for key in ["title", "message_count"] {
        js_sys::Reflect::set(
            &out,
            &key.into(),
            &js_sys::Reflect::get(&record, &key.into())?,
        )?;
    }
    js_sys::Reflect::set(&out, &"messages".into(), &messages)?;
    Ok(out.into())
}

/// One save, one transaction: the chat record, each changed message (keyed by its id, with its
/// position) and a delete for each removed one. The engine hears back with `save_acked` or `save_failed` (kept dirty and
/// retried by the engine, shown as `runtime.storage_error`).
/// `after_save` hears of each acknowledged save that changed the chat itself (not only
/// checkpointed a streaming reply), before the engine does.
pub(super) fn save_trajectory(
    shared: &Handle,
    save: TrajectorySave,
    after_save: fn(&Handle, &str),
) {
    let shared = shared.clone();
    *shared
        .borrow_mut()
        .saves_in_flight
        .entry(save.chat_id.clone())
        .or_default() += 1;
    spawn_local(async move {
        let result = write_save(&shared, &save).await;
        if let Some(n) = shared.borrow_mut().saves_in_flight.get_mut(&save.chat_id) {
            *n = n.saturating_sub(1);
        }
        let input = match result {
            Ok((records, bytes)) => {
                let mut s = shared.borrow_mut();
                s.records_written += records;
                s.bytes_written += bytes;
                if !s.marker_set {
                    s.marker_set = local_storage_set(&s.marker, "1");
                }
                drop(s);
                if changes_chat(&save) {
                    after_save(&shared, &save.chat_id);
                }
                Input::SaveAcked {
                    chat_id: save.chat_id.clone(),
                    version: save.version,
                }
            }
            Err(e) => Input::SaveFailed {
                chat_id: save.chat_id.clone(),
                version: save.version,
                reason: describe(e),
            },
        };
        feed(&shared, input);
    });
}

/// Whether a save changed the chat itself (not only checkpointed a streaming reply).
fn changes_chat(save: &TrajectorySave) -> bool {
    !save.upserts.is_empty() || !save.removed.is_empty() || save.thread.is_some()
}

pub(super) async fn write_save(
    shared: &Handle,
    save: &TrajectorySave,
) -> Result<(u64, u64), JsValue> {
    if let Some(reason) = shared.borrow().fail_saves.clone() {
        return Err(js_sys::Error::new(&reason).into());
    }
    let (db, mut record) = {
        let s = shared.borrow();
        let record = s
            .chats
            .get(&save.chat_id)
            .cloned()
            .unwrap_or_else(|| json!({"id": save.chat_id, "thread": {}}));
        (s.db.clone(), record)
    };
    if let Some(thread) = &save.thread {
        record["thread"] = thread.clone();
        record["title"] = thread.get("title").cloned().unwrap_or(json!(""));
    }
    if let Some(draft) = &save.draft {
        record["draft"] = draft.clone();
    }
    record["id"] = json!(save.chat_id);
    record["message_count"] = json!(save.message_count);
    record["version"] = json!(save.version);
    record["updated_at"] = json!(now());
    let tx = idb::write_transaction(&db)?;
    let chats = idb::store(&tx, idb::CHATS)?;
    let messages = idb::store(&tx, idb::MESSAGES)?;
    // A save of the whole chat also writes its packed copy, made of the same rows.
    let mut copy = packed::save_covers_chat(save).then(JsText::default);
    let mut bytes = 0;
    for (i, upsert) in save.upserts.iter().enumerate() {
        let row = json!({"chat_id": save.chat_id, "message_id": upsert.message.message_id, "position": upsert.position, "message": upsert.message});
        let text = row.to_string();
        bytes += text.len() as u64;
        if let Some(copy) = copy.as_mut() {
            copy.push(if i == 0 { "[" } else { "," });
            copy.push(&text);
        }
        messages.put(&idb::to_js(&row)?)?;
    }
    let written = save.upserts.iter().map(|u| &u.message.message_id);
    if let Some(mut copy) = copy {
        copy.push("]");
        packed::write_whole(&tx, &save.chat_id, &mut record, copy, written)?;
    } else if !save.upserts.is_empty() || !save.removed.is_empty() {
        packed::note_written(
            &tx,
            &save.chat_id,
            &mut record,
            written.chain(&save.removed),
        )?;
    }
    chats.put(&idb::to_js(&record)?)?;
    bytes += record.to_string().len() as u64;
    for removed in &save.removed {
        messages.delete(&idb::message_key(&save.chat_id, removed))?;
    }
    if super::outbox::enabled(shared) && changes_chat(save) {
        // Sync (issue 21): each changed document waits in the outbox, written with the change.
        let outbox = idb::store(&tx, idb::SYNC_OUTBOX)?;
        let mark = super::outbox::next_mark(shared);
        outbox.put(&super::outbox::outbox_record(&save.chat_id, None, mark)?)?;
        let ids = save
            .upserts
            .iter()
            .map(|u| &u.message.message_id)
            .chain(&save.removed);
        for id in ids {
            outbox.put(&super::outbox::outbox_record(
                &save.chat_id,
                Some(id),
                mark,
            )?)?;
        }
    }
    idb::transaction_done(&tx).await?;
    shared
        .borrow_mut()
        .chats
        .insert(save.chat_id.clone(), record);
    Ok((1 + save.upserts.len() as u64, bytes))
}

/// Waits (up to a minute) until no save of `chat_id` (of any chat when `None`) is in flight.
pub(super) async fn wait_for_saves(shared: &Handle, chat_id: Option<&str>) {
    for _ in 0..6000 {
        let busy = {
            let s = shared.borrow();
            match chat_id {
                Some(id) => s.saves_in_flight.get(id).copied().unwrap_or(0) > 0,
                None => s.saves_in_flight.values().any(|n| *n > 0),
            }
        };
        if !busy {
            return;
        }
        sleep_ms(10).await;
    }
}

pub(super) fn current_storage_error(shared: &Handle, chat_id: &str) -> Option<String> {
    let s = shared.borrow();
    s.engine
        .session(chat_id)?
        .runtime(s.engine.config())
        .storage_error
}
