//! The browser host (SPEC §0, §2.5, §4, §6.1): `Palaver`, the JS API of the engine in a page.
//! It performs the engine's effects — provider requests with `fetch` and a streamed body
//! (cancelled with `AbortController`), timers, workspace tools through `palaver serve`, host tools
//! registered from JS, saves to IndexedDB acknowledged back — and hands events to subscribers.
//! API keys live only in this object's memory: never in IndexedDB, never in an export.

use super::browser::*;
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

mod chats;
mod transfer;
mod upkeep;

#[wasm_bindgen(js_name = Palaver)]
pub struct Host {
    shared: Handle,
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
            chat_files: ChatFilesState::new(format!(
                "palaver.workspace_copy.{name}."
            )),
            marker_set: local_storage_get(&marker).as_deref() == Some("1") && !data_lost,
            marker,
            data_lost,
            feed: super::driver::handle,
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

    /// The address printed by `palaver serve` (`http://127.0.0.1:N`) and its token.
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
        super::driver::reconfigure(&self.shared, config);
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

    /// Search inside every stored chat's messages (user, assistant and tool-result text, every word, any
    /// case): `{hits: [{chat_id, message_id, role, line}], more}`, at most `limit` hits.
    #[wasm_bindgen(js_name = searchMessages, unchecked_return_type = "Promise<MessageSearch>")]
    pub fn search_messages(&self, query: String, limit: u32) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let found = super::message_search::search(&shared, &query, limit as usize).await?;
            Ok(to_js(&found))
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
            None if shared.engine.session(chat_id).is_some() => "owner",
            None => "closed",
        };
        to_js(&json!({"role": role, "note": shared.tabs_note}))
    }

    /// Calls `callback(event)` with the chat's snapshot, then every event; returns an id for
    /// `unsubscribe`. A subscriber that sees a gap in `seq` asks again.
    /// `from_seq`: the last `seq` the caller has; when it is current no snapshot is sent.
    /// `window`: only the chat's last `window` messages come whole in the snapshot, the others
    /// light (id, role, tool calls' ids; `light: true`) — `messages` gives them when drawn.
    pub fn subscribe(
        &self,
        chat_id: String,
        #[wasm_bindgen(unchecked_param_type = "(event: EventEnvelope) => void")] callback: Function,
        from_seq: Option<f64>,
        window: Option<u32>,
    ) -> u32 {
        let known = from_seq.map(|s| s as u64);
        let window = window.map(|w| w as usize);
        if let Some(snapshot) = current_snapshot_js(&self.shared, &chat_id, known, window) {
            let _ = callback.call1(&JsValue::NULL, &snapshot);
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
        let step = feed(&self.shared, Input::Command { chat_id, command });
        Ok(to_js(&step.events))
    }

    /// The engine's snapshot of an open chat.
    #[wasm_bindgen(unchecked_return_type = "EventEnvelope | undefined")]
    pub fn snapshot(&self, chat_id: &str) -> JsValue {
        current_snapshot_js(&self.shared, chat_id, None, None).unwrap_or(JsValue::UNDEFINED)
    }

    /// An open chat's messages `[from, to)`, whole (a subscriber's light ones, when drawn).
    #[wasm_bindgen(unchecked_return_type = "unknown[]")]
    pub fn messages(&self, chat_id: &str, from: u32, to: u32) -> JsValue {
        let shared = self.shared.borrow();
        let messages = match shared.roles.get(chat_id) {
            Some(ChatRole::Follower { view, .. }) => view.as_ref().map(|v| v.messages.as_slice()),
            _ => shared
                .engine
                .session(chat_id)
                .map(|s| s.messages.as_slice()),
        };
        let messages = messages.unwrap_or_default();
        let to = (to as usize).min(messages.len());
        let from = (from as usize).min(to);
        to_js(&&messages[from..to])
    }

    /// The thread params of an open chat (title, composer draft, model settings) without its
    /// messages: what the composer reads on every switch, cheap for a long chat.
    #[wasm_bindgen(unchecked_return_type = "ThreadParams | undefined")]
    pub fn thread(&self, chat_id: &str) -> JsValue {
        let shared = self.shared.borrow();
        let thread = match shared.roles.get(chat_id) {
            Some(ChatRole::Follower { view, .. }) => view.as_ref().map(|v| v.thread.clone()),
            _ => shared.engine.session(chat_id).map(|s| s.thread.to_json()),
        };
        thread.map_or(JsValue::UNDEFINED, |t| to_js(&t))
    }

    /// The last provider request of a chat as sent (URL, headers with the key redacted, body):
    /// the "what the model sees" view. `undefined` before the first request of this session.
    #[wasm_bindgen(js_name = lastRequest, unchecked_return_type = "LastRequest | undefined")]
    pub fn last_request(&self, chat_id: &str) -> JsValue {
        let shared = self.shared.borrow();
        let Some(sent) = shared.last_requests.get(chat_id) else {
            return JsValue::UNDEFINED;
        };
        let record = to_js(&sent.head);
        // The body as sent is JSON text this engine wrote: parsed, it is the request's object.
        let body = sent
            .body
            .dyn_ref::<js_sys::JsString>()
            .and_then(|text| crate::web::crossing::parse_text(text).ok())
            .unwrap_or(JsValue::NULL);
        let _ = js_sys::Reflect::set(&record, &JsValue::from_str("body"), &body);
        record
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
