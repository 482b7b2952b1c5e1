//! The documents a chat syncs as (`chat:{id}`, `msg:{chat}:{message}`), what a pulled one means
//! here, and the outbox entries and results the host stores.

use super::{body_of, RevInfo};
use serde_json::{json, Value};

/// The document id of a chat, and of one of its messages.
pub fn chat_doc_id(chat_id: &str) -> String {
    format!("chat:{chat_id}")
}

pub fn message_doc_id(chat_id: &str, message_id: &str) -> String {
    format!("msg:{chat_id}:{message_id}")
}

/// The document body of a stored message record (`{chat_id, message_id, position, message}`).
pub fn message_doc(record: &Value) -> Value {
    json!({"type": "message", "chat_id": record["chat_id"], "message_id": record["message_id"], "position": record["position"], "message": record["message"]})
}

/// The document body of a chat record: only what syncs (never the draft, the version or the
/// count, which are this browser's).
pub fn chat_doc(chat_id: &str, record: &Value) -> Value {
    json!({"type": "chat", "chat_id": chat_id, "title": record["title"], "thread": record["thread"], "updated_at": record["updated_at"]})
}

/// What a pulled document means for this browser's stores.
#[derive(Debug, Clone, PartialEq)]
pub enum LocalDoc {
    /// The message record to put, or `None`: the message was removed.
    Message {
        chat_id: String,
        message_id: String,
        record: Option<Value>,
    },
    /// The chat's synced fields (`chat_doc`), or `None`: the chat was removed.
    Chat {
        chat_id: String,
        fields: Option<Value>,
    },
}

/// A pulled document (with `_id`, `_deleted`) as `LocalDoc`; `None` for a document not ours.
pub fn local_doc(doc: &Value) -> Option<LocalDoc> {
    let id = doc.get("_id")?.as_str()?;
    let deleted = doc.get("_deleted").and_then(Value::as_bool) == Some(true);
    let body = body_of(doc);
    if let Some(rest) = id.strip_prefix("msg:") {
        // The ids come from the body; the document id is the fallback (an id may hold `:`).
        let (chat_id, message_id) = match (body["chat_id"].as_str(), body["message_id"].as_str()) {
            (Some(chat), Some(message)) => (chat.to_string(), message.to_string()),
            _ => {
                let (chat, message) = rest.split_once(':')?;
                (chat.to_string(), message.to_string())
            }
        };
        let record = (!deleted).then(|| json!({"chat_id": chat_id, "message_id": message_id, "position": body["position"], "message": body["message"]}));
        return Some(LocalDoc::Message {
            chat_id,
            message_id,
            record,
        });
    }
    let chat_id = id.strip_prefix("chat:")?.to_string();
    Some(LocalDoc::Chat {
        chat_id,
        fields: (!deleted).then_some(body),
    })
}

/// A changed document waiting to be pushed, as the host read it: its body (the document's own
/// fields, without `_id`/`_rev`), or `None` when it was removed here; the revision this replica
/// knows; `mark`, which the host compares before it clears the entry (a newer change stays).
#[derive(Clone, Debug, PartialEq)]
pub struct OutboxEntry {
    pub id: String,
    pub mark: f64,
    pub body: Option<Value>,
    pub known: Option<RevInfo>,
}

/// A document pushed: the host records its revision and clears the outbox entry if `mark` is
/// still the entry's.
#[derive(Clone, Debug, PartialEq)]
pub struct Pushed {
    pub id: String,
    pub mark: f64,
    pub info: RevInfo,
}

/// A pulled document to store here (`doc` has `_id`, `_rev`, `_deleted` when removed), or a
/// losing leaf to remember (`doc` null).
#[derive(Clone, Debug, PartialEq)]
pub struct Pulled {
    pub id: String,
    pub doc: Value,
    pub info: RevInfo,
}

/// The body of a message document removed because its whole chat was deleted here: a deleted
/// document that says why. A device that added to that chat meanwhile keeps the message (an
/// addition wins over a deletion, the merge rule) instead of losing it with the chat.
pub fn removed_with_chat() -> Value {
    json!({"_deleted": true, "chat_deleted": true})
}

/// Whether a body to push removes its document: none, or a removal that says why.
pub fn is_removal(body: Option<&Value>) -> bool {
    body.is_none_or(|b| b.get("_deleted").and_then(Value::as_bool) == Some(true))
}

/// Whether a pulled document is a message removed only because its chat was deleted.
pub fn removed_with_its_chat(doc: &Value) -> bool {
    doc.get("_deleted").and_then(Value::as_bool) == Some(true)
        && doc.get("chat_deleted").and_then(Value::as_bool) == Some(true)
}

/// What a pulled message document does to this browser's store (the merge rule's last part).
#[derive(Debug, Clone, PartialEq)]
pub enum MessageFate {
    /// Store this message record.
    Put(Value),
    /// A removal that came only with its chat's deletion elsewhere, while the chat is still here
    /// (this device added to it): the message is kept and pushed again, a new revision over the
    /// removal, so every device has it back — and so is its chat's document, so the chat comes
    /// back with it even where a later deletion (of a device that had not seen this) won.
    KeepAndPushAgain,
    /// Remove the message.
    Remove,
}

/// The fate of a pulled message: `record` as `local_doc` read it (`None`: removed), `doc` the
/// pulled document, `chat_here` whether its chat is in this store after this pull's own chat
/// documents (a chat deleted by the same pull is not here).
pub fn message_fate(record: Option<Value>, doc: &Value, chat_here: bool) -> MessageFate {
    match record {
        Some(record) => MessageFate::Put(record),
        None if removed_with_its_chat(doc) && chat_here => MessageFate::KeepAndPushAgain,
        None => MessageFate::Remove,
    }
}

/// The body an outbox entry pushes, read from the store as it is now: the record's document, or,
/// for a message no longer here, a removal — one that says it went with its whole chat when it
/// did (`with_chat`, or its chat is gone too), so a device that added to that chat keeps it.
pub fn outbox_body(
    chat_id: &str,
    message: bool,
    record: Option<&Value>,
    with_chat: bool,
    chat_here: bool,
) -> Option<Value> {
    match (record, message) {
        (Some(record), true) => Some(message_doc(record)),
        (Some(record), false) => Some(chat_doc(chat_id, record)),
        (None, true) if with_chat || !chat_here => Some(removed_with_chat()),
        (None, _) => None,
    }
}
