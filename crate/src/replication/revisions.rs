//! Revisions of a replicated document: CouchDB's `N-hash` ids, the history each replica knows,
//! the next revision of a local change (content addressed) and the merge rule (`choose`).

use super::HISTORY;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What this replica knows of one document: its current revision, the history behind it, the
/// losing leaves it has seen, and the hash of the body it holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct RevInfo {
    pub rev: String,
    /// Revision hashes, newest (this revision's) first.
    pub ancestry: Vec<String>,
    #[serde(default)]
    pub deleted: bool,
    /// Losing leaves already seen (not fetched again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen: Vec<String>,
    /// For chat documents: `updated_at`, which decides a conflict.
    #[serde(default)]
    pub stamp: f64,
    #[serde(default)]
    pub body_hash: String,
    /// What decides between the losing leaves seen and a newcomer (`beats`), so a leaf seen once
    /// is not fetched again to be compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub losers: Vec<Loser>,
}

/// A losing leaf as `beats` ranks it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Loser {
    pub rev: String,
    #[serde(default)]
    pub deleted: bool,
    #[serde(default)]
    pub stamp: f64,
}

impl Loser {
    pub fn of(info: &RevInfo) -> Loser {
        Loser {
            rev: info.rev.clone(),
            deleted: info.deleted,
            stamp: info.stamp,
        }
    }

    /// The leaf as `beats` needs it (its history is its own id only).
    pub fn info(&self) -> RevInfo {
        RevInfo {
            rev: self.rev.clone(),
            ancestry: parse_rev(&self.rev)
                .map(|(_, h)| vec![h.to_string()])
                .unwrap_or_default(),
            deleted: self.deleted,
            stamp: self.stamp,
            ..RevInfo::default()
        }
    }
}

impl RevInfo {
    pub(super) fn generation(&self) -> u64 {
        parse_rev(&self.rev).map_or(0, |(g, _)| g)
    }

    /// Whether `rev` is this revision, one of its ancestors, or a leaf seen and set aside.
    pub fn knows(&self, rev: &str) -> bool {
        self.in_history(rev) || self.seen.iter().any(|s| s == rev)
    }

    /// Whether `rev` is this revision or one of its ancestors.
    pub(super) fn in_history(&self, rev: &str) -> bool {
        if rev == self.rev {
            return true;
        }
        let (Some((generation, hash)), mine) = (parse_rev(rev), self.generation()) else {
            return false;
        };
        generation <= mine
            && self
                .ancestry
                .get((mine - generation) as usize)
                .is_some_and(|h| h == hash)
    }

    /// Whether this revision descends from (or is) `other`.
    pub(super) fn descends_from(&self, other: &str) -> bool {
        other.is_empty() || self.in_history(other)
    }
}

/// `"3-abc"` → `(3, "abc")`.
pub fn parse_rev(rev: &str) -> Option<(u64, &str)> {
    let (generation, hash) = rev.split_once('-')?;
    Some((generation.parse().ok()?, hash))
}

/// A stable 128-bit hash (FNV-1a) as 32 hex digits: revision ids and body hashes.
pub fn hash_hex(parts: &[&[u8]]) -> String {
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013B;
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for part in parts {
        for byte in *part {
            h = (h ^ u128::from(*byte)).wrapping_mul(PRIME);
        }
        h = (h ^ 0xff).wrapping_mul(PRIME);
    }
    format!("{h:032x}")
}

/// The text a body hashes as (`null` for a removed document).
fn body_text(body: Option<&Value>) -> String {
    body.map_or_else(|| "null".to_string(), Value::to_string)
}

/// The next revision of a document this replica changed: generation + 1, its hash from the
/// parent and the body (so equal changes on two devices are one revision).
pub fn next_revision(known: Option<&RevInfo>, body: Option<&Value>) -> RevInfo {
    let body_text = body_text(body);
    let body_hash = hash_hex(&[body_text.as_bytes()]);
    let parent = known.map_or("", |k| k.rev.as_str());
    let hash = hash_hex(&[parent.as_bytes(), body_text.as_bytes()]);
    let generation = known.map_or(0, RevInfo::generation) + 1;
    let mut ancestry = vec![hash.clone()];
    if let Some(k) = known {
        ancestry.extend(k.ancestry.iter().take(HISTORY - 1).cloned());
    }
    RevInfo {
        rev: format!("{generation}-{hash}"),
        ancestry,
        deleted: super::is_removal(body),
        // The losing leaves seen stay leaves on the server after a local change (a conflict is
        // not resolved by editing the winner): forgetting them fetched them again each time.
        seen: known.map(|k| k.seen.clone()).unwrap_or_default(),
        stamp: stamp_of(body),
        body_hash,
        losers: known.map(|k| k.losers.clone()).unwrap_or_default(),
    }
}

fn stamp_of(body: Option<&Value>) -> f64 {
    body.and_then(|b| b.get("updated_at"))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

/// What a remote document means here (the merge rule of the module's head).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Known already: nothing to do.
    Known,
    /// Store it: it descends from the local revision, or wins the conflict.
    Take,
    /// Keep the local revision; remember the remote leaf as seen.
    Keep,
}

/// Chooses between the local revision (if any) and a remote leaf with its history.
pub fn choose(id: &str, local: Option<&RevInfo>, remote: &RevInfo) -> Choice {
    let Some(local) = local else {
        return Choice::Take;
    };
    if local.knows(&remote.rev) {
        return Choice::Known;
    }
    if remote.descends_from(&local.rev) {
        return Choice::Take;
    }
    if beats(id, remote, local) {
        Choice::Take
    } else {
        Choice::Keep
    }
}

/// Whether leaf `a` wins over leaf `b`: CouchDB's winner (not deleted over deleted, then the
/// longer history, then the greater revision id), after the newest `updated_at` for a chat
/// document. It depends on the two leaves only, so every device that sees the same leaves
/// keeps the same one.
pub fn beats(id: &str, a: &RevInfo, b: &RevInfo) -> bool {
    let key = |r: &RevInfo| {
        (
            !r.deleted,
            r.generation(),
            parse_rev(&r.rev).map(|(_, h)| h.to_string()),
        )
    };
    if id.starts_with("chat:") {
        (a.stamp, key(a)) > (b.stamp, key(b))
    } else {
        key(a) > key(b)
    }
}

/// The revision history of a received document (`_revisions`), as a `RevInfo`.
pub fn info_of(doc: &Value) -> Option<RevInfo> {
    let rev = doc.get("_rev")?.as_str()?.to_string();
    let (generation, hash) = parse_rev(&rev)?;
    let ancestry = doc
        .get("_revisions")
        .and_then(|r| {
            let start = r.get("start")?.as_u64()?;
            let ids: Vec<String> = r
                .get("ids")?
                .as_array()?
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .take(HISTORY)
                .collect();
            (start == generation && ids.first().map(String::as_str) == Some(hash)).then_some(ids)
        })
        .unwrap_or_else(|| vec![hash.to_string()]);
    let deleted = doc.get("_deleted").and_then(Value::as_bool) == Some(true);
    let body = body_of(doc);
    Some(RevInfo {
        rev,
        ancestry,
        deleted,
        seen: Vec::new(),
        stamp: stamp_of(Some(&body)),
        body_hash: hash_hex(&[body_text((!deleted).then_some(&body)).as_bytes()]),
        losers: Vec::new(),
    })
}

/// A document's own fields (no `_id`, `_rev`, `_revisions`, …).
pub fn body_of(doc: &Value) -> Value {
    match doc {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('_'))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => Value::Object(Map::new()),
    }
}
