//! Sync's HTTP: the database's URL (checked: http(s), no credentials in it), this device's id,
//! Basic credentials, and one request with its JSON answer (a `longpoll` aborted by a local change).

use super::*;

pub(super) fn database_url(config: &SyncConfig) -> Result<String, JsValue> {
    let base = config.url.trim().trim_end_matches('/');
    let parsed =
        web_sys::Url::new(base).map_err(|_| error("BadSyncUrl", &format!("not a URL: {base}")))?;
    if !matches!(parsed.protocol().as_str(), "http:" | "https:") {
        return Err(error(
            "BadSyncUrl",
            "the sync URL must be http:// or https://",
        ));
    }
    let name = config.database.trim();
    // CouchDB's rule for database names.
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_$()+-/".contains(c));
    if !valid {
        return Err(error(
            "BadSyncDatabase",
            "a CouchDB database name starts with a lowercase letter and holds only a-z, 0-9 and _$()+-/",
        ));
    }
    Ok(format!("{base}/{}/", crate::replication::encode(name)))
}

pub(super) fn device_id() -> String {
    const KEY: &str = "palaver.device";
    if let Some(id) = local_storage_get(KEY) {
        return id;
    }
    let id = format!(
        "{:016x}{:016x}",
        (js_sys::Math::random() * 2f64.powi(53)) as u64,
        now()
    );
    local_storage_set(KEY, &id);
    id
}

pub(super) fn basic_auth(user: &str, password: &str) -> String {
    // `btoa` takes one byte per character: the UTF-8 bytes, each as a char.
    let binary: String = format!("{user}:{password}")
        .bytes()
        .map(char::from)
        .collect();
    let encoded = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .and_then(|w| w.btoa(&binary).ok())
        .unwrap_or_default();
    format!("Basic {encoded}")
}

pub(super) async fn http(
    shared: &Handle,
    request: crate::replication::HttpRequest,
) -> Result<(u16, Value), String> {
    let (url, auth, controller) = {
        let mut s = shared.borrow_mut();
        let state = s.sync.state.as_mut().ok_or("sync is off")?;
        let controller = AbortController::new().map_err(describe)?;
        state.aborts.insert(request.id, controller.clone());
        (
            format!("{}{}", state.db_url, request.path),
            state.auth.clone(),
            controller,
        )
    };
    let headers = web_sys::Headers::new().map_err(describe)?;
    let _ = headers.set("accept", "application/json");
    if let Some(auth) = &auth {
        let _ = headers.set("authorization", auth);
    }
    let init = web_sys::RequestInit::new();
    init.set_method(match request.method {
        crate::replication::Method::Get => "GET",
        crate::replication::Method::Put => "PUT",
        crate::replication::Method::Post => "POST",
    });
    init.set_credentials(web_sys::RequestCredentials::Omit);
    init.set_signal(Some(&controller.signal()));
    if let Some(body) = &request.body {
        let _ = headers.set("content-type", "application/json");
        init.set_body(&JsValue::from_str(&body.to_string()));
    }
    init.set_headers(&headers);
    let window = js_sys::global()
        .dyn_into::<web_sys::Window>()
        .map_err(|_| "no window".to_string())?;
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str_and_init(&url, &init))
        .await
        .map_err(|e| format!("the sync server cannot be reached ({})", describe(e)))?
        .dyn_into()
        .map_err(describe)?;
    let status = response.status();
    let text = match response.text() {
        Ok(promise) => JsFuture::from(promise)
            .await
            .map(|t| crate::web::text_of(&t).unwrap_or_default())
            .map_err(|e| format!("the sync server's reply broke off ({})", describe(e)))?,
        Err(e) => return Err(describe(e)),
    };
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}
