//! Issue 20: the literal fast path for per-token events (`provider::literal`) reads what
//! serde_json reads, and refuses — leaving the event to the general reader — whatever it does
//! not read exactly. Checked at the cursor (strings and indexes of every kind, valid or not) and
//! at the decoder (a stream of deltas gives the same message whether its events take the fast
//! path or, written in another key order or spacing, the general one).

use palaver::decode::decode_stream;
use palaver::provider::literal::Cursor;
use palaver::provider::ProviderKind;
use proptest::prelude::*;
use serde_json::Value;

/// What the cursor reads of `text` as a string, and nothing after it.
fn cursor_string(text: &str) -> Option<String> {
    let mut cursor = Cursor::new(text);
    let read = cursor.string()?.into_owned();
    cursor.end().map(|_| read)
}

fn cursor_index(text: &str) -> Option<u64> {
    let mut cursor = Cursor::new(text);
    let read = cursor.index()?;
    cursor.end().map(|_| read)
}

/// The cursor never reads a text serde_json refuses, and reads what serde_json reads.
fn agrees_on_string(text: &str) {
    let serde = serde_json::from_str::<String>(text).ok();
    if let Some(ours) = cursor_string(text) {
        assert_eq!(Some(ours), serde, "{text:?}");
    }
}

#[test]
fn strings_read_as_serde_json_reads_them() {
    for text in [
        r#""plain""#,
        r#""""#,
        r#""with \"quotes\" and \\ backslash""#,
        r#""line\nbreak\ttab\u00e9\ud83d\udc4b""#,
        "\"raw unicode é 👋\"",
        "  \"spaced\"  ",
    ] {
        assert_eq!(
            cursor_string(text),
            serde_json::from_str::<String>(text).ok(),
            "{text:?}"
        );
        assert!(cursor_string(text).is_some(), "{text:?}");
    }
    // What JSON refuses is not read: a raw control byte, a bad escape, a lone surrogate escape,
    // an unterminated string, a string ending in a backslash.
    for text in [
        "\"tab\tinside\"",
        "\"nul\u{0}\"",
        r#""bad \x escape""#,
        r#""lone \ud83d surrogate""#,
        r#""unterminated"#,
        r#""ends in \"#,
        r#""\"#,
        "plain",
    ] {
        assert_eq!(cursor_string(text), None, "{text:?}");
        agrees_on_string(text);
    }
}

#[test]
fn indexes_read_as_serde_json_reads_them() {
    for (text, expected) in [
        ("0", Some(0)),
        ("7", Some(7)),
        ("10000", Some(10_000)),
        ("18446744073709551615", Some(u64::MAX)),
        // Refused: JSON refuses them, or serde_json reads another type.
        ("18446744073709551616", None),
        ("01", None),
        ("-1", None),
        ("1.0", None),
        ("1e3", None),
        ("", None),
        ("x", None),
    ] {
        assert_eq!(cursor_index(text), expected, "{text:?}");
        if let Some(n) = expected {
            assert_eq!(serde_json::from_str::<u64>(text).ok(), Some(n));
        }
    }
}

proptest! {
    #[test]
    fn any_json_string_reads_as_serde_json_reads_it(s in "\\PC*", raw in any::<Vec<u8>>()) {
        // Every string serde_json writes (escapes, unicode) is read back exactly.
        let written = serde_json::to_string(&s).unwrap_or_default();
        prop_assert_eq!(cursor_string(&written), Some(s));
        // Arbitrary text between quotes: read only as serde_json reads it.
        let text = format!("\"{}\"", String::from_utf8_lossy(&raw));
        agrees_on_string(&text);
    }

    /// Texts dense in escapes, good and bad, and quotes that end a string early (random bytes
    /// rarely make them): read exactly when serde_json reads them, to the same text.
    #[test]
    fn escapes_read_as_serde_json_reads_them(
        inner in r#"(\\[\\"/bfnrtvx0]|\\u[0-9a-fA-FdD]{0,4}|[a-z "\\é👋]){0,24}"#,
    ) {
        let text = format!("\"{inner}\"");
        prop_assert_eq!(cursor_string(&text), serde_json::from_str::<String>(&text).ok(), "{:?}", text);
    }

    #[test]
    fn any_index_reads_as_serde_json_reads_it(text in "[-0-9.eE+]{0,24}") {
        if let Some(ours) = cursor_index(&text) {
            prop_assert_eq!(serde_json::from_str::<u64>(&text).ok(), Some(ours));
        }
    }

    /// A stream of deltas as Anthropic writes them (the fast path) and the same stream with each
    /// event's keys in another order and spaced out (the general reader) give one message.
    #[test]
    fn the_fast_and_the_general_reading_give_one_message(
        texts in proptest::collection::vec("\\PC{0,12}", 1..8),
        thinking in proptest::collection::vec("\\PC{0,12}", 0..4),
        index in 0u64..4,
    ) {
        let fast = stream(&texts, &thinking, index, false);
        let general = stream(&texts, &thinking, index, true);
        prop_assert_eq!(assembled(&fast), assembled(&general));
    }
}

fn stream(texts: &[String], thinking: &[String], index: u64, reordered: bool) -> String {
    let delta = |block: u64, kind: &str, field: &str, text: &str| {
        let text = serde_json::to_string(text).unwrap_or_default();
        let event = if reordered {
            format!(
                r#"{{ "index" : {block}, "delta" : {{ "{field}" : {text}, "type" : "{kind}" }}, "type" : "content_block_delta" }}"#
            )
        } else {
            format!(
                r#"{{"type":"content_block_delta","index":{block},"delta":{{"type":"{kind}","{field}":{text}}}     }}"#
            )
        };
        format!("event: content_block_delta\ndata: {event}\n\n")
    };
    let mut sse = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"role\":\"assistant\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
    );
    let thinking_block = index + 1;
    sse += &format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{thinking_block},\"content_block\":{{\"type\":\"thinking\",\"thinking\":\"\"}}}}\n\n");
    for text in thinking {
        sse += &delta(thinking_block, "thinking_delta", "thinking", text);
    }
    sse += &format!("event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":{thinking_block}}}\n\n");
    sse += &format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":{index},\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n");
    for text in texts {
        sse += &delta(index, "text_delta", "text", text);
    }
    sse += "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    sse
}

fn assembled(sse: &str) -> Value {
    match decode_stream(ProviderKind::Anthropic, &[sse.as_bytes()]) {
        Ok(decoded) => decoded.assembled.to_value(),
        Err(error) => Value::String(format!("{error:?}")),
    }
}

#[test]
fn a_stream_of_deltas_reads_the_same_both_ways() {
    let texts = ["Hello", " \"quoted\"\n", "👋 é", ""].map(String::from);
    let thinking = ["Let me think", " \\ done"].map(String::from);
    let fast = assembled(&stream(&texts, &thinking, 0, false));
    assert_eq!(fast["content"], "Hello \"quoted\"\n👋 é");
    assert_eq!(fast, assembled(&stream(&texts, &thinking, 0, true)));
}

/// Every real Anthropic transcript decodes to the same message when each event is written the
/// general way — its keys (and its delta's) in reverse order, pretty-printed over several
/// `data:` lines — so that no literal fast path and no typed reading in key order applies.
#[test]
fn every_anthropic_transcript_reads_the_same_the_general_way() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/wire/anthropic");
    let mut cases = 0;
    for entry in std::fs::read_dir(dir).expect("wire dir") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("sse") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("transcript");
        let general = written_the_general_way(&text);
        assert_ne!(general, text);
        assert_eq!(outcome(&text), outcome(&general), "{}", path.display());
        cases += 1;
    }
    assert!(cases >= 10, "only {cases} transcripts");
}

fn outcome(sse: &str) -> (Value, bool) {
    match decode_stream(ProviderKind::Anthropic, &[sse.as_bytes()]) {
        Ok(decoded) => (decoded.assembled.to_value(), true),
        Err(palaver::decode::DecodeError::Stream { partial, .. }) => {
            (partial.assembled.to_value(), false)
        }
        Err(other) => panic!("{other:?}"),
    }
}

fn written_the_general_way(sse: &str) -> String {
    let mut out = String::new();
    let mut decoder = palaver::sse::SseDecoder::new("anthropic");
    let mut write = |event: &palaver::sse::SseEvent| {
        if let Some(kind) = event.event {
            out += &format!("event: {kind}\n");
        }
        let data = match serde_json::from_str::<Value>(event.data) {
            Ok(mut value) => {
                reverse_keys(&mut value);
                if let Some(delta) = value.get_mut("delta") {
                    reverse_keys(delta);
                }
                serde_json::to_string_pretty(&value).unwrap_or_default()
            }
            Err(_) => event.data.to_string(),
        };
        for line in data.lines() {
            out += &format!("data: {line}\n");
        }
        out += "\n";
        Ok(())
    };
    decoder.feed(sse.as_bytes(), &mut write).expect("framing");
    decoder.finish(&mut write).expect("framing");
    out
}

fn reverse_keys(value: &mut Value) {
    if let Value::Object(map) = value {
        let entries: Vec<_> = std::mem::take(map).into_iter().rev().collect();
        map.extend(entries);
    }
}

#[test]
fn raw_json_is_equal_by_value_and_reads_from_text_or_value() {
    use palaver::message::RawJson;
    let spaced: RawJson = serde_json::from_str("{ \"a\" : [1, 2], \"b\": \"é\" }").expect("raw");
    let compact = RawJson::from_value(&serde_json::json!({"a": [1, 2], "b": "é"}));
    assert_eq!(compact.as_str(), r#"{"a":[1,2],"b":"é"}"#);
    assert_eq!(spaced, compact);
    assert_ne!(
        compact,
        RawJson::from_value(&serde_json::json!({"a": [2, 1]}))
    );
    // Written as it came, read back through a `Value` (how the engine's commands are read).
    assert_eq!(
        serde_json::to_string(&spaced).ok().as_deref(),
        Some(spaced.as_str())
    );
    let from_value: RawJson =
        serde_json::from_value(serde_json::json!({"a": [1, 2], "b": "é"})).expect("from value");
    assert_eq!(from_value.as_str(), compact.as_str());
}
