//! Packed copies of long chats (issue 41): a chat's message records as one JSON text, stored as
//! UTF-8 bytes, in the store `packed_messages`, so opening a 5 000-message chat reads one record instead of 5 000 (IndexedDB
//! pays per record: the same bytes as one record read ~10× faster).
//!
//! The records stay the truth and the unit of saving and sync; the copy is trusted only as the
//! chat's record vouches for it. A load that reads the records writes the copy and, in the same
//! transaction, `packed_changes: []` on the chat's record; so does a save that writes the whole
//! chat (an import), from the rows it writes, so a long chat's first load reads one record too;
//! a long chat that sync brought from another device is packed once the replication caught up.
//! Each save, and each sync pull into the chat, then lists on that record the messages it wrote
//! or removed (the record is written by every save and pull anyway), and a load reads the copy
//! plus those few records. A chat's record without the list, a list past `CHANGES_MAX`, or the
//! chat's deletion: the copy goes, and the next load reads the records and packs again.

use super::crossing::JsText;
use super::idb;
use crate::trajectory::TrajectorySave;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use web_sys::{IdbDatabase, IdbTransaction};

/// A chat of at least this many messages gets a copy when it is loaded: below it, reading the
/// records is as quick as reading one, and the copy would only add a write.
pub const PACK_FROM: usize = 200;
/// The messages written since the copy that a load reads one by one; past it, the copy goes.
pub const CHANGES_MAX: usize = 256;
/// The field of a chat's record that vouches for its copy.
const CHANGES: &str = "packed_changes";

/// What a chat's copy gives a load: the rows it holds and those written since, one text each.
pub(super) struct Copy {
    /// The rows when the copy was written, as `JSON.stringify`d then (stored as UTF-8 bytes).
    pub base: String,
    /// The ids written or removed since, and their records now (`null` where removed), as JSON.
    pub changed_ids: Vec<String>,
    pub changed: String,
}

/// The ids the chat's record lists as written since its copy, or `None` when it vouches for none.
fn listed_changes(record: &Value) -> Option<Vec<String>> {
    record[CHANGES].as_array().map(|ids| {
        ids.iter()
            .filter_map(|id| id.as_str().map(String::from))
            .collect()
    })
}

/// The chat's copy and the records written since (in `tx`, which holds both stores), when the
/// chat's record vouches for a copy and one is there.
pub(super) async fn read_copy(
    tx: &IdbTransaction,
    chat_id: &str,
    record: &Value,
) -> Result<Option<Copy>, JsValue> {
    let Some(changed_ids) = listed_changes(record) else {
        return Ok(None);
    };
    let Ok(store) = idb::store(tx, idb::PACKED) else {
        return Ok(None);
    };
    let copy = store.get(&JsValue::from_str(chat_id))?;
    let messages = idb::store(tx, idb::MESSAGES)?;
    // All asked at once, then awaited in order: one round through IndexedDB.
    let asked = changed_ids
        .iter()
        .map(|id| messages.get(&idb::message_key(chat_id, id)))
        .collect::<Result<Vec<_>, JsValue>>()?;
    let copy = idb::request_done(&copy).await?;
    let changed = js_sys::Array::new();
    for request in &asked {
        let record = idb::request_done(request).await?;
        changed.push(&if record.is_undefined() {
            JsValue::NULL
        } else {
            record
        });
    }
    let Some(base) = js_sys::Reflect::get(&copy, &"rows".into())
        .ok()
        .and_then(|rows| rows_text(&rows))
    else {
        return Ok(None);
    };
    let changed = super::text_of(&js_sys::JSON::stringify(&changed)?.into()).unwrap_or_default();
    Ok(Some(Copy {
        base,
        changed_ids,
        changed,
    }))
}

/// A copy's rows as text: UTF-8 bytes, copied into wasm memory as they are (a JS string had to
/// be encoded first, ~25 ms of a 5 000-message chat's opening); a copy an earlier version wrote
/// as a string is still read. `None` for anything else, or bytes that are not UTF-8.
fn rows_text(rows: &JsValue) -> Option<String> {
    match rows.dyn_ref::<js_sys::Uint8Array>() {
        Some(bytes) => String::from_utf8(bytes.to_vec()).ok(),
        None => super::text_of(rows),
    }
}

/// The chat's record and its message records (in order, as one JSON text), read in one
/// read-write transaction that — for a long chat — also writes them as its copy and vouches for
/// it on the record, so no save lands between the reading and the copy.
pub(super) async fn read_and_pack(
    db: &IdbDatabase,
    chat_id: &str,
) -> Result<(JsValue, String), JsValue> {
    let tx = idb::write_transaction(db)?;
    let chats = idb::store(&tx, idb::CHATS)?;
    let record = idb::request_done(&chats.get(&JsValue::from_str(chat_id))?).await?;
    let (rows, text) = read_records(&tx, chat_id).await?;
    let text = super::text_of(&text.into()).unwrap_or_default();
    if rows.length() as usize >= PACK_FROM && record.is_object() {
        // Not awaited: the chat opens while the copy is written.
        pack(&tx, &chats, &record, chat_id, &text)?;
    }
    Ok((record, text))
}

/// Packs a long chat whose record vouches for no copy (one a sync pull brought from another
/// device), so that its first opening here reads one record too; a chat packed meanwhile (opened,
/// or its workspace copy written) or gone is left as it is.
pub(super) async fn pack_unvouched(db: &IdbDatabase, chat_id: &str) -> Result<(), JsValue> {
    let tx = idb::write_transaction(db)?;
    let chats = idb::store(&tx, idb::CHATS)?;
    let record = idb::request_done(&chats.get(&JsValue::from_str(chat_id))?).await?;
    if !record.is_object() || vouches(&idb::from_js(&record).unwrap_or_default()) {
        return Ok(());
    }
    let (rows, text) = read_records(&tx, chat_id).await?;
    if rows.length() as usize >= PACK_FROM {
        pack(
            &tx,
            &chats,
            &record,
            chat_id,
            &super::text_of(&text.into()).unwrap_or_default(),
        )?;
    }
    idb::transaction_done(&tx).await
}

/// Puts `text` (the chat's records in order) as the chat's copy in `tx` and has its `record`
/// vouch for it, with no changes since — unless the database has no store for copies.
fn pack(
    tx: &IdbTransaction,
    chats: &web_sys::IdbObjectStore,
    record: &JsValue,
    chat_id: &str,
    text: &str,
) -> Result<(), JsValue> {
    if put_copy(tx, chat_id, &js_sys::Uint8Array::from(text.as_bytes()))? {
        js_sys::Reflect::set(record, &CHANGES.into(), &js_sys::Array::new())?;
        chats.put(record)?;
    }
    Ok(())
}

/// Whether a chat's record vouches for a packed copy (the copy and the changes it lists since).
pub(super) fn vouches(record: &Value) -> bool {
    listed_changes(record).is_some()
}

/// Puts `rows` (the chat's message records in order, as JSON text in UTF-8 bytes) as the chat's
/// copy in `tx`; false when the database has no store for copies (an older schema). The caller
/// has the chat's record vouch for it, with no changes since.
fn put_copy(
    tx: &IdbTransaction,
    chat_id: &str,
    rows: &js_sys::Uint8Array,
) -> Result<bool, JsValue> {
    let Ok(packed) = idb::store(tx, idb::PACKED) else {
        return Ok(false);
    };
    let copy = js_sys::Object::new();
    js_sys::Reflect::set(&copy, &"chat_id".into(), &JsValue::from_str(chat_id))?;
    js_sys::Reflect::set(&copy, &"rows".into(), rows)?;
    packed.put(&copy)?;
    Ok(true)
}

/// Whether a save writes the whole chat — every message, in stored order, none removed — and
/// so can write the chat's copy beside its records (an import), so that its first load reads
/// one record too.
pub(super) fn save_covers_chat(save: &TrajectorySave) -> bool {
    save.upserts.len() >= PACK_FROM
        && save.upserts.len() == save.message_count
        && save.removed.is_empty()
        && save
            .upserts
            .windows(2)
            .all(|pair| pair[0].position < pair[1].position)
}

/// The copy a save that covers the chat wrote (its rows in order, as text made in JS): put in
/// `tx`, and `record` vouches for it. Without a copy store or a `TextEncoder`, the save goes
/// on as any other ([`note_written`]).
pub(super) fn write_whole<'a>(
    tx: &IdbTransaction,
    chat_id: &str,
    record: &mut Value,
    rows: JsText,
    ids: impl Iterator<Item = &'a String>,
) -> Result<(), JsValue> {
    match rows.utf8() {
        Some(bytes) if put_copy(tx, chat_id, &bytes)? => {
            record[CHANGES] = json!([]);
            Ok(())
        }
        _ => note_written(tx, chat_id, record, ids),
    }
}

/// A chat's message records in order, and the same as one JSON text.
pub(super) async fn read_records(
    tx: &IdbTransaction,
    chat_id: &str,
) -> Result<(js_sys::Array, js_sys::JsString), JsValue> {
    let rows = idb::store(tx, idb::MESSAGES)?
        .index(idb::BY_POSITION)?
        .get_all_with_key(&idb::positions_of(chat_id)?)?;
    let rows: js_sys::Array = idb::request_done(&rows).await?.into();
    let text = js_sys::JSON::stringify(&rows)?;
    Ok((rows, text))
}

/// A save writes or removes `ids` of the chat whose record is `record` (in `tx`): the record
/// lists them for its copy, or — without a list, or past `CHANGES_MAX` — the copy goes.
pub(super) fn note_written<'a>(
    tx: &IdbTransaction,
    chat_id: &str,
    record: &mut Value,
    ids: impl Iterator<Item = &'a String>,
) -> Result<(), JsValue> {
    if let Some(list) = record.get_mut(CHANGES).and_then(Value::as_array_mut) {
        for id in ids {
            if !list.iter().any(|known| known.as_str() == Some(id)) {
                list.push(json!(id));
            }
        }
        if list.len() <= CHANGES_MAX {
            return Ok(());
        }
    }
    forget(tx, chat_id, record)
}

/// The chat's copy goes, and its record no longer vouches for one (a database opened at an older
/// schema, as tests build, has none to forget).
pub(super) fn forget(
    tx: &IdbTransaction,
    chat_id: &str,
    record: &mut Value,
) -> Result<(), JsValue> {
    if let Some(fields) = record.as_object_mut() {
        fields.remove(CHANGES);
    }
    idb::forget_packed(tx, chat_id)
}
