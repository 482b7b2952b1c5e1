//! Tool calls: workspace tools through `palaver serve` (`run_command` and the MCP
//! servers' tools streamed as NDJSON, their output lines and progress as `tool_progress`), and host
//! tools the page registered, answered with `ide_tool_result`. An MCP tool's images come back as
//! image parts of the result.

use super::browser::*;
use super::shared::*;
use crate::engine::Input;
use js_sys::Promise;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};
use web_sys::{AbortController, Headers, RequestInit, Response};

/// A workspace tool through `palaver serve`: `POST {proxy}/api/tools/{name}` with the bearer token.
/// `run_command` asks for NDJSON, so its output lines reach the page while it runs.
pub(super) fn run_tool(
    shared: &Handle,
    chat_id: String,
    tool_call_id: String,
    name: String,
    args: Value,
) {
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
            chat: Some((&chat_id, &tool_call_id)),
        };
        let streamed = name == "run_command" || name.starts_with(crate::tools::MCP_PREFIX);
        let outcome = if streamed {
            call_proxy_streaming(&shared, &chat_id, &tool_call_id, &call).await
        } else {
            call_proxy(&call).await
        };
        shared.borrow_mut().tools.remove(&tool_call_id);
        if controller.signal().aborted() {
            return;
        }
        let reply = outcome.unwrap_or_else(|e| {
            ToolReply::failed(&format!("palaver serve could not be reached: {e}"))
        });
        tool_result(&shared, chat_id, tool_call_id, reply);
    });
}

impl ToolReply {
    fn failed(message: &str) -> Self {
        ToolReply {
            content: message.to_string(),
            failed: true,
            data: None,
            parts: Vec::new(),
        }
    }

    /// From `palaver serve`'s JSON reply (`{content, is_error, data?, error?}`).
    fn from_json(reply: &Value, http_ok: bool) -> Self {
        let content = reply
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| {
                // A refusal: `{error: {kind, message}}` — its sentence.
                let error = reply.get("error")?;
                let message = error.get("message").and_then(Value::as_str);
                Some(message.map_or_else(|| error.to_string(), str::to_string))
            })
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
            parts: reply
                .get("parts")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        }
    }
}

/// What a tool answered: its text for the model, whether it failed, its `data`, and image parts.
pub(super) struct ToolReply {
    content: String,
    failed: bool,
    data: Option<Value>,
    parts: Vec<Value>,
}

pub(super) struct ProxyCall<'a> {
    url: &'a str,
    token: &'a str,
    name: &'a str,
    args: &'a Value,
    controller: &'a AbortController,
    /// The chat and the tool call it is for: `palaver serve` records a write's earlier content
    /// under them (issue 39).
    chat: Option<(&'a str, &'a str)>,
}

pub(super) async fn proxy_response(call: &ProxyCall<'_>, accept: &str) -> Result<Response, String> {
    let headers = Headers::new().map_err(describe)?;
    let _ = headers.set("content-type", "application/json");
    let _ = headers.set("accept", accept);
    let _ = headers.set("authorization", &format!("Bearer {}", call.token));
    if let Some((chat, tool_call)) = call.chat {
        let _ = headers.set("x-palaver-chat", chat);
        let _ = headers.set("x-palaver-call", tool_call);
    }
    let init = RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(&JsValue::from_str(&call.args.to_string()));
    init.set_signal(Some(&call.controller.signal()));
    let window = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .map_err(|_| "no window".to_string())?;
    JsFuture::from(
        window.fetch_with_str_and_init(&format!("{}/api/tools/{}", call.url, call.name), &init),
    )
    .await
    .map_err(describe)?
    .dyn_into()
    .map_err(describe)
}

pub(super) async fn call_proxy(call: &ProxyCall<'_>) -> Result<ToolReply, String> {
    let response = proxy_response(call, "application/json").await?;
    let text = JsFuture::from(response.text().map_err(describe)?)
        .await
        .map_err(describe)
        .map(|t| super::text_of(&t).unwrap_or_default())?;
    let reply: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"content": text, "is_error": true}));
    Ok(ToolReply::from_json(&reply, response.ok()))
}

/// A streamed tool as NDJSON: each `line` becomes a `tool_progress` input while it runs; the final
/// `result` line is the tool's reply. `run_command`'s output lines are its result too (the result
/// line carries the exit status); an MCP tool's `progress` lines are only shown.
pub(super) async fn call_proxy_streaming(
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
    let reader = reader_of(&body)?;
    let mut pending = Vec::new();
    let mut output = String::new();
    let mut result = None;
    while let Some(bytes) = next_chunk(&reader).await? {
        pending.extend(bytes);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            match event.get("type").and_then(Value::as_str) {
                Some("line") => {
                    let stream = event["stream"].as_str().unwrap_or("stdout").to_string();
                    let text = event["text"].as_str().unwrap_or("").to_string();
                    if stream != "progress" {
                        if stream == "stderr" {
                            output.push_str("[stderr] ");
                        }
                        output.push_str(&text);
                        output.push('\n');
                    }
                    feed(
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
            "The tool's stream ended without a result (the server stopped?).\n{output}"
        )));
    };
    let mut reply = ToolReply::from_json(&result, true);
    if call.name == "run_command" {
        // The result line carries the exit status; the model needs the output too.
        reply.content = format!("{output}[{}]", reply.content);
    }
    Ok(reply)
}

pub(super) fn tool_result(
    shared: &Handle,
    chat_id: String,
    tool_call_id: String,
    reply: ToolReply,
) {
    feed(
        shared,
        Input::ToolResult {
            chat_id,
            tool_call_id,
            content: reply.content,
            tool_failed: reply.failed,
            data: reply.data,
            session_metadata: None,
            parts: reply.parts,
        },
    );
}

/// A host tool registered from JS answers with `ide_tool_result`.
pub(super) fn run_host_tool(
    shared: &Handle,
    chat_id: &str,
    tool_call_id: &str,
    name: &str,
    args: &Value,
) {
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
        feed(&shared, Input::Command { chat_id, command });
    });
}
