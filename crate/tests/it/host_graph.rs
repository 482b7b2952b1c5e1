//! No circles in the hosts: the files of the browser host (`web/`) and of `palaver serve`
//! (`proxy/`) form a graph without cycles, read from their paths (`super::x`, `crate::web::x`,
//! `self::x`, a child module's name). The core's layers are checked in `tidy.rs`; this covers the
//! rest of the crate, so "no circles anywhere" holds for every file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, as module paths relative to `src` (`web/sync/mod.rs` → `web::sync`).
fn modules_under(dir: &Path, out: &mut BTreeMap<Vec<String>, PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            modules_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.insert(module_path(&path), path);
        }
    }
}

fn module_path(file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src_dir()).unwrap_or(file);
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The code without comments, string literals and the `#[cfg(test)]` tail.
fn code_of(text: &str) -> String {
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = String::new();
    for line in body.lines() {
        let mut in_string = false;
        let mut previous = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if in_string {
                if c == '"' && previous != '\\' {
                    in_string = false;
                }
                previous = if previous == '\\' { ' ' } else { c };
                continue;
            }
            if c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' {
                in_string = true;
                previous = ' ';
                continue;
            }
            out.push(c);
        }
        out.push('\n');
    }
    out
}

/// The paths a file's code names, as module paths: `super::a::b`, `crate::x::{y, z::w}`,
/// `self::a`, `child::a` for a child module `child`.
fn named_paths(code: &str, own: &[String]) -> Vec<Vec<String>> {
    let compact: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let compact = compact.replace(" ::", "::").replace(":: ", "::");
    // `self` is the file's own module whether it is `x.rs` or `x/mod.rs`; `super` its parent.
    let here: Vec<String> = own.to_vec();
    let children: BTreeSet<String> = compact
        .split(';')
        .filter_map(|s| {
            let s = s.trim();
            let s = s.rsplit(' ').collect::<Vec<_>>();
            // `mod x` / `pub mod x` / `pub(super) mod x`
            (s.len() >= 2 && s[1] == "mod").then(|| s[0].to_string())
        })
        .collect();
    let mut out = Vec::new();
    let bytes: Vec<char> = compact.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0
            || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_' || bytes[i - 1] == ':');
        if !starts_word || !(bytes[i].is_alphabetic() || bytes[i] == '_') {
            i += 1;
            continue;
        }
        let word: String = bytes[i..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        let after = i + word.chars().count();
        let followed = bytes.get(after) == Some(&':') && bytes.get(after + 1) == Some(&':');
        if !followed {
            i = after;
            continue;
        }
        let base: Option<Vec<String>> = match word.as_str() {
            "crate" => Some(Vec::new()),
            "self" => Some(here.clone()),
            "super" => Some(here[..here.len().saturating_sub(1)].to_vec()),
            w if children.contains(w) => Some([here.clone(), vec![w.to_string()]].concat()),
            _ => None,
        };
        let Some(mut base) = base else {
            i = after;
            continue;
        };
        let mut j = after + 2;
        // More `super::` hops.
        while bytes[j..].iter().collect::<String>().starts_with("super::") {
            base.pop();
            j += "super::".len();
        }
        for tail in path_tails(&bytes[j..]) {
            out.push([base.clone(), tail].concat());
        }
        i = j;
    }
    out
}

/// The segments after `x::`: `a::b::c` as one path, `{a::b, c}` as one per top-level member.
fn path_tails(rest: &[char]) -> Vec<Vec<String>> {
    let mut segments = Vec::new();
    let mut at = 0;
    loop {
        if rest.get(at) == Some(&'{') {
            let mut depth = 0;
            let mut member = String::new();
            let mut members = Vec::new();
            for c in &rest[at + 1..] {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => members.push(std::mem::take(&mut member)),
                    c => member.push(*c),
                }
            }
            members.push(member);
            return members
                .iter()
                .map(|m| {
                    let first: Vec<String> = m
                        .trim()
                        .split("::")
                        .map(|s| s.trim().to_string())
                        .take_while(|s| {
                            !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_')
                        })
                        .collect();
                    [segments.clone(), first].concat()
                })
                .collect();
        }
        let word: String = rest[at..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        if word.is_empty() {
            break;
        }
        at += word.chars().count();
        segments.push(word);
        if rest.get(at) == Some(&':') && rest.get(at + 1) == Some(&':') {
            at += 2;
        } else {
            break;
        }
    }
    vec![segments]
}

/// The file a module path lands in: its longest prefix that is a file of `modules`.
fn resolve(path: &[String], modules: &BTreeMap<Vec<String>, PathBuf>) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| modules.contains_key(prefix))
}

/// A concept of a host: its top-level module (`web::sync` for `web/sync/records.rs`), whose parts
/// may use each other as a module's private parts do; `web` itself is its `mod.rs`.
fn concept_of(module: &[String]) -> Vec<String> {
    module.iter().take(2).cloned().collect()
}

/// The concepts of `area` (`web` or `proxy`) and which of them each one uses.
fn graph_of(area: &str) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut all = BTreeMap::new();
    modules_under(&src_dir(), &mut all);
    let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, file) in all
        .iter()
        .filter(|(m, _)| m.first().is_some_and(|f| f == area))
    {
        let code = code_of(&fs::read_to_string(file).unwrap_or_default());
        let concept = concept_of(module);
        let uses: BTreeSet<Vec<String>> = named_paths(&code, module)
            .iter()
            .filter_map(|p| resolve(p, &all))
            .filter(|target| target.first().is_some_and(|f| f == area))
            .map(|target| concept_of(&target))
            .filter(|target| *target != concept)
            .collect();
        graph.entry(concept).or_default().extend(uses);
    }
    graph
}

/// The circles of a graph: each strongly connected group of more than one file.
fn circles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(next) = todo.pop() {
            for to in graph.get(&next).into_iter().flatten() {
                if seen.insert(to.clone()) {
                    todo.push(to.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<_, _> = graph.keys().map(|m| (m.clone(), reach(m))).collect();
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut placed = BTreeSet::new();
    for module in graph.keys() {
        if placed.contains(module) {
            continue;
        }
        let group: Vec<Vec<String>> = graph
            .keys()
            .filter(|other| {
                *other == module
                    || (reaches[module].contains(*other) && reaches[*other].contains(module))
            })
            .cloned()
            .collect();
        if group.len() > 1 || reaches[module].contains(module) {
            placed.extend(group.iter().cloned());
            groups.push(group.iter().map(|m| m.join("::")).collect());
        }
    }
    groups
}

fn assert_no_circles(area: &str) {
    let graph = graph_of(area);
    assert!(graph.len() >= 8, "{area}: found only {} files", graph.len());
    let found = circles(&graph);
    let mut detail = Vec::new();
    for group in &found {
        detail.push(format!("circle: {}", group.join(", ")));
        for module in group {
            let key: Vec<String> = module.split("::").map(String::from).collect();
            let inside: Vec<String> = graph[&key]
                .iter()
                .map(|m| m.join("::"))
                .filter(|m| group.contains(m))
                .collect();
            detail.push(format!("  {module} uses {}", inside.join(", ")));
        }
    }
    assert!(found.is_empty(), "{area}:\n{}", detail.join("\n"));
}

#[test]
fn the_browser_host_has_no_circles() {
    assert_no_circles("web");
}

#[test]
fn palaver_serve_has_no_circles() {
    assert_no_circles("proxy");
}

/// The reader finds the edges a circle is made of, so the two tests above could fail.
#[test]
fn the_graph_reader_sees_paths_groups_and_children() {
    let own = vec!["web".to_string(), "sync".to_string()];
    let code = "mod records; use super::{shared::Handle, tabs}; use crate::web::storage::x; \
                fn f() { records::apply(); super::super::lib(); let s = \"super::fake\"; }";
    let paths = named_paths(&code_of(code), &own);
    let joined: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    for expected in [
        "web::shared::Handle",
        "web::tabs",
        "web::storage::x",
        "web::sync::records::apply",
        "lib",
    ] {
        assert!(
            joined.contains(&expected.to_string()),
            "{expected} not in {joined:?}"
        );
    }
    assert!(!joined.iter().any(|p| p.contains("fake")), "{joined:?}");
    let mut graph = BTreeMap::new();
    let a = vec!["a".to_string()];
    let b = vec!["b".to_string()];
    graph.insert(a.clone(), BTreeSet::from([b.clone()]));
    graph.insert(b.clone(), BTreeSet::from([a.clone()]));
    assert_eq!(circles(&graph).len(), 1);
    graph.insert(b, BTreeSet::new());
    assert!(circles(&graph).is_empty());
}
