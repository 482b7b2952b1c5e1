//! The routes of the user's MCP servers: a tool call streamed as NDJSON (progress, then the
//! result; dropped when the page goes away, which cancels it), status and its event stream,
//! resources and prompts.

use super::*;

/// An MCP tool call as NDJSON: its progress notifications as `line`s (stream `progress`), then
/// the `result`. When the page goes away the call is dropped, which cancels it at the server.
pub(super) fn stream_mcp(
    api: Arc<Api>,
    name: String,
    args: serde_json::Value,
    scanning: Option<Scanning>,
) -> Response {
    let (lines, receiver) = tokio::sync::mpsc::channel::<String>(64);
    let receiver = recorded_lines(api.clone(), scanning, receiver);
    tokio::spawn(async move {
        let (progress, mut updates) = tokio::sync::mpsc::channel::<String>(64);
        let call = api.mcp.call(&name, args, Some(progress));
        tokio::pin!(call);
        let progress_line = |text: String| {
            let line = serde_json::json!({"type": "line", "stream": "progress", "text": text});
            format!("{line}\n")
        };
        loop {
            tokio::select! {
                biased;
                Some(text) = updates.recv() => {
                    if lines.send(progress_line(text)).await.is_err() {
                        break;
                    }
                }
                reply = &mut call => {
                    // Progress that came just before the answer goes first.
                    while let Ok(text) = updates.try_recv() {
                        let _ = lines.send(progress_line(text)).await;
                    }
                    let mut body = reply.body();
                    body["type"] = serde_json::json!("result");
                    let _ = lines.send(format!("{body}\n")).await;
                    break;
                }
                () = lines.closed() => break,
            }
        }
    });
    ndjson(receiver)
}

/// `GET /api/mcp`: each MCP server's state, error, stderr tail, tools and protocol version.
pub(super) async fn mcp_status(State(api): State<Arc<Api>>) -> Json<serde_json::Value> {
    Json(api.mcp.status())
}

/// `GET /api/mcp/events`: NDJSON, one line per change (`status`, `tools_changed`, …) with the
/// tools' version, so the page asks `/api/tools` again when an MCP server's tools change.
pub(super) async fn mcp_events(State(api): State<Arc<Api>>) -> Response {
    let (lines, receiver) = tokio::sync::mpsc::channel::<String>(16);
    let mut events = api.mcp.subscribe();
    tokio::spawn(async move {
        let hello = serde_json::json!({"type": "hello", "tools_version": api.mcp.tools_version()});
        if lines.send(format!("{hello}\n")).await.is_err() {
            return;
        }
        loop {
            let line = tokio::select! {
                event = events.recv() => match event {
                    Ok(event) => serde_json::json!({"type": event.name(), "tools_version": api.mcp.tools_version()}),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => serde_json::json!({"type": "status", "tools_version": api.mcp.tools_version()}),
                    Err(_) => break,
                },
                () = tokio::time::sleep(Duration::from_secs(15)) => serde_json::json!({"type": "ping"}),
                () = lines.closed() => break,
            };
            if lines.send(format!("{line}\n")).await.is_err() {
                break;
            }
        }
    });
    let mut response = ndjson(receiver);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

pub(super) async fn mcp_resources(State(api): State<Arc<Api>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({"resources": api.mcp.resources().await}))
}

pub(super) async fn mcp_prompts(State(api): State<Arc<Api>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({"prompts": api.mcp.prompts().await}))
}

pub(super) fn str_field<'a>(value: &'a serde_json::Value, key: &str) -> Result<&'a str, Response> {
    value.get(key).and_then(|v| v.as_str()).ok_or_else(|| {
        json_error(
            StatusCode::BAD_REQUEST,
            "invalid_arguments",
            &format!("`{key}` (a string) is required"),
        )
    })
}

pub(super) fn mcp_answer(answer: Result<serde_json::Value, (u16, String)>) -> Response {
    match answer {
        Ok(value) => Json(value).into_response(),
        Err((status, message)) => json_error(
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            "mcp_error",
            &message,
        ),
    }
}

/// `POST /api/mcp/resources/read {server, uri}`: the resource's text, to attach to a message.
pub(super) async fn mcp_read_resource(State(api): State<Arc<Api>>, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            "the body is not JSON",
        );
    };
    let (server, uri) = match (str_field(&request, "server"), str_field(&request, "uri")) {
        (Ok(server), Ok(uri)) => (server, uri),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    mcp_answer(api.mcp.read_resource(server, uri).await)
}

/// `POST /api/mcp/prompts/get {server, name, arguments}`: the prompt's messages as text.
pub(super) async fn mcp_get_prompt(State(api): State<Arc<Api>>, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            "the body is not JSON",
        );
    };
    let (server, name) = match (str_field(&request, "server"), str_field(&request, "name")) {
        (Ok(server), Ok(name)) => (server, name),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let arguments = request
        .get("arguments")
        .and_then(|a| a.as_object())
        .cloned()
        .unwrap_or_default();
    mcp_answer(api.mcp.get_prompt(server, name, arguments).await)
}
