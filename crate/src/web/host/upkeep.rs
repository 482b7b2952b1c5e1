//! `Palaver`'s sync and storage: the replication started, watched and restarted; how the
//! browser keeps our storage; what was written (for the bench page); flush before a close.

use super::*;

#[wasm_bindgen(js_class = Palaver)]
impl Host {
    /// Sync through a CouchDB database (issue 21): `{url, database, username, password}` starts
    /// (or restarts) the replication, `null` stops it. Rejects a malformed URL or database name.
    #[wasm_bindgen(js_name = setSync, unchecked_return_type = "Promise<void>")]
    pub fn set_sync(&self, config: JsValue) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let config = if config.is_null() || config.is_undefined() {
                None
            } else {
                Some(from_js::<sync::SyncConfig>(&config).map_err(|e| error("BadSyncConfig", &e))?)
            };
            sync::configure(&shared, config).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// The replication's status: `{state, error?, retry_at?, pushed, pulled, synced_at?}`.
    #[wasm_bindgen(js_name = syncStatus, unchecked_return_type = "SyncStatus")]
    pub fn sync_status(&self) -> JsValue {
        to_js(&sync::status(&self.shared))
    }

    /// `callback({type: "status", status})` on each status change, and
    /// `callback({type: "changed", chats, deleted})` when pulled changes reached this browser.
    #[wasm_bindgen(js_name = onSync)]
    pub fn on_sync(&self, callback: Option<Function>) {
        self.shared.borrow_mut().sync.listener = callback;
    }

    /// Starts the replication again now (after a stop, or to skip a backoff).
    #[wasm_bindgen(js_name = syncNow)]
    pub fn sync_now(&self) {
        sync::restart(&self.shared);
    }

    /// `{persisted, usage, quota, near_quota, data_lost, tabs_note}`: whether the browser keeps
    /// our storage, how full it is (warning at 80%), and whether data was lost since last time.
    #[wasm_bindgen(js_name = storageStatus, unchecked_return_type = "Promise<StorageStatus>")]
    pub fn storage_status(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            let storage = js_sys::global()
                .dyn_into::<web_sys::Window>()
                .ok()
                .map(|w| w.navigator().storage());
            let mut persisted = Value::Null;
            let mut usage = Value::Null;
            let mut quota = Value::Null;
            if let Some(storage) = storage {
                if let Ok(p) = storage.persisted() {
                    persisted = JsFuture::from(p)
                        .await
                        .ok()
                        .and_then(|v| v.as_bool())
                        .map_or(Value::Null, Value::Bool);
                }
                if let Ok(p) = storage.estimate() {
                    if let Ok(estimate) = JsFuture::from(p).await {
                        usage = idb::from_js(&estimate)
                            .map(|e| e["usage"].clone())
                            .unwrap_or(Value::Null);
                        quota = idb::from_js(&estimate)
                            .map(|e| e["quota"].clone())
                            .unwrap_or(Value::Null);
                    }
                }
            }
            let near_quota = match (usage.as_f64(), quota.as_f64()) {
                (Some(u), Some(q)) if q > 0.0 => u >= 0.8 * q,
                _ => false,
            };
            let s = shared.borrow();
            Ok(to_js(
                &json!({"persisted": persisted, "usage": usage, "quota": quota, "near_quota": near_quota, "data_lost": s.data_lost, "tabs_note": s.tabs_note}),
            ))
        })
    }

    /// IndexedDB records written so far (each save writes its chat record and changed messages).
    #[wasm_bindgen(js_name = recordsWritten)]
    pub fn records_written(&self) -> f64 {
        self.shared.borrow().records_written as f64
    }

    /// Bytes of JSON written to IndexedDB so far (the bench page's bytes per turn).
    #[wasm_bindgen(js_name = bytesWritten)]
    pub fn bytes_written(&self) -> f64 {
        self.shared.borrow().bytes_written as f64
    }

    /// Tests: make the next saves fail with `reason` (e.g. a quota error); `undefined` heals.
    #[wasm_bindgen(js_name = simulateSaveFailure)]
    pub fn simulate_save_failure(&self, reason: Option<String>) {
        self.shared.borrow_mut().fail_saves = reason;
    }

    /// Resolves when every save started so far is acknowledged by IndexedDB (or has failed).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn flush(&self) -> Promise {
        let shared = self.shared.clone();
        future_to_promise(async move {
            wait_for_saves(&shared, None).await;
            Ok(JsValue::UNDEFINED)
        })
    }
}
