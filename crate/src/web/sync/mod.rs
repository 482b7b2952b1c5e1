//! Issue 21: sync between devices through a CouchDB database — the browser side of
//! `replication::Replicator`. The replicator decides; this module performs what it asks: the
//! HTTP requests (with the user's Basic credentials, a `longpoll` aborted when a local change
//! comes), the reads and writes of the sync stores beside the chats (`sync_revs`, `sync_outbox`),
//! the checkpoint kept in `localStorage`, the timer, `online`/`offline`. A pulled change to a chat
//! open here reaches its engine as `ReloadChat` once the chat is idle and saved.

use super::browser::*;
use super::idb;
use super::shared::*;
use super::tabs::ChatRole;
use crate::engine::Input;
use crate::replication::{
    hash_hex, local_doc, LocalDoc, OutboxEntry, Pulled, Pushed, Replicator, RevInfo, SyncEffect,
    SyncInput, SyncStatus,
};
use crate::replication::{message_fate, outbox_body, removed_with_its_chat, MessageFate};
use js_sys::Reflect;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};
use web_sys::AbortController;

mod http;
mod pulled;
mod records;

use http::*;
use pulled::*;
use records::*;

/// What Settings → Sync gives: the server, the database, the credentials (never stored here).
#[derive(Deserialize, Clone, Debug)]
pub(super) struct SyncConfig {
    pub url: String,
    pub database: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
}

/// Starts (or stops, with `None`) the replication; the status goes to the listener.
pub(super) async fn configure(shared: &Handle, config: Option<SyncConfig>) -> Result<(), JsValue> {
    stop(shared);
    let Some(config) = config else {
        emit_status(
            shared,
            &SyncStatus {
                state: "off".into(),
                ..SyncStatus::default()
            },
        );
        return Ok(());
    };
    let db_url = database_url(&config)?;
    let device = device_id();
    let replication_id = format!(
        "palaver-{}",
        &hash_hex(&[device.as_bytes(), db_url.as_bytes()])[..20]
    );
    let db_name = shared.borrow().marker.clone();
    let checkpoint_key = format!("palaver.sync.{db_name}.{replication_id}");
    let checkpoint = local_storage_get(&checkpoint_key).and_then(|t| serde_json::from_str(&t).ok());
    let seeded_key = format!("{checkpoint_key}.seeded");
    let auth =
        (!config.username.is_empty()).then(|| basic_auth(&config.username, &config.password));
    let generation = {
        let mut s = shared.borrow_mut();
        s.sync.generation += 1;
        let generation = s.sync.generation;
        s.sync.state = Some(SyncState {
            replicator: Replicator::new(&replication_id),
            db_url,
            auth,
            aborts: HashMap::new(),
            generation,
            checkpoint_key,
            reload_later: BTreeSet::new(),
            pack_later: BTreeSet::new(),
        });
        generation
    };
    hook_online(shared);
    if local_storage_get(&seeded_key).is_none() {
        // Every chat this browser holds goes into the outbox once: the first push sends them.
        seed_outbox(shared).await?;
        local_storage_set(&seeded_key, "1");
    }
    if current(shared, generation) {
        step(shared, generation, SyncInput::Start { checkpoint });
    }
    Ok(())
}

fn stop(shared: &Handle) {
    let old = shared.borrow_mut().sync.state.take();
    if let Some(old) = old {
        for controller in old.aborts.values() {
            controller.abort();
        }
    }
}

fn current(shared: &Handle, generation: u64) -> bool {
    shared
        .borrow()
        .sync
        .state
        .as_ref()
        .is_some_and(|s| s.generation == generation)
}

fn hook_online(shared: &Handle) {
    if shared.borrow().sync.online_hooked {
        return;
    }
    shared.borrow_mut().sync.online_hooked = true;
    let Ok(window) = js_sys::global().dyn_into::<web_sys::Window>() else {
        return;
    };
    for (event, online) in [("online", true), ("offline", false)] {
        let shared = shared.clone();
        let callback = Closure::<dyn FnMut()>::new(move || {
            let generation = shared.borrow().sync.state.as_ref().map(|s| s.generation);
            if let Some(generation) = generation {
                step(&shared, generation, SyncInput::Online { online });
            }
        });
        let _ = window.add_event_listener_with_callback(event, callback.as_ref().unchecked_ref());
        callback.forget();
    }
}

/// A save (or a removal) changed the outbox: push soon.
pub(super) fn local_change(shared: &Handle) {
    let generation = shared.borrow().sync.state.as_ref().map(|s| s.generation);
    if let Some(generation) = generation {
        step(shared, generation, SyncInput::LocalChange);
    }
}

/// Starts again from the checkpoint (after a stop, or when the user asks).
pub(super) fn restart(shared: &Handle) {
    let found = shared
        .borrow()
        .sync
        .state
        .as_ref()
        .map(|s| (s.generation, s.checkpoint_key.clone()));
    if let Some((generation, key)) = found {
        let checkpoint = local_storage_get(&key).and_then(|t| serde_json::from_str(&t).ok());
        step(shared, generation, SyncInput::Start { checkpoint });
    }
}

pub(super) fn status(shared: &Handle) -> SyncStatus {
    shared
        .borrow()
        .sync
        .state
        .as_ref()
        .map(|s| s.replicator.status().clone())
        .unwrap_or_else(|| SyncStatus {
            state: "off".into(),
            ..SyncStatus::default()
        })
}

fn emit_status(shared: &Handle, status: &SyncStatus) {
    emit(shared, &json!({"type": "status", "status": status}));
}

fn emit(shared: &Handle, value: &Value) {
    let listener = shared.borrow().sync.listener.clone();
    if let Some(listener) = listener {
        let _ = listener.call1(&JsValue::NULL, &to_js(value));
    }
}

/// One input to the replicator, and its effects performed.
fn step(shared: &Handle, generation: u64, input: SyncInput) {
    if !current(shared, generation) || shared.borrow().closed {
        return;
    }
    let effects = {
        let mut s = shared.borrow_mut();
        let Some(state) = s.sync.state.as_mut() else {
            return;
        };
        state.replicator.handle(now(), input)
    };
    for effect in effects {
        perform(shared, generation, effect);
    }
}

fn perform(shared: &Handle, generation: u64, effect: SyncEffect) {
    let shared = shared.clone();
    match effect {
        SyncEffect::Http(request) => spawn_local(async move {
            let id = request.id;
            let input = match http(&shared, request).await {
                Ok((status, body)) => SyncInput::Reply { id, status, body },
                Err(reason) => SyncInput::Failed { id, reason },
            };
            if let Some(state) = shared.borrow_mut().sync.state.as_mut() {
                state.aborts.remove(&id);
            }
            step(&shared, generation, input);
        }),
        SyncEffect::Abort { id } => {
            let controller = shared
                .borrow_mut()
                .sync
                .state
                .as_mut()
                .and_then(|s| s.aborts.remove(&id));
            if let Some(controller) = controller {
                controller.abort();
            }
        }
        SyncEffect::ReadOutbox { limit } => spawn_local(async move {
            let input = match read_outbox(&shared, limit).await {
                Ok(entries) => SyncInput::Outbox { entries },
                Err(e) => storage_failed(e),
            };
            step(&shared, generation, input);
        }),
        SyncEffect::ReadKnown { ids } => spawn_local(async move {
            let input = match read_known(&shared, &ids).await {
                Ok((known, pending)) => SyncInput::Known { known, pending },
                Err(e) => storage_failed(e),
            };
            step(&shared, generation, input);
        }),
        SyncEffect::Store { pulled, pushed } => spawn_local(async move {
            match store(&shared, &pulled, &pushed).await {
                Ok(changed) => {
                    step(&shared, generation, SyncInput::Stored);
                    if !changed.chats.is_empty() || !changed.deleted.is_empty() {
                        after_pull(&shared, generation, changed).await;
                    }
                }
                Err(e) => {
                    let input = storage_failed(e);
                    step(&shared, generation, input);
                }
            }
        }),
        SyncEffect::Checkpoint { last_seq } => {
            let key = shared
                .borrow()
                .sync
                .state
                .as_ref()
                .map(|s| s.checkpoint_key.clone());
            if let Some(key) = key {
                local_storage_set(&key, &last_seq.to_string());
            }
        }
        SyncEffect::Wake { at } => {
            let delay = u32::try_from(at.saturating_sub(now())).unwrap_or(u32::MAX);
            gloo_timers::callback::Timeout::new(delay, move || {
                step(&shared, generation, SyncInput::Tick);
            })
            .forget();
        }
        SyncEffect::Status(status) => {
            emit_status(&shared, &status);
            if status.state == "live" {
                pack_pulled(&shared);
            }
        }
    }
}

/// A local storage failure during sync: shown, and retried like a server failure.
fn storage_failed(error: JsValue) -> SyncInput {
    SyncInput::LocalFailed {
        reason: describe(error),
    }
}
