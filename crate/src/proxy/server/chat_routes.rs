//! The routes of the workspace's chat files (`chat_files`): list, read, write and delete, each
//! run off the async threads, a workspace copy error answered as JSON.

use super::*;

pub(super) fn copy_error(e: CopyError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_error(status, e.code(), &e.to_string())
}

/// Runs a workspace copy operation off the async workers (it does file IO).
pub(super) async fn on_copy<T: Send + 'static>(
    api: &Arc<Api>,
    work: impl FnOnce(&ChatFiles) -> Result<T, CopyError> + Send + 'static,
) -> Result<T, Response> {
    let chats = api.chats.clone();
    match tokio::task::spawn_blocking(move || work(&chats)).await {
        Ok(result) => result.map_err(copy_error),
        Err(e) => Err(copy_error(CopyError::Io(e.to_string()))),
    }
}

/// `GET /api/chats`: `{enabled, chats: [{id, bytes, modified_ms}], skipped}`.
pub(super) async fn list_chats(State(api): State<Arc<Api>>) -> Response {
    match on_copy(&api, |chats| chats.list()).await {
        Ok(listing) => Json(listing).into_response(),
        Err(response) => response,
    }
}

pub(super) async fn read_chat(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    match on_copy(&api, move |chats| chats.read(&id)).await {
        Ok((bytes, hash)) => (
            [
                (header::CONTENT_TYPE, "application/json".to_string()),
                (header::HeaderName::from_static("x-palaver-hash"), hash),
            ],
            bytes,
        )
            .into_response(),
        Err(response) => response,
    }
}

/// `PUT /api/chats/{id}`: `If-Match: <hash>` (replace the copy last written by this browser),
/// `If-None-Match: *` (only if there is none), or neither (replace whatever is there). Answers
/// `{hash}`; 412 `conflict` when the copy is not the one expected.
pub(super) async fn write_chat(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().trim_matches('"').to_string())
    };
    let expect = match (header(header::IF_MATCH), header(header::IF_NONE_MATCH)) {
        (Some(hash), _) => chat_files::Precondition::Hash(hash),
        (None, Some(star)) if star == "*" => chat_files::Precondition::Absent,
        _ => chat_files::Precondition::Any,
    };
    match on_copy(&api, move |chats| chats.write(&id, &body, &expect)).await {
        Ok(hash) => Json(serde_json::json!({ "hash": hash })).into_response(),
        Err(response) => response,
    }
}

pub(super) async fn delete_chat(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    match on_copy(&api, move |chats| chats.remove(&id)).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(response) => response,
    }
}
