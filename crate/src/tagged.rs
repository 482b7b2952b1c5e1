//! Reading tagged JSON objects (`{"type": "x", …fields}`) and objects with extra keys, without
//! serde's buffering.
//!
//! serde's derive reads an internally tagged enum, an untagged one or a `flatten` field by first
//! copying the whole object into its private `Content` tree and then reading every field again
//! from that copy: each field type gets a second generic instantiation, and in the wasm that was
//! a sixth of the binary (issue 20). The enums the engine reads (`Input`, `Command`, `Event`,
//! `DeltaOp`) therefore derive only `Serialize`; their `Deserialize` takes the object as a
//! `serde_json::Map` and each field out of it with [`Fields`], through the one `Value`
//! deserializer the rest of the engine uses. Missing and mistyped fields give serde's own words.
//!
//! A `Deserialize` written with `Fields` must read every field its `Serialize` writes: each
//! enum's round trip over every variant is tested in `tests/it/tagged.rs`.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Error, Map, Value};

/// The fields of one JSON object, taken one by one; what is left is the object's extra keys.
#[derive(Debug)]
pub struct Fields {
    map: Map<String, Value>,
}

impl Fields {
    /// The object `deserializer` holds; anything else is an error in serde's words.
    pub fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Fields {
            map: Map::deserialize(deserializer)?,
        })
    }

    pub fn new(map: Map<String, Value>) -> Self {
        Fields { map }
    }

    /// The variant named by `key` (`"type"`, `"op"`, `"input"`), removed from the fields.
    pub fn tag(&mut self, key: &'static str) -> Result<String, Error> {
        match self.map.remove(key) {
            Some(Value::String(tag)) => Ok(tag),
            Some(other) => Err(Error::custom(format!(
                "invalid type: {}, expected the variant name in `{key}`",
                kind_of(&other)
            ))),
            None => Err(Error::missing_field(key)),
        }
    }

    /// A field the object must have (serde's default for a field without `#[serde(default)]`).
    pub fn take<T: DeserializeOwned>(&mut self, key: &'static str) -> Result<T, Error> {
        match self.map.remove(key) {
            Some(value) => T::deserialize(value),
            None => Err(Error::missing_field(key)),
        }
    }

    /// A field that may be missing: `#[serde(default)]`, or an `Option` (missing or `null`).
    pub fn or_default<T: DeserializeOwned + Default>(
        &mut self,
        key: &'static str,
    ) -> Result<T, Error> {
        match self.map.remove(key) {
            Some(value) => T::deserialize(value),
            None => Ok(T::default()),
        }
    }

    /// A field that may be missing, with the default `default` gives (`#[serde(default = …)]`).
    pub fn or_else<T: DeserializeOwned>(
        &mut self,
        key: &'static str,
        default: impl FnOnce() -> T,
    ) -> Result<T, Error> {
        match self.map.remove(key) {
            Some(value) => T::deserialize(value),
            None => Ok(default()),
        }
    }

    /// The keys not taken: a `flatten`ed struct or map.
    pub fn rest(self) -> Map<String, Value> {
        self.map
    }

    /// The rest read as `T`, for a variant whose fields are a flattened struct.
    pub fn rest_as<T: DeserializeOwned>(self) -> Result<T, Error> {
        T::deserialize(Value::Object(self.map))
    }
}

/// serde's error for a variant name the enum does not have.
pub fn unknown_variant(tag: &str, variants: &'static [&'static str]) -> Error {
    Error::unknown_variant(tag, variants)
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "map",
    }
}

/// Reads an object from `deserializer` with `read` (a type's `from_fields`), its errors in the
/// deserializer's own type: the body of a `Deserialize` impl written with `Fields`.
pub fn read<'de, D, T>(
    deserializer: D,
    read: impl FnOnce(Fields) -> Result<T, Error>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    read(Fields::read(deserializer)?).map_err(D::Error::custom)
}
