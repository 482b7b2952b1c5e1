//! Safe edits (`checkpoints`, issue 39) over HTTP: a write tool's call is recorded when the page
//! names its chat and call (`x-palaver-chat`, `x-palaver-call`); `GET /api/changes?chat=` lists a
//! chat's recorded changes, `GET /api/changes/content` one side of a change (for its diff),
//! `POST /api/changes/restore` puts files back.

use super::*;
use crate::proxy::checkpoints::{Checkpoints, Pending};
use axum::extract::Query;

/// The recording of a `write_file` / `edit_file` call, begun before it runs; `Err` is the reply
/// when the pre-image cannot be kept (the write is then not made).
pub(super) fn record_before(
    api: &Api,
    name: &str,
    headers: &axum::http::HeaderMap,
    args: &serde_json::Value,
) -> Result<Option<Pending>, Response> {
    let Some(store) = api.checkpoints.as_ref() else {
        return Ok(None);
    };
    let named = |key: &str| {
        headers
            .get(key)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
    };
    let path = args.get("path").and_then(serde_json::Value::as_str);
    let (Some(chat), Some(call), Some(path)) =
        (named("x-palaver-chat"), named("x-palaver-call"), path)
    else {
        return Ok(None);
    };
    if !matches!(name, "write_file" | "edit_file") {
        return Ok(None);
    }
    match store.before(&api.tools.workspace, chat, call, path) {
        Ok(pending) => Ok(Some(pending)),
        // A path the tool itself refuses is the tool's to answer.
        Err(reply) if reply.status != 200 => Ok(None),
        Err(reply) => Err((StatusCode::OK, Json(reply.body())).into_response()),
    }
}

/// Logs the change once the tool succeeded.
pub(super) fn record_after(api: &Api, pending: Option<Pending>, succeeded: bool) {
    if let (Some(store), Some(pending), true) = (api.checkpoints.as_ref(), pending, succeeded) {
        let _ = store.finish(&api.tools.workspace, pending);
    }
}

/// A `run_command` or MCP call being recorded: its chat, its call, the workspace before it.
pub(super) struct Scanning {
    chat: String,
    call: String,
    before: Arc<crate::proxy::workspace_scan::Scan>,
}

/// Before `run_command` or an MCP tool that names its chat and call: the workspace scanned, what
/// moved since the last scan kept (issue 39). `None` when the call is not recorded.
pub(super) async fn scan_before(
    api: &Api,
    name: &str,
    headers: &axum::http::HeaderMap,
) -> Option<Scanning> {
    if name != "run_command" && !name.starts_with(MCP_PREFIX) {
        return None;
    }
    let store = api.checkpoints.clone()?;
    let named = |key: &str| {
        let value = headers.get(key)?.to_str().ok()?;
        (!value.is_empty()).then(|| value.to_string())
    };
    let (chat, call) = (named("x-palaver-chat")?, named("x-palaver-call")?);
    let workspace = api.tools.workspace.clone();
    let budget = scan_budget(&api.tools);
    let before = tokio::task::spawn_blocking(move || store.scan_before(&workspace, &budget))
        .await
        .ok()?;
    Some(Scanning { chat, call, before })
}

/// After the call: what it created, changed and deleted, logged under its chat and call.
pub(super) async fn scan_after(api: &Api, scanning: Option<Scanning>) {
    let (Some(store), Some(scanning)) = (api.checkpoints.clone(), scanning) else {
        return;
    };
    let workspace = api.tools.workspace.clone();
    let budget = scan_budget(&api.tools);
    let _ = tokio::task::spawn_blocking(move || {
        let Scanning { chat, call, before } = scanning;
        store.record_scan(&workspace, &chat, &call, &before, &budget)
    })
    .await;
}

/// A streamed call's lines, with its last line (the result) held until the call's changes are
/// logged: the page asks for them when it sees the result.
pub(super) fn recorded_lines(
    api: Arc<Api>,
    scanning: Option<Scanning>,
    mut receiver: tokio::sync::mpsc::Receiver<String>,
) -> tokio::sync::mpsc::Receiver<String> {
    if scanning.is_none() {
        return receiver;
    }
    let (lines, out) = tokio::sync::mpsc::channel::<String>(64);
    tokio::spawn(async move {
        let mut held: Option<String> = None;
        while let Some(line) = receiver.recv().await {
            if let Some(previous) = held.replace(line) {
                if lines.send(previous).await.is_err() {
                    return; // the page went away; the call is cancelled
                }
            }
        }
        scan_after(&api, scanning).await;
        if let Some(last) = held {
            let _ = lines.send(last).await;
        }
    });
    out
}

fn scan_budget(tools: &Tools) -> crate::proxy::walk::Budget {
    let deadline = std::time::Instant::now() + tools.capabilities.walk_deadline;
    crate::proxy::walk::Budget::new(deadline, Default::default())
}

#[derive(serde::Deserialize)]
pub(super) struct ChatQuery {
    chat: String,
}

/// `GET /api/changes?chat=ID`: `{recording, changes: [{id, call_id, path, before, after, restore}]}`.
pub(super) async fn list_changes(
    State(api): State<Arc<Api>>,
    Query(query): Query<ChatQuery>,
) -> Response {
    let Some(store) = api.checkpoints.clone() else {
        return Json(serde_json::json!({"recording": false, "changes": []})).into_response();
    };
    let changes = tokio::task::spawn_blocking(move || store.changes(&query.chat))
        .await
        .unwrap_or_default();
    Json(serde_json::json!({"recording": true, "changes": changes})).into_response()
}

/// The answer of a change route when this `palaver serve` keeps no changes.
fn not_recording() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "not_recording",
        "this palaver serve records no changes (it has no data folder)",
    )
}

#[derive(serde::Deserialize)]
pub(super) struct ContentQuery {
    chat: String,
    hash: String,
}

/// `GET /api/changes/content?chat=ID&hash=SHA256`: `{text}` (or `{binary: true}`) of a content the
/// chat's changes name as before or after; 404 with a sentence for any other hash.
pub(super) async fn change_content(
    State(api): State<Arc<Api>>,
    Query(query): Query<ContentQuery>,
) -> Response {
    let Some(store) = api.checkpoints.clone() else {
        return not_recording();
    };
    let read = tokio::task::spawn_blocking(move || store.content(&query.chat, &query.hash)).await;
    match read.ok().flatten() {
        Some(bytes) => match String::from_utf8(bytes) {
            Ok(text) => Json(serde_json::json!({ "text": text })).into_response(),
            Err(_) => Json(serde_json::json!({ "binary": true })).into_response(),
        },
        None => json_error(
            StatusCode::NOT_FOUND,
            "not_recorded",
            "this content is not among the chat's recorded changes (or it was pruned)",
        ),
    }
}

#[derive(serde::Deserialize)]
pub(super) struct RestoreAsk {
    chat_id: String,
    call_id: String,
    /// One file only ("Revert this change" of a file in the report).
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    force: bool,
}

/// `POST /api/changes/restore {chat_id, call_id, path?, force}`: the files the chat changed from
/// that call on (or that one file), back as they were before it: `{restored: [path], skipped:
/// [{path, reason}]}`.
pub(super) async fn restore_changes(State(api): State<Arc<Api>>, body: Bytes) -> Response {
    let ask: RestoreAsk = match serde_json::from_slice(&body) {
        Ok(ask) => ask,
        Err(e) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                &format!("a restore is {{chat_id, call_id, force}}: {e}"),
            )
        }
    };
    let Some(store) = api.checkpoints.clone() else {
        return not_recording();
    };
    let workspace = api.tools.workspace.clone();
    let done = tokio::task::spawn_blocking(move || store_restore(&store, &workspace, &ask)).await;
    match done {
        Ok(Ok(restored)) => Json(restored).into_response(),
        Ok(Err(reply)) => (StatusCode::NOT_FOUND, Json(reply.body())).into_response(),
        Err(e) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &format!("the restore stopped: {e}"),
        ),
    }
}

fn store_restore(
    store: &Checkpoints,
    workspace: &Workspace,
    ask: &RestoreAsk,
) -> Result<crate::proxy::checkpoints::Restored, tools::ToolReply> {
    let only = ask.path.as_deref();
    store.restore(workspace, &ask.chat_id, &ask.call_id, only, ask.force)
}
