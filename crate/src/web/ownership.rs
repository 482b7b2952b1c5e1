//! One tab owns each chat (SPEC §4): the owner runs its engine and answers the others over a
//! `BroadcastChannel`; followers mirror it and take over when it goes (Web Locks in `tabs`).

use super::browser::*;
use super::shared::*;
use super::storage::*;
use super::subscribers::*;
use super::tabs::{self, ChatRole};
use crate::engine::Input;
use js_sys::{Function, Promise};
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{spawn_local, JsFuture};

/// The chat as this tab sees it, as JS: the engine's snapshot when it owns the chat, the
/// mirrored view when it follows; written from the chat without a copy of its messages. `None`
/// when the chat is not open here, or when its `seq` is `known` (the caller has it already).
/// With a `window`, only the last `window` messages whole (`SnapshotView::window`).
pub(super) fn current_snapshot_js(
    shared: &Handle,
    chat_id: &str,
    known: Option<u64>,
    window: Option<usize>,
) -> Option<JsValue> {
    let s = shared.borrow();
    let view = match s.roles.get(chat_id) {
        Some(ChatRole::Follower { view, .. }) => view.as_ref()?.snapshot_view(chat_id),
        _ => s.engine.snapshot_view(chat_id)?,
    };
    let view = match window {
        Some(window) => view.window(window),
        None => view,
    };
    (known != Some(view.seq)).then(|| to_js(&view))
}

/// Whether `current_snapshot_js` has one, without building it (a long chat's is costly).
pub(super) fn has_snapshot(shared: &Handle, chat_id: &str) -> bool {
    let s = shared.borrow();
    match s.roles.get(chat_id) {
        Some(ChatRole::Follower { view, .. }) => view.is_some(),
        _ => s.engine.session(chat_id).is_some(),
    }
}

/// Runs the chat here: load it, serve the other tabs over the channel, hold the lock.
pub(super) async fn become_owner(
    shared: &Handle,
    chat_id: &str,
    release: Option<Function>,
) -> Result<(), JsValue> {
    let (trajectory, stored) = load_trajectory(shared, chat_id).await?;
    feed(
        shared,
        Input::OpenChat {
            chat_id: chat_id.to_string(),
            trajectory: Some(trajectory),
            stored: Some(stored),
        },
    );
    let served = shared.clone();
    let chat = chat_id.to_string();
    let channel = tabs::open_channel(chat_id, move |message| match message["kind"].as_str() {
        Some("command") => {
            let command = message["command"].clone();
            feed(
                &served,
                Input::Command {
                    chat_id: chat.clone(),
                    command,
                },
            );
        }
        Some("snapshot_request") => {
            let served = served.borrow();
            let (Some(snapshot), Some(role)) =
                (served.engine.snapshot_view(&chat), served.roles.get(&chat))
            else {
                return;
            };
            tabs::post(role.channel(), &tabs::snapshot_message(&snapshot));
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
    // Tabs following this chat (their owner went away) ask for the snapshot when they hear a
    // new owner: posting a long chat's whole snapshot to nobody cost every opening ~40 ms.
    tabs::post(&channel, &json!({"kind": "owner_ready"}));
    Ok(())
}

/// Opens a chat in this tab: as its owner when its Web Lock is free, else as a follower of the
/// tab that holds it (then with the owner's snapshot, already crossed to JS).
pub(super) async fn open_or_follow(
    shared: &Handle,
    chat_id: &str,
) -> Result<Option<JsValue>, JsValue> {
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
        return follow(shared, chat_id).await.map(Some);
    }
    become_owner(shared, chat_id, release).await?;
    Ok(None)
}

/// Mirrors a chat another tab owns; resolves to the owner's snapshot. Meanwhile waits for the
/// lock, to take over when the owner goes away.
pub(super) async fn follow(shared: &Handle, chat_id: &str) -> Result<JsValue, JsValue> {
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
    let answer = JsFuture::from(waiting);
    let timeout = gloo_timers::future::TimeoutFuture::new(5000);
    let snapshot = match futures::future::select(answer, timeout).await {
        futures::future::Either::Left((answer, _)) => answer?,
        futures::future::Either::Right(_) => {
            return Err(error(
                "OwnerSilent",
                "the tab that owns this chat does not answer",
            ))
        }
    };
    wait_for_takeover(shared, chat_id);
    Ok(snapshot)
}

pub(super) fn on_owner_message(shared: &Handle, chat_id: &str, message: Value) {
    match message["kind"].as_str() {
        Some("owner_ready") => {
            if let Some(role) = shared.borrow().roles.get(chat_id) {
                tabs::post(role.channel(), &json!({"kind": "snapshot_request"}));
            }
        }
        Some("snapshot") => {
            let Ok(snapshot) =
                serde_json::from_value::<crate::event::EventEnvelope>(message["snapshot"].clone())
            else {
                return;
            };
            if let Some(ChatRole::Follower { view, .. }) =
                shared.borrow_mut().roles.get_mut(chat_id)
            {
                *view = crate::mirror::ChatMirror::from_snapshot(&snapshot).ok();
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

/// When the owner's lock frees, this tab loads the chat from IndexedDB and owns it; its
/// subscribers get the new snapshot.
pub(super) fn wait_for_takeover(shared: &Handle, chat_id: &str) {
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
            if let Some(snapshot) = current_snapshot_js(&shared, &chat_id, None, None) {
                notify(&shared, &chat_id, &snapshot);
            }
        }
    });
}
