//! The subscribers of each chat: every step's events delivered to the page's callbacks, in `seq` order.

use super::browser::to_js;
use super::shared::*;
use super::tabs::{self, ChatRole};
use crate::engine::Step;
use js_sys::Function;
use litemap::LiteMap;
use wasm_bindgen::prelude::*;

pub(super) fn deliver(shared: &Handle, step: &Step) {
    let mut by_chat: LiteMap<&str, Vec<&crate::event::EventEnvelope>> = LiteMap::new();
    for envelope in &step.events {
        by_chat.entry(&envelope.chat_id).or_default().push(envelope);
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
    }
}

pub(super) fn notify(shared: &Handle, chat_id: &str, value: &JsValue) {
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
