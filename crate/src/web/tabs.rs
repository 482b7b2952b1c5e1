//! Several tabs on one chat (SPEC §4): one owner per chat through the Web Locks API
//! (`palaver-chat-{id}`); the owner runs the chat in its engine and saves it, every other tab is a
//! follower that sends commands over a `BroadcastChannel` of the same name and applies the
//! owner's events to its own view, with the same `seq`/snapshot rules (a gap asks for a new
//! snapshot). A follower also waits for the lock: when the owner goes away it takes over from
//! IndexedDB. Where Web Locks are missing, each tab owns its chats and says so.

use crate::event::EventEnvelope;
use crate::mirror::ChatMirror;
use js_sys::{Function, Promise, Reflect};
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{BroadcastChannel, MessageEvent};

/// This tab's part in one chat.
pub enum ChatRole {
    Owner {
        channel: BroadcastChannel,
        /// Resolving it releases the lock.
        release: Option<Function>,
    },
    Follower {
        channel: BroadcastChannel,
        view: Option<ChatMirror>,
    },
}

impl ChatRole {
    pub fn channel(&self) -> &BroadcastChannel {
        match self {
            ChatRole::Owner { channel, .. } | ChatRole::Follower { channel, .. } => channel,
        }
    }
}

pub fn lock_name(chat_id: &str) -> String {
    format!("palaver-chat-{chat_id}")
}

/// `navigator.locks`, when the browser has it.
pub fn lock_manager() -> Option<JsValue> {
    let navigator = Reflect::get(&js_sys::global(), &"navigator".into()).ok()?;
    let locks = Reflect::get(&navigator, &"locks".into()).ok()?;
    (!locks.is_undefined() && !locks.is_null()).then_some(locks)
}

/// What a lock request gives: `Some(release)` when held, `None` when another tab holds it.
/// `wait: false` asks `ifAvailable`; `wait: true` resolves only once the lock is ours.
pub async fn request_lock(
    locks: &JsValue,
    name: &str,
    wait: bool,
) -> Result<Option<Function>, JsValue> {
    let request: Function = Reflect::get(locks, &"request".into())?.dyn_into()?;
    let options = js_sys::Object::new();
    if !wait {
        Reflect::set(&options, &"ifAvailable".into(), &JsValue::TRUE)?;
    }
    let outcome = Promise::new(&mut |resolve: Function, _reject: Function| {
        let callback = Closure::once_into_js(move |lock: JsValue| -> JsValue {
            if lock.is_null() {
                let _ = resolve.call1(&JsValue::NULL, &JsValue::NULL);
                return JsValue::UNDEFINED;
            }
            // Held until `release` is called: the callback's promise stays pending until then.
            let held = Promise::new(&mut |release: Function, _| {
                let _ = resolve.call1(&JsValue::NULL, &release);
            });
            held.into()
        });
        let _ = request.call3(locks, &JsValue::from_str(name), &options, &callback);
    });
    let released = wasm_bindgen_futures::JsFuture::from(outcome).await?;
    Ok(released.dyn_into::<Function>().ok())
}

pub fn open_channel(
    chat_id: &str,
    on_message: impl FnMut(Value) + 'static,
) -> Result<BroadcastChannel, JsValue> {
    let channel = BroadcastChannel::new(&lock_name(chat_id))?;
    let mut on_message = on_message;
    let handler = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let text = event.data().as_string().unwrap_or_default();
        if let Ok(message) = serde_json::from_str::<Value>(&text) {
            on_message(message);
        }
    });
    channel.set_onmessage(Some(handler.as_ref().unchecked_ref()));
    handler.forget();
    Ok(channel)
}

pub fn post(channel: &BroadcastChannel, message: &Value) {
    let _ = channel.post_message(&JsValue::from_str(&message.to_string()));
}

pub fn events_message(events: &[&EventEnvelope]) -> Value {
    json!({"kind": "events", "events": events})
}

pub fn snapshot_message(snapshot: &crate::event::SnapshotView) -> Value {
    json!({"kind": "snapshot", "snapshot": snapshot})
}
