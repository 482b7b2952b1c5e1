//! The workspace copy's requests to `palaver serve`: with the pairing token, the workspace's
//! chats listed and one read, a copy's hash from `HEAD`, and a refusal's body as one sentence.

use super::*;

/// `GET /api/chats` as the server answers it (`{enabled, chats, skipped}`).
pub(in crate::web) async fn list(shared: &Handle) -> Result<Value, String> {
    let Some((url, token)) = shared.borrow().proxy.clone() else {
        return Err("not paired with palaver serve".into());
    };
    let response = fetch(&url, &token, "GET", "/api/chats", &[], None).await?;
    let status = response.status();
    let body = body_text(&response).await;
    if status != 200 {
        return Err(error_message(status, &body));
    }
    serde_json::from_str(&body).map_err(|e| e.to_string())
}

/// A workspace copy's text and hash.
pub(in crate::web) async fn read(
    shared: &Handle,
    chat_id: &str,
) -> Result<(String, String), String> {
    let Some((url, token)) = shared.borrow().proxy.clone() else {
        return Err("not paired with palaver serve".into());
    };
    let response = fetch(
        &url,
        &token,
        "GET",
        &format!("/api/chats/{chat_id}"),
        &[],
        None,
    )
    .await?;
    let status = response.status();
    let hash = response
        .headers()
        .get("x-palaver-hash")
        .ok()
        .flatten()
        .unwrap_or_default();
    let body = body_text(&response).await;
    if status != 200 {
        return Err(error_message(status, &body));
    }
    Ok((body, hash))
}

pub(super) async fn head_hash(
    url: &str,
    token: &str,
    chat_id: &str,
) -> Result<Option<String>, String> {
    let response = fetch(
        url,
        token,
        "GET",
        &format!("/api/chats/{chat_id}"),
        &[],
        None,
    )
    .await?;
    match response.status() {
        200 => Ok(response.headers().get("x-palaver-hash").ok().flatten()),
        404 => Ok(None),
        status => Err(error_message(status, &body_text(&response).await)),
    }
}

pub(super) async fn request(
    url: &str,
    token: &str,
    method: &str,
    chat_id: &str,
    headers: &[(&str, String)],
    body: Option<&JsValue>,
) -> Result<(u16, String), String> {
    let path = format!("/api/chats/{chat_id}");
    let response = fetch(url, token, method, &path, headers, body).await?;
    let status = response.status();
    Ok((status, body_text(&response).await))
}

pub(super) async fn fetch(
    url: &str,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Option<&JsValue>,
) -> Result<web_sys::Response, String> {
    let all = web_sys::Headers::new().map_err(describe)?;
    let _ = all.set("authorization", &format!("Bearer {token}"));
    for (name, value) in headers {
        let _ = all.set(name, value);
    }
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    init.set_headers(&all);
    if let Some(body) = body {
        init.set_body(body);
    }
    let window = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .map_err(|_| "no window".to_string())?;
    JsFuture::from(window.fetch_with_str_and_init(&format!("{url}{path}"), &init))
        .await
        .map_err(|e| format!("palaver serve cannot be reached: {}", describe(e)))?
        .dyn_into()
        .map_err(describe)
}

pub(super) async fn body_text(response: &web_sys::Response) -> String {
    match response.text() {
        Ok(promise) => JsFuture::from(promise)
            .await
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default(),
        Err(_) => String::new(),
    }
}

pub(super) fn error_message(status: u16, body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(String::from))
        .unwrap_or_else(|| format!("palaver serve answered {status}"))
}
