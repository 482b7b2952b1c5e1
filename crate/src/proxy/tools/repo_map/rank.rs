//! Which definitions matter most: files as nodes, an edge from a file to each file defining a
//! name it uses, ranked with PageRank personalised to the files the chat works on (aider's
//! repository map ranks the same way); each definition then gets the rank its users send it.

use super::tags::Tag;
// Fx hashing: the ranking hashes every tag name of the workspace several times (SipHash was a
// measurable share of a cold map).
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

/// One definition with its rank and how many other files use its name.
#[derive(Debug, Clone)]
pub struct Ranked {
    pub file: usize,
    pub tag: Tag,
    pub rank: f64,
    pub used_by: usize,
}

const DAMPING: f64 = 0.85;
const ROUNDS: usize = 40;

/// Every definition of `files`, most important first. `focus`: indices of the chat's files.
pub fn rank(files: &[(String, Arc<Vec<Tag>>)], focus: &HashSet<usize>) -> Vec<Ranked> {
    let mut defined_in: HashMap<&str, Vec<usize>> = HashMap::default();
    for (index, (_, tags)) in files.iter().enumerate() {
        for tag in tags.iter().filter(|t| t.is_definition) {
            let at = defined_in.entry(tag.name.as_str()).or_default();
            if at.last() != Some(&index) {
                at.push(index);
            }
        }
    }
    // Which files use each name (their own definitions aside), then the edges.
    // A use after a `.` counts a twentieth: `x.push()` may be any type's `push`, rarely ours.
    let mut counts: Vec<HashMap<&str, f64>> = vec![HashMap::default(); files.len()];
    let mut users: HashMap<&str, HashSet<usize>> = HashMap::default();
    let mut any_use: HashMap<&str, HashSet<usize>> = HashMap::default();
    for (from, (_, tags)) in files.iter().enumerate() {
        for tag in tags.iter().filter(|t| !t.is_definition) {
            let name = tag.name.as_str();
            let Some(definers) = defined_in.get(name) else {
                continue;
            };
            *counts[from].entry(name).or_default() += if tag.dotted { 0.05 } else { 1.0 };
            any_use.entry(name).or_default().insert(from);
            if !tag.dotted && definers.iter().any(|to| *to != from) {
                users.entry(name).or_default().insert(from);
            }
        }
    }
    // Edges: (from, to, name) → weight.
    let mut edges: HashMap<(usize, usize, &str), f64> = HashMap::default();
    for (from, names) in counts.iter().enumerate() {
        for (name, count) in names {
            let definers = &defined_in[name];
            let used_anyhow = any_use.get(name).map_or(0, HashSet::len);
            let weight = name_weight(name, definers.len())
                * rarity(files.len(), used_anyhow)
                * count.sqrt()
                * if focus.contains(&from) { 50.0 } else { 1.0 };
            if weight <= 0.0 {
                continue; // no edge of weight 0: a file with only those would divide by 0
            }
            // A file using its own names says nothing of what the others need: no edge.
            for &to in definers.iter().filter(|to| **to != from) {
                *edges.entry((from, to, *name)).or_default() += weight;
            }
        }
    }
    let file_rank = pagerank(files.len(), &edges, focus);
    let mut out_weight = vec![0.0; files.len()];
    for ((from, _, _), weight) in &edges {
        out_weight[*from] += weight;
    }
    let mut sent: HashMap<(usize, &str), f64> = HashMap::default();
    for ((from, to, name), weight) in &edges {
        if out_weight[*from] > 0.0 {
            *sent.entry((*to, name)).or_default() += file_rank[*from] * weight / out_weight[*from];
        }
    }
    let mut ranked = Vec::new();
    for (index, (_, tags)) in files.iter().enumerate() {
        let mut seen = HashSet::default();
        for tag in tags.iter().filter(|t| t.is_definition) {
            if !seen.insert((tag.name.as_str(), tag.line)) {
                continue;
            }
            let name = tag.name.as_str();
            let used_by = users
                .get(name)
                .map_or(0, |u| u.iter().filter(|f| **f != index).count());
            // A definition nobody uses still ranks, below every used one of its file.
            let rank = sent.get(&(index, name)).copied().unwrap_or(0.0) + file_rank[index] * 1e-3;
            ranked.push(Ranked {
                file: index,
                tag: tag.clone(),
                rank,
                used_by,
            });
        }
    }
    ranked.sort_by(|a, b| {
        b.rank
            .partial_cmp(&a.rank)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.file.cmp(&b.file))
            .then(a.tag.line.cmp(&b.tag.line))
    });
    ranked
}

/// A name most files use (`push`, `len`) tells little about any one definition of it: the
/// inverse of how many use it, as search engines weigh words.
/// A name a fifth of the files use (past ten) is the language's or a library's (`Ok`, `new`,
/// `to_string`), whatever this repository happens to define under it: it weighs nothing.
fn rarity(files: usize, used_by: usize) -> f64 {
    if used_by > (files / 5).max(10) {
        return 0.0;
    }
    ((1 + files) as f64 / (1 + used_by) as f64).ln().max(0.0)
}

/// Long, specific names say more than `new` or `get`; private, short and widely defined ones less.
fn name_weight(name: &str, definers: usize) -> f64 {
    let mut weight = 1.0;
    let specific =
        name.len() >= 8 && (name.contains('_') || name.chars().any(|c| c.is_uppercase()));
    if specific {
        weight *= 10.0;
    }
    if name.starts_with('_') {
        weight *= 0.1;
    }
    // `get`, `push`, `is_empty`: defined in many files, a use says nothing of which one.
    if definers > 2 {
        weight /= (definers * definers) as f64;
    }
    if name.len() < 4 {
        weight *= 0.1;
    }
    weight
}

/// PageRank with the restart going to `focus` (every file when it is empty).
fn pagerank(
    n: usize,
    edges: &HashMap<(usize, usize, &str), f64>,
    focus: &HashSet<usize>,
) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let restart: Vec<f64> = if focus.is_empty() {
        vec![1.0 / n as f64; n]
    } else {
        (0..n)
            .map(|i| {
                if focus.contains(&i) {
                    1.0 / focus.len() as f64
                } else {
                    0.0
                }
            })
            .collect()
    };
    let mut out_weight = vec![0.0; n];
    let mut links: HashMap<(usize, usize), f64> = HashMap::default();
    for ((from, to, _), weight) in edges {
        out_weight[*from] += weight;
        *links.entry((*from, *to)).or_default() += weight;
    }
    let mut rank = restart.clone();
    for _ in 0..ROUNDS {
        let dangling: f64 = (0..n)
            .filter(|i| out_weight[*i] == 0.0)
            .map(|i| rank[i])
            .sum();
        let mut next: Vec<f64> = restart
            .iter()
            .map(|r| (1.0 - DAMPING) * r + DAMPING * dangling * r)
            .collect();
        for ((from, to), weight) in &links {
            next[*to] += DAMPING * rank[*from] * weight / out_weight[*from];
        }
        rank = next;
    }
    rank
}
