//! `merge_thinking_blocks` and `fill_empty_thinking` (SPEC §3.3), native and wasm.

use litemap::LiteMap;
use palaver::thinking::{fill_empty_thinking, merge_thinking_blocks};
use serde_json::{json, Value};

fn merged(blocks: Vec<Value>) -> Vec<Value> {
    let mut acc = Vec::new();
    for block in blocks {
        merge_thinking_blocks(&mut acc, block);
    }
    acc
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn same_index_replaces_the_signature() {
    let acc = merged(vec![
        json!({"type": "thinking", "index": 0, "thinking": "hm", "signature": ""}),
        json!({"type": "thinking", "index": 0, "signature": "sig"}),
    ]);
    assert_eq!(
        acc,
        vec![json!({"type": "thinking", "index": 0, "thinking": "hm", "signature": "sig"})]
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn successive_signature_deltas_end_with_the_last() {
    let acc = merged(
        ["a", "b", "c"]
            .iter()
            .map(|s| json!({"type": "thinking", "index": 2, "signature": s}))
            .collect(),
    );
    assert_eq!(acc.len(), 1);
    assert_eq!(acc[0]["signature"], "c");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn different_indices_stay_separate_in_first_seen_order() {
    let acc = merged(vec![
        json!({"type": "thinking", "index": 3, "signature": "x"}),
        json!({"type": "thinking", "index": 1, "signature": "y"}),
        json!({"type": "thinking", "index": 3, "signature": "z"}),
    ]);
    assert_eq!(acc.len(), 2);
    assert_eq!(acc[0]["index"], 3);
    assert_eq!(acc[0]["signature"], "z");
    assert_eq!(acc[1]["signature"], "y");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn same_index_different_type_stays_separate() {
    let acc = merged(vec![
        json!({"type": "thinking", "index": 0, "signature": "x"}),
        json!({"type": "reasoning", "index": 0, "signature": "y"}),
    ]);
    assert_eq!(acc.len(), 2);
    assert_eq!(acc[0]["signature"], "x");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn matches_by_id_without_index() {
    let acc = merged(vec![
        json!({"type": "thinking", "id": "a", "signature": "1"}),
        json!({"type": "thinking", "id": "b", "signature": "2"}),
        json!({"type": "thinking", "id": "a", "signature": "3"}),
    ]);
    assert_eq!(acc.len(), 2);
    assert_eq!(acc[0]["signature"], "3");
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn matches_by_signature_when_no_index_or_id() {
    let acc = merged(vec![
        json!({"type": "thinking", "thinking": "t", "signature": "s"}),
        json!({"type": "thinking", "signature": "s"}),
    ]);
    assert_eq!(
        acc,
        vec![json!({"type": "thinking", "thinking": "t", "signature": "s"})]
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_block_without_keys_is_appended() {
    let acc = merged(vec![
        json!({"type": "thinking", "thinking": "a"}),
        json!({"type": "thinking", "thinking": "a"}),
    ]);
    assert_eq!(acc.len(), 2);
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn a_sparse_reasoning_item_is_enriched_by_its_complete_version() {
    let acc = merged(vec![
        json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": null}),
        json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "s"}],
               "encrypted_content": "gAAA", "status": null}),
    ]);
    assert_eq!(
        acc,
        vec![json!({"type": "reasoning", "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "s"}], "encrypted_content": "gAAA"})]
    );
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn empty_thinking_is_filled_from_its_index_and_text_is_never_overwritten() {
    let mut blocks = vec![
        json!({"type": "thinking", "index": 0, "thinking": "", "signature": "a"}),
        json!({"type": "thinking", "index": 1, "thinking": "  \n", "signature": "b"}),
        json!({"type": "thinking", "index": 2, "thinking": "kept", "signature": "c"}),
        json!({"type": "thinking", "index": 5, "signature": "d"}),
    ];
    let reasoning: LiteMap<u64, String> = [(0, "zero"), (1, "one"), (2, "two")]
        .into_iter()
        .map(|(i, t)| (i, t.to_string()))
        .collect();
    assert!(fill_empty_thinking(&mut blocks, &reasoning));
    assert_eq!(blocks[0]["thinking"], "zero");
    assert_eq!(blocks[1]["thinking"], "one");
    assert_eq!(blocks[2]["thinking"], "kept");
    assert!(blocks[3].get("thinking").is_none());
    assert!(!fill_empty_thinking(&mut blocks, &reasoning));
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn redacted_thinking_is_untouched() {
    let redacted = json!({"type": "redacted_thinking", "data": "EqkE=="});
    let acc = merged(vec![
        redacted.clone(),
        json!({"type": "redacted_thinking", "data": "EqkE==", "signature": "x"}),
        json!({"type": "thinking", "index": 0, "signature": "s"}),
    ]);
    assert_eq!(acc[0], redacted);
    assert_eq!(acc.len(), 3);
    let mut blocks = vec![redacted.clone()];
    fill_empty_thinking(&mut blocks, &LiteMap::from_iter([(0, "r".to_string())]));
    assert_eq!(blocks, vec![redacted]);
}
