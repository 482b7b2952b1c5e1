//! Issue 20: `json_text::to_string` writes what `serde_json::to_string` writes, byte for byte —
//! every wire transcript's assembled message and events, random JSON with every kind of string,
//! typed values of every serde shape (enums, maps with number keys, `RawValue`) — and its
//! refusals are serde_json's.

use palaver::decode::decode_stream;
use palaver::json_text::to_string;
use palaver::provider::ProviderKind;
use proptest::prelude::*;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::BTreeMap;

fn same<T: Serialize + ?Sized>(value: &T) {
    let theirs = serde_json::to_string(value).map_err(|e| e.to_string());
    let ours = to_string(value).map_err(|e| e.to_string());
    assert_eq!(ours, theirs);
}

#[test]
fn every_wire_transcript_serializes_the_same() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/wire");
    let mut cases = 0;
    for kind_dir in std::fs::read_dir(root).expect("wire dir") {
        let kind_dir = kind_dir.expect("entry").path();
        let Some(kind) = kind_dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(ProviderKind::parse)
        else {
            continue;
        };
        for file in std::fs::read_dir(&kind_dir).expect("kind dir") {
            let path = file.expect("entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("sse") {
                continue;
            }
            let bytes = std::fs::read(&path).expect("transcript");
            let decoded = decode_stream(kind, &[&bytes[..]]);
            if let Ok(decoded) = &decoded {
                same(&decoded.assembled);
                same(&decoded.ops);
            }
            let oracle = path.with_extension("oracle.json");
            if let Ok(text) = std::fs::read_to_string(&oracle) {
                same(&serde_json::from_str::<Value>(&text).expect("oracle JSON"));
            }
            cases += 1;
        }
    }
    assert!(cases > 20, "{cases} transcripts");
}

/// A float as a map key (serde_json writes a finite one quoted, refuses the others).
#[derive(Serialize, PartialEq)]
struct FloatKey(f64);
impl Eq for FloatKey {}
impl std::hash::Hash for FloatKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// An `f32` key, written with `f32`'s own shortest digits.
#[derive(Serialize, PartialEq)]
struct Float32Key(f32);
impl Eq for Float32Key {}
impl std::hash::Hash for Float32Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

#[derive(Serialize)]
enum Shape {
    Unit,
    Newtype(u8),
    Tuple(i32, String),
    Struct { a: Option<f64>, b: Vec<bool> },
}

#[derive(Serialize)]
struct Typed<'a> {
    shapes: Vec<Shape>,
    numbered: BTreeMap<i64, &'a str>,
    flags: BTreeMap<bool, u8>,
    chars: BTreeMap<char, char>,
    raw: &'a RawValue,
    big: (u128, i128, f32, f64),
    unit: (),
    bytes: &'a [u8],
}

#[test]
fn every_serde_shape_serializes_the_same() {
    let raw = RawValue::from_string(r#"{ "kept" : [1, 2] }"#.into()).expect("raw");
    same(&Typed {
        shapes: vec![
            Shape::Unit,
            Shape::Newtype(7),
            Shape::Tuple(-3, "t\u{1}\"".into()),
            Shape::Struct {
                a: Some(f64::NAN),
                b: vec![true, false],
            },
            Shape::Struct {
                a: Some(1e300),
                b: vec![],
            },
        ],
        numbered: BTreeMap::from([(-5, "minus"), (12, "twelve")]),
        flags: BTreeMap::from([(true, 1), (false, 0)]),
        chars: BTreeMap::from([('"', '\n'), ('é', '\u{7f}')]),
        raw: &raw,
        big: (u128::MAX, i128::MIN, 0.1, -0.0),
        unit: (),
        bytes: b"\x00\xff",
    });
    same(&BTreeMap::from([(vec![1], 2)]));
    same(&std::collections::HashMap::from([(FloatKey(1.5), 2)]));
    same(&std::collections::HashMap::from([(
        FloatKey(f64::INFINITY),
        2,
    )]));
    same(&std::collections::HashMap::from([(Float32Key(0.1), 2)]));
    same(&std::collections::HashMap::from([(
        Float32Key(f32::NAN),
        2,
    )]));
    same(&json!({"a": [null, 1, -1, 1.5, "x"], "": {}}));
}

fn json_value() -> impl Strategy<Value = Value> {
    let text = prop_oneof![any::<String>(), "[\\x00-\\x1f\"\\\\a-z\u{7f}é😀]{0,40}",];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        text.clone().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((text.clone(), inner), 0..8)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn random_json_serializes_the_same(value in json_value()) {
        same(&value);
    }

    #[test]
    fn every_string_serializes_the_same(text in any::<String>(), controls in "[\\x00-\\x1f\"\\\\]{0,20}", pad in 0usize..17) {
        let mixed = format!("{}{controls}{text}{controls}", "a".repeat(pad));
        same(&mixed);
    }
}

/// `to_ascii_string`: the same JSON value as `to_string`, in pure ASCII, counting the UTF-8
/// bytes it escaped (what the page is handed when few characters are outside ASCII).
fn ascii_same_value<T: Serialize + ?Sized>(value: &T) {
    let text = to_string(value).expect("text");
    let (ascii, escaped) = palaver::json_text::to_ascii_string(value).expect("ascii text");
    assert!(ascii.is_ascii(), "{ascii}");
    // Compared with the text read back, not `value`: serde_json's float reading may differ in a
    // last digit from the float written, either way.
    let read = |t: &str| serde_json::from_str::<Value>(t).ok();
    assert_eq!(read(&ascii), read(&text));
    assert!(read(&text).is_some());
    assert_eq!(escaped, text.bytes().filter(|b| !b.is_ascii()).count());
    if escaped == 0 {
        assert_eq!(ascii, text);
    }
}

#[test]
fn escaping_outside_ascii_keeps_the_value() {
    ascii_same_value(&json!({"é": "naïve café 👋 \u{ffff} \u{10ffff}", "n": [1, "日本語", null]}));
    let (text, escaped) = palaver::json_text::to_ascii_string(&json!(["é👋\n"])).expect("text");
    assert_eq!(text, r#"["\u00e9\ud83d\udc4b\n"]"#);
    assert_eq!(escaped, 6);
    // A raw value's characters outside ASCII are escaped too; its text is otherwise kept.
    let raw = RawValue::from_string(r#"{ "a": "é" }"#.to_string()).expect("raw");
    ascii_same_value(&raw);
    let (text, _) = palaver::json_text::to_ascii_string(&raw).expect("text");
    assert_eq!(text, r#"{ "a": "\u00e9" }"#);
}

proptest! {
    #[test]
    fn escaping_outside_ascii_keeps_any_value(value in json_value()) {
        ascii_same_value(&value);
    }
}

/// `write_in_pieces` (a long snapshot handed to the page a piece at a time): the pieces put
/// together are `to_string`'s text (or `to_ascii_string`'s), each a valid UTF-8 text of its own
/// (cut only between values), none much over the piece's size unless one element is.
fn pieces_same<T: Serialize + ?Sized>(value: &T, piece: usize) {
    for ascii in [false, true] {
        let pieces = std::rc::Rc::new(std::cell::RefCell::new(Vec::<String>::new()));
        let into = pieces.clone();
        let sink = Box::new(move |text: &str| into.borrow_mut().push(text.to_string()));
        let escaped =
            palaver::json_text::write_in_pieces(value, ascii, piece, sink).expect("pieces");
        let whole = if ascii {
            palaver::json_text::to_ascii_string(value).expect("ascii")
        } else {
            (to_string(value).expect("text"), 0)
        };
        let pieces = pieces.borrow();
        assert_eq!(
            pieces.concat(),
            whole.0,
            "piece size {piece}, ascii {ascii}"
        );
        if ascii {
            assert_eq!(escaped, whole.1);
        }
        assert!(pieces.iter().all(|p| !p.is_empty()), "an empty piece");
    }
}

#[test]
fn a_long_text_is_handed_over_in_pieces() {
    let messages: Vec<Value> = (0..500)
        .map(
            |i| json!({"role": "user", "content": format!("message {i} é👋 \"quoted\"\n"), "n": i}),
        )
        .collect();
    let snapshot =
        json!({"chat_id": "c", "messages": messages, "nested": [[1, 2], [3, [4, "日本"]]]});
    for piece in [1, 7, 100, 4096, 1 << 20] {
        pieces_same(&snapshot, piece);
    }
    let count = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen = count.clone();
    let sink = Box::new(move |_: &str| seen.set(seen.get() + 1));
    palaver::json_text::write_in_pieces(&snapshot, true, 4096, sink).expect("pieces");
    assert!(
        count.get() > 5,
        "a 40 KB text in 4 KB pieces came in {} pieces",
        count.get()
    );
}

proptest! {
    #[test]
    fn any_value_in_pieces_is_the_same_text(value in json_value(), piece in 1usize..64) {
        pieces_same(&value, piece);
    }
}
