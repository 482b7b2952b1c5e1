//! Sync's stores beside the chats: the outbox (seeded on the first start, read in batches), the
//! revisions known here, and what a pull stores (chats and messages, in one transaction with the
//! revisions).

use super::*;
use crate::web::outbox::{next_mark, outbox_record};

/// Every chat and message of this browser into the outbox (sync's first start here).
pub(super) async fn seed_outbox(shared: &Handle) -> Result<(), JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::write_transaction(&db)?;
    let chat_keys = idb::request_done(&idb::store(&tx, idb::CHATS)?.get_all_keys()?).await?;
    let message_keys = idb::request_done(&idb::store(&tx, idb::MESSAGES)?.get_all_keys()?).await?;
    let outbox = idb::store(&tx, idb::SYNC_OUTBOX)?;
    for key in js_sys::Array::from(&chat_keys).iter() {
        if let Some(chat_id) = key.as_string() {
            outbox.put(&outbox_record(&chat_id, None, next_mark(shared))?)?;
        }
    }
    for key in js_sys::Array::from(&message_keys).iter() {
        let pair = js_sys::Array::from(&key);
        if let (Some(chat_id), Some(message_id)) =
            (pair.get(0).as_string(), pair.get(1).as_string())
        {
            outbox.put(&outbox_record(
                &chat_id,
                Some(&message_id),
                next_mark(shared),
            )?)?;
        }
    }
    idb::transaction_done(&tx).await
}

#[derive(Deserialize)]
pub(super) struct OutboxRow {
    id: String,
    mark: f64,
    chat_id: String,
    #[serde(default)]
    message_id: Option<String>,
    /// Removed with its whole chat (decided when the chat was deleted, not at the push).
    #[serde(default)]
    with_chat: bool,
}

/// The outbox's first `limit` entries with their bodies as stored now and what is known of them.
pub(super) async fn read_outbox(
    shared: &Handle,
    limit: usize,
) -> Result<Vec<OutboxEntry>, JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::read_transaction(&db)?;
    let rows = idb::request_done(
        &idb::store(&tx, idb::SYNC_OUTBOX)?
            .get_all_with_key_and_limit(&JsValue::NULL, limit as u32)?,
    )
    .await?;
    let rows: Vec<OutboxRow> = idb::from_js(&rows)
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| error("StorageError", "an outbox record of sync is malformed"))?;
    let (chats, messages, revs) = (
        idb::store(&tx, idb::CHATS)?,
        idb::store(&tx, idb::MESSAGES)?,
        idb::store(&tx, idb::SYNC_REVS)?,
    );
    // All reads asked at once, then awaited: one round through IndexedDB.
    let mut asked = Vec::with_capacity(rows.len());
    for row in &rows {
        let body = match &row.message_id {
            Some(m) => messages.get(&idb::message_key(&row.chat_id, m))?,
            None => chats.get(&JsValue::from_str(&row.chat_id))?,
        };
        // Asked in the order they are awaited (a request's success fires once, in order).
        let known = revs.get(&JsValue::from_str(&row.id))?;
        let chat = chats.get(&JsValue::from_str(&row.chat_id))?;
        asked.push((body, known, chat));
    }
    let mut entries = Vec::with_capacity(rows.len());
    for (row, (body, known, chat)) in rows.into_iter().zip(asked) {
        let record = idb::from_js(&idb::request_done(&body).await?);
        let known = idb::from_js(&idb::request_done(&known).await?)
            .and_then(|v| serde_json::from_value::<RevInfo>(v).ok());
        let chat_here = idb::from_js(&idb::request_done(&chat).await?).is_some();
        let message = row.message_id.is_some();
        let body = outbox_body(
            &row.chat_id,
            message,
            record.as_ref(),
            row.with_chat,
            chat_here,
        );
        entries.push(OutboxEntry {
            id: row.id,
            mark: row.mark,
            body,
            known,
        });
    }
    Ok(entries)
}

/// What is known of `ids`, and which of them have unpushed changes.
pub(super) async fn read_known(
    shared: &Handle,
    ids: &[String],
) -> Result<(HashMap<String, RevInfo>, Vec<String>), JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::read_transaction(&db)?;
    let (revs, outbox) = (
        idb::store(&tx, idb::SYNC_REVS)?,
        idb::store(&tx, idb::SYNC_OUTBOX)?,
    );
    let mut asked = Vec::with_capacity(ids.len());
    for id in ids {
        let key = JsValue::from_str(id);
        asked.push((revs.get(&key)?, outbox.get_key(&key)?));
    }
    let mut known = HashMap::new();
    let mut pending = Vec::new();
    for (id, (rev, queued)) in ids.iter().zip(asked) {
        if let Some(info) = idb::from_js(&idb::request_done(&rev).await?)
            .and_then(|v| serde_json::from_value(v).ok())
        {
            known.insert(id.clone(), info);
        }
        let queued = idb::request_done(&queued).await?;
        if !queued.is_undefined() && !queued.is_null() {
            pending.push(id.clone());
        }
    }
    Ok((known, pending))
}

#[derive(Default)]
pub(super) struct Changed {
    pub(super) chats: BTreeSet<String>,
    pub(super) deleted: BTreeSet<String>,
    /// Chats deleted on another device but added to here: kept, and the page says so.
    pub(super) kept: BTreeSet<String>,
    /// Long chats this pull wrote to that have no packed copy (`packed.rs`).
    pub(super) unpacked: BTreeSet<String>,
}

/// Pulled documents into the chats' stores and pushed ones recorded — one transaction.
pub(super) async fn store(
    shared: &Handle,
    pulled: &[Pulled],
    pushed: &[Pushed],
) -> Result<Changed, JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::write_transaction(&db)?;
    let (chats, messages, revs, outbox) = (
        idb::store(&tx, idb::CHATS)?,
        idb::store(&tx, idb::MESSAGES)?,
        idb::store(&tx, idb::SYNC_REVS)?,
        idb::store(&tx, idb::SYNC_OUTBOX)?,
    );
    let mut changed = Changed::default();
    let mut chat_docs: HashMap<String, Value> = HashMap::new();
    // Chats first: whether a chat is still here decides what a message removed with it means.
    let mut ordered: Vec<&Pulled> = pulled.iter().collect();
    ordered.sort_by_key(|p| !p.id.starts_with("chat:"));
    // Chats that get an existing message or their own document (others are not made up).
    let mut alive: BTreeSet<String> = BTreeSet::new();
    // Each chat's messages this pull wrote or removed: listed for its packed copy.
    let mut written: HashMap<String, Vec<String>> = HashMap::new();
    let mark = next_mark(shared);
    for p in ordered {
        revs.put(&rev_record(&p.id, &p.info)?)?;
        if p.doc.is_null() {
            continue;
        }
        match local_doc(&p.doc) {
            Some(LocalDoc::Message {
                chat_id,
                message_id,
                record,
            }) => {
                // A removal needs to know whether the chat is still here (not deleted by this
                // pull, stored); the rest does not read the store.
                let chat_here = removed_with_its_chat(&p.doc)
                    && !changed.deleted.contains(&chat_id)
                    && idb::from_js(
                        &idb::request_done(&chats.get(&JsValue::from_str(&chat_id))?).await?,
                    )
                    .is_some();
                match message_fate(record, &p.doc, chat_here) {
                    MessageFate::Put(record) => {
                        messages.put(&idb::to_js(&record)?)?;
                        alive.insert(chat_id.clone());
                        written.entry(chat_id.clone()).or_default().push(message_id);
                    }
                    MessageFate::KeepAndPushAgain => {
                        outbox.put(&outbox_record(&chat_id, Some(&message_id), mark)?)?;
                        outbox.put(&outbox_record(&chat_id, None, mark)?)?;
                        changed.kept.insert(chat_id.clone());
                        alive.insert(chat_id.clone());
                    }
                    MessageFate::Remove => {
                        messages.delete(&idb::message_key(&chat_id, &message_id))?;
                        written.entry(chat_id.clone()).or_default().push(message_id);
                    }
                };
                changed.chats.insert(chat_id);
            }
            Some(LocalDoc::Chat {
                chat_id,
                fields: None,
            }) => {
                chats.delete(&JsValue::from_str(&chat_id))?;
                messages.delete(&idb::messages_of(&chat_id)?)?;
                changed.deleted.insert(chat_id);
            }
            Some(LocalDoc::Chat {
                chat_id,
                fields: Some(fields),
            }) => {
                changed.chats.insert(chat_id.clone());
                alive.insert(chat_id.clone());
                chat_docs.insert(chat_id, fields);
            }
            None => {}
        }
    }
    for chat_id in &changed.deleted {
        changed.chats.remove(chat_id);
    }
    // Each changed chat's record: the pulled thread and title, its message count recounted.
    let mut ghosts = Vec::new();
    for chat_id in &changed.chats {
        let stored = idb::request_done(&chats.get(&JsValue::from_str(chat_id))?).await?;
        // Removals of messages of a chat that is not here make no chat (no empty ghost).
        if idb::from_js(&stored).is_none() && !alive.contains(chat_id) {
            ghosts.push(chat_id.clone());
            continue;
        }
        let mut record = idb::from_js(&stored).unwrap_or_else(
            || json!({"id": chat_id, "thread": {}, "title": "", "updated_at": now()}),
        );
        if let Some(body) = chat_docs.get(chat_id) {
            // What steers the agent never comes from another device's document (SECURITY F2).
            record["thread"] = crate::thread::from_outside(&body["thread"], &record["thread"]);
            record["title"] = body["title"].clone();
            record["updated_at"] = body["updated_at"].clone();
        }
        if changed.kept.contains(chat_id) {
            // Kept over a deletion: a new revision of the chat, newer than the deletion, goes
            // out with its messages (the same body would be the same revision).
            record["updated_at"] = json!(now());
        }
        let count = idb::request_done(
            &messages
                .index(idb::BY_POSITION)?
                .count_with_key(&idb::positions_of(chat_id)?)?,
        )
        .await?;
        record["message_count"] = json!(count.as_f64().unwrap_or(0.0));
        // The pulled messages are listed for the chat's packed copy, as a save's are: a few
        // messages from another device keep a long chat quick to open here; many, or a chat
        // with no copy, and the copy goes (the next load reads the records and packs again).
        let pulled_here = written.get(chat_id).map(Vec::as_slice).unwrap_or_default();
        crate::web::packed::note_written(&tx, chat_id, &mut record, pulled_here.iter())?;
        if !crate::web::packed::vouches(&record)
            && count.as_f64().unwrap_or(0.0) >= crate::web::packed::PACK_FROM as f64
        {
            changed.unpacked.insert(chat_id.clone());
        }
        chats.put(&idb::to_js(&record)?)?;
        shared.borrow_mut().chats.insert(chat_id.clone(), record);
    }
    for chat_id in &changed.deleted {
        idb::forget_packed(&tx, chat_id)?;
    }
    // Every pushed document's outbox entry asked at once, then awaited in order: one round
    // through IndexedDB, not one per document (200 a batch: a push of the 5,000-message chat
    // waited ~1.5 s on them).
    let entries = pushed
        .iter()
        .map(|p| {
            revs.put(&rev_record(&p.id, &p.info)?)?;
            outbox.get(&JsValue::from_str(&p.id))
        })
        .collect::<Result<Vec<_>, JsValue>>()?;
    for (p, entry) in pushed.iter().zip(&entries) {
        let entry = idb::request_done(entry).await?;
        let mark = Reflect::get(&entry, &"mark".into())
            .ok()
            .and_then(|m| m.as_f64());
        if mark == Some(p.mark) {
            outbox.delete(&JsValue::from_str(&p.id))?;
        }
    }
    idb::transaction_done(&tx).await?;
    for chat_id in &ghosts {
        changed.chats.remove(chat_id);
    }
    for chat_id in &changed.deleted {
        shared.borrow_mut().chats.remove(chat_id);
    }
    let records: Vec<Value> = {
        let s = shared.borrow();
        changed
            .chats
            .iter()
            .filter_map(|id| s.chats.get(id).cloned())
            .collect()
    };
    let deleted: Vec<String> = changed.deleted.iter().cloned().collect();
    crate::web::chat_list::changed(shared, &records, &deleted);
    Ok(changed)
}

pub(super) fn rev_record(id: &str, info: &RevInfo) -> Result<JsValue, JsValue> {
    let mut value =
        serde_json::to_value(info).map_err(|e| error("StorageError", &e.to_string()))?;
    value["id"] = json!(id);
    idb::to_js(&value)
}
