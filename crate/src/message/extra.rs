//! A message's unknown keys (`ChatMessage::extra`): what other tools and older versions wrote,
//! and the engine's own notes on a message (an event, a plan's metadata, a notice, who
//! answered), kept and written back in the order they came, exactly as `serde_json::Map` (with
//! `preserve_order`, an `IndexMap`) keeps and writes them.
//!
//! Why not that map: an `IndexMap` holds a hash table beside its entries and room for four
//! of them (about 300 bytes natively) however few it has, and most messages that have unknown
//! keys hold two (an answer's provider and model), looked up by name a few times. A `Vec` of
//! exactly the entries it has, searched in order, costs a third of that in every message of a
//! long chat (issue 41).

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

#[derive(Clone, Debug, Default)]
pub struct Extra(Vec<(String, Value)>);

/// Equal when they hold the same keys with equal values, in any order, as two maps are: a
/// message read from another device with its keys in another order is the same message.
impl PartialEq for Extra {
    fn eq(&self, other: &Extra) -> bool {
        self.0.len() == other.0.len() && self.0.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Extra {
    pub fn new() -> Self {
        Extra(Vec::new())
    }

    fn find(&self, key: &str) -> Option<usize> {
        self.0.iter().position(|(k, _)| k == key)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.find(key).map(|i| &self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_some()
    }

    /// Sets `key` where it is, or last when new (growing by exactly one); returns what it held.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        match self.find(&key) {
            Some(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            None => {
                self.0.reserve_exact(1);
                self.0.push((key, value));
                None
            }
        }
    }

    /// As `serde_json::Map::remove` with `preserve_order`: the last entry takes its place.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.find(key)?;
        Some(self.0.swap_remove(i).1)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// In the order they came.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl Extend<(String, Value)> for Extra {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, entries: I) {
        for (key, value) in entries {
            self.insert(key, value);
        }
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        let mut entries = Vec::with_capacity(map.len());
        entries.extend(map);
        Extra(entries)
    }
}

/// `extra["key"]`: `null` when absent, as indexing a JSON value is.
impl std::ops::Index<&str> for Extra {
    type Output = Value;

    fn index(&self, key: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.get(key).unwrap_or(&NULL)
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn written_as_a_json_map_writes_the_same_keys_in_the_same_order() {
        let text = r#"{"zeta":1,"alpha":{"b":2,"a":1},"mid":[true],"extra":{},"last":null}"#;
        let mut map: Map<String, Value> = serde_json::from_str(text).unwrap_or_default();
        let mut extra = Extra::new();
        for (key, value) in map.clone() {
            extra.insert(key, value);
        }
        let alpha = map["alpha"].clone();
        assert_eq!(
            extra.insert("alpha".into(), alpha.clone()),
            Some(alpha.clone())
        );
        map.insert("alpha".into(), alpha);
        assert_eq!(extra.remove("extra"), map.remove("extra"));
        extra.insert("new".into(), json!(2));
        map.insert("new".into(), json!(2));
        let written = serde_json::to_string(&extra).unwrap_or_default();
        assert_eq!(written, serde_json::to_string(&map).unwrap_or_default());
        assert_eq!(Extra::from(map), extra);
    }

    #[test]
    fn kept_in_order_with_exactly_its_entries() {
        let mut extra = Extra::new();
        extra.insert("provider".into(), json!("openai-chat"));
        extra.insert("model".into(), json!("m"));
        assert_eq!(extra.0.capacity(), 2);
        extra.insert("a".into(), json!(1));
        assert_eq!(extra.remove("a"), Some(json!(1)));
        assert_eq!(
            extra.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            ["provider", "model"]
        );
        assert_eq!(extra["missing"], Value::Null);
        let reversed: Extra = serde_json::from_value::<Map<String, Value>>(
            json!({"model": "m", "provider": "openai-chat"}),
        )
        .unwrap_or_default()
        .into();
        assert_eq!(extra, reversed, "equal in any order, as maps are");
        assert_ne!(extra, Extra::new());
        assert_eq!(extra.insert("model".into(), json!("n")), Some(json!("m")));
    }
}
