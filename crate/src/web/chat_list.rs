//! The chat list as the page shows it: a stored chat record's summary, and `chats_changed`, the
//! page's one way to learn that the list changed — a save made a chat or changed its title or
//! count, a chat was created or deleted, a pull brought changes (issue 34: no timers re-reading
//! the list). A leaf: the parts that change chats call it; it calls only the page's listener.

use super::browser::*;
use super::shared::*;
use js_sys::Function;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;

/// `{id, title, message_count, updated_at, parent_id, root_chat_id, link_type}` of a record.
pub(super) fn summary(record: &Value) -> Value {
    json!({"id": record["id"], "title": record["title"], "message_count": record["message_count"], "updated_at": record["updated_at"],
        "parent_id": record["thread"]["parent_id"], "root_chat_id": record["thread"]["root_chat_id"], "link_type": record["thread"]["link_type"]})
}

pub(super) fn set_listener(shared: &Handle, listener: Option<Function>) {
    shared.borrow_mut().chats_listener = listener;
}

/// Tells the page: `{changed: [ChatSummary], deleted: [id]}`.
pub(super) fn changed(shared: &Handle, records: &[Value], deleted: &[String]) {
    let Some(listener) = shared.borrow().chats_listener.clone() else {
        return;
    };
    let changed: Vec<Value> = records.iter().map(summary).collect();
    let _ = listener.call1(
        &JsValue::NULL,
        &to_js(&json!({"changed": changed, "deleted": deleted})),
    );
}
