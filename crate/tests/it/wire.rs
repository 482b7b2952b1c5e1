//! Provider transcripts from `../shared/wire` through the decoders, compared with the SDK oracles
//! by SPEC §6.3's mapping. Where the oracle is not the message the stream describes, a file
//! `tests/fixtures/wire/<provider>/<case>.json` gives `{why, expected}` and wins.
//! Providers covered: those with a decoder (`COVERED`); a wire case of a covered provider
//! without an oracle, or an empty wire table, fails the test.

use crate::support::oracle::{
    compare_assembled, expected_anthropic, expected_gemini, expected_openai_chat,
    expected_responses,
};
use crate::support::{fixture, wire, WIRE};
use palaver::decode::{decode_stream, DecodeError, Decoded};
use palaver::provider::ProviderKind;
use serde_json::Value;

pub const COVERED: [&str; 4] = ["openai-chat", "anthropic", "gemini", "openai-responses"];

pub struct WireCase {
    pub provider: ProviderKind,
    pub name: String,
    pub sse: &'static str,
    pub splits: Option<Vec<usize>>,
    pub expected: Value,
}

/// Every transcript of the covered providers, with its expectation.
pub fn cases() -> Vec<WireCase> {
    assert!(
        !WIRE.is_empty(),
        "../shared/wire is missing: the wire cases cannot run"
    );
    let mut cases = Vec::new();
    for (path, sse) in WIRE.iter().filter(|(p, _)| p.ends_with(".sse")) {
        let Some((provider_name, file)) = path.split_once('/') else {
            continue;
        };
        if !COVERED.contains(&provider_name) {
            continue;
        }
        let provider = ProviderKind::parse(provider_name)
            .unwrap_or_else(|| panic!("unknown provider dir {provider_name}"));
        let name = file.trim_end_matches(".sse").to_string();
        let expected = expectation(provider_name, &name);
        let splits = wire(&format!("{provider_name}/{name}.splits.json")).map(parse_splits);
        cases.push(WireCase {
            provider,
            name,
            sse,
            splits,
            expected,
        });
    }
    cases
}

fn expectation(provider: &str, name: &str) -> Value {
    if let Some(text) = fixture(&format!("wire/{provider}/{name}.json")) {
        let over: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("wire/{provider}/{name}.json: {e}"));
        assert!(
            over["why"].as_str().is_some_and(|w| w.len() > 20),
            "wire/{provider}/{name}.json must say why"
        );
        return over["expected"].clone();
    }
    let oracle = wire(&format!("{provider}/{name}.oracle.json"))
        .unwrap_or_else(|| panic!("{provider}/{name} has no oracle"));
    let oracle: Value =
        serde_json::from_str(oracle).unwrap_or_else(|e| panic!("{provider}/{name} oracle: {e}"));
    match provider {
        "openai-chat" => expected_openai_chat(&oracle),
        "anthropic" => expected_anthropic(&oracle),
        "gemini" => expected_gemini(&oracle),
        "openai-responses" => expected_responses(&oracle),
        other => panic!("no oracle mapping for {other}"),
    }
}

/// `.splits.json`: the piece sizes or cut offsets the variant is served in.
fn parse_splits(text: &str) -> Vec<usize> {
    let value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let list = value
        .get("split_offsets")
        .or(value.get("offsets"))
        .or(value.get("splits"))
        .or(value.get("cuts"))
        .unwrap_or(&value);
    list.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .map(|n| n as usize)
                .collect()
        })
        .unwrap_or_default()
}

pub fn chunks_at<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        if cut > start && cut < bytes.len() {
            pieces.push(&bytes[start..cut]);
            start = cut;
        }
    }
    pieces.push(&bytes[start..]);
    pieces
}

pub fn decode(case: &WireCase, chunks: &[&[u8]]) -> Decoded {
    match decode_stream(case.provider, chunks) {
        Ok(decoded) => decoded,
        Err(DecodeError::Stream { error, .. }) => panic!("{}: {error}", case.name),
        Err(DecodeError::Unsupported(kind)) => {
            panic!("{}: no decoder for {}", case.name, kind.name())
        }
    }
}

#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn wire_cases_match_their_oracles() {
    let cases = cases();
    assert!(
        cases.len() >= 35,
        "expected the wire cases of every covered provider, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        let bytes = case.sse.as_bytes();
        let chunks = chunks_at(bytes, case.splits.as_deref().unwrap_or(&[]));
        let decoded = decode(case, &chunks);
        if let Err(e) = compare_assembled(&case.expected, &decoded.assembled.to_value()) {
            failures.push(format!("{}: {e}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} wire cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Assembling without keeping the ops (the page's `StreamAssembly`, `palaver decode --bench`)
/// moves each op's payload into the draft: the message is the same, failures included, in the
/// case's splits and one byte at a time.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn assembling_without_ops_gives_the_same_message() {
    use palaver::decode::assemble_stream;
    let cases = cases();
    assert!(!cases.is_empty());
    for case in &cases {
        let bytes = case.sse.as_bytes();
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        for chunks in [
            chunks_at(bytes, case.splits.as_deref().unwrap_or(&[])),
            singles,
        ] {
            let (kept, moved) = (
                decode_stream(case.provider, &chunks),
                assemble_stream(case.provider, &chunks),
            );
            match (kept, moved) {
                (Ok(kept), Ok(moved)) => {
                    assert_eq!(kept.assembled, moved.assembled, "{}", case.name);
                    assert_eq!(kept.complete, moved.complete, "{}", case.name);
                    assert!(moved.ops.is_empty(), "{}: ops were kept", case.name);
                }
                (
                    Err(DecodeError::Stream {
                        error: a,
                        partial: p,
                    }),
                    Err(DecodeError::Stream {
                        error: b,
                        partial: q,
                    }),
                ) => {
                    assert_eq!(a, b, "{}", case.name);
                    assert_eq!(p.assembled, q.assembled, "{}", case.name);
                }
                (kept, moved) => panic!("{}: {kept:?} against {moved:?}", case.name),
            }
        }
    }
}

/// Issue 14 §6, one accumulation path: every transcript through `Engine::handle` — the bytes fed
/// as the browser host feeds them, in the case's splits — and the reply the engine streams to its
/// subscribers (its `stream_delta` ops applied to a draft, its `stream_finished` reason) compared
/// with the SDK oracle. Cases that end in a provider failure are the stream-failure suite's
/// (`security_streams`, D1–D24): there the engine keeps a partial by SPEC §6.5's rules instead.
#[cfg_attr(not(target_arch = "wasm32"), test)]
#[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
fn wire_cases_through_the_engine_match_their_oracles() {
    use crate::support::harness::Harness;
    use palaver::delta::Draft;
    use palaver::event::Event;
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases()
        .iter()
        .filter(|c| c.expected["finish_reason"] != "error")
    {
        let kind = case.provider.name();
        let mut h = Harness::with_config_patch(&serde_json::json!({
            "providers": [{"kind": kind, "base_url": "http://127.0.0.1:9/v1", "model": "m"}],
        }));
        h.open("c1", None);
        h.command("c1", serde_json::json!({"type": "set_params", "client_request_id": "p", "patch": {"provider": kind}}));
        h.command(
            "c1",
            serde_json::json!({"type": "user_message", "client_request_id": "u", "content": "hi"}),
        );
        let mut steps = Vec::new();
        for chunk in chunks_at(case.sse.as_bytes(), case.splits.as_deref().unwrap_or(&[])) {
            steps.push(h.stream(chunk));
        }
        steps.push(h.stream_end());
        let mut draft = Draft::default();
        let mut finish = None;
        for event in steps.iter().flat_map(|s| s.events.iter()) {
            match &event.event {
                Event::StreamDelta { ops, .. } => ops.iter().for_each(|op| draft.apply(op)),
                Event::StreamFinished { finish_reason, .. } => finish = Some(finish_reason.clone()),
                _ => {}
            }
        }
        let Some(finish) = finish else {
            failures.push(format!(
                "{kind}/{}: the engine did not finish the stream",
                case.name
            ));
            continue;
        };
        let assembled = draft.into_assembled(Some(&finish), None);
        if let Err(e) = compare_assembled(&case.expected, &assembled.to_value()) {
            failures.push(format!("{kind}/{}: {e}", case.name));
        }
        checked += 1;
    }
    assert!(
        checked >= 30,
        "only {checked} cases went through the engine"
    );
    assert!(
        failures.is_empty(),
        "{} cases differ through the engine:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
