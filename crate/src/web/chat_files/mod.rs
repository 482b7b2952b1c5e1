//! The page's side of the workspace copy (issue 21; the server's side is `proxy::chat_files`).
//! When paired with `palaver serve`, each chat whose save IndexedDB acknowledged is written to
//! `.palaver/chats/{id}.json` a moment later (saves coalesce: one write per chat at a time, the
//! newest state). Each write says which copy it replaces: `If-Match` with the hash of the copy
//! this browser wrote last (kept in `localStorage`), or `If-None-Match: *` for a first copy. A
//! copy changed elsewhere (another browser, a person) is therefore never overwritten: the chat's
//! copy becomes `conflict` and the page offers the choice (`keepBrowserCopy`, or opening the
//! workspace's copy as a new chat). Restoring takes a workspace copy into this browser under its
//! own id, once: a chat already here is never duplicated or replaced.
//!
//! One origin serves every workspace `palaver serve` is started in (the same port), so this
//! browser's chats are many projects' chats (SECURITY F4): a chat is copied only into the
//! workspace it was last used with (`thread.workspace_id`, set when a message is sent while
//! paired), and the hashes of the copies are kept per workspace.

use super::browser::*;
use super::shared::*;
use js_sys::Function;
use serde_json::Value;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};

mod http;

use http::*;
pub(super) use http::{list, read};

/// How long after an acknowledged save the copy is written (later saves join the same write).
const SETTLE_MS: u32 = 700;

pub(super) fn state_of(shared: &Handle, chat_id: &str) -> CopyState {
    let s = shared.borrow();
    if s.proxy.is_none() {
        return CopyState::Off;
    }
    s.chat_files
        .states
        .get(chat_id)
        .cloned()
        .unwrap_or(CopyState::Pending)
}

/// A message was sent in `chat_id` while paired: the chat is this workspace's from now on.
pub(super) fn used(shared: &Handle, chat_id: &str) {
    shared
        .borrow_mut()
        .chat_files
        .used
        .insert(chat_id.to_string());
}

/// The pairing changed: the workspace is asked its id again.
pub(super) fn paired(shared: &Handle) {
    let mut s = shared.borrow_mut();
    s.chat_files.workspace = None;
    s.chat_files.used.clear();
    s.chat_files.states.clear();
}

/// The paired workspace's id (asked of `/api/health` once per pairing).
async fn workspace_id(shared: &Handle) -> Result<String, String> {
    if let Some(id) = shared.borrow().chat_files.workspace.clone() {
        return Ok(id);
    }
    let Some((url, token)) = shared.borrow().proxy.clone() else {
        return Err("not paired with palaver serve".into());
    };
    let response = fetch(&url, &token, "GET", "/api/health", &[], None).await?;
    let body = body_text(&response).await;
    let id = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["workspace_id"].as_str().map(String::from))
        .ok_or_else(|| "palaver serve did not name its workspace (the workspace copy is off, or an older palaver serve)".to_string())?;
    shared.borrow_mut().chat_files.workspace = Some(id.clone());
    Ok(id)
}

/// The chat's copy as the engine holds it — a `Blob` written a piece at a time, never whole in
/// the wasm memory — or, a chat not open here and changed by sync, as stored.
async fn current_body(shared: &Handle, chat_id: &str) -> Result<JsValue, String> {
    let open = super::crossing::refact_blob(&shared.borrow().engine, chat_id);
    if let Some(blob) = open {
        return blob.map(JsValue::from);
    }
    current_text(shared, chat_id)
        .await
        .map(|text| JsValue::from_str(&text))
}

/// A chat not open here, as stored.
async fn current_text(shared: &Handle, chat_id: &str) -> Result<String, String> {
    let (text, _) = super::storage::load_trajectory(shared, chat_id)
        .await
        .map_err(|_| format!("chat {chat_id} cannot be read from this browser's storage"))?;
    let stored: Value = serde_json::from_str(text.get()).map_err(|e| e.to_string())?;
    let mut flat = match &stored["thread"] {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    flat.insert("id".into(), Value::String(chat_id.to_string()));
    flat.insert("messages".into(), stored["messages"].clone());
    crate::export::export_chat(&Value::Object(flat), "refact")
}

/// Whether `chat_id` is the paired workspace's: bound to it, or used here since the pairing
/// (then bound now, by a `set_params` the next save carries).
fn belongs(shared: &Handle, chat_id: &str, workspace: &str) -> bool {
    let bound = shared
        .borrow()
        .engine
        .session(chat_id)
        .and_then(|session| session.thread.workspace_id.clone())
        .or_else(|| stored_workspace(shared, chat_id));
    if bound.as_deref() == Some(workspace) {
        return true;
    }
    if !shared.borrow().chat_files.used.contains(chat_id) {
        return false;
    }
    let command = serde_json::json!({"type": "set_params", "client_request_id": format!("bind-{}", now()), "patch": {"workspace_id": workspace}});
    feed(
        shared,
        crate::engine::Input::Command {
            chat_id: chat_id.to_string(),
            command,
        },
    );
    true
}

/// The workspace a chat not open here is bound to, from its stored record.
fn stored_workspace(shared: &Handle, chat_id: &str) -> Option<String> {
    let s = shared.borrow();
    let record = s.chats.get(chat_id)?;
    record["thread"]["workspace_id"].as_str().map(String::from)
}

pub(super) fn set_listener(shared: &Handle, listener: Option<Function>) {
    shared.borrow_mut().chat_files.listener = listener;
}

fn set_state(shared: &Handle, chat_id: &str, state: CopyState) {
    let listener = {
        let mut s = shared.borrow_mut();
        if s.chat_files.states.get(chat_id) == Some(&state) {
            return;
        }
        s.chat_files
            .states
            .insert(chat_id.to_string(), state.clone());
        s.chat_files.listener.clone()
    };
    if let Some(listener) = listener {
        let _ = listener.call2(&JsValue::NULL, &JsValue::from_str(chat_id), &to_js(&state));
    }
}

/// A save of `chat_id` was acknowledged: its copy is written once the saves settle.
pub(super) fn saved(shared: &Handle, chat_id: &str) {
    let skip = {
        let s = shared.borrow();
        s.proxy.is_none()
            || matches!(
                s.chat_files.states.get(chat_id),
                Some(CopyState::Conflict | CopyState::Off)
            )
    };
    if skip {
        return;
    }
    if !shared
        .borrow_mut()
        .chat_files
        .busy
        .insert(chat_id.to_string())
    {
        shared
            .borrow_mut()
            .chat_files
            .again
            .insert(chat_id.to_string());
        return;
    }
    set_state(shared, chat_id, CopyState::Pending);
    let shared = shared.clone();
    let chat_id = chat_id.to_string();
    spawn_local(async move {
        loop {
            sleep_ms(SETTLE_MS).await;
            shared.borrow_mut().chat_files.again.remove(&chat_id);
            let state = write(&shared, &chat_id, false).await;
            set_state(&shared, &chat_id, state);
            if !shared.borrow_mut().chat_files.again.remove(&chat_id) {
                break;
            }
        }
        shared.borrow_mut().chat_files.busy.remove(&chat_id);
    });
}

/// The user keeps this browser's copy over a workspace copy changed elsewhere.
pub(super) async fn keep_browser_copy(shared: &Handle, chat_id: &str) -> CopyState {
    let state = write(shared, chat_id, true).await;
    set_state(shared, chat_id, state.clone());
    state
}

fn hash_key(shared: &Handle, workspace: &str, chat_id: &str) -> String {
    format!("{}{workspace}.{chat_id}", shared.borrow().chat_files.prefix)
}

/// Writes the chat's trajectory as the Refact export has it; says where the copy stands after.
async fn write(shared: &Handle, chat_id: &str, force: bool) -> CopyState {
    let Some((url, token)) = shared.borrow().proxy.clone() else {
        return CopyState::Off;
    };
    let workspace = match workspace_id(shared).await {
        Ok(id) => id,
        Err(error) => return CopyState::Failed { error },
    };
    if !belongs(shared, chat_id, &workspace) {
        return CopyState::OtherWorkspace;
    }
    let body = match current_body(shared, chat_id).await {
        Ok(body) => body,
        Err(e) => return CopyState::Failed { error: e },
    };
    let key = hash_key(shared, &workspace, chat_id);
    let mut headers = vec![("content-type", "application/json".to_string())];
    if !force {
        match local_storage_get(&key) {
            Some(hash) => headers.push(("if-match", hash)),
            None => headers.push(("if-none-match", "*".to_string())),
        }
    }
    let reply = request(&url, &token, "PUT", chat_id, &headers, Some(&body)).await;
    match reply {
        Ok((200, body)) => {
            let hash = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v["hash"].as_str().map(String::from))
                .unwrap_or_default();
            local_storage_set(&key, &hash);
            CopyState::Current
        }
        Ok((412, _)) => CopyState::Conflict,
        // `mirror_off`: what a `palaver serve` before the rename answers.
        Ok((404, body)) if body.contains("workspace_copy_off") || body.contains("mirror_off") => {
            CopyState::Off
        }
        Ok((status, body)) => CopyState::Failed {
            error: error_message(status, &body),
        },
        Err(e) => CopyState::Failed { error: e },
    }
}

/// Checks the chat's copy against the one this browser wrote last: a copy changed elsewhere is
/// a conflict at once (offered when the chat opens, not only at its next save).
pub(super) async fn check(shared: &Handle, chat_id: &str) -> CopyState {
    let Some((url, token)) = shared.borrow().proxy.clone() else {
        return CopyState::Off;
    };
    let workspace = match workspace_id(shared).await {
        Ok(id) => id,
        Err(error) => return CopyState::Failed { error },
    };
    let bound = shared
        .borrow()
        .engine
        .session(chat_id)
        .and_then(|session| session.thread.workspace_id.clone());
    if bound.as_deref() != Some(workspace.as_str()) {
        set_state(shared, chat_id, CopyState::OtherWorkspace);
        return CopyState::OtherWorkspace;
    }
    let Some(mine) = local_storage_get(&hash_key(shared, &workspace, chat_id)) else {
        // Never written from here (saved before the pairing): its first copy now.
        saved(shared, chat_id);
        return state_of(shared, chat_id);
    };
    let state = match head_hash(&url, &token, chat_id).await {
        Ok(Some(hash)) if hash == mine => CopyState::Current,
        Ok(Some(_)) => CopyState::Conflict,
        // Gone from the workspace (deleted there, or .palaver removed): written again at the
        // next save, as a first copy.
        Ok(None) => {
            remove_hash(shared, &workspace, chat_id);
            CopyState::Pending
        }
        Err(e) => CopyState::Failed { error: e },
    };
    set_state(shared, chat_id, state.clone());
    state
}

fn remove_hash(shared: &Handle, workspace: &str, chat_id: &str) {
    let key = hash_key(shared, workspace, chat_id);
    if let Some(storage) = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .and_then(|w| w.local_storage().ok().flatten())
    {
        let _ = storage.remove_item(&key);
    }
}

/// The chat was deleted here: its workspace copy goes too (an undo saves it again).
pub(super) fn deleted(shared: &Handle, chat_id: &str) {
    let Some((url, token)) = shared.borrow().proxy.clone() else {
        return;
    };
    // Only from the workspace the chat belonged to (its thread is gone: the one it was bound to
    // when it was deleted, which the page's engine knew).
    let Some(workspace) = shared.borrow().chat_files.workspace.clone() else {
        return;
    };
    let key = hash_key(shared, &workspace, chat_id);
    if local_storage_get(&key).is_none() {
        return; // never copied into this workspace
    }
    remove_hash(shared, &workspace, chat_id);
    shared.borrow_mut().chat_files.states.remove(chat_id);
    let chat_id = chat_id.to_string();
    spawn_local(async move {
        let _ = fetch(
            &url,
            &token,
            "DELETE",
            &format!("/api/chats/{chat_id}"),
            &[],
            None,
        )
        .await;
    });
}

/// Before a restore: the copy about to be read in is the one this browser holds, so later saves
/// replace it. Kept before the chat is stored, not after: a page reloaded or closed the moment
/// the restored chat shows up would otherwise have no hash, write its next save as a first copy,
/// and find its own workspace's copy a conflict. The workspace's id, or `None` unpaired.
pub(super) async fn adopting(shared: &Handle, chat_id: &str, hash: &str) -> Option<String> {
    let workspace = workspace_id(shared).await.ok()?;
    local_storage_set(&hash_key(shared, &workspace, chat_id), hash);
    Some(workspace)
}

/// After a restore: the chat came from this workspace, it is this workspace's, its copy current.
/// A restore that failed forgets the hash `adopting` kept.
pub(super) fn adopted(shared: &Handle, chat_id: &str, workspace: &str, stored: bool) {
    if !stored {
        remove_hash(shared, workspace, chat_id);
        return;
    }
    used(shared, chat_id);
    belongs(shared, chat_id, workspace);
    set_state(shared, chat_id, CopyState::Current);
}
