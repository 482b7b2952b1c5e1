//! Hostile and odd streams through the openai-chat decoder: typed errors with byte offsets, no
//! panics, and the SSE framing rules of SPEC §6.2.

use palaver::decode::{decode_stream, DecodeError};
use palaver::error::StreamDecodeError;
use palaver::provider::ProviderKind;
use serde_json::Value;

fn assembled(sse: &str) -> Value {
    match decode_stream(ProviderKind::OpenaiChat, &[sse.as_bytes()]) {
        Ok(decoded) => decoded.assembled,
        Err(e) => panic!("unexpected error: {e:?}"),
    }
}

fn error_of(bytes: &[u8]) -> StreamDecodeError {
    match decode_stream(ProviderKind::OpenaiChat, &[bytes]) {
        Err(DecodeError::Stream { error, .. }) => error,
        other => panic!("expected a stream error, got {other:?}"),
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn truncated_json_is_malformed_at_its_offset() {
    let error =
        error_of(b"data: {\"choices\":[]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"hi");
    assert_eq!(
        error,
        StreamDecodeError::MalformedStream {
            provider: "openai-chat".into(),
            offset: 22,
            reason: error_reason(&error)
        }
    );
}

fn error_reason(error: &StreamDecodeError) -> String {
    match error {
        StreamDecodeError::MalformedStream { reason, .. }
        | StreamDecodeError::ProviderMisbehaved { reason, .. } => reason.clone(),
        _ => String::new(),
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn invalid_utf8_is_an_error_at_the_bad_byte() {
    let error = error_of(b"data: {\"a\":1}\n\ndata: \"\xc3\x28\"\n\n");
    assert!(
        matches!(error, StreamDecodeError::MalformedStream { offset: 22, .. }),
        "{error:?}"
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_ten_megabyte_line_is_refused() {
    let mut bytes = b"data: ".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 10 * 1024 * 1024));
    let error = error_of(&bytes);
    assert!(error_reason(&error).contains("8 MiB"), "{error:?}");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_tool_index_of_ten_thousand_is_one_call() {
    let message = assembled(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":10000,\"id\":\"c\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
    );
    assert_eq!(message["tool_calls"].as_array().map(Vec::len), Some(1));
    assert_eq!(message["tool_calls"][0]["id"], "c");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn unknown_events_fields_and_comments_are_ignored() {
    let message = assembled(
        ": keep-alive\n\nevent: something_new\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\",\"mystery\":[1]}}],\"extra\":true}\n\nid: 7\nretry: 100\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
    );
    assert_eq!(message["content"], "ab");
    assert_eq!(message["finish_reason"], "stop");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn cr_only_line_ends_and_a_missing_final_blank_line_work() {
    let message = assembled("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\r\rdata: [DONE]");
    assert_eq!(message["content"], "x");
    assert_eq!(message["finish_reason"], "stop");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn tool_calls_starting_at_a_nonzero_index_with_repeated_role_and_no_object_field() {
    // As GitHub Copilot's server sends them (INDEX.md: copilot_tool_index_nonzero).
    let message = assembled(concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Let me\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":1,\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":1,\"id\":\"t1\",\"function\":{\"name\":\"read_file\",\"arguments\":\"th\\\": 1}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n",
        "data: [DONE]\n\n"
    ));
    assert_eq!(message["content"], "Let me");
    assert_eq!(message["tool_calls"][0]["id"], "t1");
    assert_eq!(message["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(
        message["tool_calls"][0]["function"]["arguments"],
        "{\"path\": 1}"
    );
    assert_eq!(message["usage"]["total_tokens"], 7);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_midstream_error_keeps_the_partial_and_the_providers_words() {
    let message = assembled("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\ndata: {\"error\":{\"message\":\"Rate limit\",\"type\":\"tokens\",\"code\":\"rate_limit_exceeded\"}}\n\n");
    assert_eq!(message["content"], "par");
    assert_eq!(message["finish_reason"], "error");
    assert_eq!(message["error"]["code"], "rate_limit_exceeded");
    assert_eq!(message["error"]["message"], "Rate limit");
}
