//! The mapping of SPEC §6.3 from an SDK oracle (`*.oracle.json`) to the assembled message the
//! engine must produce, and the comparison (tool-call arguments compared as parsed JSON when both
//! parse; `content: null` and `""` are the same). Written apart from the engine's own code so a
//! mistake in one does not hide in the other.

use super::json::short;
use serde_json::{json, Map, Value};

/// The expected assembled message for an openai-chat oracle.
pub fn expected_openai_chat(oracle: &Value) -> Value {
    let root = if oracle["final"].is_null() {
        &oracle["accumulated"]["snapshot"]
    } else {
        &oracle["final"]
    };
    let choice = root["choices"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["index"].as_u64().unwrap_or(0) == 0))
        .cloned()
        .unwrap_or(Value::Null);
    let message = &choice["message"];
    let content = match (&message["content"], &message["refusal"]) {
        (Value::String(s), _) if !s.is_empty() => s.clone(),
        (_, Value::String(r)) => r.clone(),
        (Value::String(s), _) => s.clone(),
        _ => String::new(),
    };
    let reasoning = message["reasoning_content"]
        .as_str()
        .or(message["reasoning"].as_str())
        .unwrap_or("")
        .to_string();
    let tool_calls: Vec<Value> = message["tool_calls"]
        .as_array()
        .map(|calls| calls.iter().map(|c| json!({"id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}})).collect())
        .unwrap_or_default();
    let mut expected = json!({
        "role": "assistant",
        "content": content,
        "reasoning_content": reasoning,
        "tool_calls": tool_calls,
        "finish_reason": choice["finish_reason"],
        "usage": openai_usage(&root["usage"]),
    });
    if oracle["outcome"] == "error" {
        let error = &oracle["error"];
        let code = error["code"]
            .as_str()
            .map(str::to_string)
            .or_else(|| error["code"].as_u64().map(|n| n.to_string()))
            .or_else(|| error["error_type"].as_str().map(str::to_string))
            .or_else(|| error["body"]["type"].as_str().map(str::to_string))
            .unwrap_or_default();
        expected["finish_reason"] = json!("error");
        expected["error"] = json!({"code": code, "message": error["message"]});
    }
    expected
}

/// SPEC §6.4 for OpenAI-style usage, written out independently of the engine.
fn openai_usage(usage: &Value) -> Value {
    if !usage.is_object() {
        return Value::Null;
    }
    let mut out = Map::new();
    let mut put = |key: &str, value: &Value| {
        if let Some(n) = value.as_u64() {
            out.insert(key.to_string(), json!(n));
        }
    };
    put("prompt_tokens", &usage["prompt_tokens"]);
    put("completion_tokens", &usage["completion_tokens"]);
    put("total_tokens", &usage["total_tokens"]);
    put(
        "reasoning_tokens",
        &usage["completion_tokens_details"]["reasoning_tokens"],
    );
    let cached = [
        &usage["prompt_tokens_details"]["cached_tokens"],
        &usage["prompt_cache_hit_tokens"],
        &usage["cache_read_input_tokens"],
    ]
    .into_iter()
    .find(|v| v.is_u64())
    .cloned()
    .unwrap_or(Value::Null);
    put("cache_read_tokens", &cached);
    put(
        "cache_creation_tokens",
        &usage["cache_creation_input_tokens"],
    );
    Value::Object(out)
}

/// Compares an assembled message with an expectation; only the keys the expectation names.
pub fn compare_assembled(expected: &Value, actual: &Value) -> Result<(), String> {
    let Value::Object(fields) = expected else {
        return Err("expectation is not an object".into());
    };
    for (key, want) in fields {
        let got = &actual[key.as_str()];
        let same = match key.as_str() {
            "tool_calls" => same_tool_calls(want, got),
            "content" | "reasoning_content" => text_of(want) == text_of(got),
            _ => want == got,
        };
        if !same {
            return Err(format!(
                "{key}: got {}, expected {}",
                short(got),
                short(want)
            ));
        }
    }
    Ok(())
}

fn text_of(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

fn same_tool_calls(want: &Value, got: &Value) -> bool {
    let (Some(want), Some(got)) = (want.as_array(), got.as_array()) else {
        return want == got;
    };
    want.len() == got.len()
        && want.iter().zip(got).all(|(w, g)| {
            w["id"] == g["id"]
                && w["function"]["name"] == g["function"]["name"]
                && same_arguments(&w["function"]["arguments"], &g["function"]["arguments"])
        })
}

fn same_arguments(want: &Value, got: &Value) -> bool {
    let parse = |v: &Value| {
        v.as_str()
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
    };
    match (parse(want), parse(got)) {
        (Some(w), Some(g)) => w == g,
        _ => want == got,
    }
}

/// The error an oracle raised, as the assembled message carries it (`finish_reason: "error"`).
fn oracle_failure(oracle: &Value) -> Option<Value> {
    if oracle["outcome"] != "error" {
        return None;
    }
    let error = &oracle["error"];
    let body_error = &error["body"]["error"];
    let code = error["error_type"]
        .as_str()
        .or(body_error["type"].as_str())
        .or(error["code"].as_str())
        .or(body_error["code"].as_str())
        .unwrap_or_default();
    let message = body_error["message"]
        .as_str()
        .or(error["body"]["message"].as_str())
        .or(error["message"].as_str())
        .unwrap_or_default();
    Some(json!({"code": code, "message": message}))
}

fn with_failure(mut expected: Value, oracle: &Value) -> Value {
    if let Some(failure) = oracle_failure(oracle) {
        expected["finish_reason"] = json!("error");
        expected["error"] = failure;
    }
    expected
}

/// SPEC §6.3 for Anthropic: the final message's content blocks, by type. Thinking blocks carry
/// their content-block position as `index` (the engine's merge key, SPEC §3.3); redacted ones
/// are compared byte for byte.
pub fn expected_anthropic(oracle: &Value) -> Value {
    let message = &oracle["final"];
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    let mut content = String::new();
    let mut reasoning = String::new();
    let mut thinking = Vec::new();
    let mut tool_calls = Vec::new();
    let mut citations = Vec::new();
    let mut server = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        match block["type"].as_str().unwrap_or("") {
            "text" => {
                content.push_str(block["text"].as_str().unwrap_or(""));
                citations.extend(block["citations"].as_array().cloned().unwrap_or_default());
            }
            "thinking" => {
                reasoning.push_str(block["thinking"].as_str().unwrap_or(""));
                thinking.push(json!({"type": "thinking", "thinking": block["thinking"],
                    "signature": block["signature"], "index": index}));
            }
            "redacted_thinking" => thinking.push(block.clone()),
            "tool_use" => tool_calls.push(json!({"id": block["id"], "type": "function",
                "function": {"name": block["name"], "arguments": block["input"].to_string()}})),
            "server_tool_use" | "mcp_tool_use" => server.push(block.clone()),
            other if other.ends_with("_tool_result") => server.push(block.clone()),
            _ => {}
        }
    }
    let expected = if message.is_null() {
        json!({"role": "assistant", "content": "", "tool_calls": [], "usage": Value::Null})
    } else {
        json!({
            "role": "assistant",
            "content": content,
            "reasoning_content": reasoning,
            "thinking_blocks": thinking,
            "tool_calls": tool_calls,
            "citations": citations,
            "server_content_blocks": server,
            "finish_reason": message["stop_reason"],
            "usage": anthropic_usage(&message["usage"]),
        })
    };
    with_failure(expected, oracle)
}

/// SPEC §6.4 for Anthropic: the prompt counts every input token, cached or not.
fn anthropic_usage(usage: &Value) -> Value {
    let Some(input) = usage["input_tokens"].as_u64() else {
        return Value::Null;
    };
    let read = usage["cache_read_input_tokens"].as_u64();
    let write = usage["cache_creation_input_tokens"].as_u64();
    let mut out = Map::new();
    out.insert(
        "prompt_tokens".into(),
        json!(input + read.unwrap_or(0) + write.unwrap_or(0)),
    );
    if let Some(n) = usage["output_tokens"].as_u64() {
        out.insert("completion_tokens".into(), json!(n));
    }
    if let Some(n) = read {
        out.insert("cache_read_tokens".into(), json!(n));
    }
    if let Some(n) = write {
        out.insert("cache_creation_tokens".into(), json!(n));
    }
    Value::Object(out)
}

/// SPEC §6.3 for Gemini: `final.text`, `final.thought_text`, `final.function_calls` (id
/// `call_<n>` when Gemini gives none), the last `usage_metadata`, the finish reason in OpenAI
/// words (STOP → stop, MAX_TOKENS → length, others lowercased). From the raw chunks: each
/// distinct grounding chunk is a citation `{type: <kind>, ..}`, and each `thoughtSignature` a
/// thinking block carrying the thought text since the previous signature.
pub fn expected_gemini(oracle: &Value) -> Value {
    let last = &oracle["final"];
    let tool_calls: Vec<Value> = last["function_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(n, call)| {
            let id = call["id"]
                .as_str()
                .map_or(format!("call_{n}"), str::to_string);
            let args = if call["args"].is_null() {
                json!({})
            } else {
                call["args"].clone()
            };
            json!({"id": id, "type": "function",
                "function": {"name": call["name"], "arguments": args.to_string()}})
        })
        .collect();
    let finish = last["finish_reason"].as_str().map(|r| match r {
        "STOP" => "stop".to_string(),
        "MAX_TOKENS" => "length".to_string(),
        other => other.to_lowercase(),
    });
    let (citations, thinking) = gemini_chunk_walk(&last["chunks"]);
    let expected = json!({
        "role": "assistant",
        "content": last["text"],
        "reasoning_content": last["thought_text"],
        "tool_calls": tool_calls,
        "citations": citations,
        "thinking_blocks": thinking,
        "finish_reason": finish,
        "usage": gemini_usage(&last["usage_metadata"]),
    });
    with_failure(expected, oracle)
}

fn gemini_chunk_walk(chunks: &Value) -> (Vec<Value>, Vec<Value>) {
    let mut citations: Vec<Value> = Vec::new();
    let mut thinking = Vec::new();
    let mut thought = String::new();
    let mut calls = 0;
    for chunk in chunks.as_array().into_iter().flatten() {
        let candidate = &chunk["candidates"][0];
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let is_thought = part["thought"] == json!(true);
            if is_thought {
                thought.push_str(part["text"].as_str().unwrap_or(""));
            }
            let call_id = part["functionCall"].is_object().then(|| {
                calls += 1;
                part["functionCall"]["id"]
                    .as_str()
                    .map_or(format!("call_{}", calls - 1), str::to_string)
            });
            if let Some(signature) = part["thoughtSignature"].as_str().map(standard_base64) {
                let kind = match (&call_id, is_thought) {
                    (Some(_), _) => "function_call",
                    (None, true) => "thought",
                    (None, false) => "text",
                };
                let mut block = json!({"type": "thinking", "thinking": thought,
                    "signature": signature, "index": thinking.len(), "part": kind});
                if let Some(id) = call_id {
                    block["tool_call_id"] = json!(id);
                }
                thinking.push(block);
                thought.clear();
            }
        }
        let grounding = candidate["groundingMetadata"]["groundingChunks"].as_array();
        for source in grounding.into_iter().flatten() {
            if let Some((kind, body)) = source.as_object().and_then(|o| o.iter().next()) {
                let mut citation = body.clone();
                citation["type"] = json!(kind);
                if !citations.contains(&citation) {
                    citations.push(citation);
                }
            }
        }
    }
    (citations, thinking)
}

/// google-genai holds `thoughtSignature` as bytes and dumps them URL-safe base64; the wire (and
/// what the engine keeps, to send back unchanged) is standard base64.
fn standard_base64(text: &str) -> String {
    text.replace('-', "+").replace('_', "/")
}

fn gemini_usage(usage: &Value) -> Value {
    if !usage.is_object() {
        return Value::Null;
    }
    let mut out = Map::new();
    for (from, to) in [
        ("promptTokenCount", "prompt_tokens"),
        ("candidatesTokenCount", "completion_tokens"),
        ("thoughtsTokenCount", "reasoning_tokens"),
        ("cachedContentTokenCount", "cache_read_tokens"),
        ("totalTokenCount", "total_tokens"),
    ] {
        if let Some(n) = usage[from].as_u64() {
            out.insert(to.into(), json!(n));
        }
    }
    Value::Object(out)
}

/// SPEC §6.3 for Responses: `output_text`; reasoning = every summary text, joined by a blank
/// line; thinking blocks = the reasoning items; tool calls from `function_call` items (id =
/// `call_id`); server blocks = the other `*_call` items; citations = the output texts'
/// annotations; finish reason `tool_calls` when there are function calls, else `stop` (`length`
/// when incomplete for `max_output_tokens`). Null fields of items are left out.
pub fn expected_responses(oracle: &Value) -> Value {
    let response = &oracle["final"];
    let output = response["output"].as_array().cloned().unwrap_or_default();
    let mut summaries = Vec::new();
    let mut thinking = Vec::new();
    let mut tool_calls = Vec::new();
    let mut server = Vec::new();
    let mut citations = Vec::new();
    for item in &output {
        match item["type"].as_str().unwrap_or("") {
            "reasoning" => {
                for part in item["summary"].as_array().into_iter().flatten() {
                    summaries.push(part["text"].as_str().unwrap_or("").to_string());
                }
                thinking.push(no_nulls(item));
            }
            "function_call" => tool_calls.push(json!({"id": item["call_id"], "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]}})),
            "message" => {
                for part in item["content"].as_array().into_iter().flatten() {
                    citations.extend(part["annotations"].as_array().cloned().unwrap_or_default());
                }
            }
            "custom_tool_call" => {}
            other if other.ends_with("_call") => server.push(no_nulls(item)),
            _ => {}
        }
    }
    let finish = match response["status"].as_str() {
        Some("incomplete") => json!(match response["incomplete_details"]["reason"].as_str() {
            Some("max_output_tokens") => "length",
            Some(other) => other,
            None => "incomplete",
        }),
        Some(_) if !tool_calls.is_empty() => json!("tool_calls"),
        Some(_) => json!("stop"),
        None => Value::Null,
    };
    let expected = json!({
        "role": "assistant",
        "content": response["output_text"].as_str().unwrap_or(""),
        "reasoning_content": summaries.join("\n\n"),
        "thinking_blocks": thinking,
        "tool_calls": tool_calls,
        "server_content_blocks": server,
        "citations": citations,
        "finish_reason": finish,
        "usage": responses_usage(&response["usage"]),
    });
    with_failure(expected, oracle)
}

/// The SDK's dump adds its own keys (`parsed_arguments`, `parsed`) and nulls; neither is wire.
fn no_nulls(item: &Value) -> Value {
    let fields = item.as_object().cloned().unwrap_or_default();
    Value::Object(fields.into_iter().filter(|(_, v)| !v.is_null()).collect())
}

fn responses_usage(usage: &Value) -> Value {
    if !usage.is_object() {
        return Value::Null;
    }
    let mut out = Map::new();
    for (path, to) in [
        (&["input_tokens"][..], "prompt_tokens"),
        (&["output_tokens"][..], "completion_tokens"),
        (
            &["input_tokens_details", "cached_tokens"][..],
            "cache_read_tokens",
        ),
        (
            &["output_tokens_details", "reasoning_tokens"][..],
            "reasoning_tokens",
        ),
        (&["total_tokens"][..], "total_tokens"),
    ] {
        let value = path.iter().fold(usage, |v, k| &v[*k]);
        if let Some(n) = value.as_u64() {
            out.insert(to.into(), json!(n));
        }
    }
    Value::Object(out)
}
