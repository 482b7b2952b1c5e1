//! The browser host (SPEC §0, §2.5, §4, §6.1): `Palaver`, the JS API of the engine in a page.
//! It performs the engine's effects — provider requests with `fetch` and a streamed body
//! (cancelled with `AbortController`), timers, workspace tools through the proxy, host tools
//! registered from JS, saves to IndexedDB acknowledged back — and hands events to subscribers.
//! API keys live only in this object's memory: never in IndexedDB, never in an export.

use super::idb;
use super::tabs::{self, ChatRole};
use crate::engine::{Bytes, Effect, Engine, EngineConfig, Input, Step};
use crate::event::Event;
use crate::request::ProviderRequest;
use crate::trajectory::TrajectorySave;
use js_sys::{Function, Promise, Reflect, Uint8Array};
use serde::Serialize;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{future_to_promise, spawn_local, JsFuture};
use web_sys::{AbortController, Headers, RequestInit, Response};

struct Shared {
    engine: Engine,
    db: web_sys::IdbDatabase,
    subscribers: BTreeMap<String, Vec<(u32, Function)>>,
    next_subscriber: u32,
    requests: HashMap<String, AbortController>,
    tools: HashMap<String, AbortController>,
    keys: HashMap<String, String>,
    proxy: Option<(String, String)>,
    host_tools: HashMap<String, Function>,
    /// Chat records as stored (title, thread), updated by each save.
    chats: BTreeMap<String, Value>,
    next_command: u64,
    /// IndexedDB records written so far (for tests and the bench page).
    records_written: u64,
    /// Bytes of JSON those records held.
    bytes_written: u64,
    /// This tab's role in each chat it opened (owner or follower, SPEC §4).
    roles: HashMap<String, ChatRole>,
    /// Follower `openChat` calls waiting for the owner's snapshot.
    snapshot_waiters: HashMap<String, Vec<Function>>,
    /// Saves started and not yet acknowledged or failed, per chat (`flush` waits for them).
    saves_in_flight: HashMap<String, u32>,
    /// Chats an `openChat` is under way for: a second call waits for the first.
    opening: std::collections::HashSet<String>,
    /// Why several tabs cannot coordinate here, when they cannot.
    tabs_note: Option<String>,
    /// The out-of-band marker saying this database has held data.
    marker: String,
    marker_set: bool,
    /// The browser dropped this origin's data since the last visit.
    data_lost: bool,
    /// When set, saves fail with this reason (tests simulate a quota error).
    fail_saves: Option<String>,
    /// The last provider request of each chat as sent, the key redacted ("what the model sees").
    last_requests: HashMap<String, Value>,
    /// Set by `close`: late inputs (a tool's answer, a timer) are dropped instead of reaching an
    /// engine whose database is closed.
    closed: bool,
}

type Handle = Rc<RefCell<Shared>>;

#[wasm_bindgen(js_name = Palaver)]
pub struct Host {
    shared: Handle,
}

fn now() -> u64 {
    js_sys::Date::now() as u64
}

fn to_js<T: Serialize>(value: &T) -> JsValue {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .unwrap_or(JsValue::UNDEFINED)
}

fn error(name: &str, message: &str) -> JsValue {
    super::js_error(name, message)
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
        let config: EngineConfig = if config.is_undefined() || config.is_null() {
            EngineConfig::default()
        } else {
            serde_wasm_bindgen::from_value(config)
                .map_err(|e| error("BadConfig", &e.to_string()))?
        };
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
            subscribers: BTreeMap::new(),
            next_subscriber: 1,
            requests: HashMap::new(),
            tools: HashMap::new(),
            keys: HashMap::new(),
            proxy: None,
            host_tools: HashMap::new(),
            chats: BTreeMap::new(),
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
            marker_set: local_storage_get(&marker).as_deref() == Some("1") && !data_lost,
            marker,
            data_lost,
        }));
        Ok(Host { shared })
    }

    /// The API key for a provider kind, kept in memory only.
    #[wasm_bindgen(js_name = setProviderKey)]
    pub fn set_provider_key(&self, kind: String, key: String) {
        self.shared.borrow_mut().keys.insert(kind, key);
    }

    /// The proxy printed by `palaver serve` (`http://127.0.0.1:N`) and its token.
    #[wasm_bindgen(js_name = setProxy)]
    pub fn set_proxy(&self, url: String, token: String) {
        self.shared.borrow_mut().proxy = Some((url.trim_end_matches('/').to_string(), token));
    }

    /// A tool the page runs: `fn(args) → string | Promise<string>`; a throw is a failed result.
    #[wasm_bindgen(js_name = registerHostTool)]
    pub fn register_host_tool(&self, name: String, run: Function) {
        self.shared.borrow_mut().host_tools.insert(name, run);
    }

    /// Stored chats: `[{id, title, message_count, updated_at}]`, newest first.
    #[wasm_bindgen(js_name = listChats)]
    pub fn list_chats(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let db = shared.borrow().db.clone();
            let tx = idb::read_transaction(&db)?;
            let all = idb::request_done(&idb::store(&tx, idb::CHATS)?.get_all()?).await?;
            let mut chats: Vec<Value> = js_sys::Array::from(&all)
                .iter()
                .filter_map(|c| idb::from_js(&c))
                .map(|c| json!({"id": c["id"], "title": c["title"], "message_count": c["message_count"], "updated_at": c["updated_at"]}))
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
    #[wasm_bindgen(js_name = createChat)]
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
            shared.borrow_mut().chats.insert(id.clone(), record);
            Ok(JsValue::from_str(&id))
        })
    }

    /// Renames a chat (a `set_params` of its title, saved like any change).
    #[wasm_bindgen(js_name = renameChat)]
    pub fn rename_chat(&self, chat_id: String, title: String) -> Result<JsValue, JsValue> {
        let command = json!({"type": "set_params", "patch": {"title": title}});
        self.send(chat_id, to_js(&command))
    }

    /// Removes a chat and its messages from the engine and IndexedDB.
    #[wasm_bindgen(js_name = deleteChat)]
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
            idb::store(&tx, idb::MESSAGES)?.delete(&idb::messages_of(&chat_id, 0)?)?;
            idb::store(&tx, idb::CHATS)?.delete(&JsValue::from_str(&chat_id))?;
            idb::transaction_done(&tx).await?;
            shared.borrow_mut().chats.remove(&chat_id);
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Opens a chat: as its owner (loaded from IndexedDB into this engine, tolerantly: what
    /// cannot be read is kept as a notice, never dropped), or — when another tab owns it — as a
    /// follower mirroring the owner. Resolves to the snapshot.
    #[wasm_bindgen(js_name = openChat)]
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

    /// `owner`, `follower` or `closed` for a chat, and why tabs cannot coordinate if they cannot.
    #[wasm_bindgen(js_name = tabRole)]
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
    pub fn subscribe(&self, chat_id: String, callback: Function, from_seq: Option<f64>) -> u32 {
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
        for subs in self.shared.borrow_mut().subscribers.values_mut() {
            subs.retain(|(sub, _)| *sub != id);
        }
    }

    /// Sends a command (`{type, …}`; a `client_request_id` is added when missing); returns the
    /// events of this step (the `ack` among them).
    pub fn send(&self, chat_id: String, command: JsValue) -> Result<JsValue, JsValue> {
        let mut command: Value = serde_wasm_bindgen::from_value(command)
            .map_err(|e| error("BadInput", &e.to_string()))?;
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
        let step = handle(&self.shared, Input::Command { chat_id, command });
        Ok(to_js(&step.events))
    }

    /// The engine's snapshot of an open chat.
    pub fn snapshot(&self, chat_id: &str) -> JsValue {
        current_snapshot(&self.shared, chat_id).map_or(JsValue::UNDEFINED, |s| to_js(&s))
    }

    /// A chat as `refact` (trajectory JSON), `openai` (messages JSON) or `markdown`; keys are
    /// never part of it.
    /// The last provider request of a chat as sent (URL, headers with the key redacted, body):
    /// the "what the model sees" view. `undefined` before the first request of this session.
    #[wasm_bindgen(js_name = lastRequest)]
    pub fn last_request(&self, chat_id: &str) -> JsValue {
        self.shared
            .borrow()
            .last_requests
            .get(chat_id)
            .map_or(JsValue::UNDEFINED, to_js)
    }

    #[wasm_bindgen(js_name = exportChat)]
    pub fn export_chat(&self, chat_id: String, format: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let trajectory = match shared.borrow().engine.snapshot(&chat_id) {
                Some(snapshot) => trajectory_of(&chat_id, &snapshot),
                None => None,
            };
            let trajectory = match trajectory {
                Some(t) => t,
                None => idb::from_js(
                    &load_trajectory(&shared, &chat_id)
                        .await
                        .map(|t| idb::to_js(&t))
                        .and_then(|r| r)?,
                )
                .unwrap_or(Value::Null),
            };
            let text =
                crate::export::render(&trajectory, &format).map_err(|e| error("BadInput", &e))?;
            Ok(JsValue::from_str(&text))
        })
    }

    /// Imports a trajectory (JSON text, Refact format or a bare message array) as a new chat:
    /// loaded tolerantly (repairs are reported as events) and saved whole.
    #[wasm_bindgen(js_name = importChat)]
    pub fn import_chat(&self, text: String) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let trajectory: Value =
                serde_json::from_str(&text).map_err(|e| error("BadInput", &e.to_string()))?;
            let id = format!("chat-{}-{}", now(), (js_sys::Math::random() * 1e9) as u64);
            handle(
                &shared,
                Input::OpenChat {
                    chat_id: id.clone(),
                    trajectory: None,
                },
            );
            let command = json!({"type": "restore_from_trajectory", "client_request_id": "import", "trajectory": trajectory});
            let step = handle(
                &shared,
                Input::Command {
                    chat_id: id.clone(),
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
                handle(&shared, Input::CloseChat { chat_id: id });
                return Err(error("BadTrajectory", &reason));
            }
            // Resolved once the imported chat is stored: closing the page then loses nothing.
            wait_for_saves(&shared, Some(&id)).await;
            if let Some(reason) = current_storage_error(&shared, &id) {
                return Err(error("StorageError", &reason));
            }
            Ok(JsValue::from_str(&id))
        })
    }

    /// `{persisted, usage, quota, near_quota, data_lost, tabs_note}`: whether the browser keeps
    /// our storage, how full it is (warning at 80%), and whether data was lost since last time.
    #[wasm_bindgen(js_name = storageStatus)]
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
    pub fn flush(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            wait_for_saves(&shared, None).await;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Closes the database (tests reopen to check what was stored).
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

/// Asks the browser not to evict our storage; the answer is informational.
fn request_persistence() {
    let navigator = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .map(|w| w.navigator());
    if let Some(storage) = navigator.map(|n| n.storage()) {
        let _ = storage.persist();
    }
}

/// The trajectory JSON of a snapshot: the thread's keys, the id and the messages.
fn trajectory_of(chat_id: &str, snapshot: &crate::event::EventEnvelope) -> Option<Value> {
    let Event::Snapshot {
        thread, messages, ..
    } = &snapshot.event
    else {
        return None;
    };
    let mut out = match thread {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    out.insert("id".into(), json!(chat_id));
    out.insert("messages".into(), json!(messages));
    Some(Value::Object(out))
}

/// Reads a chat's record and messages back into trajectory JSON.
async fn load_trajectory(shared: &Handle, chat_id: &str) -> Result<Value, JsValue> {
    let db = shared.borrow().db.clone();
    let tx = idb::read_transaction(&db)?;
    let record =
        idb::request_done(&idb::store(&tx, idb::CHATS)?.get(&JsValue::from_str(chat_id))?).await?;
    let record = idb::from_js(&record).ok_or_else(|| error("UnknownChat", chat_id))?;
    let rows = idb::request_done(
        &idb::store(&tx, idb::MESSAGES)?.get_all_with_key(&idb::messages_of(chat_id, 0)?)?,
    )
    .await?;
    let count = record["message_count"].as_u64().unwrap_or(0) as usize;
    let messages: Vec<Value> = js_sys::Array::from(&rows)
        .iter()
        .filter_map(|row| idb::from_js(&row))
        .filter(|row| row["index"].as_u64().is_some_and(|i| (i as usize) < count))
        .map(|row| row["message"].clone())
        .collect();
    let mut trajectory = match &record["thread"] {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    trajectory.insert("id".into(), json!(chat_id));
    trajectory.insert("messages".into(), Value::Array(messages));
    if record["draft"].is_object() {
        trajectory.insert("draft".into(), record["draft"].clone());
    }
    shared
        .borrow_mut()
        .chats
        .insert(chat_id.to_string(), record);
    Ok(Value::Object(trajectory))
}

/// Feeds one input to the engine, then delivers its events and performs its effects.
fn handle(shared: &Handle, input: Input) -> Step {
    if shared.borrow().closed {
        return Step::default();
    }
    let step = shared.borrow_mut().engine.handle(now(), input);
    deliver(shared, &step);
    for effect in step.effects.clone() {
        perform(shared, effect);
    }
    step
}

fn deliver(shared: &Handle, step: &Step) {
    let mut by_chat: BTreeMap<&str, Vec<crate::event::EventEnvelope>> = BTreeMap::new();
    for envelope in &step.events {
        by_chat
            .entry(&envelope.chat_id)
            .or_default()
            .push(envelope.clone());
    }
    for (chat_id, events) in by_chat {
        if let Some(ChatRole::Owner { channel, .. }) = shared.borrow().roles.get(chat_id) {
            tabs::post(channel, &tabs::events_message(&events));
        }
    }
    for envelope in &step.events {
        let callbacks: Vec<Function> = shared
            .borrow()
            .subscribers
            .get(&envelope.chat_id)
            .map(|subs| subs.iter().map(|(_, f)| f.clone()).collect())
            .unwrap_or_default();
        let value = to_js(envelope);
        for callback in callbacks {
            let _ = callback.call1(&JsValue::NULL, &value);
        }
        if let Event::IdeToolRequired {
            tool_call_id,
            tool_name,
            args,
        } = &envelope.event
        {
            run_host_tool(shared, &envelope.chat_id, tool_call_id, tool_name, args);
        }
    }
}

fn perform(shared: &Handle, effect: Effect) {
    match effect {
        Effect::StartRequest {
            chat_id,
            request_id,
            request,
            ..
        } => {
            remember_request(shared, &chat_id, &request);
            start_request(shared, request_id, request)
        }
        Effect::CancelRequest { request_id } => {
            if let Some(controller) = shared.borrow_mut().requests.remove(&request_id) {
                controller.abort();
            }
        }
        Effect::RunTool {
            chat_id,
            tool_call_id,
            name,
            args,
        } => run_tool(shared, chat_id, tool_call_id, name, args),
        Effect::CancelTool { tool_call_id, .. } => {
            if let Some(controller) = shared.borrow_mut().tools.remove(&tool_call_id) {
                controller.abort();
            }
        }
        Effect::SaveTrajectory { save } => save_trajectory(shared, save),
        Effect::WakeAt { at_ms } => wake_at(shared, at_ms),
    }
}

fn wake_at(shared: &Handle, at_ms: u64) {
    let shared = shared.clone();
    let delay = at_ms.saturating_sub(now()).min(i32::MAX as u64) as i32;
    let tick = Closure::once_into_js(move || {
        handle(&shared, Input::Tick {});
    });
    let _ = js_sys::global().dyn_into::<web_sys::Window>().map(|w| {
        w.set_timeout_with_callback_and_timeout_and_arguments_0(tick.unchecked_ref(), delay)
    });
}

/// Keeps the request as it goes out, for the "what the model sees" view: the URL, the headers
/// with the auth header's value replaced (the key never enters this record), and the body.
fn remember_request(shared: &Handle, chat_id: &str, request: &ProviderRequest) {
    let mut headers = request.headers.clone();
    headers.insert("content-type".into(), "application/json".into());
    let kind = request.provider.name();
    let has_key = shared.borrow().keys.get(kind).is_some_and(|k| !k.is_empty());
    if let Some((name, _)) = auth_header(kind, "redacted").filter(|_| has_key) {
        headers.insert(name.into(), "[redacted]".into());
    }
    let record = json!({"provider": kind, "url": request.url, "headers": headers, "body": request.body});
    shared
        .borrow_mut()
        .last_requests
        .insert(chat_id.to_string(), record);
}

/// The provider's auth header for a key: never in the URL (SECURITY C13, C15).
fn auth_header(provider: &str, key: &str) -> Option<(&'static str, String)> {
    if key.is_empty() {
        return None;
    }
    Some(match provider {
        "anthropic" => ("x-api-key", key.to_string()),
        "gemini" => ("x-goog-api-key", key.to_string()),
        _ => ("authorization", format!("Bearer {key}")),
    })
}

fn start_request(shared: &Handle, request_id: String, request: ProviderRequest) {
    let controller = match AbortController::new() {
        Ok(c) => c,
        Err(_) => {
            return fail_request(
                shared,
                &request_id,
                None,
                "cannot create an AbortController".into(),
                Default::default(),
                None,
            )
        }
    };
    let kind = request.provider.name().to_string();
    let key = shared.borrow().keys.get(&kind).cloned().unwrap_or_default();
    shared
        .borrow_mut()
        .requests
        .insert(request_id.clone(), controller.clone());
    let shared = shared.clone();
    spawn_local(async move {
        let result = fetch_stream(&shared, &request_id, &request, &key, &controller).await;
        shared.borrow_mut().requests.remove(&request_id);
        if let Err(message) = result {
            if !controller.signal().aborted() {
                fail_request(
                    &shared,
                    &request_id,
                    None,
                    message,
                    Default::default(),
                    None,
                );
            }
        }
    });
}

/// One provider request: headers (with the key), the JSON body, then the streamed response fed
/// to the engine chunk by chunk. `Err` is a network failure.
async fn fetch_stream(
    shared: &Handle,
    request_id: &str,
    request: &ProviderRequest,
    key: &str,
    controller: &AbortController,
) -> Result<(), String> {
    let headers = Headers::new().map_err(|e| format!("{e:?}"))?;
    let _ = headers.set("content-type", "application/json");
    for (name, value) in &request.headers {
        if let Some(value) = value.as_str() {
            let _ = headers.set(name, value);
        }
    }
    if let Some((name, value)) = auth_header(request.provider.name(), key) {
        let _ = headers.set(name, &value);
    }
    let init = RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(&JsValue::from_str(&request.body.to_string()));
    init.set_signal(Some(&controller.signal()));
    let window = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .map_err(|_| "no window".to_string())?;
    let response: Response = JsFuture::from(window.fetch_with_str_and_init(&request.url, &init))
        .await
        .map_err(describe)?
        .dyn_into()
        .map_err(describe)?;
    if !response.ok() {
        let status = response.status();
        let response_headers = headers_of(&response);
        let text = match response.text() {
            Ok(p) => JsFuture::from(p)
                .await
                .ok()
                .and_then(|t| t.as_string())
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        let (error_type, message) = provider_error(&text);
        handle(
            shared,
            Input::RequestFailed {
                request_id: request_id.into(),
                status: Some(status),
                error_type,
                message: message.unwrap_or_else(|| format!("HTTP {status}")),
                retry_after_ms: None,
                headers: response_headers,
                context_window: context_window_in(&text),
            },
        );
        return Ok(());
    }
    let Some(body) = response.body() else {
        handle(
            shared,
            Input::StreamEnd {
                request_id: request_id.into(),
            },
        );
        return Ok(());
    };
    let reader: web_sys::ReadableStreamDefaultReader = body
        .get_reader()
        .dyn_into()
        .map_err(|e| describe(e.into()))?;
    loop {
        let chunk = JsFuture::from(reader.read()).await.map_err(describe)?;
        let done = Reflect::get(&chunk, &"done".into())
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        if done {
            break;
        }
        let value = Reflect::get(&chunk, &"value".into()).unwrap_or(JsValue::UNDEFINED);
        let bytes = Uint8Array::new(&value).to_vec();
        handle(
            shared,
            Input::StreamBytes {
                request_id: request_id.into(),
                bytes: Bytes(bytes),
            },
        );
    }
    handle(
        shared,
        Input::StreamEnd {
            request_id: request_id.into(),
        },
    );
    Ok(())
}

fn describe(error: JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| "network error".into())
}

fn headers_of(response: &Response) -> BTreeMap<String, String> {
    ["retry-after", "retry-after-ms", "x-should-retry"]
        .iter()
        .filter_map(|name| {
            let value = response.headers().get(name).ok().flatten()?;
            Some((name.to_string(), value))
        })
        .collect()
}

/// A context window an error body states: llama.cpp's `n_ctx` (in `error` or at the top).
fn context_window_in(text: &str) -> Option<u64> {
    let value: Value = serde_json::from_str(text).ok()?;
    let error = value.get("error").unwrap_or(&value);
    error
        .get("n_ctx")
        .or_else(|| value.get("n_ctx"))
        .and_then(Value::as_u64)
}

/// `(error type, message)` from a provider's error body: `{error: {type|code|status, message}}`.
fn provider_error(text: &str) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return (
            None,
            (!text.is_empty()).then(|| text.chars().take(500).collect()),
        );
    };
    let error = value.get("error").unwrap_or(&value);
    let kind = ["type", "code", "status"]
        .iter()
        .find_map(|k| error.get(*k).and_then(Value::as_str))
        .map(str::to_string);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string);
    (kind, message)
}

fn fail_request(
    shared: &Handle,
    request_id: &str,
    status: Option<u16>,
    message: String,
    headers: BTreeMap<String, String>,
    error_type: Option<String>,
) {
    handle(
        shared,
        Input::RequestFailed {
            request_id: request_id.into(),
            status,
            error_type,
            message,
            retry_after_ms: None,
            headers,
            context_window: None,
        },
    );
}

/// A workspace tool through the proxy: `POST {proxy}/api/tools/{name}` with the bearer token.
/// `run_command` asks for NDJSON, so its output lines reach the page while it runs.
fn run_tool(shared: &Handle, chat_id: String, tool_call_id: String, name: String, args: Value) {
    let proxy = shared.borrow().proxy.clone();
    let Some((url, token)) = proxy else {
        tool_result(shared, chat_id, tool_call_id, ToolReply::failed("No workspace proxy is connected: run `palaver serve` and open the URL it prints (or paste it in Settings)."));
        return;
    };
    let Ok(controller) = AbortController::new() else {
        return;
    };
    shared
        .borrow_mut()
        .tools
        .insert(tool_call_id.clone(), controller.clone());
    let shared = shared.clone();
    spawn_local(async move {
        let call = ProxyCall {
            url: &url,
            token: &token,
            name: &name,
            args: &args,
            controller: &controller,
        };
        let outcome = if name == "run_command" {
            call_proxy_streaming(&shared, &chat_id, &tool_call_id, &call).await
        } else {
            call_proxy(&call).await
        };
        shared.borrow_mut().tools.remove(&tool_call_id);
        if controller.signal().aborted() {
            return;
        }
        let reply = outcome
            .unwrap_or_else(|e| ToolReply::failed(&format!("The proxy could not be reached: {e}")));
        tool_result(&shared, chat_id, tool_call_id, reply);
    });
}

/// What a tool answered: its text for the model, whether it failed, and its `data`.
struct ToolReply {
    content: String,
    failed: bool,
    data: Option<Value>,
}

impl ToolReply {
    fn failed(message: &str) -> Self {
        ToolReply {
            content: message.to_string(),
            failed: true,
            data: None,
        }
    }

    /// From the proxy's JSON reply (`{content, is_error, data?, error?}`).
    fn from_json(reply: &Value, http_ok: bool) -> Self {
        let content = reply
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| reply.get("error").map(|e| e.to_string()))
            .unwrap_or_default();
        let failed = !http_ok
            || reply
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false);
        ToolReply {
            content,
            failed,
            data: reply.get("data").filter(|d| !d.is_null()).cloned(),
        }
    }
}

struct ProxyCall<'a> {
    url: &'a str,
    token: &'a str,
    name: &'a str,
    args: &'a Value,
    controller: &'a AbortController,
}

async fn proxy_response(call: &ProxyCall<'_>, accept: &str) -> Result<Response, String> {
    let headers = Headers::new().map_err(describe)?;
    let _ = headers.set("content-type", "application/json");
    let _ = headers.set("accept", accept);
    let _ = headers.set("authorization", &format!("Bearer {}", call.token));
    let init = RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(&JsValue::from_str(&call.args.to_string()));
    init.set_signal(Some(&call.controller.signal()));
    let window = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .map_err(|_| "no window".to_string())?;
    JsFuture::from(window.fetch_with_str_and_init(
        &format!("{}/api/tools/{}", call.url, call.name),
        &init,
    ))
    .await
    .map_err(describe)?
    .dyn_into()
    .map_err(describe)
}

async fn call_proxy(call: &ProxyCall<'_>) -> Result<ToolReply, String> {
    let response = proxy_response(call, "application/json").await?;
    let text = JsFuture::from(response.text().map_err(describe)?)
        .await
        .map_err(describe)?
        .as_string()
        .unwrap_or_default();
    let reply: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"content": text, "is_error": true}));
    Ok(ToolReply::from_json(&reply, response.ok()))
}

/// `run_command` as NDJSON: each `line` becomes a `tool_progress` input while the program runs;
/// the final `result` line is the tool's reply, with the whole output for the model.
async fn call_proxy_streaming(
    shared: &Handle,
    chat_id: &str,
    tool_call_id: &str,
    call: &ProxyCall<'_>,
) -> Result<ToolReply, String> {
    let response = proxy_response(call, "application/x-ndjson").await?;
    let streamed = response
        .headers()
        .get("content-type")
        .ok()
        .flatten()
        .is_some_and(|t| t.contains("ndjson"));
    let Some(body) = response.body().filter(|_| streamed && response.ok()) else {
        // A refusal (403 exec_disabled, 400 bad argv) comes as one JSON reply.
        let text = JsFuture::from(response.text().map_err(describe)?)
            .await
            .map_err(describe)?
            .as_string()
            .unwrap_or_default();
        let reply: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| json!({"content": text, "is_error": true}));
        return Ok(ToolReply::from_json(&reply, response.ok()));
    };
    let reader: web_sys::ReadableStreamDefaultReader =
        body.get_reader().dyn_into().map_err(|e| describe(e.into()))?;
    let mut pending = Vec::new();
    let mut output = String::new();
    let mut result = None;
    loop {
        let chunk = JsFuture::from(reader.read()).await.map_err(describe)?;
        if Reflect::get(&chunk, &"done".into())
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true)
        {
            break;
        }
        let value = Reflect::get(&chunk, &"value".into()).unwrap_or(JsValue::UNDEFINED);
        pending.extend(Uint8Array::new(&value).to_vec());
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            match event.get("type").and_then(Value::as_str) {
                Some("line") => {
                    let stream = event["stream"].as_str().unwrap_or("stdout").to_string();
                    let text = event["text"].as_str().unwrap_or("").to_string();
                    if stream == "stderr" {
                        output.push_str("[stderr] ");
                    }
                    output.push_str(&text);
                    output.push('\n');
                    handle(
                        shared,
                        Input::ToolProgress {
                            chat_id: chat_id.to_string(),
                            tool_call_id: tool_call_id.to_string(),
                            stream,
                            text,
                        },
                    );
                }
                Some("result") => result = Some(event),
                _ => {}
            }
        }
    }
    let Some(result) = result else {
        return Ok(ToolReply::failed(&format!(
            "The command's output ended without a result.\n{output}"
        )));
    };
    let mut reply = ToolReply::from_json(&result, true);
    // The result line carries the exit status; the model needs the output too.
    reply.content = format!("{output}[{}]", reply.content);
    Ok(reply)
}

fn tool_result(shared: &Handle, chat_id: String, tool_call_id: String, reply: ToolReply) {
    handle(
        shared,
        Input::ToolResult {
            chat_id,
            tool_call_id,
            content: reply.content,
            tool_failed: reply.failed,
            data: reply.data,
            session_metadata: None,
        },
    );
}

/// A host tool registered from JS answers with `ide_tool_result`.
fn run_host_tool(shared: &Handle, chat_id: &str, tool_call_id: &str, name: &str, args: &Value) {
    let run = shared.borrow().host_tools.get(name).cloned();
    let shared = shared.clone();
    let chat_id = chat_id.to_string();
    let tool_call_id = tool_call_id.to_string();
    let name = name.to_string();
    let args = to_js(args);
    spawn_local(async move {
        let (content, failed) = match run {
            None => (format!("The page has no tool named {name}."), true),
            Some(run) => match run.call1(&JsValue::NULL, &args) {
                Err(e) => (describe(e), true),
                Ok(value) => match JsFuture::from(Promise::resolve(&value)).await {
                    Ok(v) => (
                        v.as_string().unwrap_or_else(|| {
                            js_sys::JSON::stringify(&v)
                                .ok()
                                .and_then(|s| s.as_string())
                                .unwrap_or_default()
                        }),
                        false,
                    ),
                    Err(e) => (describe(e), true),
                },
            },
        };
        let command = json!({"type": "ide_tool_result", "client_request_id": format!("host-{tool_call_id}"), "tool_call_id": tool_call_id, "content": content, "tool_failed": failed});
        handle(&shared, Input::Command { chat_id, command });
    });
}

/// One save, one transaction: the chat record and each changed message; messages past the new
/// count are deleted. The engine hears back with `save_acked` or `save_failed` (kept dirty and
/// retried by the engine, shown as `runtime.storage_error`).
fn save_trajectory(shared: &Handle, save: TrajectorySave) {
    let shared = shared.clone();
    *shared
        .borrow_mut()
        .saves_in_flight
        .entry(save.chat_id.clone())
        .or_default() += 1;
    spawn_local(async move {
        let result = write_save(&shared, &save).await;
        if let Some(n) = shared.borrow_mut().saves_in_flight.get_mut(&save.chat_id) {
            *n = n.saturating_sub(1);
        }
        let input = match result {
            Ok((records, bytes)) => {
                let mut s = shared.borrow_mut();
                s.records_written += records;
                s.bytes_written += bytes;
                if !s.marker_set {
                    s.marker_set = local_storage_set(&s.marker, "1");
                }
                drop(s);
                Input::SaveAcked {
                    chat_id: save.chat_id.clone(),
                    version: save.version,
                }
            }
            Err(e) => Input::SaveFailed {
                chat_id: save.chat_id.clone(),
                version: save.version,
                reason: describe(e),
            },
        };
        handle(&shared, input);
    });
}

async fn write_save(shared: &Handle, save: &TrajectorySave) -> Result<(u64, u64), JsValue> {
    if let Some(reason) = shared.borrow().fail_saves.clone() {
        return Err(js_sys::Error::new(&reason).into());
    }
    let (db, mut record) = {
        let s = shared.borrow();
        let record = s
            .chats
            .get(&save.chat_id)
            .cloned()
            .unwrap_or_else(|| json!({"id": save.chat_id, "thread": {}}));
        (s.db.clone(), record)
    };
    if let Some(thread) = &save.thread {
        record["thread"] = thread.clone();
        record["title"] = thread.get("title").cloned().unwrap_or(json!(""));
    }
    if let Some(draft) = &save.draft {
        record["draft"] = draft.clone();
    }
    record["id"] = json!(save.chat_id);
    record["message_count"] = json!(save.message_count);
    record["version"] = json!(save.version);
    record["updated_at"] = json!(now());
    let tx = idb::write_transaction(&db)?;
    let chats = idb::store(&tx, idb::CHATS)?;
    let messages = idb::store(&tx, idb::MESSAGES)?;
    chats.put(&idb::to_js(&record)?)?;
    let mut bytes = record.to_string().len() as u64;
    for upsert in &save.upserts {
        let row =
            json!({"chat_id": save.chat_id, "index": upsert.index, "message": upsert.message});
        bytes += row.to_string().len() as u64;
        messages.put(&idb::to_js(&row)?)?;
    }
    messages.delete(&idb::messages_of(&save.chat_id, save.message_count)?)?;
    idb::transaction_done(&tx).await?;
    shared
        .borrow_mut()
        .chats
        .insert(save.chat_id.clone(), record);
    Ok((1 + save.upserts.len() as u64, bytes))
}

/// The chat as this tab sees it: the engine's snapshot when it owns the chat, the mirrored
/// view when it follows.
fn current_snapshot(shared: &Handle, chat_id: &str) -> Option<crate::event::EventEnvelope> {
    let s = shared.borrow();
    if let Some(ChatRole::Follower { view, .. }) = s.roles.get(chat_id) {
        return view.as_ref().map(|v| v.to_snapshot(chat_id));
    }
    s.engine.snapshot(chat_id)
}

/// Runs the chat here: load it, serve the other tabs over the channel, hold the lock.
async fn become_owner(
    shared: &Handle,
    chat_id: &str,
    release: Option<Function>,
) -> Result<(), JsValue> {
    let trajectory = load_trajectory(shared, chat_id).await?;
    handle(
        shared,
        Input::OpenChat {
            chat_id: chat_id.to_string(),
            trajectory: Some(trajectory),
        },
    );
    let served = shared.clone();
    let chat = chat_id.to_string();
    let channel = tabs::open_channel(chat_id, move |message| match message["kind"].as_str() {
        Some("command") => {
            let command = message["command"].clone();
            handle(
                &served,
                Input::Command {
                    chat_id: chat.clone(),
                    command,
                },
            );
        }
        Some("snapshot_request") => {
            let snapshot = served.borrow().engine.snapshot(&chat);
            let channel = match served.borrow().roles.get(&chat) {
                Some(role) => role.channel().clone(),
                None => return,
            };
            if let Some(snapshot) = snapshot {
                tabs::post(&channel, &tabs::snapshot_message(&snapshot));
            }
        }
        _ => {}
    })?;
    let old = shared.borrow_mut().roles.insert(
        chat_id.to_string(),
        ChatRole::Owner {
            channel: channel.clone(),
            release,
        },
    );
    // A tab that was following drops its old channel for the owner's.
    if let Some(old) = old {
        old.channel().set_onmessage(None);
        old.channel().close();
    }
    // Followers that asked before this tab answered get the snapshot now.
    let snapshot = shared.borrow().engine.snapshot(chat_id);
    if let Some(snapshot) = snapshot {
        tabs::post(&channel, &tabs::snapshot_message(&snapshot));
    }
    Ok(())
}

/// Opens a chat in this tab: as its owner when its Web Lock is free, else as a follower of the
/// tab that holds it.
async fn open_or_follow(shared: &Handle, chat_id: &str) -> Result<JsValue, JsValue> {
    let locks = tabs::lock_manager();
    let mut release = None;
    if let Some(locks) = &locks {
        // A lock released a moment ago (this page closed its engine) frees within a
        // task or two: ask a few times before deciding another tab owns the chat.
        for attempt in 0..4 {
            release = tabs::request_lock(locks, &tabs::lock_name(chat_id), false).await?;
            if release.is_some() {
                break;
            }
            sleep_ms(25 * (attempt + 1)).await;
        }
    }
    if locks.is_some() && release.is_none() {
        return follow(shared, chat_id).await;
    }
    become_owner(shared, chat_id, release).await?;
    current_snapshot(shared, chat_id)
        .map(|s| to_js(&s))
        .ok_or_else(|| error("UnknownChat", chat_id))
}

/// Mirrors a chat another tab owns; resolves to the owner's snapshot. Meanwhile waits for the
/// lock, to take over when the owner goes away.
async fn follow(shared: &Handle, chat_id: &str) -> Result<JsValue, JsValue> {
    let mirror = shared.clone();
    let chat = chat_id.to_string();
    let channel = tabs::open_channel(chat_id, move |message| {
        on_owner_message(&mirror, &chat, message)
    })?;
    shared.borrow_mut().roles.insert(
        chat_id.to_string(),
        ChatRole::Follower {
            channel: channel.clone(),
            view: None,
        },
    );
    let waiting = Promise::new(&mut |resolve: Function, _| {
        shared
            .borrow_mut()
            .snapshot_waiters
            .entry(chat_id.to_string())
            .or_default()
            .push(resolve);
    });
    tabs::post(&channel, &json!({"kind": "snapshot_request"}));
    let timeout = Promise::new(&mut |_, reject: Function| {
        if let Ok(window) = js_sys::global().dyn_into::<web_sys::Window>() {
            let silent = error("OwnerSilent", "the tab that owns this chat does not answer");
            let _ = window
                .set_timeout_with_callback_and_timeout_and_arguments_1(&reject, 5000, &silent);
        }
    });
    let race = Promise::race(&js_sys::Array::of2(&waiting, &timeout));
    let snapshot = JsFuture::from(race).await?;
    wait_for_takeover(shared, chat_id);
    Ok(snapshot)
}

fn on_owner_message(shared: &Handle, chat_id: &str, message: Value) {
    match message["kind"].as_str() {
        Some("snapshot") => {
            let Ok(snapshot) =
                serde_json::from_value::<crate::event::EventEnvelope>(message["snapshot"].clone())
            else {
                return;
            };
            if let Some(ChatRole::Follower { view, .. }) =
                shared.borrow_mut().roles.get_mut(chat_id)
            {
                *view = crate::view::ChatView::from_snapshot(&snapshot).ok();
            }
            let value = to_js(&snapshot);
            let waiters = shared
                .borrow_mut()
                .snapshot_waiters
                .remove(chat_id)
                .unwrap_or_default();
            for waiter in waiters {
                let _ = waiter.call1(&JsValue::NULL, &value);
            }
            notify(shared, chat_id, &value);
        }
        Some("events") => {
            let events: Vec<crate::event::EventEnvelope> =
                serde_json::from_value(message["events"].clone()).unwrap_or_default();
            for event in events {
                let applied = match shared.borrow_mut().roles.get_mut(chat_id) {
                    Some(ChatRole::Follower {
                        view: Some(view),
                        channel,
                    }) => {
                        let ok = view.apply(&event).is_ok();
                        if !ok {
                            // A gap: ask for a new snapshot, as any subscriber would.
                            tabs::post(channel, &json!({"kind": "snapshot_request"}));
                        }
                        ok
                    }
                    _ => false,
                };
                if !applied {
                    return;
                }
                notify(shared, chat_id, &to_js(&event));
            }
        }
        _ => {}
    }
}

fn notify(shared: &Handle, chat_id: &str, value: &JsValue) {
    let callbacks: Vec<Function> = shared
        .borrow()
        .subscribers
        .get(chat_id)
        .map(|subs| subs.iter().map(|(_, f)| f.clone()).collect())
        .unwrap_or_default();
    for callback in callbacks {
        let _ = callback.call1(&JsValue::NULL, value);
    }
}

/// When the owner's lock frees, this tab loads the chat from IndexedDB and owns it; its
/// subscribers get the new snapshot.
fn wait_for_takeover(shared: &Handle, chat_id: &str) {
    let Some(locks) = tabs::lock_manager() else {
        return;
    };
    let shared = shared.clone();
    let chat_id = chat_id.to_string();
    spawn_local(async move {
        let Ok(Some(release)) = tabs::request_lock(&locks, &tabs::lock_name(&chat_id), true).await
        else {
            return;
        };
        // This tab may have closed meanwhile: then it lets go at once.
        let following = matches!(
            shared.borrow().roles.get(&chat_id),
            Some(ChatRole::Follower { .. })
        );
        if !following {
            let _ = release.call0(&JsValue::NULL);
            return;
        }
        if become_owner(&shared, &chat_id, Some(release)).await.is_ok() {
            let snapshot = shared.borrow().engine.snapshot(&chat_id);
            if let Some(snapshot) = snapshot {
                notify(&shared, &chat_id, &to_js(&snapshot));
            }
        }
    });
}

/// Waits (up to a minute) until no save of `chat_id` (of any chat when `None`) is in flight.
async fn wait_for_saves(shared: &Handle, chat_id: Option<&str>) {
    for _ in 0..6000 {
        let busy = {
            let s = shared.borrow();
            match chat_id {
                Some(id) => s.saves_in_flight.get(id).copied().unwrap_or(0) > 0,
                None => s.saves_in_flight.values().any(|n| *n > 0),
            }
        };
        if !busy {
            return;
        }
        sleep_ms(10).await;
    }
}

fn current_storage_error(shared: &Handle, chat_id: &str) -> Option<String> {
    let s = shared.borrow();
    s.engine
        .session(chat_id)?
        .runtime(s.engine.config())
        .storage_error
}

async fn sleep_ms(ms: i32) {
    let promise = Promise::new(&mut |resolve: Function, _| {
        if let Ok(window) = js_sys::global().dyn_into::<web_sys::Window>() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = JsFuture::from(promise).await;
}

/// `localStorage[key]`: only the small data-existed marker of B18 lives there, never chat data.
fn local_storage_get(key: &str) -> Option<String> {
    let window = js_sys::global().dyn_into::<web_sys::Window>().ok()?;
    window
        .local_storage()
        .ok()
        .flatten()?
        .get_item(key)
        .ok()
        .flatten()
}

fn local_storage_set(key: &str, value: &str) -> bool {
    js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .and_then(|w| w.local_storage().ok().flatten())
        .is_some_and(|storage| storage.set_item(key, value).is_ok())
}
