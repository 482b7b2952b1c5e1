//! The wasm facade, from inside Chromium: the JS class creates an engine, takes inputs as plain
//! objects, hands back steps and snapshots, and throws named errors for malformed values.

use palaver::web::WasmEngine;
use serde_json::{json, Value};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

fn js(value: Value) -> JsValue {
    use serde::Serialize;
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .unwrap_or(JsValue::NULL)
}

fn rust(value: JsValue) -> Value {
    serde_wasm_bindgen::from_value(value).unwrap_or(Value::Null)
}

#[wasm_bindgen_test]
fn a_turn_through_the_js_class() {
    let config = js(
        json!({"providers": [{"kind": "openai-chat", "base_url": "http://127.0.0.1:1/v1", "model": "m"}]}),
    );
    let mut engine = WasmEngine::new(config).unwrap_or_else(|_| panic!("engine"));
    let step = rust(
        engine
            .handle(1.0, js(json!({"input": "open_chat", "chat_id": "c"})))
            .unwrap_or(JsValue::NULL),
    );
    assert_eq!(step["events"][0]["type"], "runtime_updated");
    let command = json!({"input": "command", "chat_id": "c", "command": {"type": "user_message", "content": "hi", "client_request_id": "1"}});
    let step = rust(engine.handle(2.0, js(command)).unwrap_or(JsValue::NULL));
    let request = step["effects"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["effect"] == "start_request"))
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        request["request"]["url"],
        "http://127.0.0.1:1/v1/chat/completions"
    );
    let request_id = request["request_id"].as_str().unwrap_or("").to_string();
    let sse = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let step = rust(
        engine
            .stream_bytes(3.0, request_id.clone(), sse)
            .unwrap_or(JsValue::NULL),
    );
    assert_eq!(step["events"][0]["type"], "stream_delta");
    engine
        .handle(
            4.0,
            js(json!({"input": "stream_end", "request_id": request_id})),
        )
        .unwrap_or(JsValue::NULL);
    let snapshot = rust(engine.snapshot("c").unwrap_or(JsValue::NULL));
    assert_eq!(snapshot["messages"][1]["content"], "hello");
    assert_eq!(snapshot["runtime"]["state"], "idle");
    assert!(engine
        .snapshot("nope")
        .map(|v| v.is_undefined())
        .unwrap_or(false));
    assert_eq!(WasmEngine::version(), env!("CARGO_PKG_VERSION"));
}

#[wasm_bindgen_test]
fn malformed_values_throw_named_errors() {
    let error = WasmEngine::new(js(json!({"stall_timeout_ms": "soon"})))
        .err()
        .unwrap_or(JsValue::NULL);
    assert_eq!(
        js_sys::Reflect::get(&error, &"name".into())
            .ok()
            .and_then(|n| n.as_string())
            .as_deref(),
        Some("BadConfig")
    );
    let mut engine = WasmEngine::new(JsValue::UNDEFINED).unwrap_or_else(|_| panic!("engine"));
    let error = engine
        .handle(0.0, js(json!({"input": "teleport"})))
        .err()
        .unwrap_or(JsValue::NULL);
    assert_eq!(
        js_sys::Reflect::get(&error, &"name".into())
            .ok()
            .and_then(|n| n.as_string())
            .as_deref(),
        Some("BadInput")
    );
}
