//! Provider requests as fetch streams: the auth header (never in the URL), the body as built by the
//! engine, the response's bytes fed to the engine chunk by chunk, failures typed with the provider's
//! error type, message and stated context window; the last request kept for "what the model sees".

use super::browser::*;
use super::shared::*;
use crate::engine::{Bytes, Input};
use crate::provider::ProviderKind;
use crate::request::ProviderRequest;

use litemap::LiteMap;
use serde_json::Value;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};
use web_sys::{AbortController, Headers, RequestInit, Response};

/// Keeps the request as it goes out, for the "what the model sees" view: the URL, the headers
/// with the auth header's value replaced (the key never enters this record), and the body.
pub(super) fn remember_request(
    shared: &Handle,
    chat_id: &str,
    request: &ProviderRequest,
    body: wasm_bindgen::JsValue,
) {
    let mut headers = request.headers.clone();
    headers.insert("content-type".into(), "application/json".into());
    let kind = request.provider.name();
    let has_key = !shared.borrow().key_for(kind, &request.url).is_empty();
    if let Some((name, _)) = auth_header(kind, "redacted").filter(|_| has_key) {
        headers.insert(name.into(), "[redacted]".into());
    }
    // The body is kept as the text sent (not a parse): it is read only when asked for.
    let record = SentRequest {
        head: super::shared::SentHead {
            provider: kind,
            url: request.url.clone(),
            headers,
        },
        body,
    };
    shared
        .borrow_mut()
        .last_requests
        .insert(chat_id.to_string(), record);
}

/// The provider's auth header for a key: never in the URL (SECURITY C13, C15).
pub(super) fn auth_header(provider: &str, key: &str) -> Option<(&'static str, String)> {
    if key.is_empty() {
        return None;
    }
    Some(match provider {
        "anthropic" => ("x-api-key", key.to_string()),
        "gemini" => ("x-goog-api-key", key.to_string()),
        _ => ("authorization", format!("Bearer {key}")),
    })
}

/// Starts `request` (its `body` already taken out: `body` is its text, in JS).
pub(super) fn start_request(
    shared: &Handle,
    request_id: String,
    request: ProviderRequest,
    body: JsValue,
) {
    let controller = match AbortController::new() {
        Ok(c) => c,
        Err(_) => {
            return fail_request(
                shared,
                &request_id,
                None,
                "cannot create an AbortController".into(),
                Default::default(),
                None,
            )
        }
    };
    let kind = request.provider.name().to_string();
    let key = shared.borrow().key_for(&kind, &request.url);
    shared
        .borrow_mut()
        .requests
        .insert(request_id.clone(), controller.clone());
    let shared = shared.clone();
    spawn_local(async move {
        let result = fetch_stream(&shared, &request_id, &request, &body, &key, &controller).await;
        shared.borrow_mut().requests.remove(&request_id);
        if let Err(message) = result {
            if !controller.signal().aborted() {
                fail_request(
                    &shared,
                    &request_id,
                    None,
                    message,
                    Default::default(),
                    None,
                );
            }
        }
    });
}

/// One provider request: headers (with the key), the JSON body, then the streamed response fed
/// to the engine chunk by chunk. `Err` is a network failure.
pub(super) async fn fetch_stream(
    shared: &Handle,
    request_id: &str,
    request: &ProviderRequest,
    body: &JsValue,
    key: &str,
    controller: &AbortController,
) -> Result<(), String> {
    let headers = Headers::new().map_err(|e| format!("{e:?}"))?;
    let _ = headers.set("content-type", "application/json");
    for (name, value) in &request.headers {
        if let Some(value) = value.as_str() {
            let _ = headers.set(name, value);
        }
    }
    if let Some((name, value)) = auth_header(request.provider.name(), key) {
        let _ = headers.set(name, &value);
    }
    let init = RequestInit::new();
    init.set_method("POST");
    init.set_headers(&headers);
    init.set_body(body);
    init.set_signal(Some(&controller.signal()));
    let response: Response = JsFuture::from(send(shared, request, &init)?)
        .await
        .map_err(describe)?
        .dyn_into()
        .map_err(describe)?;
    if !response.ok() {
        let status = response.status();
        let response_headers = headers_of(&response);
        let text = match response.text() {
            Ok(p) => JsFuture::from(p)
                .await
                .ok()
                .and_then(|t| t.as_string())
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        let (error_type, message) = provider_error(&text);
        feed(
            shared,
            Input::RequestFailed {
                request_id: request_id.into(),
                status: Some(status),
                error_type,
                message: message.unwrap_or_else(|| format!("HTTP {status}")),
                retry_after_ms: None,
                headers: response_headers,
                context_window: context_window_in(&text),
                prompt_tokens: number_in_error(&text, "n_prompt_tokens"),
            },
        );
        return Ok(());
    }
    let Some(body) = response.body() else {
        feed(
            shared,
            Input::StreamEnd {
                request_id: request_id.into(),
            },
        );
        return Ok(());
    };
    let reader = reader_of(&body)?;
    while let Some(bytes) = next_chunk(&reader).await? {
        feed(
            shared,
            Input::StreamBytes {
                request_id: request_id.into(),
                bytes: Bytes(bytes),
            },
        );
    }
    feed(
        shared,
        Input::StreamEnd {
            request_id: request_id.into(),
        },
    );
    Ok(())
}

/// The request on its way: `fetch`, or for the `local` kind the page's transport (same shape).
fn send(
    shared: &Handle,
    request: &ProviderRequest,
    init: &RequestInit,
) -> Result<js_sys::Promise, String> {
    if request.provider == ProviderKind::Local {
        let transport = shared.borrow().local_transport.clone().ok_or_else(|| {
            "no model runs in this page: choose one in Settings (kind: model in this browser)"
                .to_string()
        })?;
        let promise = transport
            .call2(&JsValue::NULL, &JsValue::from_str(&request.url), init)
            .map_err(describe)?;
        return promise.dyn_into().map_err(describe);
    }
    let window = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .map_err(|_| "no window".to_string())?;
    Ok(window.fetch_with_str_and_init(&request.url, init))
}

/// A context window an error body states: llama.cpp's `n_ctx` (in `error` or at the top).
pub(super) fn context_window_in(text: &str) -> Option<u64> {
    number_in_error(text, "n_ctx")
}

/// A number an error body states as `key`, in `error` or at the top (llama.cpp's `n_ctx`,
/// `n_prompt_tokens`).
pub(super) fn number_in_error(text: &str, key: &str) -> Option<u64> {
    let value: Value = serde_json::from_str(text).ok()?;
    let error = value.get("error").unwrap_or(&value);
    error
        .get(key)
        .or_else(|| value.get(key))
        .and_then(Value::as_u64)
}

/// `(error type, message)` from a provider's error body: `{error: {type|code|status, message}}`.
pub(super) fn provider_error(text: &str) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return (
            None,
            (!text.is_empty()).then(|| text.chars().take(500).collect()),
        );
    };
    let error = value.get("error").unwrap_or(&value);
    let kind = ["type", "code", "status"]
        .iter()
        .find_map(|k| error.get(*k).and_then(Value::as_str))
        .map(str::to_string);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string);
    (kind, message)
}

pub(super) fn fail_request(
    shared: &Handle,
    request_id: &str,
    status: Option<u16>,
    message: String,
    headers: LiteMap<String, String>,
    error_type: Option<String>,
) {
    feed(
        shared,
        Input::RequestFailed {
            request_id: request_id.into(),
            status,
            error_type,
            message,
            retry_after_ms: None,
            headers,
            context_window: None,
            prompt_tokens: None,
        },
    );
}
