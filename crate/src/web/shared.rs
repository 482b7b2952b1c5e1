//! What the browser host's parts share: the engine and its IndexedDB, the subscribers, the requests and
//! tool calls in flight, the keys and the proxy (`Shared`, behind one `Rc<RefCell>`); how an input reaches
//! the engine (`handle`) and how its effects are performed (`perform`); small browser helpers.

use super::storage::*;
use super::streams::*;
use super::subscribers::*;
use super::tabs::ChatRole;
use super::tool_calls::*;
use crate::engine::{Effect, Engine, Input, Step};
use js_sys::Function;
use litemap::LiteMap;
use serde::Serialize;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortController, Response};

/// An API key and the one origin it may be sent to.
pub(super) struct BoundKey {
    pub(super) key: String,
    pub(super) origin: String,
}

/// The origin of `url` as the browser states it (`scheme://host:port`); `None` when it is not a URL.
pub(super) fn origin_of(url: &str) -> Option<String> {
    web_sys::Url::new(url)
        .ok()
        .map(|u| u.origin())
        .filter(|o| o != "null")
}

impl Shared {
    /// The key of `kind` for a request to `url`: empty unless `url` is on the origin the key was
    /// given for. A settings change that points a kind elsewhere never carries its key along.
    pub(super) fn key_for(&self, kind: &str, url: &str) -> String {
        match (self.keys.get(kind), origin_of(url)) {
            (Some(bound), Some(origin)) if bound.origin == origin => bound.key.clone(),
            _ => String::new(),
        }
    }
}

pub(super) struct Shared {
    pub(super) engine: Engine,
    pub(super) db: web_sys::IdbDatabase,
    pub(super) subscribers: LiteMap<String, Vec<(u32, Function)>>,
    pub(super) next_subscriber: u32,
    pub(super) requests: HashMap<String, AbortController>,
    pub(super) tools: HashMap<String, AbortController>,
    /// Each provider kind's API key with the origin it was given for (SECURITY E1).
    pub(super) keys: HashMap<String, BoundKey>,
    pub(super) proxy: Option<(String, String)>,
    pub(super) host_tools: HashMap<String, Function>,
    /// The `local` kind's transport, set by the page: `fetch`'s shape, answered by the model in
    /// the page (see `setLocalTransport`).
    pub(super) local_transport: Option<Function>,
    /// Chat records as stored (title, thread), updated by each save.
    pub(super) chats: LiteMap<String, Value>,
    pub(super) next_command: u64,
    /// IndexedDB records written so far (for tests and the bench page).
    pub(super) records_written: u64,
    /// Bytes of JSON those records held.
    pub(super) bytes_written: u64,
    /// This tab's role in each chat it opened (owner or follower, SPEC §4).
    pub(super) roles: HashMap<String, ChatRole>,
    /// Follower `openChat` calls waiting for the owner's snapshot.
    pub(super) snapshot_waiters: HashMap<String, Vec<Function>>,
    /// Saves started and not yet acknowledged or failed, per chat (`flush` waits for them).
    pub(super) saves_in_flight: HashMap<String, u32>,
    /// Chats an `openChat` is under way for: a second call waits for the first.
    pub(super) opening: std::collections::HashSet<String>,
    /// Why several tabs cannot coordinate here, when they cannot.
    pub(super) tabs_note: Option<String>,
    /// The out-of-band marker saying this database has held data.
    pub(super) marker: String,
    pub(super) marker_set: bool,
    /// The browser dropped this origin's data since the last visit.
    pub(super) data_lost: bool,
    /// When set, saves fail with this reason (tests simulate a quota error).
    pub(super) fail_saves: Option<String>,
    /// The last provider request of each chat as sent, the key redacted ("what the model sees").
    pub(super) last_requests: HashMap<String, super::streams::SentRequest>,
    /// The chats' workspace copies (issue 21).
    pub(super) chat_files: super::chat_files::ChatFilesState,
    /// Sync through CouchDB (issue 21): the replication when configured, its listener.
    pub(super) sync: super::sync::SyncHost,
    /// The page's `onChatsChanged` listener (`chat_list`).
    pub(super) chats_listener: Option<Function>,
    /// Set by `close`: late inputs (a tool's answer, a timer) are dropped instead of reaching an
    /// engine whose database is closed.
    pub(super) closed: bool,
}

pub(super) type Handle = Rc<RefCell<Shared>>;

pub(super) fn now() -> u64 {
    js_sys::Date::now() as u64
}

pub(super) fn to_js<T: Serialize>(value: &T) -> JsValue {
    super::to_js(value).unwrap_or(JsValue::UNDEFINED)
}

pub(super) use super::from_js;

pub(super) fn error(name: &str, message: &str) -> JsValue {
    super::js_error(name, message)
}

/// Feeds one input to the engine, then delivers its events and performs its effects.
pub(super) fn handle(shared: &Handle, input: Input) -> Step {
    if shared.borrow().closed {
        return Step::default();
    }
    let step = shared.borrow_mut().engine.handle(now(), input);
    run_step(shared, step)
}

/// Delivers a step's events and performs its effects.
pub(super) fn run_step(shared: &Handle, step: Step) -> Step {
    deliver(shared, &step);
    for effect in step.effects.clone() {
        perform(shared, effect);
    }
    step
}

pub(super) fn perform(shared: &Handle, effect: Effect) {
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

pub(super) fn wake_at(shared: &Handle, at_ms: u64) {
    let shared = shared.clone();
    let delay = at_ms.saturating_sub(now()).min(i32::MAX as u64) as i32;
    let delay = u32::try_from(delay).unwrap_or(0);
    gloo_timers::callback::Timeout::new(delay, move || {
        handle(&shared, Input::Tick {});
    })
    .forget();
}

pub(super) fn describe(error: JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| "network error".into())
}

pub(super) fn headers_of(response: &Response) -> LiteMap<String, String> {
    ["retry-after", "retry-after-ms", "x-should-retry"]
        .iter()
        .filter_map(|name| {
            let value = response.headers().get(name).ok().flatten()?;
            Some((name.to_string(), value))
        })
        .collect()
}

pub(super) async fn sleep_ms(ms: u32) {
    gloo_timers::future::TimeoutFuture::new(ms).await;
}

/// `localStorage[key]`: only the small data-existed marker of B18 lives there, never chat data.
pub(super) fn local_storage_get(key: &str) -> Option<String> {
    let window = js_sys::global().dyn_into::<web_sys::Window>().ok()?;
    window
        .local_storage()
        .ok()
        .flatten()?
        .get_item(key)
        .ok()
        .flatten()
}

pub(super) fn local_storage_set(key: &str, value: &str) -> bool {
    js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .and_then(|w| w.local_storage().ok().flatten())
        .is_some_and(|storage| storage.set_item(key, value).is_ok())
}

/// A response body's reader.
pub(super) fn reader_of(
    body: &web_sys::ReadableStream,
) -> Result<web_sys::ReadableStreamDefaultReader, String> {
    body.get_reader().dyn_into().map_err(|e| describe(e.into()))
}

/// The next chunk of a body as it arrives; `None` at its end.
pub(super) async fn next_chunk(
    reader: &web_sys::ReadableStreamDefaultReader,
) -> Result<Option<Vec<u8>>, String> {
    let chunk = JsFuture::from(reader.read()).await.map_err(describe)?;
    let done = js_sys::Reflect::get(&chunk, &"done".into())
        .ok()
        .and_then(|d| d.as_bool())
        .unwrap_or(true);
    if done {
        return Ok(None);
    }
    let value = js_sys::Reflect::get(&chunk, &"value".into()).unwrap_or(JsValue::UNDEFINED);
    Ok(Some(js_sys::Uint8Array::new(&value).to_vec()))
}
