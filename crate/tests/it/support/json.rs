//! JSON subset matching: an expected value matches when every key it names matches (objects),
//! arrays match element by element with the same length, scalars are equal.

use serde_json::Value;

pub fn subset_mismatch(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(exp), Value::Object(act)) => {
            exp.iter().find_map(|(key, value)| match act.get(key) {
                Some(a) => subset_mismatch(value, a, &format!("{path}.{key}")),
                None if value.is_null() => None,
                None => Some(format!("{path}.{key}: missing, expected {value}")),
            })
        }
        (Value::Array(exp), Value::Array(act)) => {
            if exp.len() != act.len() {
                return Some(format!(
                    "{path}: {} items, expected {}: {}",
                    act.len(),
                    exp.len(),
                    short(actual)
                ));
            }
            exp.iter()
                .zip(act)
                .enumerate()
                .find_map(|(i, (e, a))| subset_mismatch(e, a, &format!("{path}[{i}]")))
        }
        (e, a) if e == a => None,
        (e, a) => Some(format!("{path}: got {}, expected {}", short(a), short(e))),
    }
}

pub fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 400 {
        format!(
            "{}…",
            &text[..text
                .char_indices()
                .take_while(|(i, _)| *i < 400)
                .last()
                .map_or(0, |(i, _)| i)]
        )
    } else {
        text
    }
}

/// Finds `expected` as an in-order subsequence of `actual` (each by subset match).
pub fn subsequence_mismatch(expected: &[Value], actual: &[Value]) -> Option<String> {
    let mut cursor = 0;
    for (i, exp) in expected.iter().enumerate() {
        match actual[cursor..]
            .iter()
            .position(|a| subset_mismatch(exp, a, "").is_none())
        {
            Some(found) => cursor += found + 1,
            None => {
                return Some(format!(
                    "expected item {i} {} not found in order among {}",
                    short(exp),
                    short(&Value::Array(actual.to_vec()))
                ))
            }
        }
    }
    None
}
