//! `Palaver`'s chats in and out: export, import (stored before it resolves), undelete, and the
//! workspace's copies of chats (kept, checked, restored).

use super::*;

#[wasm_bindgen(js_class = Palaver)]
impl Host {
    /// A chat as `refact` (trajectory JSON), `openai` (messages JSON) or `markdown`; keys are
    /// never part of it.
    #[wasm_bindgen(js_name = exportChat, unchecked_return_type = "Promise<string>")]
    pub fn export_chat(&self, chat_id: String, format: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            if matches!(format.as_str(), "refact" | "json") {
                // An open chat's copy, written a piece at a time into JS (issue 41).
                let open = crate::web::crossing::refact_blob(&shared.borrow().engine, &chat_id);
                if let Some(blob) = open {
                    let blob = blob.map_err(|e| error("BadInput", &e))?;
                    return JsFuture::from(blob.text()).await;
                }
            }
            let trajectory = match shared.borrow().engine.snapshot(&chat_id) {
                Some(snapshot) => trajectory_of(&chat_id, &snapshot),
                None => None,
            };
            let trajectory = match trajectory {
                Some(t) => t,
                None => {
                    let (text, _) = load_trajectory(&shared, &chat_id).await?;
                    serde_json::from_str(text.get())
                        .map_err(|e| error("StorageError", &e.to_string()))?
                }
            };
            let text = crate::export::export_chat(&trajectory, &format)
                .map_err(|e| error("BadInput", &e))?;
            Ok(JsValue::from_str(&text))
        })
    }

    /// Imports a trajectory (JSON text, Refact format or a bare message array) as a new chat:
    /// loaded tolerantly (repairs are reported as events) and saved whole. What steers the agent
    /// does not come with it (SECURITY F2). An export with its subagents' chats (`subagents`)
    /// brings them too, each linked under the new chat as it was under the exported one.
    #[wasm_bindgen(js_name = importChat, unchecked_return_type = "Promise<string>")]
    pub fn import_chat(&self, text: js_sys::JsString) -> Promise {
        let text = crate::web::text_of(&text);
        let shared = self.shared.clone();
        future_to_promise(async move {
            let text =
                text.ok_or_else(|| error("BadInput", "an import is the file's text (a string)"))?;
            let id = format!("chat-{}-{}", now(), (js_sys::Math::random() * 1e9) as u64);
            let parsed: Value =
                serde_json::from_str(&text).map_err(|e| error("BadInput", &e.to_string()))?;
            let (root, children) = crate::export::split_subagents(parsed, &id);
            import_as(&shared, &id, &root.to_string(), false).await?;
            for (child_id, child) in children {
                import_as(&shared, &child_id, &child.to_string(), false).await?;
            }
            Ok(JsValue::from_str(&id))
        })
    }

    /// Undoes a delete: the chat comes back from the page's own copy (`exportChat`'s, taken
    /// before the delete) under its own id, params and all, so other devices see the same chat.
    #[wasm_bindgen(js_name = undeleteChat, unchecked_return_type = "Promise<string>")]
    pub fn undelete_chat(&self, chat_id: String, text: js_sys::JsString) -> Promise {
        let text = crate::web::text_of(&text);
        let shared = self.shared.clone();
        future_to_promise(async move {
            let text = text.ok_or_else(|| error("BadInput", "the copy is the export's text"))?;
            import_as(&shared, &chat_id, &text, true).await?;
            Ok(JsValue::from_str(&chat_id))
        })
    }

    /// Where a chat's workspace copy (`.palaver/chats/{id}.json`, issue 21) stands:
    /// `{state: "off" | "pending" | "current" | "failed" | "conflict", error?}`.
    #[wasm_bindgen(js_name = workspaceCopy, unchecked_return_type = "WorkspaceCopy")]
    pub fn workspace_copy(&self, chat_id: &str) -> JsValue {
        to_js(&chat_files::state_of(&self.shared, chat_id))
    }

    /// `callback(chatId, state)` whenever a chat's workspace copy changes state.
    #[wasm_bindgen(js_name = onWorkspaceCopy)]
    pub fn on_workspace_copy(&self, callback: Option<Function>) {
        chat_files::set_listener(&self.shared, callback);
    }

    /// Compares the chat's workspace copy with the one this browser wrote last (a copy changed
    /// elsewhere is a `conflict` at once).
    #[wasm_bindgen(js_name = checkWorkspaceCopy, unchecked_return_type = "Promise<WorkspaceCopy>")]
    pub fn check_workspace_copy(&self, chat_id: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move { Ok(to_js(&chat_files::check(&shared, &chat_id).await)) })
    }

    /// Writes this browser's copy over a workspace copy changed elsewhere (the user chose it).
    #[wasm_bindgen(js_name = keepBrowserCopy, unchecked_return_type = "Promise<WorkspaceCopy>")]
    pub fn keep_browser_copy(&self, chat_id: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            Ok(to_js(
                &chat_files::keep_browser_copy(&shared, &chat_id).await,
            ))
        })
    }

    /// The chats kept in the workspace: `{enabled, chats: [{id, bytes, modified_ms}], skipped}`.
    #[wasm_bindgen(js_name = workspaceChats, unchecked_return_type = "Promise<WorkspaceChats>")]
    pub fn workspace_chats(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let listing = chat_files::list(&shared)
                .await
                .map_err(|e| error("WorkspaceError", &e))?;
            Ok(to_js(&listing))
        })
    }

    /// Takes a chat from the workspace into this browser: under its own id (refused when a chat
    /// with that id is here: never a duplicate, never a replacement), or as a new chat (`asNew`,
    /// for a copy changed elsewhere). Resolves to the chat's id here.
    #[wasm_bindgen(js_name = restoreFromWorkspace)]
    pub fn restore_from_workspace(&self, chat_id: String, as_new: bool) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let (text, hash) = chat_files::read(&shared, &chat_id)
                .await
                .map_err(|e| error("WorkspaceError", &e))?;
            if as_new {
                let id = format!("chat-{}-{}", now(), (js_sys::Math::random() * 1e9) as u64);
                import_as(&shared, &id, &text, false).await?;
                return Ok(JsValue::from_str(&id));
            }
            if stored_chat_exists(&shared, &chat_id).await? {
                return Err(error(
                    "AlreadyHere",
                    &format!("chat {chat_id} is already in this browser"),
                ));
            }
            let workspace = chat_files::adopting(&shared, &chat_id, &hash).await;
            let imported = import_as(&shared, &chat_id, &text, false).await;
            if let Some(workspace) = workspace {
                chat_files::adopted(&shared, &chat_id, &workspace, imported.is_ok());
            }
            imported?;
            Ok(JsValue::from_str(&chat_id))
        })
    }
}

/// Imports a trajectory (Refact JSON, or an OpenAI-style message array) as chat `id`, resolved
/// once it is stored: closing the page then loses nothing.
pub(super) async fn import_as(
    shared: &Handle,
    id: &str,
    text: &str,
    own_copy: bool,
) -> Result<(), JsValue> {
    let trajectory: Value =
        serde_json::from_str(text).map_err(|e| error("BadInput", &e.to_string()))?;
    feed(
        shared,
        Input::OpenChat {
            chat_id: id.to_string(),
            trajectory: None,
            stored: None,
        },
    );
    let command = json!({"type": "restore_from_trajectory", "client_request_id": "import", "trajectory": trajectory, "own_copy": own_copy});
    let step = feed(
        shared,
        Input::Command {
            chat_id: id.to_string(),
            command,
        },
    );
    let refused = step.events.iter().find_map(|e| match &e.event {
        Event::Ack {
            accepted: false,
            reason,
            ..
        } => Some(format!("{reason:?}")),
        _ => None,
    });
    if let Some(reason) = refused {
        feed(
            shared,
            Input::CloseChat {
                chat_id: id.to_string(),
            },
        );
        return Err(error("BadTrajectory", &reason));
    }
    wait_for_saves(shared, Some(id)).await;
    if let Some(reason) = current_storage_error(shared, id) {
        return Err(error("StorageError", &reason));
    }
    Ok(())
}

/// Whether chat `id` has a record in IndexedDB.
pub(super) async fn stored_chat_exists(shared: &Handle, id: &str) -> Result<bool, JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::read_transaction(&db)?;
    let record =
        idb::request_done(&idb::store(&tx, idb::CHATS)?.get(&JsValue::from_str(id))?).await?;
    Ok(!record.is_undefined() && !record.is_null())
}
