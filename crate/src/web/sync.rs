//! Issue 21: sync between devices through a CouchDB database — the browser side of
//! `replication::Replicator`. The replicator decides; this module performs what it asks: the
//! HTTP requests (with the user's Basic credentials, a `longpoll` aborted when a local change
//! comes), the reads and writes of the sync stores beside the chats (`sync_revs`, `sync_outbox`),
//! the checkpoint kept in `localStorage`, the timer, `online`/`offline`. A pulled change to a chat
//! open here reaches its engine as `ReloadChat` once the chat is idle and saved.

use super::idb;
use super::shared::*;
use super::tabs::ChatRole;
use crate::engine::Input;
use crate::replication::{
    chat_doc, chat_doc_id, hash_hex, local_doc, message_doc, message_doc_id, LocalDoc, OutboxEntry,
    Pulled, Pushed, Replicator, RevInfo, SyncEffect, SyncInput, SyncStatus,
};
use js_sys::{Function, Reflect};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};
use web_sys::AbortController;

/// What Settings → Sync gives: the server, the database, the credentials (never stored here).
#[derive(Deserialize, Clone, Debug)]
pub(super) struct SyncConfig {
    pub url: String,
    pub database: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
}

pub(super) struct SyncState {
    replicator: Replicator,
    /// The database's URL, ending in `/`.
    db_url: String,
    auth: Option<String>,
    aborts: HashMap<u64, AbortController>,
    /// Bumped by each `configure`: what an older replication's futures bring back is dropped.
    generation: u64,
    checkpoint_key: String,
    /// Chats whose pulled changes wait for them to be idle and saved.
    reload_later: BTreeSet<String>,
}

#[derive(Default)]
pub(super) struct SyncHost {
    pub(super) state: Option<SyncState>,
    pub(super) listener: Option<Function>,
    generation: u64,
    online_hooked: bool,
    mark: f64,
}

/// Whether saves record their changes for the replication.
pub(super) fn enabled(shared: &Handle) -> bool {
    shared.borrow().sync.state.is_some()
}

/// The outbox mark of the next change: increasing within this tab, distinct across tabs.
pub(super) fn next_mark(shared: &Handle) -> f64 {
    let mut s = shared.borrow_mut();
    s.sync.mark = (s.sync.mark + 1.0).max(now() as f64 * 1000.0);
    s.sync.mark
}

/// One outbox record: the document id and where its body lives.
pub(super) fn outbox_record(
    chat_id: &str,
    message_id: Option<&str>,
    mark: f64,
) -> Result<JsValue, JsValue> {
    let id = match message_id {
        Some(m) => message_doc_id(chat_id, m),
        None => chat_doc_id(chat_id),
    };
    idb::to_js(&json!({"id": id, "mark": mark, "chat_id": chat_id, "message_id": message_id}))
}

/// A chat removed here: its document and each message's are removed on the other devices too.
pub(super) async fn removing_chat(
    shared: &Handle,
    tx: &web_sys::IdbTransaction,
    chat_id: &str,
) -> Result<(), JsValue> {
    let keys = idb::request_done(
        &idb::store(tx, idb::MESSAGES)?.get_all_keys_with_key(&idb::messages_of(chat_id)?)?,
    )
    .await?;
    let outbox = idb::store(tx, idb::SYNC_OUTBOX)?;
    let mark = next_mark(shared);
    outbox.put(&outbox_record(chat_id, None, mark)?)?;
    for key in js_sys::Array::from(&keys).iter() {
        if let Some(message_id) = js_sys::Array::from(&key).get(1).as_string() {
            outbox.put(&outbox_record(chat_id, Some(&message_id), mark)?)?;
        }
    }
    Ok(())
}

/// Starts (or stops, with `None`) the replication; the status goes to the listener.
pub(super) async fn configure(shared: &Handle, config: Option<SyncConfig>) -> Result<(), JsValue> {
    stop(shared);
    let Some(config) = config else {
        emit_status(
            shared,
            &SyncStatus {
                state: "off".into(),
                ..SyncStatus::default()
            },
        );
        return Ok(());
    };
    let db_url = database_url(&config)?;
    let device = device_id();
    let replication_id = format!(
        "palaver-{}",
        &hash_hex(&[device.as_bytes(), db_url.as_bytes()])[..20]
    );
    let db_name = shared.borrow().marker.clone();
    let checkpoint_key = format!("palaver.sync.{db_name}.{replication_id}");
    let checkpoint = local_storage_get(&checkpoint_key).and_then(|t| serde_json::from_str(&t).ok());
    let seeded_key = format!("{checkpoint_key}.seeded");
    let auth =
        (!config.username.is_empty()).then(|| basic_auth(&config.username, &config.password));
    let generation = {
        let mut s = shared.borrow_mut();
        s.sync.generation += 1;
        let generation = s.sync.generation;
        s.sync.state = Some(SyncState {
            replicator: Replicator::new(&replication_id),
            db_url,
            auth,
            aborts: HashMap::new(),
            generation,
            checkpoint_key,
            reload_later: BTreeSet::new(),
        });
        generation
    };
    hook_online(shared);
    if local_storage_get(&seeded_key).is_none() {
        // Every chat this browser holds goes into the outbox once: the first push sends them.
        seed_outbox(shared).await?;
        local_storage_set(&seeded_key, "1");
    }
    if current(shared, generation) {
        step(shared, generation, SyncInput::Start { checkpoint });
    }
    Ok(())
}

fn stop(shared: &Handle) {
    let old = shared.borrow_mut().sync.state.take();
    if let Some(old) = old {
        for controller in old.aborts.values() {
            controller.abort();
        }
    }
}

fn current(shared: &Handle, generation: u64) -> bool {
    shared
        .borrow()
        .sync
        .state
        .as_ref()
        .is_some_and(|s| s.generation == generation)
}

fn database_url(config: &SyncConfig) -> Result<String, JsValue> {
    let base = config.url.trim().trim_end_matches('/');
    let parsed =
        web_sys::Url::new(base).map_err(|_| error("BadSyncUrl", &format!("not a URL: {base}")))?;
    if !matches!(parsed.protocol().as_str(), "http:" | "https:") {
        return Err(error(
            "BadSyncUrl",
            "the sync URL must be http:// or https://",
        ));
    }
    let name = config.database.trim();
    // CouchDB's rule for database names.
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_$()+-/".contains(c));
    if !valid {
        return Err(error(
            "BadSyncDatabase",
            "a CouchDB database name starts with a lowercase letter and holds only a-z, 0-9 and _$()+-/",
        ));
    }
    Ok(format!("{base}/{}/", crate::replication::encode(name)))
}

fn device_id() -> String {
    const KEY: &str = "palaver.device";
    if let Some(id) = local_storage_get(KEY) {
        return id;
    }
    let id = format!(
        "{:016x}{:016x}",
        (js_sys::Math::random() * 2f64.powi(53)) as u64,
        now()
    );
    local_storage_set(KEY, &id);
    id
}

fn basic_auth(user: &str, password: &str) -> String {
    // `btoa` takes one byte per character: the UTF-8 bytes, each as a char.
    let binary: String = format!("{user}:{password}")
        .bytes()
        .map(char::from)
        .collect();
    let encoded = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .and_then(|w| w.btoa(&binary).ok())
        .unwrap_or_default();
    format!("Basic {encoded}")
}

fn hook_online(shared: &Handle) {
    if shared.borrow().sync.online_hooked {
        return;
    }
    shared.borrow_mut().sync.online_hooked = true;
    let Ok(window) = js_sys::global().dyn_into::<web_sys::Window>() else {
        return;
    };
    for (event, online) in [("online", true), ("offline", false)] {
        let shared = shared.clone();
        let callback = Closure::<dyn FnMut()>::new(move || {
            let generation = shared.borrow().sync.state.as_ref().map(|s| s.generation);
            if let Some(generation) = generation {
                step(&shared, generation, SyncInput::Online { online });
            }
        });
        let _ = window.add_event_listener_with_callback(event, callback.as_ref().unchecked_ref());
        callback.forget();
    }
}

/// A save (or a removal) changed the outbox: push soon.
pub(super) fn local_change(shared: &Handle) {
    let generation = shared.borrow().sync.state.as_ref().map(|s| s.generation);
    if let Some(generation) = generation {
        step(shared, generation, SyncInput::LocalChange);
    }
}

/// Starts again from the checkpoint (after a stop, or when the user asks).
pub(super) fn restart(shared: &Handle) {
    let found = shared
        .borrow()
        .sync
        .state
        .as_ref()
        .map(|s| (s.generation, s.checkpoint_key.clone()));
    if let Some((generation, key)) = found {
        let checkpoint = local_storage_get(&key).and_then(|t| serde_json::from_str(&t).ok());
        step(shared, generation, SyncInput::Start { checkpoint });
    }
}

pub(super) fn status(shared: &Handle) -> SyncStatus {
    shared
        .borrow()
        .sync
        .state
        .as_ref()
        .map(|s| s.replicator.status().clone())
        .unwrap_or_else(|| SyncStatus {
            state: "off".into(),
            ..SyncStatus::default()
        })
}

fn emit_status(shared: &Handle, status: &SyncStatus) {
    emit(shared, &json!({"type": "status", "status": status}));
}

fn emit(shared: &Handle, value: &Value) {
    let listener = shared.borrow().sync.listener.clone();
    if let Some(listener) = listener {
        let _ = listener.call1(&JsValue::NULL, &to_js(value));
    }
}

/// One input to the replicator, and its effects performed.
fn step(shared: &Handle, generation: u64, input: SyncInput) {
    if !current(shared, generation) || shared.borrow().closed {
        return;
    }
    let effects = {
        let mut s = shared.borrow_mut();
        let Some(state) = s.sync.state.as_mut() else {
            return;
        };
        state.replicator.handle(now(), input)
    };
    for effect in effects {
        perform(shared, generation, effect);
    }
}

fn perform(shared: &Handle, generation: u64, effect: SyncEffect) {
    let shared = shared.clone();
    match effect {
        SyncEffect::Http(request) => spawn_local(async move {
            let id = request.id;
            let input = match http(&shared, request).await {
                Ok((status, body)) => SyncInput::Reply { id, status, body },
                Err(reason) => SyncInput::Failed { id, reason },
            };
            if let Some(state) = shared.borrow_mut().sync.state.as_mut() {
                state.aborts.remove(&id);
            }
            step(&shared, generation, input);
        }),
        SyncEffect::Abort { id } => {
            let controller = shared
                .borrow_mut()
                .sync
                .state
                .as_mut()
                .and_then(|s| s.aborts.remove(&id));
            if let Some(controller) = controller {
                controller.abort();
            }
        }
        SyncEffect::ReadOutbox { limit } => spawn_local(async move {
            let input = match read_outbox(&shared, limit).await {
                Ok(entries) => SyncInput::Outbox { entries },
                Err(e) => storage_failed(e),
            };
            step(&shared, generation, input);
        }),
        SyncEffect::ReadKnown { ids } => spawn_local(async move {
            let input = match read_known(&shared, &ids).await {
                Ok((known, pending)) => SyncInput::Known { known, pending },
                Err(e) => storage_failed(e),
            };
            step(&shared, generation, input);
        }),
        SyncEffect::Store { pulled, pushed } => spawn_local(async move {
            match store(&shared, &pulled, &pushed).await {
                Ok(changed) => {
                    step(&shared, generation, SyncInput::Stored);
                    if !changed.chats.is_empty() || !changed.deleted.is_empty() {
                        after_pull(&shared, generation, changed).await;
                    }
                }
                Err(e) => {
                    let input = storage_failed(e);
                    step(&shared, generation, input);
                }
            }
        }),
        SyncEffect::Checkpoint { last_seq } => {
            let key = shared
                .borrow()
                .sync
                .state
                .as_ref()
                .map(|s| s.checkpoint_key.clone());
            if let Some(key) = key {
                local_storage_set(&key, &last_seq.to_string());
            }
        }
        SyncEffect::Wake { at } => {
            let delay = u32::try_from(at.saturating_sub(now())).unwrap_or(u32::MAX);
            gloo_timers::callback::Timeout::new(delay, move || {
                step(&shared, generation, SyncInput::Tick);
            })
            .forget();
        }
        SyncEffect::Status(status) => emit_status(&shared, &status),
    }
}

/// A local storage failure during sync: shown, and retried like a server failure.
fn storage_failed(error: JsValue) -> SyncInput {
    SyncInput::LocalFailed {
        reason: describe(error),
    }
}

async fn http(
    shared: &Handle,
    request: crate::replication::HttpRequest,
) -> Result<(u16, Value), String> {
    let (url, auth, controller) = {
        let mut s = shared.borrow_mut();
        let state = s.sync.state.as_mut().ok_or("sync is off")?;
        let controller = AbortController::new().map_err(describe)?;
        state.aborts.insert(request.id, controller.clone());
        (
            format!("{}{}", state.db_url, request.path),
            state.auth.clone(),
            controller,
        )
    };
    let headers = web_sys::Headers::new().map_err(describe)?;
    let _ = headers.set("accept", "application/json");
    if let Some(auth) = &auth {
        let _ = headers.set("authorization", auth);
    }
    let init = web_sys::RequestInit::new();
    init.set_method(match request.method {
        crate::replication::Method::Get => "GET",
        crate::replication::Method::Put => "PUT",
        crate::replication::Method::Post => "POST",
    });
    init.set_credentials(web_sys::RequestCredentials::Omit);
    init.set_signal(Some(&controller.signal()));
    if let Some(body) = &request.body {
        let _ = headers.set("content-type", "application/json");
        init.set_body(&JsValue::from_str(&body.to_string()));
    }
    init.set_headers(&headers);
    let window = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .map_err(|_| "no window".to_string())?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str_and_init(&url, &init))
        .await
        .map_err(|e| format!("the sync server cannot be reached ({})", describe(e)))?
        .dyn_into()
        .map_err(describe)?;
    let status = response.status();
    let text = match response.text() {
        Ok(promise) => JsFuture::from(promise)
            .await
            .map(|t| super::text_of(&t).unwrap_or_default())
            .map_err(|e| format!("the sync server's reply broke off ({})", describe(e)))?,
        Err(e) => return Err(describe(e)),
    };
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// Every chat and message of this browser into the outbox (sync's first start here).
async fn seed_outbox(shared: &Handle) -> Result<(), JsValue> {
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
struct OutboxRow {
    id: String,
    mark: f64,
    chat_id: String,
    #[serde(default)]
    message_id: Option<String>,
}

/// The outbox's first `limit` entries with their bodies as stored now and what is known of them.
async fn read_outbox(shared: &Handle, limit: usize) -> Result<Vec<OutboxEntry>, JsValue> {
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
        asked.push((body, revs.get(&JsValue::from_str(&row.id))?));
    }
    let mut entries = Vec::with_capacity(rows.len());
    for (row, (body, known)) in rows.into_iter().zip(asked) {
        let record = idb::from_js(&idb::request_done(&body).await?);
        let known = idb::from_js(&idb::request_done(&known).await?)
            .and_then(|v| serde_json::from_value::<RevInfo>(v).ok());
        let body = record.map(|r| match &row.message_id {
            Some(_) => message_doc(&r),
            None => chat_doc(&row.chat_id, &r),
        });
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
async fn read_known(
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
struct Changed {
    chats: BTreeSet<String>,
    deleted: BTreeSet<String>,
}

/// Pulled documents into the chats' stores and pushed ones recorded — one transaction.
async fn store(shared: &Handle, pulled: &[Pulled], pushed: &[Pushed]) -> Result<Changed, JsValue> {
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
    for p in pulled {
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
                match record {
                    Some(record) => messages.put(&idb::to_js(&record)?)?,
                    None => messages.delete(&idb::message_key(&chat_id, &message_id))?,
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
                chat_docs.insert(chat_id, fields);
            }
            None => {}
        }
    }
    for chat_id in &changed.deleted {
        changed.chats.remove(chat_id);
    }
    // Each changed chat's record: the pulled thread and title, its message count recounted.
    for chat_id in &changed.chats {
        let stored = idb::request_done(&chats.get(&JsValue::from_str(chat_id))?).await?;
        let mut record = idb::from_js(&stored).unwrap_or_else(
            || json!({"id": chat_id, "thread": {}, "title": "", "updated_at": now()}),
        );
        if let Some(body) = chat_docs.get(chat_id) {
            // What steers the agent never comes from another device's document (SECURITY F2).
            record["thread"] = crate::thread::from_outside(&body["thread"], &record["thread"]);
            record["title"] = body["title"].clone();
            record["updated_at"] = body["updated_at"].clone();
        }
        let count = idb::request_done(
            &messages
                .index(idb::BY_POSITION)?
                .count_with_key(&idb::positions_of(chat_id)?)?,
        )
        .await?;
        record["message_count"] = json!(count.as_f64().unwrap_or(0.0));
        chats.put(&idb::to_js(&record)?)?;
        shared.borrow_mut().chats.insert(chat_id.clone(), record);
    }
    for p in pushed {
        revs.put(&rev_record(&p.id, &p.info)?)?;
        let entry = idb::request_done(&outbox.get(&JsValue::from_str(&p.id))?).await?;
        let mark = Reflect::get(&entry, &"mark".into())
            .ok()
            .and_then(|m| m.as_f64());
        if mark == Some(p.mark) {
            outbox.delete(&JsValue::from_str(&p.id))?;
        }
    }
    idb::transaction_done(&tx).await?;
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
    super::chat_list::changed(shared, &records, &deleted);
    Ok(changed)
}

fn rev_record(id: &str, info: &RevInfo) -> Result<JsValue, JsValue> {
    let mut value =
        serde_json::to_value(info).map_err(|e| error("StorageError", &e.to_string()))?;
    value["id"] = json!(id);
    idb::to_js(&value)
}

/// Pulled changes reach the page: the chat list refreshes, open chats take them (now if idle and
/// saved, else when they are), a chat removed elsewhere closes.
async fn after_pull(shared: &Handle, generation: u64, changed: Changed) {
    for chat_id in &changed.deleted {
        if shared.borrow().engine.session(chat_id).is_some() {
            handle(
                shared,
                Input::CloseChat {
                    chat_id: chat_id.clone(),
                },
            );
        }
    }
    if let Some(state) = shared.borrow_mut().sync.state.as_mut() {
        state.reload_later.extend(changed.chats.iter().cloned());
    }
    emit(
        shared,
        &json!({"type": "changed", "chats": changed.chats, "deleted": changed.deleted}),
    );
    reload_open_chats(shared, generation).await;
}

/// Open chats owned here with pulled changes take them when idle and saved; the rest wait.
async fn reload_open_chats(shared: &Handle, generation: u64) {
    let waiting: Vec<String> = match shared.borrow().sync.state.as_ref() {
        Some(state) if state.generation == generation => {
            state.reload_later.iter().cloned().collect()
        }
        _ => return,
    };
    let mut still = BTreeSet::new();
    for chat_id in waiting {
        let owned = {
            let s = shared.borrow();
            s.engine.session(&chat_id).is_some()
                && !matches!(s.roles.get(&chat_id), Some(ChatRole::Follower { .. }))
        };
        if !owned {
            continue;
        }
        let ready = shared
            .borrow()
            .engine
            .session(&chat_id)
            .is_some_and(|s| s.can_reload().is_ok());
        if !ready {
            still.insert(chat_id);
            continue;
        }
        match super::storage::load_trajectory(shared, &chat_id).await {
            Ok((trajectory, stored)) => {
                let step = handle(
                    shared,
                    Input::ReloadChat {
                        chat_id: chat_id.clone(),
                        trajectory,
                        stored: Some(stored),
                    },
                );
                if !step.errors.is_empty() {
                    still.insert(chat_id);
                }
            }
            Err(e) => web_sys::console::warn_2(&"palaver: sync could not reload a chat".into(), &e),
        }
    }
    let again = !still.is_empty();
    if let Some(state) = shared.borrow_mut().sync.state.as_mut() {
        state.reload_later = still;
    }
    if again {
        let shared = shared.clone();
        gloo_timers::callback::Timeout::new(1000, move || {
            spawn_local(async move { reload_open_chats(&shared, generation).await });
        })
        .forget();
    }
}
