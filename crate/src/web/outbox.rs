//! The sync outbox: each change to a chat, written in the same IndexedDB transaction as the change,
//! waits here until sync pushes it (`sync`). A leaf under storage and sync alike: saves and deletions
//! write it, the replication reads it.

use super::browser::now;
use super::idb;
use super::shared::Handle;
use crate::replication::{chat_doc_id, message_doc_id};
use serde_json::json;
use wasm_bindgen::prelude::*;

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

/// The outbox record of a message removed because its whole chat was deleted here: pushed as
/// such (`removed_with_chat`) even if the chat comes back from a pull before the push.
fn removed_with_chat_record(
    chat_id: &str,
    message_id: &str,
    mark: f64,
) -> Result<JsValue, JsValue> {
    idb::to_js(&json!({
        "id": message_doc_id(chat_id, message_id),
        "mark": mark,
        "chat_id": chat_id,
        "message_id": message_id,
        "with_chat": true,
    }))
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
            outbox.put(&removed_with_chat_record(chat_id, &message_id, mark)?)?;
        }
    }
    Ok(())
}
