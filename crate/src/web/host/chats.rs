//! `Palaver`'s stored chats: listed, created, renamed and deleted (a deletion another tab or a
//! synced device learns of), and opened in this tab (as owner or follower).

use super::*;

#[wasm_bindgen(js_class = Palaver)]
impl Host {
    /// Stored chats: `[{id, title, message_count, updated_at, parent_id, root_chat_id, link_type}]`,
    /// newest first (a subagent's chat names its parent and root).
    #[wasm_bindgen(js_name = listChats, unchecked_return_type = "Promise<ChatSummary[]>")]
    pub fn list_chats(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let db = shared.borrow().db.clone();
            let tx = idb::read_transaction(&db)?;
            let all = idb::request_done(&idb::store(&tx, idb::CHATS)?.get_all()?).await?;
            let mut chats: Vec<Value> = js_sys::Array::from(&all)
                .iter()
                .filter_map(|c| idb::from_js(&c))
                .map(|c| chat_list::summary(&c))
                .collect();
            chats.sort_by(|a, b| {
                b["updated_at"]
                    .as_f64()
                    .partial_cmp(&a["updated_at"].as_f64())
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            Ok(to_js(&chats))
        })
    }

    /// A new empty chat; resolves to its id once stored.
    #[wasm_bindgen(js_name = createChat, unchecked_return_type = "Promise<string>")]
    pub fn create_chat(&self, title: Option<String>) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let id = format!("chat-{}-{}", now(), (js_sys::Math::random() * 1e9) as u64);
            let title = title.unwrap_or_default();
            let record = json!({"id": id, "title": title, "thread": {"title": title}, "message_count": 0, "version": 0, "updated_at": now()});
            let db = shared.borrow().db.clone();
            let tx = idb::write_transaction(&db)?;
            idb::store(&tx, idb::CHATS)?.put(&idb::to_js(&record)?)?;
            idb::transaction_done(&tx).await?;
            shared.borrow_mut().chats.insert(id.clone(), record.clone());
            chat_list::changed(&shared, &[record], &[]);
            Ok(JsValue::from_str(&id))
        })
    }

    /// Renames a chat (a `set_params` of its title, saved like any change).
    #[wasm_bindgen(js_name = renameChat, unchecked_return_type = "EventEnvelope[]")]
    pub fn rename_chat(&self, chat_id: String, title: String) -> Result<JsValue, JsValue> {
        let command = json!({"type": "set_params", "patch": {"title": title}});
        self.send(chat_id, to_js(&command))
    }

    /// Removes a chat and its messages from the engine and IndexedDB.
    #[wasm_bindgen(js_name = deleteChat, unchecked_return_type = "Promise<void>")]
    pub fn delete_chat(&self, chat_id: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            feed(
                &shared,
                Input::CloseChat {
                    chat_id: chat_id.clone(),
                },
            );
            let db = shared.borrow().db.clone();
            let tx = idb::write_transaction(&db)?;
            if crate::web::outbox::enabled(&shared) {
                crate::web::outbox::removing_chat(&shared, &tx, &chat_id).await?;
            }
            idb::store(&tx, idb::MESSAGES)?.delete(&idb::messages_of(&chat_id)?)?;
            idb::forget_packed(&tx, &chat_id)?;
            idb::store(&tx, idb::CHATS)?.delete(&JsValue::from_str(&chat_id))?;
            idb::transaction_done(&tx).await?;
            shared.borrow_mut().chats.remove(&chat_id);
            chat_files::deleted(&shared, &chat_id);
            sync::local_change(&shared);
            chat_list::changed(&shared, &[], std::slice::from_ref(&chat_id));
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Opens a chat: as its owner (loaded from IndexedDB into this engine, tolerantly: what
    /// cannot be read is kept as a notice, never dropped), or — when another tab owns it — as a
    /// follower mirroring the owner. Resolves to the snapshot.
    #[wasm_bindgen(js_name = openChat, unchecked_return_type = "Promise<EventEnvelope>")]
    pub fn open_chat(&self, chat_id: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            match open_here(&shared, &chat_id).await? {
                Some(snapshot) => Ok(snapshot),
                None => current_snapshot_js(&shared, &chat_id, None, None)
                    .ok_or_else(|| error("UnknownChat", &chat_id)),
            }
        })
    }

    /// Loads a chat into this tab as `openChat` does, without handing its snapshot back: the
    /// page's subscriber gets the snapshot, and a 5 000-message chat crossed to JS twice cost
    /// the opening ~60 ms (issue 41).
    #[wasm_bindgen(js_name = loadChat, unchecked_return_type = "Promise<void>")]
    pub fn load_chat(&self, chat_id: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            open_here(&shared, &chat_id).await?;
            Ok(JsValue::UNDEFINED)
        })
    }
}

/// Opens a chat in this tab unless it is open already; a follower's opening comes with the
/// owner's snapshot (already in JS), an owner's does not.
async fn open_here(shared: &Handle, chat_id: &str) -> Result<Option<JsValue>, JsValue> {
    // Two quick clicks must not open the chat twice (two owners' saves, two channels).
    for _ in 0..400 {
        if !shared.borrow().opening.contains(chat_id) {
            break;
        }
        sleep_ms(20).await;
    }
    if has_snapshot(shared, chat_id) {
        return Ok(None);
    }
    shared.borrow_mut().opening.insert(chat_id.to_string());
    let opened = open_or_follow(shared, chat_id).await;
    shared.borrow_mut().opening.remove(chat_id);
    opened
}
