//! Golden request bodies: `tests/fixtures/requests/*.json` give a provider, thread params, a
//! system prompt, tools, a stored history and optionally a token `budget`; the built request must
//! equal `expected` exactly (URL; the body byte for byte, keys in the file's order), carry the expected headers and report the expected
//! `compression_strength`, or fail with the expected `error`. These are also the context
//! pipeline's conformance cases (history in → request body out). Runs natively and in Chromium.

use crate::support::fixtures_in;
use palaver::message::ChatMessage;
use palaver::request::{build_request, ProviderConfig, RequestInput};
use palaver::thread::ThreadParams;
use palaver::tools::ToolSpec;
use serde_json::Value;

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn request_bodies_match_their_golden_files() {
    let fixtures = fixtures_in("requests");
    assert!(!fixtures.is_empty(), "no request fixtures");
    for (name, text) in fixtures {
        let fixture: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let parse = |key: &str| fixture.get(key).cloned().unwrap_or(Value::Null);
        let provider: ProviderConfig = serde_json::from_value(parse("provider"))
            .unwrap_or_else(|e| panic!("{name} provider: {e}"));
        let thread: ThreadParams = serde_json::from_value(parse("thread"))
            .unwrap_or_else(|e| panic!("{name} thread: {e}"));
        let tools: Vec<ToolSpec> = serde_json::from_value(parse("tools")).unwrap_or_default();
        let history: Vec<ChatMessage> = serde_json::from_value(parse("history"))
            .unwrap_or_else(|e| panic!("{name} history: {e}"));
        let built = build_request(&RequestInput {
            provider: &provider,
            thread: &thread,
            system_prompt: fixture["system_prompt"].as_str(),
            tools: &tools,
            history: &history,
            budget: fixture["budget"].as_u64(),
            tiers: None,
        });
        if fixture.get("expected").is_none() {
            bless(
                name,
                &fixture,
                built.as_ref().map(|r| r.clone()).map_err(|e| e.to_string()),
            );
            continue;
        }
        let expected = &fixture["expected"];
        if let Some(error) = expected["error"].as_str() {
            let got = built.map(|r| r.body).err().map(|e| e.to_string());
            assert!(
                got.as_deref().is_some_and(|g| g.contains(error)),
                "{name}: expected the error {error:?}, got {got:?}"
            );
            continue;
        }
        let request = built.unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(strength) = expected.get("compression_strength") {
            assert_eq!(
                &serde_json::to_value(request.compression_strength).unwrap_or_default(),
                strength,
                "{name}: compression strength"
            );
        }
        assert_eq!(
            Value::String(request.url.clone()),
            expected["url"],
            "{name}: url"
        );
        // Byte for byte: the file's body written back in its own key order (`preserve_order`)
        // is the text the provider gets.
        let expected_text = expected["body"].to_string();
        assert_eq!(
            request.body.text(),
            expected_text,
            "{name}: body\n got: {}\n expected: {expected_text}",
            request.body.text()
        );
        for (key, value) in expected["headers"].as_object().cloned().unwrap_or_default() {
            assert_eq!(
                request.headers.get(&key),
                Some(&value),
                "{name}: header {key}"
            );
        }
    }
}

/// A fixture without `expected` fails, unless `PALAVER_BLESS=1` (native only): then the current
/// output is written into it, to be reviewed before committing.
fn bless(name: &str, fixture: &Value, built: Result<palaver::request::ProviderRequest, String>) {
    let blessing =
        cfg!(not(target_arch = "wasm32")) && std::env::var("PALAVER_BLESS").is_ok_and(|v| v == "1");
    assert!(
        blessing,
        "{name} has no `expected`; run with PALAVER_BLESS=1 to write it"
    );
    let expected = match built {
        Ok(request) => serde_json::json!({
            "url": request.url,
            "compression_strength": request.compression_strength,
            "body": request.body_json(),
        }),
        Err(error) => serde_json::json!({"error": error}),
    };
    let mut fixture = fixture.clone();
    fixture["expected"] = expected;
    let path = format!("{}/../tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = serde_json::to_string_pretty(&fixture).unwrap_or_default() + "\n";
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{path}: {e}"));
}

/// Through the engine: an Anthropic round with thinking, a signature and a tool call; the next
/// request of the same turn sends the thinking block back byte for byte, before the tool_use.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn anthropic_thinking_round_trips_within_the_tool_turn() {
    use crate::support::harness::Harness;
    use palaver::engine::{Effect, Input};
    use serde_json::json;
    let mut h = Harness::with_config_patch(
        &json!({"providers": [{"kind": "anthropic", "base_url": "https://api.anthropic.com/v1", "model": "claude-test"}]}),
    );
    h.open("c", None);
    h.command("c", json!({"type": "set_params", "patch": {"provider": "anthropic", "thinking_budget": 1024}, "client_request_id": "p"}));
    h.command(
        "c",
        json!({"type": "user_message", "content": "read a.txt", "client_request_id": "u"}),
    );
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-test", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Read it first."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2lnbmF0dXJl+/=="}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a.txt\"}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}}),
        json!({"type": "message_stop"}),
    ];
    let sse: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect();
    h.stream(sse.as_bytes());
    h.stream_end();
    let step = h.handle(Input::ToolResult {
        chat_id: "c".into(),
        tool_call_id: "toolu_9".into(),
        content: "hello".into(),
        tool_failed: false,
        data: None,
        session_metadata: None,
        parts: Vec::new(),
    });
    let body = step
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::StartRequest { request, .. } => Some(request.body_json()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no second request: {:?}", step.effects));
    let assistant = &body["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "Read it first.", "signature": "c2lnbmF0dXJl+/=="}),
        "{body}"
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(assistant["content"][1]["input"], json!({"path": "a.txt"}));
    assert_eq!(
        body["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_9", "content": "hello", "cache_control": {"type": "ephemeral"}}),
        "the last turn carries the moving cache breakpoint"
    );
}

/// The `local` kind (the model in the page) is OpenAI chat on the wire: for every OpenAI chat
/// golden case the body and URL are the same, only the request's kind differs (the host routes
/// by it); and a stream decodes to the same message.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn the_local_kind_is_openai_chat_on_the_wire() {
    use palaver::provider::ProviderKind;
    let mut compared = 0;
    for (name, text) in fixtures_in("requests") {
        let fixture: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        if fixture["provider"]["kind"] != "openai-chat" || fixture["expected"].get("body").is_none()
        {
            continue;
        }
        let mut provider: ProviderConfig = serde_json::from_value(fixture["provider"].clone())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        provider.kind = ProviderKind::Local;
        let thread: ThreadParams =
            serde_json::from_value(fixture["thread"].clone()).unwrap_or_default();
        let tools: Vec<ToolSpec> =
            serde_json::from_value(fixture["tools"].clone()).unwrap_or_default();
        let history: Vec<ChatMessage> = serde_json::from_value(fixture["history"].clone())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let request = build_request(&RequestInput {
            provider: &provider,
            thread: &thread,
            system_prompt: fixture["system_prompt"].as_str(),
            tools: &tools,
            history: &history,
            budget: fixture["budget"].as_u64(),
            tiers: None,
        })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(request.provider, ProviderKind::Local, "{name}");
        assert_eq!(
            request.body.text(),
            fixture["expected"]["body"].to_string(),
            "{name}: body"
        );
        assert_eq!(
            Value::String(request.url),
            fixture["expected"]["url"],
            "{name}: url"
        );
        compared += 1;
    }
    assert!(compared > 0, "no OpenAI chat golden case to compare with");
    assert_eq!(ProviderKind::parse("local"), Some(ProviderKind::Local));
    let sse = crate::support::wire("openai-chat/parallel_tool_calls_gpt4o.sse").unwrap_or_default();
    assert!(!sse.is_empty(), "the wire transcript is missing");
    let decode = |kind| {
        palaver::decode::decode_stream(kind, &[sse.as_bytes()])
            .map(|d| (d.assembled.to_value(), d.complete))
    };
    let local = decode(ProviderKind::Local).unwrap_or_else(|e| panic!("local: {e:?}"));
    assert!(local.1, "the stream is complete");
    assert!(
        local.0["tool_calls"]
            .as_array()
            .is_some_and(|c| c.len() > 1),
        "the calls are decoded: {}",
        local.0
    );
    assert_eq!(Some(local), decode(ProviderKind::OpenaiChat).ok());
}

/// Issue 17: an MCP tool's images reach each provider the way it takes them — inside the tool
/// result (Anthropic), in the function call's output (Responses), beside the function response
/// (Gemini), or as a user message right after the step's results (OpenAI chat, which takes no
/// images in a tool message); the text is always the tool result's own.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn tool_result_images_reach_each_provider_in_its_shape() {
    use palaver::provider::ProviderKind;
    use serde_json::json;
    let image =
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}});
    let history: Vec<ChatMessage> = serde_json::from_value(json!([
        {"message_id": "u", "role": "user", "content": "draw"},
        {"message_id": "a", "role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "mcp__everything__get-tiny-image", "arguments": "{}"}}]},
        {"message_id": "t", "role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "A tiny image."}, image]},
        {"message_id": "a2", "role": "assistant", "content": "Done."},
    ]))
    .unwrap_or_default();
    let body = |kind: ProviderKind| {
        let provider = ProviderConfig {
            kind,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "m".into(),
            ..Default::default()
        };
        build_request(&RequestInput {
            provider: &provider,
            thread: &ThreadParams::default(),
            system_prompt: None,
            tools: &[],
            history: &history,
            budget: None,
            tiers: None,
        })
        .map(|r| r.body_json())
        .unwrap_or_default()
    };
    let openai = body(ProviderKind::OpenaiChat);
    assert_eq!(
        openai["messages"][2],
        json!({"role": "tool", "content": "A tiny image.", "tool_call_id": "call_1"}),
        "{openai}"
    );
    assert_eq!(openai["messages"][3]["role"], "user", "{openai}");
    assert_eq!(
        openai["messages"][3]["content"][1], image,
        "the image follows the results"
    );
    assert_eq!(openai["messages"][4]["role"], "assistant");
    let anthropic = body(ProviderKind::Anthropic);
    let result = &anthropic["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{anthropic}");
    assert_eq!(
        result["content"][0],
        json!({"type": "text", "text": "A tiny image."})
    );
    assert_eq!(
        result["content"][1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    );
    let responses = body(ProviderKind::OpenaiResponses);
    let output = responses["input"]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["type"] == "function_call_output"))
        .map(|i| i["output"].clone())
        .unwrap_or_default();
    assert_eq!(
        output[0],
        json!({"type": "input_text", "text": "A tiny image."}),
        "{responses}"
    );
    assert_eq!(output[1]["type"], "input_image");
    let gemini = body(ProviderKind::Gemini);
    let parts = &gemini["contents"][2]["parts"];
    assert!(parts[0].get("functionResponse").is_some(), "{gemini}");
    assert_eq!(
        parts[1],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
    );
}

/// Issue 17, SECURITY F8: an MCP server's tool asks before it runs, unless a server the user
/// trusts marks it read-only; the user's rule wins either way; the workspace tools keep SPEC
/// §8.4's defaults.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn mcp_tools_ask_unless_read_only() {
    use palaver::thread::{ToolRule, ToolRules};
    let host = ToolRules::new();
    let mut thread = ThreadParams::default();
    assert_eq!(
        thread.rule_for(&host, "mcp__everything__echo", false),
        ToolRule::Ask
    );
    assert_eq!(
        thread.rule_for(&host, "mcp__memory__read_graph", true),
        ToolRule::Auto
    );
    assert_eq!(thread.rule_for(&host, "read_file", false), ToolRule::Auto);
    assert_eq!(thread.rule_for(&host, "write_file", true), ToolRule::Ask);
    thread
        .tool_policy
        .insert("mcp__memory__read_graph".into(), ToolRule::Deny);
    assert_eq!(
        thread.rule_for(&host, "mcp__memory__read_graph", true),
        ToolRule::Deny
    );
    // F8: the hint is the server's own word; only a server the user trusts sets a default.
    let untrusted: ToolSpec = serde_json::from_value(
        serde_json::json!({"name": "mcp__a__b", "annotations": {"readOnlyHint": true}}),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(!untrusted.is_read_only());
    let trusted: ToolSpec = serde_json::from_value(serde_json::json!({"name": "mcp__a__b", "annotations": {"readOnlyHint": true}, "trust_annotations": true}))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(trusted.is_read_only());
}

/// A long body is held in pieces (issue 41: never one body-sized buffer in the wasm memory), cut
/// between messages, and its text is serde_json's, byte for byte; a short one is one piece.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_long_body_is_held_in_pieces_of_the_same_text() {
    use palaver::request::RequestBody;
    let message = |i: usize| serde_json::json!({"role": "user", "content": format!("message {i}: {} \"quoted\" é ✓", "x".repeat(900))});
    let long =
        serde_json::json!({"model": "m", "messages": (0..400).map(message).collect::<Vec<_>>()});
    let body = RequestBody::write(&long);
    let expected = serde_json::to_string(&long).expect("plain data");
    assert!(
        body.pieces().len() > 4,
        "{} pieces for {} bytes",
        body.pieces().len(),
        body.len()
    );
    assert!(
        body.pieces().iter().all(|piece| piece.len() < 80 * 1024),
        "a piece far over 64 KB"
    );
    assert_eq!(body.text(), expected);
    assert_eq!(body.len(), expected.len());
    let short = serde_json::json!({"model": "m", "messages": [message(1)]});
    assert_eq!(RequestBody::write(&short).pieces().len(), 1);
    // Written out whole (a step's effects as JSON) it is the JSON value itself, and reads back.
    let round: RequestBody =
        serde_json::from_str(&serde_json::to_string(&body).expect("body")).expect("read back");
    assert_eq!(round, body);
}

/// A llama.cpp server (its `/props` answered) is asked for its prompt-reading progress with
/// `return_progress`, right after `stream_options`; no other server is (OpenAI refuses a
/// parameter it does not know), and a provider that did not say so is not.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn only_a_llama_cpp_server_is_asked_for_prompt_progress() {
    let body = |provider: Value| {
        let provider: ProviderConfig =
            serde_json::from_value(provider).unwrap_or_else(|e| panic!("{e}"));
        let history: Vec<ChatMessage> = serde_json::from_value(
            serde_json::json!([{"message_id": "u", "role": "user", "content": "hi"}]),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        build_request(&RequestInput {
            provider: &provider,
            thread: &ThreadParams::default(),
            system_prompt: None,
            tools: &[],
            history: &history,
            budget: None,
            tiers: None,
        })
        .map(|r| r.body.text())
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let llama = body(
        serde_json::json!({"kind": "openai-chat", "base_url": "http://127.0.0.1:8080/v1", "model": "m", "return_progress": true}),
    );
    assert!(
        llama.ends_with(r#""stream_options":{"include_usage":true},"return_progress":true}"#),
        "{llama}"
    );
    for other in [
        serde_json::json!({"kind": "openai-chat", "base_url": "https://api.openai.com/v1", "model": "m"}),
        serde_json::json!({"kind": "openai-chat", "base_url": "https://api.openai.com/v1", "model": "m", "return_progress": false}),
        serde_json::json!({"kind": "anthropic", "base_url": "https://api.anthropic.com/v1", "model": "m", "return_progress": true}),
        serde_json::json!({"kind": "openai-responses", "base_url": "https://api.openai.com/v1", "model": "m", "return_progress": true}),
    ] {
        assert!(!body(other.clone()).contains("return_progress"), "{other}");
    }
}
