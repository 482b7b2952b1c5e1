//! IndexedDB's events as futures: a request's result, a cursor's last values, a transaction's
//! commit. Each handler is set for as long as its future waits and is taken off and freed when
//! it ends, or when the future is dropped. A handler left behind keeps what it holds alive for
//! the life of the page: `once_into_js` handlers that never fired (a request's `onerror` once it
//! succeeded) held the request, so the rows of every `getAll` stayed in memory — a 5 000-message
//! chat's records, ~4 MB of strings, beside the chat itself (issue 41).

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{IdbRequest, IdbTransaction};

/// Handlers set on one IndexedDB object; `Drop` takes them off (`off`) before freeing them.
struct Handlers<'a> {
    off: Box<dyn Fn() + 'a>,
    _closures: Vec<Closure<dyn FnMut()>>,
}

impl Drop for Handlers<'_> {
    fn drop(&mut self) {
        (self.off)();
    }
}

/// Waits for the first of `count` events; `set(i, handler)` sets (or, `None`, takes off) the
/// handler of event `i`. Returns which fired.
async fn first_of(count: usize, set: impl Fn(usize, Option<&Function>)) -> usize {
    let mut settle = None;
    let promise = Promise::new(&mut |resolve: Function, _| settle = Some(resolve));
    let closures: Vec<Closure<dyn FnMut()>> = (0..count)
        .map(|i| {
            let resolve = settle.clone();
            Closure::<dyn FnMut()>::new(move || {
                if let Some(resolve) = &resolve {
                    let _ = resolve.call1(&JsValue::NULL, &JsValue::from(i as u32));
                }
            })
        })
        .collect();
    for (i, closure) in closures.iter().enumerate() {
        set(i, Some(closure.as_ref().unchecked_ref()));
    }
    let set = &set;
    let _handlers = Handlers {
        off: Box::new(move || (0..count).for_each(|i| set(i, None))),
        _closures: closures,
    };
    let which = JsFuture::from(promise).await.ok().and_then(|i| i.as_f64());
    which.unwrap_or(0.0) as usize
}

/// An `IDBRequest` as a future: its result, or its error.
pub async fn request_done(request: &IdbRequest) -> Result<JsValue, JsValue> {
    let which = first_of(2, |i, handler| match i {
        0 => request.set_onsuccess(handler),
        _ => request.set_onerror(handler),
    })
    .await;
    match which {
        0 => Ok(request.result().unwrap_or(JsValue::UNDEFINED)),
        _ => Err(request_error(request, "IndexedDB request failed")),
    }
}

fn request_error(request: &IdbRequest, otherwise: &str) -> JsValue {
    request
        .error()
        .ok()
        .flatten()
        .map(JsValue::from)
        .unwrap_or_else(|| JsValue::from_str(otherwise))
}

/// The last `count` values of `index` within `range`, in index order (a cursor walking back
/// from the end: the newest records, without reading the others).
pub async fn last_values(
    index: &web_sys::IdbIndex,
    range: &JsValue,
    count: usize,
) -> Result<Vec<JsValue>, JsValue> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let request =
        index.open_cursor_with_range_and_direction(range, web_sys::IdbCursorDirection::Prev)?;
    let mut values = Vec::new();
    loop {
        // Each row is one success event; the next is asked for only after this one is read.
        let cursor = request_done(&request).await?;
        if cursor.is_null() || cursor.is_undefined() {
            break;
        }
        let cursor: web_sys::IdbCursorWithValue = cursor.dyn_into()?;
        values.push(cursor.value()?);
        if values.len() >= count {
            break;
        }
        cursor.continue_()?;
    }
    values.reverse();
    Ok(values)
}

/// A transaction as a future: `Ok` once committed, `Err` when it errors or aborts (a quota
/// error shows up here).
pub async fn transaction_done(tx: &IdbTransaction) -> Result<(), JsValue> {
    let which = first_of(3, |i, handler| match i {
        0 => tx.set_oncomplete(handler),
        1 => tx.set_onerror(handler),
        _ => tx.set_onabort(handler),
    })
    .await;
    let error = || tx.error().map(JsValue::from);
    match which {
        0 => Ok(()),
        1 => Err(error().unwrap_or_else(|| "transaction failed".into())),
        _ => Err(error().unwrap_or_else(|| "transaction aborted".into())),
    }
}
