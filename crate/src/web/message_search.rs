//! Search inside messages (issue 38), over what this browser stores: every chat's messages read
//! in one pass of IndexedDB, each user, assistant or tool-result text matched by `message_search` (every word,
//! any case). Results name the chat, the message and the line that matched.

use super::idb;
use super::shared::Handle;
use crate::message_search::{matching_line, terms};
use js_sys::{Array, Reflect};
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;

/// `{hits: [{chat_id, message_id, role, line}], more}`: at most `limit` hits, chats in stored
/// order and messages in theirs; `more` when the limit cut the list.
pub(super) async fn search(shared: &Handle, query: &str, limit: usize) -> Result<Value, JsValue> {
    let terms = terms(query);
    if terms.is_empty() {
        return Ok(json!({"hits": [], "more": false}));
    }
    let db = shared.borrow().db.clone();
    let tx = idb::read_transaction(&db)?;
    let index = idb::store(&tx, idb::MESSAGES)?.index(idb::BY_POSITION)?;
    let rows: Array = idb::request_done(&index.get_all()?).await?.into();
    let mut hits = Vec::new();
    let mut more = false;
    for row in rows.iter() {
        let message = get(&row, "message");
        let role = get(&message, "role").as_string().unwrap_or_default();
        if !matches!(role.as_str(), "user" | "assistant" | "tool") {
            continue;
        }
        let Some(line) = matching_line(&text_of(&get(&message, "content")), &terms) else {
            continue;
        };
        if hits.len() == limit {
            more = true;
            break;
        }
        hits.push(json!({
            "chat_id": get(&row, "chat_id").as_string(),
            "message_id": get(&message, "message_id").as_string(),
            "role": role,
            "line": line,
        }));
    }
    Ok(json!({"hits": hits, "more": more}))
}

fn get(value: &JsValue, key: &str) -> JsValue {
    Reflect::get(value, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED)
}

/// A message's text: its string, or its text parts joined (images and the rest have none).
fn text_of(content: &JsValue) -> String {
    if let Some(text) = content.as_string() {
        return text;
    }
    if !Array::is_array(content) {
        return String::new();
    }
    Array::from(content)
        .iter()
        .filter_map(|part| get(&part, "text").as_string())
        .collect::<Vec<_>>()
        .join("\n")
}
