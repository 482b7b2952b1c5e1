//! Thinking blocks (SPEC §3.3): merging the blocks a provider streams into one ordered list, and
//! filling empty thinking text at the end of a stream.
//!
//! Invariants: order is first-seen; a signature is opaque, so a later one replaces the earlier
//! (never concatenated); `redacted_thinking` blocks are kept byte for byte; existing thinking text
//! is never overwritten. Blocks are provider JSON objects; anything else is appended untouched.

use litemap::LiteMap;
use serde_json::Value;

const MATCH_KEYS: [&str; 3] = ["index", "id", "signature"];

/// Merges one incoming block into `acc` (SPEC §3.3).
///
/// The first of `index`, `id`, `signature` the incoming block has decides the match, always
/// together with `type`. On a match a string `signature` replaces the old one, and a
/// `type: "reasoning"` block (OpenAI Responses) copies its other non-null fields over. No key or
/// no match: appended.
pub fn merge_thinking_blocks(acc: &mut Vec<Value>, incoming: Value) {
    if block_type(&incoming) == Some("redacted_thinking") {
        acc.push(incoming);
        return;
    }
    let Some(position) = find_match(acc, &incoming) else {
        acc.push(incoming);
        return;
    };
    if let Some(target) = acc.get_mut(position) {
        merge_into(target, &incoming);
    }
}

/// The key the incoming block is matched by: its first present, non-null match key.
fn match_key(block: &Value) -> Option<(&'static str, &Value)> {
    MATCH_KEYS
        .iter()
        .find_map(|key| block.get(*key).filter(|v| !v.is_null()).map(|v| (*key, v)))
}

fn find_match(acc: &[Value], incoming: &Value) -> Option<usize> {
    let (key, value) = match_key(incoming)?;
    let kind = block_type(incoming);
    acc.iter().position(|block| {
        block_type(block) == kind
            && block_type(block) != Some("redacted_thinking")
            && block.get(key) == Some(value)
    })
}

fn merge_into(target: &mut Value, incoming: &Value) {
    let is_reasoning = block_type(incoming) == Some("reasoning");
    let (Some(target), Some(fields)) = (target.as_object_mut(), incoming.as_object()) else {
        return;
    };
    if let Some(signature) = fields.get("signature").filter(|s| s.is_string()) {
        target.insert("signature".into(), signature.clone());
    }
    if is_reasoning {
        for (key, value) in fields.iter().filter(|(k, v)| *k != "type" && !v.is_null()) {
            target.insert(key.clone(), value.clone());
        }
    }
}

fn block_type(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

/// At the end of a stream: a `thinking` block whose text is missing, empty or only whitespace
/// gets the reasoning streamed for its `index`. Returns whether any block changed.
pub fn fill_empty_thinking(
    blocks: &mut [Value],
    reasoning_by_index: &LiteMap<u64, String>,
) -> bool {
    let mut changed = false;
    for block in blocks.iter_mut() {
        if block_type(block) != Some("thinking") || !is_blank(block.get("thinking")) {
            continue;
        }
        let text = block
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|index| reasoning_by_index.get(&index))
            .filter(|text| !text.trim().is_empty());
        if let (Some(text), Some(fields)) = (text, block.as_object_mut()) {
            fields.insert("thinking".into(), Value::String(text.clone()));
            changed = true;
        }
    }
    changed
}

fn is_blank(text: Option<&Value>) -> bool {
    text.and_then(Value::as_str)
        .is_none_or(|t| t.trim().is_empty())
}
