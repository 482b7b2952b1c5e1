//! Issue 35, step by step with a 4 096-token window (as llama.cpp's server runs SmolLM2): every
//! request carries the answer's limit and keeps exactly that free; a refusal's window is learned
//! exactly (again and again), and what the server counted scales the estimate; a message that
//! cannot fit is refused in the app's own words; what the history limit leaves out is shown;
//! images are counted by each provider's rule and never sent to a text-only model; a plain chat
//! gets a short prompt and no tools. Runs natively and in headless Chromium.

use crate::support::harness::{openai_reply, Harness};
use palaver::engine::{Effect, Input, Step};
use palaver::images::{data_url_dimensions, image_tokens, ImageRule};
use serde_json::{json, Value};

fn harness(provider: Value) -> Harness {
    let mut h = Harness::with_config_patch(&json!({
        "system_prompt": "You are Palaver.",
        "providers": [provider],
        "workspace_tools": [{"name": "read_file", "description": "Read a file.", "parameters": {"type": "object"}}],
        "compact_at": null,
    }));
    h.open("c1", None);
    h
}

fn llama(extra: Value) -> Value {
    let mut provider =
        json!({"kind": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "smollm2"});
    if let (Value::Object(p), Value::Object(e)) = (&mut provider, extra) {
        p.extend(e);
    }
    provider
}

fn body(step: &Step) -> Option<Value> {
    step.effects.iter().find_map(|e| match e {
        Effect::StartRequest { request, .. } => Some(request.body_json()),
        _ => None,
    })
}

fn runtime(h: &Harness) -> Value {
    serde_json::to_value(h.engine.snapshot("c1")).unwrap_or_default()["runtime"].clone()
}

fn messages(h: &Harness) -> Vec<Value> {
    serde_json::to_value(h.engine.snapshot("c1")).unwrap_or_default()["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn say(h: &mut Harness, text: &str) -> Step {
    let id = format!("u{}", messages(h).len());
    h.command(
        "c1",
        json!({"type": "user_message", "client_request_id": id, "content": text}),
    )
}

fn answer(h: &mut Harness, text: &str) {
    // No prompt count: the estimate is the chat's own, not anchored to a made-up usage.
    h.stream(openai_reply(&json!({"text": text, "usage": {"completion_tokens": 5}})).as_bytes());
    h.stream_end();
}

/// llama.cpp's refusal of a prompt over its window, with the window and the prompt it counted.
fn overflow(h: &mut Harness, n_ctx: u64, counted: u64) -> Step {
    let request_id = h.request_id();
    h.handle(Input::RequestFailed {
        request_id,
        status: Some(400),
        error_type: Some("exceed_context_size_error".into()),
        message: format!(
            "the request exceeds the available context size ({n_ctx} tokens), try increasing it"
        ),
        retry_after_ms: None,
        headers: Default::default(),
        context_window: Some(n_ctx),
        prompt_tokens: Some(counted),
    })
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_request_carries_the_answers_limit_and_keeps_that_free() {
    // Nothing set: a quarter of the 4 096 window.
    let mut h = harness(llama(json!({"n_ctx": 4096})));
    let sent = body(&say(&mut h, "Hello")).expect("a request");
    assert_eq!(sent["max_tokens"], 1024, "{sent}");
    assert_eq!(runtime(&h)["context_usage"]["output_tokens"], 1024);
    // The model's own limit, as the provider says (llama.cpp's n_predict), under half the window.
    let mut h = harness(llama(json!({"n_ctx": 4096, "max_output_tokens": 512})));
    assert_eq!(
        body(&say(&mut h, "Hello")).expect("a request")["max_tokens"],
        512
    );
    let mut h = harness(llama(json!({"n_ctx": 4096, "max_output_tokens": 100_000})));
    assert_eq!(
        body(&say(&mut h, "Hello")).expect("a request")["max_tokens"],
        2048
    );
    // The user's choice wins.
    let mut h = harness(llama(json!({"n_ctx": 4096, "max_tokens": 96})));
    assert_eq!(
        body(&say(&mut h, "Hello")).expect("a request")["max_tokens"],
        96
    );
    // A large window: at most 8 192 by default.
    let mut h = harness(llama(json!({"n_ctx": 200_000})));
    assert_eq!(
        body(&say(&mut h, "Hello")).expect("a request")["max_tokens"],
        8192
    );
    // The ~1 700-token message of the report fits a 4 096 window: only what is asked is held back.
    let mut h = harness(llama(json!({"n_ctx": 4096})));
    let note = "word ".repeat(1360);
    assert!(
        body(&say(&mut h, &note)).is_some(),
        "a 1 700-token message is sent whole"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_refusals_window_is_learned_exactly_every_time_and_its_count_scales_the_estimate() {
    let mut h = harness(llama(json!({"n_ctx": 32_768})));
    let long = "word ".repeat(2400); // ~3 000 tokens: over 4 096 once the answer is kept free
    say(&mut h, &long);
    let resent = body(&overflow(&mut h, 4096, 5012));
    assert_eq!(runtime(&h)["context_usage"]["n_ctx"], 4096);
    assert_eq!(runtime(&h)["context_usage"]["learned"], true);
    assert!(
        resent.is_none(),
        "the message cannot fit 4 096 with 1 024 kept free: refused, not sent"
    );
    let said = runtime(&h)["error"].clone();
    assert_eq!(said["source"], "app", "{said}");
    assert!(
        said["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("Your message is too long for this model")
            && said["message"]
                .as_str()
                .unwrap_or("")
                .contains("4,096-token window"),
        "{said}"
    );
    // A shorter message; the server refuses again with the same window: it stays 4 096 (not ¾).
    h.command("c1", json!({"type": "remove_message", "client_request_id": "rm", "message_id": messages(&h)[0]["message_id"]}));
    let mut h2 = harness(llama(json!({"n_ctx": 4096})));
    say(&mut h2, &"word ".repeat(1200));
    let resent = body(&overflow(&mut h2, 4096, 4500));
    assert_eq!(
        runtime(&h2)["context_usage"]["n_ctx"],
        4096,
        "the window is what the server says"
    );
    assert!(resent.is_some() || runtime(&h2)["state"] == "error");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn what_the_history_limit_leaves_out_is_shown_with_counts() {
    let mut h = harness(llama(json!({"n_ctx": 4096})));
    for i in 0..24 {
        say(&mut h, &format!("note {i}: {}", "pasted text ".repeat(60)));
        answer(&mut h, &format!("answer {i}"));
    }
    let markers: Vec<Value> = messages(&h)
        .into_iter()
        .filter(|m| {
            m["extra"]["event"]["subkind"] == "history_limited"
                || m["event"]["subkind"] == "history_limited"
        })
        .collect();
    let last = markers.last().cloned().unwrap_or_default();
    let text = last["content"].as_str().unwrap_or("");
    assert!(
        text.contains("left out of what the model sees"),
        "no marker: {:?}",
        markers
    );
    let dropped = serde_json::to_value(&last).unwrap_or_default().to_string();
    assert!(dropped.contains("\"dropped\""), "{dropped}");
    assert!(dropped.contains("\"dropped_count\""), "{dropped}");
}

/// In a long chat the marker names the first few messages left out and counts the rest: it is
/// stored and synced like any message, so it must not grow with the chat.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_left_out_marker_stays_small_in_a_long_chat() {
    let mut h = harness(llama(json!({"n_ctx": 4096})));
    for i in 0..150 {
        say(&mut h, &format!("note {i}: {}", "pasted text ".repeat(20)));
        answer(&mut h, &format!("answer {i}"));
    }
    let last = messages(&h)
        .into_iter()
        .rfind(|m| m.to_string().contains("history_limited"))
        .unwrap_or_default();
    let text = last.to_string();
    assert!(text.len() < 8_000, "the marker holds {} bytes", text.len());
    assert!(text.contains("dropped_count"), "{text}");
}

/// A long chat past its window is marked where the limit begins and where it has doubled or halved,
/// not at every request (it was a marker a request, each naming the same first 50 messages);
/// the gauge carries the last request's counts.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_long_chat_holds_a_handful_of_markers_and_the_gauge_says_the_counts() {
    let mut h = harness(llama(json!({"n_ctx": 4096})));
    for i in 0..150 {
        say(&mut h, &format!("note {i}: {}", "pasted text ".repeat(20)));
        answer(&mut h, &format!("answer {i}"));
    }
    let markers: Vec<Value> = messages(&h)
        .into_iter()
        .filter(|m| m.to_string().contains("history_limited"))
        .collect();
    assert!(
        (2..=10).contains(&markers.len()),
        "{} markers in 150 turns",
        markers.len()
    );
    let left_out = &runtime(&h)["context_usage"]["left_out"];
    let dropped = left_out["dropped"].as_u64().unwrap_or(0);
    let said = markers.last().map(|m| m.to_string()).unwrap_or_default();
    assert!(dropped > 100, "the gauge: {left_out}");
    assert!(
        said.contains("\"dropped_count\""),
        "the last marker: {said}"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_answer_cut_by_the_window_says_so_and_one_cut_by_its_limit_too() {
    let mut h = harness(llama(json!({"n_ctx": 4096})));
    say(&mut h, "Write a lot");
    h.stream(openai_reply(&json!({"text": "cut", "finish_reason": "length", "usage": {"prompt_tokens": 4000, "completion_tokens": 96}})).as_bytes());
    h.stream_end();
    let cut = messages(&h).last().cloned().unwrap_or_default();
    assert_eq!(cut["cut_by"], "window", "{cut}");
    let mut h = harness(llama(json!({"n_ctx": 4096, "max_tokens": 50})));
    say(&mut h, "Write a lot");
    h.stream(openai_reply(&json!({"text": "cut", "finish_reason": "length", "usage": {"prompt_tokens": 40, "completion_tokens": 50}})).as_bytes());
    h.stream_end();
    assert_eq!(
        messages(&h).last().cloned().unwrap_or_default()["cut_by"],
        "output_limit"
    );
}

/// A 1×1 PNG of `w`×`h` as its header says (the pixels are not read).
fn png(w: u32, h: u32) -> String {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    bytes.extend_from_slice(&w.to_be_bytes());
    bytes.extend_from_slice(&h.to_be_bytes());
    bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    format!("data:image/png;base64,{}", base64(&bytes))
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn images_are_counted_by_each_providers_rule() {
    assert_eq!(data_url_dimensions(&png(320, 200)), Some((320, 200)));
    assert_eq!(
        data_url_dimensions("data:image/png;base64,bm90IGFuIGltYWdl"),
        None
    );
    assert_eq!(image_tokens(ImageRule::OpenAi, 320, 200), 255);
    assert_eq!(image_tokens(ImageRule::OpenAi, 800, 600), 765);
    assert_eq!(image_tokens(ImageRule::Anthropic, 320, 200), 86);
    assert_eq!(image_tokens(ImageRule::Anthropic, 800, 600), 640);
    assert_eq!(image_tokens(ImageRule::Gemini, 320, 200), 258);
    assert_eq!(image_tokens(ImageRule::Gemini, 800, 600), 516);
    // The report's three images on a first message fit a 4 096 window.
    let mut h = harness(llama(json!({"n_ctx": 4096})));
    let parts = json!([{"type": "text", "text": "What are these?"},
        {"type": "image_url", "image_url": {"url": png(320, 200)}},
        {"type": "image_url", "image_url": {"url": png(800, 600)}},
        {"type": "image_url", "image_url": {"url": png(400, 400)}}]);
    let step = h.command(
        "c1",
        json!({"type": "user_message", "client_request_id": "u1", "content": parts}),
    );
    assert!(
        body(&step).is_some(),
        "three small images fit: {}",
        runtime(&h)
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_text_only_model_gets_no_images_and_a_refusal_of_them_is_not_retried() {
    let mut h = harness(llama(json!({"n_ctx": 4096, "input_modalities": ["text"]})));
    let parts = json!([{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": png(320, 200)}}]);
    let step = h.command(
        "c1",
        json!({"type": "user_message", "client_request_id": "u1", "content": parts}),
    );
    assert!(body(&step).is_none(), "nothing is sent");
    let error = runtime(&h)["error"].clone();
    assert_eq!(error["class"], "unsupported");
    assert_eq!(error["source"], "app");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("This model reads text only"),
        "{error}"
    );
    // Not known to be text-only: sent; the server's refusal ends the turn at once, as its words.
    let mut h = harness(llama(json!({"n_ctx": 4096})));
    h.command(
        "c1",
        json!({"type": "user_message", "client_request_id": "u1", "content": parts}),
    );
    let request_id = h.request_id();
    let step = h.handle(Input::RequestFailed {
        request_id,
        status: Some(500),
        error_type: Some("server_error".into()),
        message: "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj".into(),
        retry_after_ms: None,
        headers: Default::default(),
        context_window: None,
        prompt_tokens: None,
    });
    assert!(
        !step
            .effects
            .iter()
            .any(|e| matches!(e, Effect::WakeAt { .. } | Effect::StartRequest { .. })),
        "not retried"
    );
    let error = runtime(&h)["error"].clone();
    assert_eq!(error["class"], "unsupported", "{error}");
    assert!(
        error.get("source").is_none(),
        "the provider's words: {error}"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_plain_chat_gets_a_short_prompt_and_no_tools() {
    // A provider marked chat only.
    let mut h = harness(llama(json!({"n_ctx": 4096, "tool_use": false})));
    let sent = body(&say(&mut h, "What is the capital of France?")).expect("a request");
    assert!(sent.get("tools").is_none(), "{sent}");
    assert_eq!(
        sent["messages"][0]["content"],
        palaver::prompt::DEFAULT_CHAT_PROMPT
    );
    assert_eq!(runtime(&h)["prompt_profile"], "chat");
    // The chat switched to the agent: the agent's prompt and the tools.
    h.command("c1", json!({"type": "set_params", "client_request_id": "p", "patch": {"prompt_profile": "agent"}}));
    answer(&mut h, "Paris.");
    let sent = body(&say(&mut h, "And Italy?")).expect("a request");
    assert_eq!(sent["messages"][0]["content"], "You are Palaver.");
    assert!(sent["tools"].as_array().is_some_and(|t| !t.is_empty()));
    // The model in the page is a plain chat unless marked as calling tools.
    let mut h = harness(
        json!({"kind": "local", "base_url": "local://this-browser", "model": "smollm2.gguf"}),
    );
    h.command(
        "c1",
        json!({"type": "set_params", "client_request_id": "p", "patch": {"provider": "local"}}),
    );
    let sent = body(&say(&mut h, "Hi")).expect("a request");
    assert!(sent.get("tools").is_none(), "{sent}");
}
