//! Small browser helpers every part of the host uses: the clock, `localStorage`, timers, response
//! bodies and headers, URL origins, values to and from JS. A leaf: it knows nothing of the engine.

use litemap::LiteMap;
use serde::Serialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::Response;

/// The origin of `url` as the browser states it (`scheme://host:port`); `None` when it is not a URL.
pub(super) fn origin_of(url: &str) -> Option<String> {
    web_sys::Url::new(url)
        .ok()
        .map(|u| u.origin())
        .filter(|o| o != "null")
}

pub(super) fn now() -> u64 {
    js_sys::Date::now() as u64
}

pub(super) fn to_js<T: Serialize>(value: &T) -> JsValue {
    super::to_js(value).unwrap_or(JsValue::UNDEFINED)
}

pub(super) use super::from_js;

pub(super) fn error(name: &str, message: &str) -> JsValue {
    super::js_error(name, message)
}

pub(super) fn describe(error: JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| "network error".into())
}

pub(super) fn headers_of(response: &Response) -> LiteMap<String, String> {
    ["retry-after", "retry-after-ms", "x-should-retry"]
        .iter()
        .filter_map(|name| {
            let value = response.headers().get(name).ok().flatten()?;
            Some((name.to_string(), value))
        })
        .collect()
}

pub(super) async fn sleep_ms(ms: u32) {
    gloo_timers::future::TimeoutFuture::new(ms).await;
}

/// `localStorage[key]`: only the small data-existed marker of B18 lives there, never chat data.
pub(super) fn local_storage_get(key: &str) -> Option<String> {
    let window = js_sys::global().dyn_into::<web_sys::Window>().ok()?;
    window
        .local_storage()
        .ok()
        .flatten()?
        .get_item(key)
        .ok()
        .flatten()
}

pub(super) fn local_storage_set(key: &str, value: &str) -> bool {
    js_sys::global()
        .dyn_into::<web_sys::Window>()
        .ok()
        .and_then(|w| w.local_storage().ok().flatten())
        .is_some_and(|storage| storage.set_item(key, value).is_ok())
}

/// A response body's reader.
pub(super) fn reader_of(
    body: &web_sys::ReadableStream,
) -> Result<web_sys::ReadableStreamDefaultReader, String> {
    body.get_reader().dyn_into().map_err(|e| describe(e.into()))
}

/// The next chunk of a body as it arrives; `None` at its end.
pub(super) async fn next_chunk(
    reader: &web_sys::ReadableStreamDefaultReader,
) -> Result<Option<Vec<u8>>, String> {
    let chunk = JsFuture::from(reader.read()).await.map_err(describe)?;
    let done = js_sys::Reflect::get(&chunk, &"done".into())
        .ok()
        .and_then(|d| d.as_bool())
        .unwrap_or(true);
    if done {
        return Ok(None);
    }
    let value = js_sys::Reflect::get(&chunk, &"value".into()).unwrap_or(JsValue::UNDEFINED);
    Ok(Some(js_sys::Uint8Array::new(&value).to_vec()))
}
