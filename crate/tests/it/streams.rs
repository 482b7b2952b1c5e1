//! Hostile and odd streams through the openai-chat decoder: typed errors with byte offsets, no
//! panics, and the SSE framing rules of SPEC §6.2.

use palaver::decode::{decode_stream, DecodeError};
use palaver::error::StreamDecodeError;
use palaver::provider::ProviderKind;
use serde_json::Value;

fn assembled(sse: &str) -> Value {
    match decode_stream(ProviderKind::OpenaiChat, &[sse.as_bytes()]) {
        Ok(decoded) => decoded.assembled.to_value(),
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

/// The hostile cases for the other three decoders, each built on a real event shape.
fn decode_kind(kind: ProviderKind, bytes: &[u8]) -> Result<Value, StreamDecodeError> {
    match decode_stream(kind, &[bytes]) {
        Ok(decoded) => Ok(decoded.assembled.to_value()),
        Err(DecodeError::Stream { error, .. }) => Err(error),
        Err(other) => panic!("{other:?}"),
    }
}

const ANTHROPIC_START: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n";
const GEMINI_TEXT: &str = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}],\"role\":\"model\"},\"index\":0}]}\n\n";
const RESPONSES_DELTA: &str = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"hi\"}\n\n";

fn well_formed_prefix(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => ANTHROPIC_START,
        ProviderKind::Gemini => GEMINI_TEXT,
        _ => RESPONSES_DELTA,
    }
}

const OTHER_KINDS: [ProviderKind; 3] = [
    ProviderKind::Anthropic,
    ProviderKind::Gemini,
    ProviderKind::OpenaiResponses,
];

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_decoder_types_truncated_json_with_its_offset() {
    for kind in OTHER_KINDS {
        let prefix = well_formed_prefix(kind);
        let bytes = format!("{prefix}data: {{\"type\":\"content_block_delta\",\"ind\n\n");
        let error = decode_kind(kind, bytes.as_bytes()).expect_err("truncated JSON fails");
        assert!(
            matches!(&error, StreamDecodeError::MalformedStream { offset, .. } if *offset == prefix.len() as u64),
            "{}: {error:?}",
            kind.name()
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_decoder_types_invalid_utf8_and_a_ten_megabyte_line() {
    for kind in OTHER_KINDS {
        let prefix = well_formed_prefix(kind);
        let mut bytes = prefix.as_bytes().to_vec();
        bytes.extend_from_slice(b"data: \"\xc3\x28\"\n\n");
        let error = decode_kind(kind, &bytes).expect_err("invalid UTF-8 fails");
        let bad_byte = prefix.len() as u64 + 7;
        assert!(
            matches!(&error, StreamDecodeError::MalformedStream { offset, .. } if *offset == bad_byte),
            "{}: {error:?}",
            kind.name()
        );
        let mut huge = prefix.as_bytes().to_vec();
        huge.extend_from_slice(b"data: ");
        huge.extend(std::iter::repeat_n(b'x', 10 * 1024 * 1024));
        let error = decode_kind(kind, &huge).expect_err("a 10 MB line fails");
        assert!(
            error_reason(&error).contains("8 MiB"),
            "{}: {error:?}",
            kind.name()
        );
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn every_decoder_ignores_unknown_event_types() {
    for kind in OTHER_KINDS {
        let prefix = well_formed_prefix(kind);
        let bytes = format!("{prefix}event: brand_new_thing\ndata: {{\"type\":\"brand_new_thing\",\"x\":[1,2]}}\n\n: comment\n\n");
        let with = decode_kind(kind, bytes.as_bytes()).expect("unknown events are ignored");
        let without = decode_kind(kind, prefix.as_bytes()).expect("prefix decodes");
        assert_eq!(with, without, "{}", kind.name());
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn an_anthropic_block_index_of_ten_thousand_is_one_call() {
    let bytes = format!(
        "{ANTHROPIC_START}{}{}{}{}",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":10000,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":10000,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":10000}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let message = decode_kind(ProviderKind::Anthropic, bytes.as_bytes()).expect("decodes");
    assert_eq!(
        message["tool_calls"].as_array().map(Vec::len),
        Some(1),
        "{message}"
    );
    assert_eq!(
        message["tool_calls"][0]["function"]["arguments"],
        "{\"a\":1}"
    );
}

/// Issue 14 §7: what local servers and routers add. llama.cpp: `timings`, `logprobs: null`, a
/// usage-only last chunk with `choices: []`, empty `finish_reason` strings; Ollama/Gemini-compat:
/// tool calls with no `index`, each in its own chunk; routers: comment lines, a repeated `role`.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn local_server_and_router_quirks_decode_to_the_plain_message() {
    let message = assembled(concat!(
        ": OPENROUTER PROCESSING\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Reading\"},\"logprobs\":null,\"finish_reason\":\"\"}]}\n\n",
        ": keep-alive\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"a\\\"}\"}}]},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"b\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"timings\":{\"prompt_n\":12,\"predicted_per_second\":40.5}}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":9,\"total_tokens\":21}}\n\n",
        "data: [DONE]\n\n"
    ));
    assert_eq!(message["content"], "Reading");
    let calls = message["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        calls.len(),
        2,
        "two calls without index stay two: {calls:?}"
    );
    assert_eq!(calls[0]["id"], "c1");
    assert_eq!(calls[1]["function"]["arguments"], "{\"path\":\"b\"}");
    assert_eq!(message["finish_reason"], "tool_calls");
    assert_eq!(message["usage"]["total_tokens"], 21);
}

/// Issue 14 §7: a Responses (and Anthropic, Gemini) stream served through an OpenAI-compatible
/// router can end with `data: [DONE]`, which the official SDKs accept.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_done_line_after_any_providers_stream_is_accepted() {
    let cases: [(ProviderKind, &str); 3] = [
        (ProviderKind::OpenaiResponses, concat!(
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"hi\"}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1,\"total_tokens\":4}}}\n\n",
            "data: [DONE]\n\n")),
        (ProviderKind::Anthropic, concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            "data: [DONE]\n\n")),
        (ProviderKind::Gemini, concat!(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}]}\n\n",
            "data: [DONE]\n\n")),
    ];
    for (kind, sse) in cases {
        let decoded = decode_stream(kind, &[sse.as_bytes()])
            .unwrap_or_else(|e| panic!("{kind:?}: [DONE] must not be an error: {e:?}"));
        assert_eq!(decoded.assembled.to_value()["content"], "hi", "{kind:?}");
        assert!(decoded.complete, "{kind:?}: the stream is complete");
    }
}

/// Gemini's finish reasons in the engine's vocabulary: the two it maps, the rest lowered (ASCII:
/// they are enum names), unknown ones kept.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn gemini_finish_reasons_in_the_engine_vocabulary() {
    use palaver::provider::gemini::finish_reason;
    assert_eq!(finish_reason("STOP"), "stop");
    assert_eq!(finish_reason("MAX_TOKENS"), "length");
    assert_eq!(finish_reason("SAFETY"), "safety");
    assert_eq!(
        finish_reason("MALFORMED_FUNCTION_CALL"),
        "malformed_function_call"
    );
    assert_eq!(finish_reason("New_Reason_2"), "new_reason_2");
}

/// Issue 41: the deltas of one chunk make one op per run of the same text (no allocation per
/// token), in the order the stream said them; text and reasoning are never joined together.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_chunk_of_deltas_makes_one_op_per_run_of_text() {
    use palaver::delta::DeltaOp;
    use palaver::provider::{DecodeItem, StreamDecoder};
    let ops = |kind: ProviderKind, chunk: &str| -> Vec<DeltaOp> {
        let mut decoder = StreamDecoder::for_kind(kind).expect("a decoder");
        let items = decoder.feed(chunk.as_bytes()).expect("decoded");
        items
            .into_iter()
            .filter_map(|item| match item {
                DecodeItem::Op(op) => Some(op),
                _ => None,
            })
            .collect()
    };
    let text = |t: &str| DeltaOp::AppendContent { text: t.into() };
    let reasoning = |t: &str| DeltaOp::AppendReasoning { text: t.into() };
    let delta = |kind: &str, field: &str, t: &str| {
        format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"{kind}\",\"{field}\":\"{t}\"}}}}\n\n")
    };
    let anthropic = [
        delta("thinking_delta", "thinking", "hm"),
        delta("thinking_delta", "thinking", "m"),
        delta("text_delta", "text", "Hel"),
        delta("text_delta", "text", "lo"),
        delta("text_delta", "text", " \\\"you\\\""),
    ]
    .concat();
    assert_eq!(
        ops(ProviderKind::Anthropic, &anthropic),
        vec![reasoning("hmm"), text("Hello \"you\"")]
    );
    let chunk =
        |delta: &str| format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{delta}}}]}}\n\n");
    let openai = [
        chunk(r#"{"content":"a"}"#),
        chunk(r#"{"content":"b"}"#),
        chunk(r#"{"reasoning_content":"r"}"#),
        chunk(r#"{"content":"c"}"#),
    ]
    .concat();
    assert_eq!(
        ops(ProviderKind::OpenaiChat, &openai),
        vec![text("ab"), reasoning("r"), text("c")]
    );
}
