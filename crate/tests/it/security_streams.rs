//! SECURITY.md D1–D24: the stream failure cases against the sans-IO engine, fed the real
//! transcripts of `../shared/wire` (or cuts of them) and a synthetic clock. D21 (page reload
//! mid-stream) needs a browser host and is not here. Runs natively and in headless Chromium.

use crate::support::harness::{openai_reply, Harness};
use crate::support::wire;
use palaver::decode::decode_stream;
use palaver::engine::{Effect, Input, Step};
use palaver::provider::ProviderKind;
use palaver::retry::{self, RetryPolicy};
use palaver::trajectory::TrajectoryText;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A harness whose chat `c1` talks to `kind`; `patch` overrides engine config keys.
fn harness(kind: &str, patch: Value) -> Harness {
    let mut config = json!({
        "providers": [
            {"kind": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
            {"kind": "anthropic", "base_url": "http://127.0.0.1:9/v1", "model": "claude-test"},
            {"kind": "gemini", "base_url": "http://127.0.0.1:9/v1beta", "model": "gemini-test"},
            {"kind": "openai-responses", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
        ],
    });
    if let (Value::Object(base), Value::Object(extra)) = (&mut config, patch) {
        base.extend(extra);
    }
    let mut h = Harness::with_config_patch(&config);
    h.open("c1", None);
    let ack = h.command(
        "c1",
        json!({"type": "set_params", "client_request_id": "p", "patch": {"provider": kind}}),
    );
    assert!(accepted(&ack), "set_params refused: {}", events_json(&ack));
    h
}

fn send(h: &mut Harness, text: &str) -> Step {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("u-{n}");
    h.command(
        "c1",
        json!({"type": "user_message", "client_request_id": id, "content": text}),
    )
}

fn command(h: &mut Harness, command: Value) -> Step {
    h.command("c1", command)
}

fn transcript(path: &str) -> &'static str {
    wire(path).unwrap_or_else(|| panic!("missing wire transcript {path}"))
}

fn fail(
    h: &mut Harness,
    status: Option<u16>,
    error_type: Option<&str>,
    headers: &[(&str, &str)],
) -> Step {
    let request_id = h.request_id();
    h.handle(Input::RequestFailed {
        request_id,
        status,
        error_type: error_type.map(str::to_string),
        message: "failed".into(),
        retry_after_ms: None,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        context_window: None,
        prompt_tokens: None,
    })
}

fn tick_at(h: &mut Harness, at: u64) -> Step {
    h.now = at;
    h.handle(Input::Tick {})
}

fn snapshot(h: &Harness) -> Value {
    serde_json::to_value(h.engine.snapshot("c1").expect("chat c1 is open")).unwrap_or(Value::Null)
}

fn state(h: &Harness) -> String {
    snapshot(h)["runtime"]["state"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn runtime(h: &Harness) -> Value {
    snapshot(h)["runtime"].clone()
}

fn messages(h: &Harness) -> Vec<Value> {
    snapshot(h)["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn roles(h: &Harness) -> Vec<String> {
    messages(h)
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("").to_string())
        .collect()
}

fn effects(step: &Step) -> Vec<Value> {
    step.effects
        .iter()
        .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
        .collect()
}

fn effect_names(step: &Step) -> Vec<String> {
    effects(step)
        .iter()
        .map(|e| e["effect"].as_str().unwrap_or("").to_string())
        .collect()
}

fn wake_at(step: &Step) -> Option<u64> {
    step.effects.iter().find_map(|e| match e {
        Effect::WakeAt { at_ms } => Some(*at_ms),
        _ => None,
    })
}

fn starts_request(step: &Step) -> bool {
    step.effects
        .iter()
        .any(|e| matches!(e, Effect::StartRequest { .. }))
}

fn last_request_body(step: &Step) -> Value {
    step.effects
        .iter()
        .rev()
        .find_map(|e| match e {
            Effect::StartRequest { request, .. } => Some(request.body_json()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no start_request in {:?}", effect_names(step)))
}

fn events_json(step: &Step) -> String {
    serde_json::to_string(&step.events).unwrap_or_default()
}

fn event_types(step: &Step) -> Vec<String> {
    step.events
        .iter()
        .map(|e| e.event.name().to_string())
        .collect()
}

fn accepted(step: &Step) -> bool {
    step.events.iter().any(|e| {
        let v = serde_json::to_value(e).unwrap_or(Value::Null);
        v["type"] == "ack" && v["accepted"] == true
    })
}

/// The byte offset just after the first occurrence of `needle` (and its event's blank line).
fn cut_after_event(sse: &str, needle: &str) -> usize {
    let at = sse
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in transcript"));
    let rest = &sse[at..];
    let end = rest
        .find("\n\n")
        .or_else(|| rest.find("\r\n\r\n"))
        .unwrap_or(rest.len());
    at + end
        + if rest[end..].starts_with("\r\n") {
            4
        } else {
            2
        }
        .min(rest.len() - end)
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d01_overloaded_before_content_is_retried_then_typed() {
    let mut h = harness("anthropic", json!({}));
    send(&mut h, "hi");
    let sse = transcript("anthropic/error_overloaded.sse");
    for attempt in 1..=4 {
        let mut step = h.stream(sse.as_bytes());
        step.effects.extend(h.stream_end().effects);
        if attempt < 4 {
            assert_eq!(state(&h), "generating", "attempt {attempt} is retried");
            let rt = runtime(&h);
            assert_eq!(rt["retry"]["class"], "overloaded", "{rt}");
            assert_eq!(rt["retry"]["attempt"], attempt + 1);
            let at = wake_at(&step).expect("a retry wake-up");
            assert!(starts_request(&tick_at(&mut h, at)));
        }
    }
    assert_eq!(state(&h), "error");
    let error = &runtime(&h)["error"];
    assert_eq!(error["class"], "overloaded", "{error}");
    assert_eq!(error["retryable"], true);
    assert_eq!(error["attempts"], 4);
    assert_eq!(error["kind"], "stream_error");
    assert_eq!(
        roles(&h),
        ["user", "error"],
        "no completed message committed"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d02_midstream_api_error_keeps_the_started_block() {
    let full = transcript("anthropic/text_basic.sse");
    let cut = cut_after_event(full, "content_block_delta");
    let mut sse = full[..cut].to_string();
    sse.push_str("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal server error\"}}\n\n");
    let mut h = harness("anthropic", json!({}));
    send(&mut h, "hi");
    let mut all = h.stream(sse.as_bytes());
    let end = h.stream_end();
    all.events.extend(end.events);
    assert_eq!(state(&h), "error");
    let error = runtime(&h)["error"].clone();
    assert_eq!(error["class"], "server_error", "{error}");
    assert_eq!(error["retryable"], true);
    assert_eq!(error["code"], "api_error");
    let partial = &messages(&h)[1];
    assert_eq!(partial["finish_reason"], "error");
    assert!(
        !partial["content"].as_str().unwrap_or("").is_empty(),
        "{partial}"
    );
    let errors = messages(&h).iter().filter(|m| m["role"] == "error").count();
    assert_eq!(errors, 1, "exactly one error");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d03_openai_midstream_error_keeps_text_byte_exact() {
    let sse = transcript("openai-chat/error_midstream_openai.sse");
    let expected = decode_stream(ProviderKind::OpenaiChat, &[sse.as_bytes()])
        .map(|d| d.assembled.to_value()["content"].clone())
        .unwrap_or(Value::Null);
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "hi");
    h.stream(sse.as_bytes());
    h.stream_end();
    assert_eq!(state(&h), "error");
    assert_eq!(runtime(&h)["error"]["code"], "server_error");
    assert_eq!(messages(&h)[1]["content"], expected);
    assert_eq!(messages(&h)[1]["finish_reason"], "error");
    // The same text cut before `[DONE]` without an error is still not a completion.
    let text = transcript("openai-chat/text_gpt4o.sse");
    let cut = text.find("data: [DONE]").expect("[DONE] in text_gpt4o");
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "hi");
    h.stream(&text.as_bytes()[..cut]);
    h.stream_end();
    assert_eq!(state(&h), "error");
    assert_eq!(runtime(&h)["error"]["class"], "truncated");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d04_openrouter_comments_reset_the_idle_timer_and_400_is_final() {
    let sse = transcript("openai-chat/openrouter_error_midstream.sse");
    let mut h = harness("openai-chat", json!({"stall_timeout_ms": 1000}));
    send(&mut h, "hi");
    // One SSE line every 600 ms: 40+ lines take far longer than the 1 s idle timeout, but no
    // gap is longer than it, comments included.
    for line in sse.split_inclusive('\n') {
        h.now += 600;
        h.handle(Input::Tick {});
        assert_ne!(runtime(&h)["error"]["code"], "stalled");
        h.stream(line.as_bytes());
    }
    h.stream_end();
    let error = runtime(&h)["error"].clone();
    assert_eq!(error["code"], "400", "{error}");
    assert_eq!(error["class"], "bad_request");
    assert_eq!(error["retryable"], false);
    let partial = &messages(&h)[1];
    assert!(partial["reasoning_content"]
        .as_str()
        .is_some_and(|r| r.starts_with("We need to respond")));
    assert_eq!(
        partial["usage"]["prompt_tokens"], 43,
        "usage from the error chunk"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d05_quota_and_billing_are_never_retried() {
    let mut h = harness("openai-responses", json!({}));
    send(&mut h, "hi");
    h.stream(transcript("openai-responses/error_insufficient_quota.sse").as_bytes());
    let step = h.stream_end();
    assert!(wake_at(&step).is_none() && !starts_request(&step));
    assert_eq!(runtime(&h)["error"]["class"], "quota");
    assert_eq!(runtime(&h)["error"]["retryable"], false);
    for (kind, error_type) in [
        ("openai-chat", "insufficient_quota"),
        ("anthropic", "enforced_spend_limit_reached"),
        ("anthropic", "billing_error"),
    ] {
        let mut h = harness(kind, json!({}));
        send(&mut h, "hi");
        let step = fail(&mut h, Some(429), Some(error_type), &[("retry-after", "1")]);
        assert!(wake_at(&step).is_none(), "{error_type} retried");
        assert_eq!(runtime(&h)["error"]["class"], "quota", "{error_type}");
        assert_eq!(runtime(&h)["error"]["attempts"], 1);
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d06_tool_call_cut_by_max_tokens_is_not_run_nor_sent_back() {
    let mut h = harness("anthropic", json!({}));
    send(&mut h, "write the guide");
    h.stream(transcript("anthropic/tool_use_truncated_max_tokens.sse").as_bytes());
    let step = h.stream_end();
    assert!(
        !effect_names(&step).contains(&"run_tool".to_string()),
        "{:?}",
        effect_names(&step)
    );
    assert_eq!(state(&h), "idle");
    let reply = &messages(&h)[1];
    assert_eq!(reply["finish_reason"], "max_tokens");
    assert!(
        reply.get("tool_calls").is_none_or(Value::is_null),
        "{reply}"
    );
    assert_eq!(
        reply["incomplete_tool_calls"][0]["function"]["name"],
        "make_file"
    );
    let next = send(&mut h, "go on");
    let body = last_request_body(&next);
    assert!(
        !body.to_string().contains("tool_use"),
        "the cut call is not sent back: {body}"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d07_text_basic_without_final_blank_line_decodes() {
    let sse = transcript("anthropic/text_basic.sse");
    let trimmed = sse.trim_end_matches(['\n', '\r']);
    let whole = decode_stream(ProviderKind::Anthropic, &[sse.as_bytes()]).expect("decodes");
    let cut = decode_stream(ProviderKind::Anthropic, &[trimmed.as_bytes()]).expect("decodes");
    assert_eq!(whole.assembled, cut.assembled);
    assert!(cut.complete, "message_stop is dispatched at end of stream");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d08_stream_cut_after_message_delta_is_truncated_with_partial_kept() {
    let sse = transcript("anthropic/text_basic.sse");
    let cut = cut_after_event(sse, "message_delta");
    let decoded = decode_stream(ProviderKind::Anthropic, &[&sse.as_bytes()[..cut]]).expect("ok");
    assert!(!decoded.complete);
    let mut h = harness("anthropic", json!({}));
    send(&mut h, "hi");
    h.stream(&sse.as_bytes()[..cut]);
    h.stream_end();
    assert_eq!(state(&h), "error");
    let error = runtime(&h)["error"].clone();
    assert_eq!(error["class"], "truncated", "{error}");
    assert_eq!(error["retryable"], true, "offers retry");
    assert_eq!(
        messages(&h)[1]["content"],
        decoded.assembled.to_value()["content"]
    );
    let regenerate = command(
        &mut h,
        json!({"type": "regenerate", "client_request_id": "r1"}),
    );
    assert!(
        starts_request(&regenerate),
        "retry after truncation resends"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d10_network_errors_back_off_with_jitter_then_fail_typed() {
    let patch = json!({"retry": {"max_attempts": 3, "base_ms": 500}, "retry_seed": 7});
    for seed in [0u64, 7, 12345, u64::MAX] {
        let mut patch = patch.clone();
        patch["retry_seed"] = json!(seed);
        let mut h = harness("openai-chat", patch);
        send(&mut h, "hi");
        let mut planned = 500u64;
        for _ in 0..2 {
            let now = h.now;
            let at = wake_at(&fail(&mut h, None, None, &[])).expect("a retry is scheduled");
            let waited = at - now;
            assert!(
                waited * 1000 >= planned * 750 && waited <= planned,
                "seed {seed}: waited {waited} ms for a planned {planned} ms"
            );
            assert!(starts_request(&tick_at(&mut h, at)));
            planned *= 2;
        }
        let step = fail(&mut h, None, None, &[]);
        assert!(wake_at(&step).is_none());
        let error = runtime(&h)["error"].clone();
        assert_eq!(error["class"], "network", "{error}");
        assert_eq!(error["attempts"], 3);
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d11_two_overloads_then_success_make_one_message() {
    let mut h = harness("anthropic", json!({}));
    let mut all = send(&mut h, "hi");
    for _ in 0..2 {
        let step = fail(&mut h, Some(529), Some("overloaded_error"), &[]);
        let at = wake_at(&step).expect("retried");
        all.events.extend(step.events);
        all.events.extend(tick_at(&mut h, at).events);
    }
    all.events.extend(
        h.stream(transcript("anthropic/text_basic.sse").as_bytes())
            .events,
    );
    all.events.extend(h.stream_end().events);
    assert_eq!(state(&h), "idle");
    assert_eq!(roles(&h), ["user", "assistant"]);
    let types = event_types(&all);
    let count = |name: &str| types.iter().filter(|t| *t == name).count();
    assert_eq!(count("stream_started"), 1, "{types:?}");
    assert_eq!(count("stream_finished"), 1, "{types:?}");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d12_retry_after_follows_the_python_sdk_table() {
    // 2023-09-29T16:26:07Z: "Fri, 29 Sep 2023 16:26:27 GMT" is 20 s later.
    let now = 1_696_004_767_000u64;
    let backoff = retry::backoff_ms(&RetryPolicy::default(), 0, 1);
    let cases: [(&str, u64); 10] = [
        ("20", 20_000),
        ("0", backoff),
        ("-10", backoff),
        ("60", 60_000),
        ("61", backoff),
        ("Fri, 29 Sep 2023 16:26:27 GMT", 20_000),
        ("Fri, 29 Sep 2023 16:26:00 GMT", backoff),
        ("99999999999999999999999999999999999", backoff),
        ("Zun, 29 Sep 2023 16:26:27 GMT", backoff),
        ("", backoff),
    ];
    for (value, expected) in cases {
        let mut h = harness("openai-chat", json!({}));
        send(&mut h, "hi");
        h.now = now;
        let at = wake_at(&fail(&mut h, Some(429), None, &[("retry-after", value)]));
        assert_eq!(
            at.map(|at| at - now),
            Some(expected),
            "retry-after {value:?}"
        );
    }
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "hi");
    let at = wake_at(&fail(
        &mut h,
        Some(429),
        None,
        &[("Retry-After", "20"), ("retry-after-ms", "10")],
    ));
    assert_eq!(at, Some(h.now + 10), "retry-after-ms wins");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d13_x_should_retry_overrides_the_status() {
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "hi");
    let step = fail(&mut h, Some(503), None, &[("x-should-retry", "false")]);
    assert!(wake_at(&step).is_none());
    assert_eq!(state(&h), "error");
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "hi");
    let at = wake_at(&fail(
        &mut h,
        Some(400),
        None,
        &[("x-should-retry", "true")],
    ))
    .expect("400 with x-should-retry: true is retried");
    assert!(starts_request(&tick_at(&mut h, at)));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d14_status_matrix() {
    let cases: [(u16, bool, &str); 14] = [
        (400, false, "bad_request"),
        (401, false, "auth"),
        (403, false, "auth"),
        (404, false, "bad_request"),
        (408, true, "network"),
        (409, true, "bad_request"),
        (413, false, "request_too_large"),
        (422, false, "bad_request"),
        (429, true, "rate_limited"),
        (500, true, "server_error"),
        (502, true, "server_error"),
        (503, true, "server_error"),
        (504, true, "server_error"),
        (529, true, "overloaded"),
    ];
    for (status, retried, class) in cases {
        let mut h = harness("openai-chat", json!({}));
        send(&mut h, "hi");
        let step = fail(&mut h, Some(status), None, &[]);
        assert_eq!(wake_at(&step).is_some(), retried, "status {status}");
        let shown = if retried {
            runtime(&h)["retry"]["class"].clone()
        } else {
            runtime(&h)["error"]["class"].clone()
        };
        assert_eq!(shown, class, "status {status}");
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d15_reset_after_content_is_not_resent_until_asked() {
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "hi");
    h.stream(openai_reply(&json!({"text": ["one ", "two ", "three"], "partial": true})).as_bytes());
    let step = fail(&mut h, None, None, &[]);
    assert!(
        wake_at(&step).is_none() && !starts_request(&step),
        "no automatic resend"
    );
    assert_eq!(state(&h), "error");
    assert_eq!(runtime(&h)["error"]["class"], "network");
    assert_eq!(messages(&h)[1]["content"], "one two three");
    let retry = command(
        &mut h,
        json!({"type": "regenerate", "client_request_id": "r1"}),
    );
    assert!(accepted(&retry) && starts_request(&retry));
    let body = last_request_body(&retry);
    assert!(
        !body.to_string().contains("one two three"),
        "regenerate resends the original request"
    );
    // SPEC §2.2 queues commands sent while generating (SECURITY D15 asks for a refusal; the
    // SPEC is the authority): the second retry waits in the queue, visible and cancellable, and
    // never runs beside the first.
    let again = command(
        &mut h,
        json!({"type": "regenerate", "client_request_id": "r2"}),
    );
    assert!(
        !starts_request(&again),
        "a second retry while one is in flight starts nothing"
    );
    assert_eq!(runtime(&h)["queue_size"], 1);
    command(
        &mut h,
        json!({"type": "cancel_queued", "client_request_id": "r2"}),
    );
    assert_eq!(runtime(&h)["queue_size"], 0);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d16_idle_and_first_byte_timeouts() {
    let text = transcript("anthropic/text_basic.sse");
    let start = cut_after_event(text, "message_start");
    // message_start, then silence: the idle timeout fires after 30 s without bytes.
    let mut h = harness(
        "anthropic",
        json!({"stall_timeout_ms": 30000, "retry": {"max_attempts": 1}}),
    );
    send(&mut h, "hi");
    h.stream(&text.as_bytes()[..start]);
    h.stream(openai_free_text_delta().as_bytes());
    tick_at(&mut h, 29_999);
    assert_eq!(state(&h), "generating");
    let step = tick_at(&mut h, 30_000);
    assert!(effect_names(&step).contains(&"cancel_request".to_string()));
    let error = runtime(&h)["error"].clone();
    assert_eq!(error["class"], "idle_timeout", "{error}");
    assert_eq!(messages(&h)[1]["content"], "partial", "partial kept");

    // Pings every 10 s for 5 minutes keep the stream alive; then it completes.
    let mut h = harness("anthropic", json!({"stall_timeout_ms": 30000}));
    send(&mut h, "hi");
    h.stream(&text.as_bytes()[..start]);
    for i in 1..=30 {
        tick_at(&mut h, i * 10_000);
        let keepalive = if i % 2 == 0 {
            ": keep-alive\n\n"
        } else {
            "event: ping\ndata: {\"type\": \"ping\"}\n\n"
        };
        h.stream(keepalive.as_bytes());
        assert_eq!(state(&h), "generating", "after {i} pings");
    }
    h.stream(&text.as_bytes()[start..]);
    h.stream_end();
    assert_eq!(state(&h), "idle");

    // No bytes at all: the first-byte timeout, separate from the idle one.
    let mut h = harness(
        "anthropic",
        json!({"stall_timeout_ms": 30000, "first_byte_timeout_ms": 5000, "retry": {"max_attempts": 1}}),
    );
    send(&mut h, "hi");
    tick_at(&mut h, 5_000);
    assert_eq!(runtime(&h)["error"]["class"], "first_byte_timeout");
}

/// An Anthropic text block and one delta of it: "partial".
fn openai_free_text_delta() -> String {
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"partial\"}}\n\n".to_string()
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d17_user_abort_keeps_exactly_what_was_shown() {
    let sse = transcript("anthropic/text_basic.sse");
    let cut = cut_after_event(sse, "content_block_delta");
    let shown = decode_stream(ProviderKind::Anthropic, &[&sse.as_bytes()[..cut]])
        .map(|d| d.assembled.to_value()["content"].clone())
        .unwrap_or(Value::Null);
    let mut h = harness("anthropic", json!({}));
    send(&mut h, "hi");
    h.stream(&sse.as_bytes()[..cut]);
    let step = command(&mut h, json!({"type": "abort", "client_request_id": "a"}));
    assert!(wake_at(&step).is_none(), "no retry scheduled");
    let partial = &messages(&h)[1];
    assert_eq!(partial["content"], shown);
    assert_eq!(partial["finish_reason"], "abort");
    assert_eq!(partial["stopped"], true);
    assert_eq!(state(&h), "idle");
}

/// The Anthropic rules a request body must keep: no thinking without its signature, no empty
/// text or thinking block, every `tool_use` answered by a `tool_result` in the next message.
fn assert_valid_anthropic_request(body: &Value) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    for (i, message) in messages.iter().enumerate() {
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        for block in &blocks {
            match block["type"].as_str() {
                Some("thinking") => {
                    assert!(
                        block["signature"].as_str().is_some_and(|s| !s.is_empty()),
                        "unsigned thinking: {block}"
                    );
                    assert!(
                        block["thinking"]
                            .as_str()
                            .is_some_and(|s| !s.trim().is_empty()),
                        "empty thinking: {block}"
                    );
                }
                Some("text") => assert!(
                    block["text"].as_str().is_some_and(|s| !s.is_empty()),
                    "empty text: {block}"
                ),
                Some("tool_use") => {
                    let id = &block["id"];
                    let answered = messages.get(i + 1).is_some_and(|next| {
                        next["content"].as_array().is_some_and(|b| {
                            b.iter()
                                .any(|r| r["type"] == "tool_result" && r["tool_use_id"] == *id)
                        })
                    });
                    assert!(answered, "tool_use {id} without its result");
                }
                _ => {}
            }
        }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d18_abort_before_the_signature_drops_the_thinking_from_the_next_request() {
    let sse = transcript("anthropic/thinking_signature.sse");
    let cut = sse.find("signature_delta").expect("a signature delta");
    let cut = sse[..cut].rfind("event:").unwrap_or(cut);
    let mut h = harness("anthropic", json!({}));
    send(&mut h, "think");
    h.stream(&sse.as_bytes()[..cut]);
    command(&mut h, json!({"type": "abort", "client_request_id": "a"}));
    let partial = &messages(&h)[1];
    assert!(
        partial["reasoning_content"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
            || partial["thinking_blocks"]
                .as_array()
                .is_some_and(|b| !b.is_empty()),
        "the partial thinking is shown in history: {partial}"
    );
    let body = last_request_body(&send(&mut h, "go on"));
    assert_valid_anthropic_request(&body);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d19_abort_inside_tool_arguments_runs_nothing() {
    let sse = transcript("anthropic/tool_use.sse");
    let cut = sse.find("input_json_delta").expect("an input_json_delta");
    let cut = cut_after_event(&sse[cut..], "input_json_delta") + cut;
    let mut h = harness("anthropic", json!({}));
    send(&mut h, "use a tool");
    h.stream(&sse.as_bytes()[..cut]);
    let step = command(&mut h, json!({"type": "abort", "client_request_id": "a"}));
    assert!(!effect_names(&step).contains(&"run_tool".to_string()));
    let body = last_request_body(&send(&mut h, "go on"));
    assert!(!body.to_string().contains("tool_use"), "{body}");
    assert_valid_anthropic_request(&body);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d20_abort_during_backoff_sends_nothing_more() {
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "hi");
    let at = wake_at(&fail(&mut h, Some(503), None, &[])).expect("retry scheduled");
    command(&mut h, json!({"type": "abort", "client_request_id": "a"}));
    for t in [at, at + 1, at + 60_000] {
        let step = tick_at(&mut h, t);
        assert!(!starts_request(&step), "request after abort at {t}");
    }
    assert_eq!(state(&h), "idle");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d22_overload_mid_tool_loop_does_not_rerun_finished_tools() {
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "read two files");
    let calls = json!({"tool_calls": [
        {"id": "call_a", "name": "read_file", "arguments": {"path": "a.txt"}},
        {"id": "call_b", "name": "read_file", "arguments": {"path": "b.txt"}},
    ]});
    h.stream(openai_reply(&calls).as_bytes());
    let step = h.stream_end();
    let runs = effect_names(&step)
        .iter()
        .filter(|e| *e == "run_tool")
        .count();
    assert_eq!(runs, 2);
    for id in ["call_a", "call_b"] {
        h.handle(Input::ToolResult {
            chat_id: "c1".into(),
            tool_call_id: id.into(),
            content: format!("body of {id}"),
            tool_failed: false,
            data: None,
            session_metadata: None,
            parts: Vec::new(),
        });
    }
    let at = wake_at(&fail(&mut h, Some(529), Some("overloaded_error"), &[])).expect("retried");
    let retry = tick_at(&mut h, at);
    assert!(starts_request(&retry));
    assert!(!effect_names(&retry).contains(&"run_tool".to_string()));
    let body = last_request_body(&retry).to_string();
    assert!(body.contains("body of call_a") && body.contains("body of call_b"));
    h.stream(openai_reply(&json!({"text": "both read"})).as_bytes());
    h.stream_end();
    assert_eq!(state(&h), "idle");
    assert_eq!(
        roles(&h),
        ["user", "assistant", "tool", "tool", "assistant"]
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d23_a_retry_shows_its_attempt_and_duplicates_nothing() {
    let mut h = harness("openai-chat", json!({}));
    send(&mut h, "hi");
    let failed = fail(&mut h, Some(500), None, &[]);
    let countdown = runtime(&h)["retry"].clone();
    assert_eq!(countdown["attempt"], 2, "{countdown}");
    assert!(countdown["at_ms"].as_u64() == wake_at(&failed));
    let at = wake_at(&failed).unwrap_or(0);
    let retry = tick_at(&mut h, at);
    let runtime_events: Vec<Value> = serde_json::to_value(&retry.events)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e["type"] == "runtime_updated")
        .collect();
    assert!(
        runtime_events
            .iter()
            .any(|e| e["retry"]["attempt"] == 2 && e["retry"].get("at_ms").is_none()),
        "the event stream shows the retry under way: {runtime_events:?}"
    );
    h.stream(openai_reply(&json!({"text": "ok"})).as_bytes());
    h.stream_end();
    assert_eq!(roles(&h), ["user", "assistant"]);
    assert!(runtime(&h).get("retry").is_none());
    let ids: Vec<Value> = messages(&h)
        .iter()
        .map(|m| m["message_id"].clone())
        .collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids, unique);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d24_the_error_taxonomy_is_distinct() {
    let one_attempt = json!({"retry": {"max_attempts": 1}, "stall_timeout_ms": 1000});
    let mut seen = BTreeMap::new();
    let mut record = |name: &str, h: &Harness| {
        let class = runtime(h)["error"]["class"]
            .as_str()
            .unwrap_or("")
            .to_string();
        seen.insert(name.to_string(), class);
    };
    let cases: [(&str, Option<u16>, Option<&str>); 6] = [
        ("overloaded", Some(529), Some("overloaded_error")),
        ("rate_limited", Some(429), Some("rate_limit_error")),
        ("quota", Some(429), Some("insufficient_quota")),
        ("auth", Some(401), Some("authentication_error")),
        ("network", None, None),
        ("request_too_large", Some(413), None),
    ];
    for (name, status, error_type) in cases {
        let mut h = harness("anthropic", one_attempt.clone());
        send(&mut h, "hi");
        fail(&mut h, status, error_type, &[]);
        record(name, &h);
    }
    let mut h = harness("openai-chat", one_attempt.clone());
    send(&mut h, "hi");
    h.stream(openai_reply(&json!({"text": "cut", "partial": true})).as_bytes());
    h.stream_end();
    record("truncated", &h);
    let mut h = harness("openai-chat", one_attempt);
    send(&mut h, "hi");
    h.stream(openai_reply(&json!({"text": "slow", "partial": true})).as_bytes());
    tick_at(&mut h, 1000);
    record("idle_timeout", &h);
    for (name, class) in &seen {
        assert_eq!(name, class, "{seen:?}");
    }
    assert_eq!(seen.len(), 8);
}

/// OpenAI answers a bad key with 401 and the generic `invalid_request_error` (a 413 may carry one
/// too): the status decides the class, and neither is retried.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d24_a_bad_key_is_auth_whatever_the_body_type_says() {
    for (status, class) in [(401, "auth"), (403, "auth"), (413, "request_too_large")] {
        let mut h = harness("openai-chat", json!({"retry": {"max_attempts": 3}}));
        send(&mut h, "hi");
        fail(&mut h, Some(status), Some("invalid_request_error"), &[]);
        let runtime = runtime(&h);
        assert_eq!(runtime["error"]["class"], class, "{status}: {runtime}");
        assert!(
            runtime["retry"].is_null(),
            "{status} is not retried: {runtime}"
        );
    }
}

/// SECURITY D21 (engine side) and decision 5: a streaming reply is checkpointed at most every
/// 2 s in the save effects, cleared when committed; a trajectory holding a checkpoint (the page
/// went away mid-stream) loads it as an `interrupted` message, saved as such, never "generating".
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn d21_the_streaming_reply_is_checkpointed_and_recovered_as_interrupted() {
    let mut h = harness("openai-chat", json!({}));
    let saves = |step: &Step| -> Vec<Value> {
        effects(step)
            .into_iter()
            .filter(|e| e["effect"] == "save_trajectory")
            .map(|e| e["save"].clone())
            .collect()
    };
    let ack_last = |h: &mut Harness| {
        if let Some((chat_id, version)) = h.last_save.clone() {
            h.handle(Input::SaveAcked { chat_id, version });
        }
    };
    ack_last(&mut h);
    send(&mut h, "hi");
    ack_last(&mut h);
    let mut checkpoints = Vec::new();
    for (i, piece) in ["one ", "two ", "three ", "four "].iter().enumerate() {
        h.now += 900;
        let chunk = format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": piece}}]})
        );
        let step = h.stream(chunk.as_bytes());
        for save in saves(&step) {
            if let Some(draft) = save.get("draft") {
                checkpoints.push((i, draft.clone()));
            }
            h.handle(Input::SaveAcked {
                chat_id: "c1".into(),
                version: save["version"].as_u64().unwrap_or(0),
            });
        }
    }
    assert!(
        !checkpoints.is_empty() && checkpoints.len() <= 2,
        "at most one per 2 s: {checkpoints:?}"
    );
    let (_, last) = checkpoints.last().cloned().unwrap_or((0, Value::Null));
    assert!(
        last["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("one two")),
        "{last}"
    );
    // The page dies here: what storage holds is the messages plus the last checkpoint.
    let stored = snapshot(&h);
    let mut trajectory = json!({"id": "c1", "messages": stored["messages"], "draft": last});
    let mut h2 = harness("openai-chat", json!({}));
    let step = h2.handle(Input::OpenChat {
        chat_id: "c2".into(),
        trajectory: Some(TrajectoryText::from_value(&trajectory.take())),
        stored: None,
    });
    let recovered = serde_json::to_value(h2.engine.snapshot("c2")).unwrap_or(Value::Null);
    let reply = recovered["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(reply["role"], "assistant");
    assert_eq!(reply["interrupted"], true);
    assert_eq!(reply["finish_reason"], "interrupted");
    assert_eq!(
        recovered["runtime"]["state"], "idle",
        "no perpetual generating"
    );
    let save = saves(&step).into_iter().next().unwrap_or(Value::Null);
    assert_eq!(
        save["draft"],
        Value::Null,
        "the checkpoint is cleared: {save}"
    );
    assert!(save.get("draft").is_some());
    assert!(
        save["upserts"]
            .as_array()
            .is_some_and(|u| u.iter().any(|x| x["message"]["interrupted"] == true)),
        "saved as a message: {save}"
    );
    // A committed reply clears its checkpoint too.
    h.stream(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    let end = h.stream_end();
    let cleared: Vec<Value> = saves(&end)
        .into_iter()
        .filter(|s| s.get("draft").is_some())
        .collect();
    assert!(
        cleared.iter().all(|s| s["draft"].is_null()) && !cleared.is_empty(),
        "{cleared:?}"
    );
}
