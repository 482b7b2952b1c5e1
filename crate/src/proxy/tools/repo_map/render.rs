//! The map as seed 002 lays it out: a header, a legend (the kinds' letters and the path aliases),
//! then one block per file with its definitions in line order, fitted to a token budget by a
//! binary search on how many of the ranked definitions are shown (as aider fits its map).

use super::rank::Ranked;
use std::collections::{BTreeMap, HashMap};

/// The map's header: the prompt's, so the engine finds the map in a system prompt.
pub const HEADER: &str = crate::prompt::REPO_MAP_HEADER;

/// The rendered map and how many definitions it shows.
pub struct Rendered {
    pub text: String,
    pub shown: usize,
    pub files: usize,
}

/// Tokens of a text as the engine estimates them before a tokenizer is known (4 bytes each).
pub fn tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// The largest map of the best-ranked definitions within `budget` tokens.
pub fn fit(ranked: &[Ranked], paths: &[String], budget: usize) -> Rendered {
    let (mut low, mut high) = (0, ranked.len());
    while low < high {
        let middle = (low + high).div_ceil(2);
        if tokens(&render(&ranked[..middle], paths).text) <= budget {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    render(&ranked[..low], paths)
}

fn letter(kind: &str) -> &'static str {
    match kind {
        "class" => "c",
        "function" => "f",
        "method" => "m",
        "interface" | "trait" => "i",
        "module" => "d",
        "macro" => "x",
        "type" | "struct" | "enum" => "t",
        "constant" => "k",
        "heading" => "h",
        _ => "o",
    }
}

const KINDS: [(&str, &str); 10] = [
    ("c", "class"),
    ("f", "function"),
    ("m", "method"),
    ("i", "interface/trait"),
    ("t", "type"),
    ("d", "module"),
    ("x", "macro"),
    ("k", "constant"),
    ("h", "heading"),
    ("o", "other"),
];

/// The map of exactly `shown` definitions.
pub fn render(shown: &[Ranked], paths: &[String]) -> Rendered {
    // Files in the order of their best definition; definitions in line order.
    let mut order: Vec<usize> = Vec::new();
    let mut by_file: HashMap<usize, Vec<&Ranked>> = HashMap::new();
    for ranked in shown {
        if !by_file.contains_key(&ranked.file) {
            order.push(ranked.file);
        }
        by_file.entry(ranked.file).or_default().push(ranked);
    }
    let files: Vec<&str> = order.iter().map(|f| paths[*f].as_str()).collect();
    let aliases = aliases(&files);
    let mut used_letters: Vec<&str> = Vec::new();
    let mut blocks = String::new();
    for file in &order {
        let path = &paths[*file];
        blocks.push_str(&aliased(path, &aliases));
        blocks.push_str(":\n");
        let mut entries = by_file.remove(file).unwrap_or_default();
        entries.sort_by_key(|r| r.tag.line);
        for entry in entries {
            let letter = letter(&entry.tag.kind);
            if !used_letters.contains(&letter) {
                used_letters.push(letter);
            }
            let used = if entry.used_by > 0 {
                format!(" ←{}", entry.used_by)
            } else {
                String::new()
            };
            blocks.push_str(&format!(
                "  {letter} {} :{}{used}\n",
                entry.tag.name, entry.tag.line
            ));
        }
    }
    let mut text = String::from(HEADER);
    if !order.is_empty() {
        let key: Vec<String> = KINDS
            .iter()
            .filter(|(l, _)| used_letters.contains(l))
            .map(|(l, name)| format!("{l}={name}"))
            .collect();
        text.push_str(&format!(
            "Legend: {} · :N line · ←N used by N other files\n",
            key.join(" ")
        ));
        for (alias, dir) in aliases
            .values()
            .map(|(a, d)| (a, d))
            .collect::<BTreeMap<_, _>>()
        {
            text.push_str(&format!("{alias} = {dir}\n"));
        }
        text.push('\n');
        text.push_str(&blocks);
    }
    Rendered {
        text,
        shown: shown.len(),
        files: order.len(),
    }
}

/// Short names for the folders that several shown files share (the longest savings first):
/// folder → (`@1`, folder).
fn aliases(files: &[&str]) -> HashMap<String, (String, String)> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for file in files {
        if let Some((dir, _)) = file.rsplit_once('/') {
            *counts.entry(dir).or_default() += 1;
        }
    }
    let mut worth: Vec<(&str, usize)> = counts
        .into_iter()
        .filter(|(dir, n)| *n >= 2 && dir.len() >= 10)
        .collect();
    worth.sort_by(|a, b| (b.0.len() * b.1).cmp(&(a.0.len() * a.1)).then(a.0.cmp(b.0)));
    worth
        .into_iter()
        .take(9)
        .enumerate()
        .map(|(i, (dir, _))| (dir.to_string(), (format!("@{}", i + 1), format!("{dir}/"))))
        .collect()
}

fn aliased(path: &str, aliases: &HashMap<String, (String, String)>) -> String {
    match path.rsplit_once('/') {
        Some((dir, name)) => match aliases.get(dir) {
            Some((alias, _)) => format!("{alias}/{name}"),
            None => path.to_string(),
        },
        None => path.to_string(),
    }
}
