//! IndexedDB for the browser host (SPEC §4): the schema and its versioned migrations, requests
//! and transactions as futures, and the trajectory records. Stores: `chats` (one record per chat:
//! id, title, thread, message count, saved version) and `messages` (`{chat_id, message_id,
//! position, message}`, key `[chat_id, message_id]`, read in order through the index `position`
//! on `[chat_id, position]`), so a save writes one small record per changed message in one
//! transaction, and removing or editing an early message writes that one record.

use js_sys::{Array, Function, Reflect};
use serde_json::Value;
use wasm_bindgen::prelude::*;

mod events;
mod migrations;

pub use events::*;

pub use migrations::*;
use wasm_bindgen::JsCast;
use web_sys::{
    IdbDatabase, IdbKeyRange, IdbObjectStore, IdbObjectStoreParameters, IdbOpenDbRequest,
    IdbTransaction, IdbTransactionMode,
};

pub const CHATS: &str = "chats";
pub const MESSAGES: &str = "messages";
/// The index of `messages` that lists a chat's messages in order.
pub const BY_POSITION: &str = "position";
/// Issue 21's sync: what this replica knows of each document (`{id, rev, ancestry, …}`), and the
/// documents changed here and not pushed yet (`{id, mark, chat_id, message_id?}`).
pub const SYNC_REVS: &str = "sync_revs";
pub const SYNC_OUTBOX: &str = "sync_outbox";
/// Issue 41: a long chat's message records as one JSON text (`{chat_id, rows}`, the text's UTF-8
/// bytes), so opening it
/// reads one record instead of thousands. A copy, never the truth: read only while the chat's
/// record lists what was saved since; a write that list cannot carry removes it (`../packed.rs`).
pub const PACKED: &str = "packed_messages";
/// Where v3's migration keeps the v2 records while it copies them.
const V2_MESSAGES: &str = "messages_v2";

/// One schema step, run inside the `versionchange` transaction.
pub type Migration = fn(&IdbDatabase, &IdbTransaction) -> Result<(), JsValue>;

/// Each entry upgrades the database from version `i` to `i + 1`; a new schema appends one.
/// IndexedDB runs them inside the `versionchange` transaction, so one that throws rolls back the
/// whole upgrade and the old version stays readable; a rerun starts again from the old version.
pub const MIGRATIONS: [Migration; 5] = [
    create_v1,
    index_chats_by_update,
    key_messages_by_id,
    create_sync_stores,
    create_packed_store,
];
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Opens (and migrates) the database `name`. A tab holding an older version is asked to close
/// by `versionchange`; until it does, the open waits (`blocked`) and then proceeds.
pub async fn open(name: &str) -> Result<IdbDatabase, JsValue> {
    open_with(name, &MIGRATIONS).await
}

/// Opens `name` at version `migrations.len()`, running the steps it lacks (tests pass their own
/// lists to build old shapes or inject a failing step).
pub async fn open_with(
    name: &str,
    migrations: &'static [Migration],
) -> Result<IdbDatabase, JsValue> {
    open_reporting(name, migrations, None)
        .await
        .map(|(db, _)| db)
}

/// Opens like `open_with` and also says whether the database was created just now (its old
/// version was 0): with a marker saying data existed, that means the browser lost it (B18).
/// `on_blocked` hears when the upgrade waits for another tab still holding the old version
/// (SECURITY B11); the open then completes by itself once that tab closes.
pub async fn open_reporting(
    name: &str,
    migrations: &'static [Migration],
    on_blocked: Option<Function>,
) -> Result<(IdbDatabase, bool), JsValue> {
    let created = std::rc::Rc::new(std::cell::Cell::new(false));
    let seen_created = created.clone();
    let factory = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .and_then(|w| w.indexed_db().ok().flatten())
        .ok_or_else(|| JsValue::from_str("IndexedDB is not available here"))?;
    let request: IdbOpenDbRequest = factory.open_with_u32(name, migrations.len() as u32)?;
    let upgrade_request = request.clone();
    let on_upgrade = Closure::<dyn FnMut(web_sys::IdbVersionChangeEvent)>::new(
        move |event: web_sys::IdbVersionChangeEvent| {
            let Ok(db) = upgrade_request
                .result()
                .and_then(|r| r.dyn_into::<IdbDatabase>().map_err(JsValue::from))
            else {
                return;
            };
            let Some(tx) = upgrade_request.transaction() else {
                return;
            };
            let from = event.old_version() as usize;
            seen_created.set(from == 0);
            for migration in migrations.iter().skip(from) {
                if let Err(e) = migration(&db, &tx) {
                    // Aborting the versionchange transaction keeps the old schema intact.
                    let _ = tx.abort();
                    web_sys::console::error_2(&"palaver: migration failed".into(), &e);
                    return;
                }
            }
        },
    );
    request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let blocked = Closure::<dyn FnMut()>::new(move || {
        let message = "Palaver is open in another tab with an older version of its storage: close that tab (or reload it) to continue";
        web_sys::console::warn_1(&message.into());
        if let Some(callback) = &on_blocked {
            let _ = callback.call1(&JsValue::NULL, &JsValue::from_str(message));
        }
    });
    request.set_onblocked(Some(blocked.as_ref().unchecked_ref()));
    let result = request_done(&request).await;
    drop(on_upgrade);
    drop(blocked);
    let db: IdbDatabase = result?.dyn_into()?;
    // Another tab upgrading the schema asks us to step aside: close, it reloads us later.
    let closing = db.clone();
    let on_versionchange = Closure::<dyn FnMut()>::new(move || closing.close());
    db.set_onversionchange(Some(on_versionchange.as_ref().unchecked_ref()));
    on_versionchange.forget();
    Ok((db, created.get()))
}

/// A read-write transaction over both stores, committed durably (SECURITY decision 5).
pub fn write_transaction(db: &IdbDatabase) -> Result<IdbTransaction, JsValue> {
    let stores = existing_stores(db);
    // `{durability: "strict"}` is not in web-sys's stable API: call `transaction` directly.
    let options = js_sys::Object::new();
    Reflect::set(&options, &"durability".into(), &"strict".into())?;
    let transaction: Function = Reflect::get(db, &"transaction".into())?.dyn_into()?;
    transaction
        .call3(db, &stores, &"readwrite".into(), &options)?
        .dyn_into::<IdbTransaction>()
        .map_err(JsValue::from)
}

/// The chats' stores and, from v4 on, the sync stores and v5's packed copies: a transaction spans
/// those the open database has (an older schema, as the migration tests hold it, lacks them).
fn existing_stores(db: &IdbDatabase) -> Array {
    let names = Reflect::get(db, &"objectStoreNames".into()).unwrap_or(JsValue::UNDEFINED);
    let contains = Reflect::get(&names, &"contains".into())
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok());
    [CHATS, MESSAGES, SYNC_REVS, SYNC_OUTBOX, PACKED]
        .iter()
        .filter(|name| {
            [CHATS, MESSAGES].contains(name)
                || contains
                    .as_ref()
                    .and_then(|f| f.call1(&names, &JsValue::from_str(name)).ok())
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false)
        })
        .map(|s| JsValue::from_str(s))
        .collect()
}

pub fn read_transaction(db: &IdbDatabase) -> Result<IdbTransaction, JsValue> {
    let stores = existing_stores(db);
    db.transaction_with_str_sequence_and_mode(&stores, IdbTransactionMode::Readonly)
}

pub fn store(tx: &IdbTransaction, name: &str) -> Result<IdbObjectStore, JsValue> {
    tx.object_store(name)
}

/// The chat's packed copy goes (its chat or messages were removed or written unlisted; a database
/// opened at an older schema, as tests build, has none to forget).
pub fn forget_packed(tx: &IdbTransaction, chat_id: &str) -> Result<(), JsValue> {
    if let Ok(packed) = tx.object_store(PACKED) {
        packed.delete(&JsValue::from_str(chat_id))?;
    }
    Ok(())
}

/// The key range of all of a chat's message records (`[chat_id]` sorts before every
/// `[chat_id, id]`, and `[chat_id, []]` after every string id).
pub fn messages_of(chat_id: &str) -> Result<JsValue, JsValue> {
    let lower: Array = [JsValue::from_str(chat_id)].into_iter().collect();
    let upper: Array = [JsValue::from_str(chat_id), Array::new().into()]
        .into_iter()
        .collect();
    IdbKeyRange::bound(&lower, &upper).map(JsValue::from)
}

/// The range of the `position` index holding a chat's messages, in order.
pub fn positions_of(chat_id: &str) -> Result<JsValue, JsValue> {
    let lower: Array = [
        JsValue::from_str(chat_id),
        JsValue::from_f64(f64::NEG_INFINITY),
    ]
    .into_iter()
    .collect();
    let upper: Array = [JsValue::from_str(chat_id), JsValue::from_f64(f64::INFINITY)]
        .into_iter()
        .collect();
    IdbKeyRange::bound(&lower, &upper).map(JsValue::from)
}

/// The key of one message record.
pub fn message_key(chat_id: &str, message_id: &str) -> JsValue {
    [JsValue::from_str(chat_id), JsValue::from_str(message_id)]
        .into_iter()
        .collect::<Array>()
        .into()
}

/// A JSON value as a structured-cloneable JS object.
pub fn to_js(value: &Value) -> Result<JsValue, JsValue> {
    super::to_js(value)
}

/// A stored JS object back to JSON (via `JSON.stringify`, which keeps key order).
pub fn from_js(value: &JsValue) -> Option<Value> {
    let text = super::text_of(&js_sys::JSON::stringify(value).ok()?.into())?;
    serde_json::from_str(&text).ok()
}
