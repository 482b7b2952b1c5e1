//! The schema's migrations, one per version, run in order by `open`: the first stores, chats by
//! update time, messages keyed by id with a position (v3), the sync stores, packed chats (v5).

use super::*;

pub fn create_v1(db: &IdbDatabase, _tx: &IdbTransaction) -> Result<(), JsValue> {
    let chats = IdbObjectStoreParameters::new();
    chats.set_key_path(&JsValue::from_str("id"));
    db.create_object_store_with_optional_parameters(CHATS, &chats)?;
    let messages = IdbObjectStoreParameters::new();
    let key: Array = ["chat_id", "index"]
        .iter()
        .map(|s| JsValue::from_str(s))
        .collect();
    messages.set_key_path(&key);
    db.create_object_store_with_optional_parameters(MESSAGES, &messages)?;
    Ok(())
}

/// v2: chats listed newest first without reading them all.
pub fn index_chats_by_update(_db: &IdbDatabase, tx: &IdbTransaction) -> Result<(), JsValue> {
    tx.object_store(CHATS)?
        .create_index_with_str("updated_at", "updated_at")?;
    Ok(())
}

/// v3 (issue 20): message records keyed `[chat_id, message_id]` with an order field `position`
/// (the v2 index), so an early edit or removal writes one record instead of every later one.
/// The v2 store is renamed, copied record by record with a cursor (only the records the chat's
/// count made visible; a missing or repeated id gets the id loading would give it, written into
/// the message), then deleted — all inside the `versionchange` transaction: a failure anywhere
/// (a step throws, a request fails) aborts it and the v2 database stays as it was.
pub fn key_messages_by_id(db: &IdbDatabase, tx: &IdbTransaction) -> Result<(), JsValue> {
    let old = tx.object_store(MESSAGES)?;
    old.set_name(V2_MESSAGES);
    let params = IdbObjectStoreParameters::new();
    params.set_key_path(&key_path(&["chat_id", "message_id"]));
    let messages = db.create_object_store_with_optional_parameters(MESSAGES, &params)?;
    messages.create_index_with_str_sequence(BY_POSITION, &key_path(&["chat_id", "position"]))?;
    let counts_request = tx.object_store(CHATS)?.get_all()?;
    let reader = counts_request.clone();
    let (db, tx) = (db.clone(), tx.clone());
    let on_counts = Closure::once(move || {
        let counts = message_counts(&reader.result().unwrap_or(JsValue::UNDEFINED));
        if let Err(e) = copy_v2_messages(db, tx.clone(), old, messages, counts) {
            web_sys::console::error_2(&"palaver: migration to v3 failed".into(), &e);
            let _ = tx.abort();
        }
    });
    counts_request.set_onsuccess(Some(on_counts.as_ref().unchecked_ref()));
    on_counts.forget();
    Ok(())
}

/// v5 (issue 41): long chats' packed copies, empty until a chat is loaded.
pub fn create_packed_store(db: &IdbDatabase, _tx: &IdbTransaction) -> Result<(), JsValue> {
    let params = IdbObjectStoreParameters::new();
    params.set_key_path(&JsValue::from_str("chat_id"));
    db.create_object_store_with_optional_parameters(PACKED, &params)?;
    Ok(())
}

/// v4 (issue 21): the sync stores, empty until sync is configured.
pub fn create_sync_stores(db: &IdbDatabase, _tx: &IdbTransaction) -> Result<(), JsValue> {
    for name in [SYNC_REVS, SYNC_OUTBOX] {
        let params = IdbObjectStoreParameters::new();
        params.set_key_path(&JsValue::from_str("id"));
        db.create_object_store_with_optional_parameters(name, &params)?;
    }
    Ok(())
}

pub(super) fn key_path(keys: &[&str]) -> JsValue {
    keys.iter()
        .map(|s| JsValue::from_str(s))
        .collect::<Array>()
        .into()
}

/// Each chat's visible message count, from its record.
pub(super) fn message_counts(records: &JsValue) -> std::collections::HashMap<String, f64> {
    Array::from(records)
        .iter()
        .filter_map(|record| {
            let id = Reflect::get(&record, &"id".into()).ok()?.as_string()?;
            let count = Reflect::get(&record, &"message_count".into())
                .ok()?
                .as_f64()?;
            Some((id, count))
        })
        .collect()
}

/// The cursor over v2's records: each visible one is written to the v3 store; at the end the v2
/// store goes.
pub(super) fn copy_v2_messages(
    db: IdbDatabase,
    tx: IdbTransaction,
    old: IdbObjectStore,
    messages: IdbObjectStore,
    counts: std::collections::HashMap<String, f64>,
) -> Result<(), JsValue> {
    let cursor_request = old.open_cursor()?;
    let reader = cursor_request.clone();
    let mut seen: std::collections::HashSet<(String, String)> = Default::default();
    let on_row = Closure::<dyn FnMut()>::new(move || {
        let mut step = || -> Result<(), JsValue> {
            let cursor = reader.result()?;
            if cursor.is_null() || cursor.is_undefined() {
                return db.delete_object_store(V2_MESSAGES);
            }
            let cursor: web_sys::IdbCursorWithValue = cursor.dyn_into()?;
            let row = cursor.value()?;
            if let Some(record) = v3_record(&row, &counts, &mut seen)? {
                messages.put(&record)?;
            }
            cursor.continue_()
        };
        if let Err(e) = step() {
            web_sys::console::error_2(&"palaver: migration to v3 failed".into(), &e);
            let _ = tx.abort();
        }
    });
    cursor_request.set_onsuccess(Some(on_row.as_ref().unchecked_ref()));
    on_row.forget();
    Ok(())
}

/// A v2 record `{chat_id, index, message}` as a v3 record, or `None` when the chat's count hid it.
pub(super) fn v3_record(
    row: &JsValue,
    counts: &std::collections::HashMap<String, f64>,
    seen: &mut std::collections::HashSet<(String, String)>,
) -> Result<Option<JsValue>, JsValue> {
    let Some(chat_id) = Reflect::get(row, &"chat_id".into())?.as_string() else {
        return Ok(None);
    };
    let index = Reflect::get(row, &"index".into())?
        .as_f64()
        .unwrap_or(f64::NAN);
    if !(index >= 0.0 && index < counts.get(&chat_id).copied().unwrap_or(0.0)) {
        return Ok(None);
    }
    let message = Reflect::get(row, &"message".into())?;
    let given = if message.is_object() {
        Reflect::get(&message, &"message_id".into())?.as_string()
    } else {
        None
    };
    let mut id = given
        .filter(|id| !id.is_empty() && !seen.contains(&(chat_id.clone(), id.clone())))
        .unwrap_or_else(|| format!("{chat_id}-m{index}"));
    while seen.contains(&(chat_id.clone(), id.clone())) {
        id.push('_');
    }
    seen.insert((chat_id.clone(), id.clone()));
    if message.is_object() {
        Reflect::set(&message, &"message_id".into(), &JsValue::from_str(&id))?;
    }
    let record = js_sys::Object::new();
    Reflect::set(&record, &"chat_id".into(), &JsValue::from_str(&chat_id))?;
    Reflect::set(&record, &"message_id".into(), &JsValue::from_str(&id))?;
    Reflect::set(&record, &"position".into(), &JsValue::from_f64(index))?;
    Reflect::set(&record, &"message".into(), &message)?;
    Ok(Some(record.into()))
}
