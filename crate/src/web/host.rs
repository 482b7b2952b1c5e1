//! The browser host (SPEC §0, §2.5, §4, §6.1): `Palaver`, the JS API of the engine in a page.
//! It performs the engine's effects — provider requests with `fetch` and a streamed body
//! (cancelled with `AbortController`), timers, workspace tools through the proxy, host tools
//! registered from JS, saves to IndexedDB acknowledged back — and hands events to subscribers.
//! API keys live only in this object's memory: never in IndexedDB, never in an export.

use super::chat_files;
use super::chat_list;
use super::idb;
use super::ownership::*;
use super::shared::*;
use super::storage::*;
use super::sync;
use super::tabs::{self, ChatRole};
use crate::engine::{Engine, EngineConfig, Input};
use crate::event::Event;
use js_sys::{Function, Promise};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{future_to_promise, JsFuture};

#[wasm_bindgen(js_name = Palaver)]
pub struct Host {
    shared: Handle,
}

/// Imports a trajectory (Refact JSON, or an OpenAI-style message array) as chat `id`, resolved
/// once it is stored: closing the page then loses nothing.
async fn import_as(shared: &Handle, id: &str, text: &str, own_copy: bool) -> Result<(), JsValue> {
    let trajectory: Value =
        serde_json::from_str(text).map_err(|e| error("BadInput", &e.to_string()))?;
    handle(
        shared,
        Input::OpenChat {
            chat_id: id.to_string(),
            trajectory: None,
            stored: None,
        },
    );
    let command = json!({"type": "restore_from_trajectory", "client_request_id": "import", "trajectory": trajectory, "own_copy": own_copy});
    let step = handle(
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
        handle(
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
async fn stored_chat_exists(shared: &Handle, id: &str) -> Result<bool, JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::read_transaction(&db)?;
    let record =
        idb::request_done(&idb::store(&tx, idb::CHATS)?.get(&JsValue::from_str(id))?).await?;
    Ok(!record.is_undefined() && !record.is_null())
}

#[wasm_bindgen(js_class = Palaver)]
impl Host {
    /// `await Palaver.open(config, dbName?)`: the engine with its IndexedDB (default `palaver`).
    /// Asks the browser to keep the storage (`navigator.storage.persist()`).
    /// `onBlocked(message)` is called while another tab's older schema blocks the upgrade.
    pub async fn open(
        config: JsValue,
        db_name: Option<String>,
        on_blocked: Option<Function>,
    ) -> Result<Host, JsValue> {
        let mut config: EngineConfig = if config.is_undefined() || config.is_null() {
            EngineConfig::default()
        } else {
            from_js(&config).map_err(|e| error("BadConfig", &e))?
        };
        if config.id_prefix.is_empty() {
            // Ids unique to this engine: a chat continued after a reload (or on another device,
            // synced) must not get a second `m1` (records are keyed by message id).
            config.id_prefix = format!(
                "{:x}{:05x}-",
                now(),
                (js_sys::Math::random() * f64::from(0xfffff)) as u32
            );
        }
        let name = db_name.unwrap_or_else(|| "palaver".to_string());
        let (db, created) = idb::open_reporting(&name, &idb::MIGRATIONS, on_blocked)
            .await
            .map_err(|e| error("StorageError", &format!("cannot open IndexedDB: {e:?}")))?;
        let marker = format!("palaver.has_data.{name}");
        // Data was saved here before, yet the database is new: the browser dropped it (B18).
        let data_lost = created && local_storage_get(&marker).as_deref() == Some("1");
        request_persistence();
        let shared = Rc::new(RefCell::new(Shared {
            engine: Engine::new(config),
            db,
            subscribers: litemap::LiteMap::new(),
            next_subscriber: 1,
            requests: HashMap::new(),
            tools: HashMap::new(),
            keys: HashMap::new(),
            proxy: None,
            host_tools: HashMap::new(),
            local_transport: None,
            chats: litemap::LiteMap::new(),
            next_command: 1,
            records_written: 0,
            bytes_written: 0,
            roles: HashMap::new(),
            snapshot_waiters: HashMap::new(),
            opening: Default::default(),
            saves_in_flight: HashMap::new(),
            tabs_note: tabs::lock_manager()
                .is_none()
                .then(|| "Web Locks are missing in this browser: this tab assumes it is the only one with these chats open".to_string()),
            fail_saves: None,
            last_requests: HashMap::new(),
            closed: false,
            chats_listener: None,
            sync: Default::default(),
            chat_files: chat_files::ChatFilesState::new(format!(
                "palaver.workspace_copy.{name}."
            )),
            marker_set: local_storage_get(&marker).as_deref() == Some("1") && !data_lost,
            marker,
            data_lost,
        }));
        Ok(Host { shared })
    }

    /// The API key for a provider kind, kept in memory only and sent only to `base_url`'s
    /// origin (SECURITY E1): a request of that kind to any other origin goes without it. An
    /// empty key, or a base URL that is not a URL, forgets the kind's key.
    #[wasm_bindgen(js_name = setProviderKey)]
    pub fn set_provider_key(&self, kind: String, key: String, base_url: String) {
        let mut shared = self.shared.borrow_mut();
        match origin_of(&base_url).filter(|_| !key.is_empty()) {
            Some(origin) => {
                shared.keys.insert(kind, BoundKey { key, origin });
            }
            None => {
                shared.keys.remove(&kind);
            }
        }
    }

    /// The proxy printed by `palaver serve` (`http://127.0.0.1:N`) and its token.
    #[wasm_bindgen(js_name = setProxy)]
    pub fn set_proxy(&self, url: String, token: String) {
        self.shared.borrow_mut().proxy = Some((url.trim_end_matches('/').to_string(), token));
        chat_files::paired(&self.shared);
    }

    /// How requests of the `local` kind are sent: a function of `fetch`'s shape `(url, init) →
    /// Promise<Response>` whose response streams the OpenAI chat SSE bytes. The page's model
    /// runtime (`www/local/`) answers it; the engine decodes it like any OpenAI chat stream.
    #[wasm_bindgen(js_name = setLocalTransport)]
    pub fn set_local_transport(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "(url: string, init: RequestInit) => Promise<Response>"
        )]
        transport: Function,
    ) {
        self.shared.borrow_mut().local_transport = Some(transport);
    }

    /// The workspace tools offered from the next request on (`GET /api/tools` again, after an MCP
    /// server's tools changed); throws `BadInput` for a value that is not a list of tool specs.
    #[wasm_bindgen(js_name = setWorkspaceTools)]
    pub fn set_workspace_tools(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ToolSpec[]")] tools: JsValue,
    ) -> Result<(), JsValue> {
        let tools: Vec<crate::tools::ToolSpec> =
            from_js(&tools).map_err(|e| error("BadInput", &e))?;
        self.shared.borrow_mut().engine.set_workspace_tools(tools);
        Ok(())
    }

    /// New settings (Settings saved: providers and their windows, the prompt, the tools, the
    /// rules): applied to the open engine from its next request on — nothing is closed or
    /// reopened, so a message sent right after Save goes with them (issue 34). Throws `BadConfig`
    /// for a value that is not an `EngineConfig`.
    pub fn configure(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EngineConfig")] config: JsValue,
    ) -> Result<(), JsValue> {
        let config: EngineConfig = from_js(&config).map_err(|e| error("BadConfig", &e))?;
        let step = self.shared.borrow_mut().engine.reconfigure(now(), config);
        run_step(&self.shared, step);
        Ok(())
    }

    /// `listener({changed: ChatSummary[], deleted: string[]})` whenever the chat list changes:
    /// a save, a new or deleted chat, a pull (the page's list follows it; no timers).
    #[wasm_bindgen(js_name = onChatsChanged)]
    pub fn on_chats_changed(
        &self,
        #[wasm_bindgen(
            unchecked_param_type = "((change: { changed: ChatSummary[]; deleted: string[] }) => void) | null"
        )]
        listener: Option<Function>,
    ) {
        chat_list::set_listener(&self.shared, listener);
    }

    /// The user's approval rules (Settings → tool rules: `{tool or "*": "auto" | "ask" | "deny"}`),
    /// from the next tool step on; a chat's own policy can only make them stricter (SECURITY F2).
    /// Throws `BadInput` for anything else.
    #[wasm_bindgen(js_name = setToolRules)]
    pub fn set_tool_rules(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Record<string, ToolRule>")] rules: JsValue,
    ) -> Result<(), JsValue> {
        let rules: crate::thread::ToolRules = from_js(&rules).map_err(|e| error("BadInput", &e))?;
        self.shared.borrow_mut().engine.set_tool_rules(rules);
        Ok(())
    }

    /// A tool the page runs: `fn(args) → string | Promise<string>`; a throw is a failed result.
    #[wasm_bindgen(js_name = registerHostTool)]
    pub fn register_host_tool(
        &self,
        name: String,
        #[wasm_bindgen(unchecked_param_type = "(args: any) => string | Promise<string>")]
        run: Function,
    ) {
        self.shared.borrow_mut().host_tools.insert(name, run);
    }

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
            handle(
                &shared,
                Input::CloseChat {
                    chat_id: chat_id.clone(),
                },
            );
            let db = shared.borrow().db.clone();
            let tx = idb::write_transaction(&db)?;
            if sync::enabled(&shared) {
                sync::removing_chat(&shared, &tx, &chat_id).await?;
            }
            idb::store(&tx, idb::MESSAGES)?.delete(&idb::messages_of(&chat_id)?)?;
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
            // Two quick clicks must not open the chat twice (two owners' saves, two channels).
            for _ in 0..400 {
                if !shared.borrow().opening.contains(&chat_id) {
                    break;
                }
                sleep_ms(20).await;
            }
            if let Some(snapshot) = current_snapshot(&shared, &chat_id) {
                return Ok(to_js(&snapshot));
            }
            shared.borrow_mut().opening.insert(chat_id.clone());
            let opened = open_or_follow(&shared, &chat_id).await;
            shared.borrow_mut().opening.remove(&chat_id);
            opened
        })
    }

    /// The newest `count` stored messages of a chat, to draw its last screen while `openChat`
    /// loads the whole of it: `{chat_id, title, message_count, messages}`.
    #[wasm_bindgen(js_name = peekChat, unchecked_return_type = "Promise<ChatPeek>")]
    pub fn peek_chat(&self, chat_id: String, count: u32) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move { peek_trajectory(&shared, &chat_id, count as usize).await })
    }

    /// `owner`, `follower` or `closed` for a chat, and why tabs cannot coordinate if they cannot.
    #[wasm_bindgen(js_name = tabRole, unchecked_return_type = "TabRole")]
    pub fn tab_role(&self, chat_id: &str) -> JsValue {
        let shared = self.shared.borrow();
        let role = match shared.roles.get(chat_id) {
            Some(ChatRole::Owner { .. }) => "owner",
            Some(ChatRole::Follower { .. }) => "follower",
            None if shared.engine.snapshot(chat_id).is_some() => "owner",
            None => "closed",
        };
        to_js(&json!({"role": role, "note": shared.tabs_note}))
    }

    /// Calls `callback(event)` with the chat's snapshot, then every event; returns an id for
    /// `unsubscribe`. A subscriber that sees a gap in `seq` asks again.
    /// `from_seq`: the last `seq` the caller has; when it is current no snapshot is sent.
    pub fn subscribe(
        &self,
        chat_id: String,
        #[wasm_bindgen(unchecked_param_type = "(event: EventEnvelope) => void")] callback: Function,
        from_seq: Option<f64>,
    ) -> u32 {
        let snapshot = current_snapshot(&self.shared, &chat_id);
        if let Some(snapshot) = snapshot {
            if from_seq.map(|s| s as u64) != Some(snapshot.seq) {
                let _ = callback.call1(&JsValue::NULL, &to_js(&snapshot));
            }
        }
        let mut shared = self.shared.borrow_mut();
        let id = shared.next_subscriber;
        shared.next_subscriber += 1;
        shared
            .subscribers
            .entry(chat_id)
            .or_default()
            .push((id, callback));
        id
    }

    pub fn unsubscribe(&self, id: u32) {
        for subs in self
            .shared
            .borrow_mut()
            .subscribers
            .iter_mut()
            .map(|(_, v)| v)
        {
            subs.retain(|(sub, _)| *sub != id);
        }
    }

    /// Sends a command (`{type, …}`; a `client_request_id` is added when missing); returns the
    /// events of this step (the `ack` among them).
    #[wasm_bindgen(unchecked_return_type = "EventEnvelope[]")]
    pub fn send(
        &self,
        chat_id: String,
        #[wasm_bindgen(unchecked_param_type = "Command")] command: JsValue,
    ) -> Result<JsValue, JsValue> {
        let mut command: Value = from_js(&command).map_err(|e| error("BadInput", &e))?;
        if command.get("client_request_id").is_none() {
            let n = {
                let mut s = self.shared.borrow_mut();
                s.next_command += 1;
                s.next_command
            };
            command["client_request_id"] = json!(format!("js-{}-{n}", now()));
        }
        // A follower's commands go to the owning tab, which applies them in arrival order.
        let relay = match self.shared.borrow().roles.get(&chat_id) {
            Some(ChatRole::Follower { channel, .. }) => Some(channel.clone()),
            _ => None,
        };
        if let Some(channel) = relay {
            tabs::post(&channel, &json!({"kind": "command", "command": command}));
            return Ok(to_js(&Vec::<Value>::new()));
        }
        // A message sent while paired makes the chat this workspace's (its copy goes there).
        if command["type"] == "user_message" {
            chat_files::used(&self.shared, &chat_id);
        }
        let step = handle(&self.shared, Input::Command { chat_id, command });
        Ok(to_js(&step.events))
    }

    /// The engine's snapshot of an open chat.
    #[wasm_bindgen(unchecked_return_type = "EventEnvelope | undefined")]
    pub fn snapshot(&self, chat_id: &str) -> JsValue {
        current_snapshot(&self.shared, chat_id).map_or(JsValue::UNDEFINED, |s| to_js(&s))
    }

    /// The last provider request of a chat as sent (URL, headers with the key redacted, body):
    /// the "what the model sees" view. `undefined` before the first request of this session.
    #[wasm_bindgen(js_name = lastRequest, unchecked_return_type = "LastRequest | undefined")]
    pub fn last_request(&self, chat_id: &str) -> JsValue {
        self.shared
            .borrow()
            .last_requests
            .get(chat_id)
            .map_or(JsValue::UNDEFINED, to_js)
    }

    /// A chat as `refact` (trajectory JSON), `openai` (messages JSON) or `markdown`; keys are
    /// never part of it.
    #[wasm_bindgen(js_name = exportChat, unchecked_return_type = "Promise<string>")]
    pub fn export_chat(&self, chat_id: String, format: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
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
    /// does not come with it (SECURITY F2).
    #[wasm_bindgen(js_name = importChat, unchecked_return_type = "Promise<string>")]
    pub fn import_chat(&self, text: js_sys::JsString) -> Promise {
        let text = super::text_of(&text);
        let shared = self.shared.clone();
        future_to_promise(async move {
            let text =
                text.ok_or_else(|| error("BadInput", "an import is the file's text (a string)"))?;
            let id = format!("chat-{}-{}", now(), (js_sys::Math::random() * 1e9) as u64);
            import_as(&shared, &id, &text, false).await?;
            Ok(JsValue::from_str(&id))
        })
    }

    /// Undoes a delete: the chat comes back from the page's own copy (`exportChat`'s, taken
    /// before the delete) under its own id, params and all, so other devices see the same chat.
    #[wasm_bindgen(js_name = undeleteChat, unchecked_return_type = "Promise<string>")]
    pub fn undelete_chat(&self, chat_id: String, text: js_sys::JsString) -> Promise {
        let text = super::text_of(&text);
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
            import_as(&shared, &chat_id, &text, false).await?;
            chat_files::adopt(&shared, &chat_id, &hash).await;
            Ok(JsValue::from_str(&chat_id))
        })
    }

    /// `{persisted, usage, quota, near_quota, data_lost, tabs_note}`: whether the browser keeps
    /// our storage, how full it is (warning at 80%), and whether data was lost since last time.
    /// Sync through a CouchDB database (issue 21): `{url, database, username, password}` starts
    /// (or restarts) the replication, `null` stops it. Rejects a malformed URL or database name.
    #[wasm_bindgen(js_name = setSync, unchecked_return_type = "Promise<void>")]
    pub fn set_sync(&self, config: JsValue) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let config = if config.is_null() || config.is_undefined() {
                None
            } else {
                Some(from_js::<sync::SyncConfig>(&config).map_err(|e| error("BadSyncConfig", &e))?)
            };
            sync::configure(&shared, config).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// The replication's status: `{state, error?, retry_at?, pushed, pulled, synced_at?}`.
    #[wasm_bindgen(js_name = syncStatus, unchecked_return_type = "SyncStatus")]
    pub fn sync_status(&self) -> JsValue {
        to_js(&sync::status(&self.shared))
    }

    /// `callback({type: "status", status})` on each status change, and
    /// `callback({type: "changed", chats, deleted})` when pulled changes reached this browser.
    #[wasm_bindgen(js_name = onSync)]
    pub fn on_sync(&self, callback: Option<Function>) {
        self.shared.borrow_mut().sync.listener = callback;
    }

    /// Starts the replication again now (after a stop, or to skip a backoff).
    #[wasm_bindgen(js_name = syncNow)]
    pub fn sync_now(&self) {
        sync::restart(&self.shared);
    }

    #[wasm_bindgen(js_name = storageStatus, unchecked_return_type = "Promise<StorageStatus>")]
    pub fn storage_status(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let storage = js_sys::global()
                .dyn_into::<web_sys::Window>()
                .ok()
                .map(|w| w.navigator().storage());
            let mut persisted = Value::Null;
            let mut usage = Value::Null;
            let mut quota = Value::Null;
            if let Some(storage) = storage {
                if let Ok(p) = storage.persisted() {
                    persisted = JsFuture::from(p)
                        .await
                        .ok()
                        .and_then(|v| v.as_bool())
                        .map_or(Value::Null, Value::Bool);
                }
                if let Ok(p) = storage.estimate() {
                    if let Ok(estimate) = JsFuture::from(p).await {
                        usage = idb::from_js(&estimate)
                            .map(|e| e["usage"].clone())
                            .unwrap_or(Value::Null);
                        quota = idb::from_js(&estimate)
                            .map(|e| e["quota"].clone())
                            .unwrap_or(Value::Null);
                    }
                }
            }
            let near_quota = match (usage.as_f64(), quota.as_f64()) {
                (Some(u), Some(q)) if q > 0.0 => u >= 0.8 * q,
                _ => false,
            };
            let s = shared.borrow();
            Ok(to_js(
                &json!({"persisted": persisted, "usage": usage, "quota": quota, "near_quota": near_quota, "data_lost": s.data_lost, "tabs_note": s.tabs_note}),
            ))
        })
    }

    /// IndexedDB records written so far (each save writes its chat record and changed messages).
    #[wasm_bindgen(js_name = recordsWritten)]
    pub fn records_written(&self) -> f64 {
        self.shared.borrow().records_written as f64
    }

    /// Bytes of JSON written to IndexedDB so far (the bench page's bytes per turn).
    #[wasm_bindgen(js_name = bytesWritten)]
    pub fn bytes_written(&self) -> f64 {
        self.shared.borrow().bytes_written as f64
    }

    /// Tests: make the next saves fail with `reason` (e.g. a quota error); `undefined` heals.
    #[wasm_bindgen(js_name = simulateSaveFailure)]
    pub fn simulate_save_failure(&self, reason: Option<String>) {
        self.shared.borrow_mut().fail_saves = reason;
    }

    /// Resolves when every save started so far is acknowledged by IndexedDB (or has failed).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn flush(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            wait_for_saves(&shared, None).await;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Closes this engine: requests and tool calls are cancelled, later inputs dropped, and the
    /// database closed (the page reopens one with new settings; call `flush` first to keep every
    /// save).
    pub fn close(&self) {
        let mut borrowed = self.shared.borrow_mut();
        let shared = &mut *borrowed;
        shared.closed = true;
        for (_, controller) in shared.requests.drain().chain(shared.tools.drain()) {
            controller.abort();
        }
        for (_, role) in shared.roles.drain() {
            role.channel().set_onmessage(None);
            role.channel().close();
            if let ChatRole::Owner {
                release: Some(release),
                ..
            } = role
            {
                let _ = release.call0(&JsValue::NULL);
            }
        }
        shared.db.close();
    }
}
