//! Tidy tests (GUIDE §10): project rules a program can check.
//! - Core modules (everything in `crate/src` but `web/`, `proxy/`, `cli/`, `main.rs`) mention no
//!   wasm, web-sys or `target_arch`, and call no `unwrap`/`expect` outside tests.
//! - Every source module opens with a `//!` header.
//! - Every fixture file is used: session fixtures by the runner, wire overrides by a wire case.

use std::fs;
use std::path::{Path, PathBuf};

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_host(path: &Path) -> bool {
    let relative = path.strip_prefix(src_dir()).unwrap_or(path);
    let first = relative
        .components()
        .next()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .unwrap_or_default();
    matches!(
        first.as_str(),
        "web" | "proxy" | "cli" | "main.rs" | "lib.rs"
    )
}

/// The file without its `#[cfg(test)]` tail and without comments.
fn code_of(text: &str) -> String {
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    body.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn core_modules_are_host_free_and_do_not_unwrap() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let core: Vec<_> = files.iter().filter(|p| !is_host(p)).collect();
    assert!(core.len() >= 15, "found only {} core modules", core.len());
    let mut problems = Vec::new();
    for path in core {
        let code = code_of(&fs::read_to_string(path).unwrap_or_default());
        for banned in [
            "wasm_bindgen",
            "wasm-bindgen",
            "web_sys",
            "web-sys",
            "js_sys",
            "target_arch",
            ".unwrap()",
            ".expect(",
            "panic!(",
            "unreachable!(",
        ] {
            if code.contains(banned) {
                problems.push(format!("{}: contains `{banned}`", path.display()));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "core rule broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_tidy_check_would_catch_an_unwrap() {
    assert!(code_of("fn f() { x.unwrap() }").contains(".unwrap()"));
    assert!(!code_of("fn f() {} // x.unwrap()").contains(".unwrap()"));
    assert!(is_host(&src_dir().join("web").join("mod.rs")));
    assert!(!is_host(&src_dir().join("session").join("mod.rs")));
}

#[test]
fn every_module_has_a_header() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let missing: Vec<String> = files
        .iter()
        .filter(|p| {
            !fs::read_to_string(p)
                .unwrap_or_default()
                .trim_start()
                .starts_with("//!")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "modules without a //! header:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_wire_override_names_an_existing_case() {
    for (path, _) in crate::support::fixtures_in("wire") {
        let case = path.trim_start_matches("wire/").trim_end_matches(".json");
        assert!(
            crate::support::wire(&format!("{case}.sse")).is_some(),
            "{path} overrides a case that does not exist"
        );
    }
}

/// The core's top-level modules (`session` for `session/…`, `history_limit` for
/// `history_limit.rs`) with their files.
fn core_modules() -> std::collections::BTreeMap<String, Vec<PathBuf>> {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let mut modules = std::collections::BTreeMap::<String, Vec<PathBuf>>::new();
    for path in files.into_iter().filter(|p| !is_host(p)) {
        let relative = path.strip_prefix(src_dir()).unwrap_or(&path).to_path_buf();
        let first = relative
            .components()
            .next()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_string()
            })
            .unwrap_or_default();
        modules.entry(first).or_default().push(path);
    }
    modules
}

/// The core modules a file's code names: `crate::x::…` paths and `use crate::{x, y::…}` groups.
fn named_modules(
    code: &str,
    known: &std::collections::BTreeMap<String, Vec<PathBuf>>,
) -> Vec<String> {
    let compact: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    let mut push = |name: &str| {
        if known.contains_key(name) && !out.iter().any(|n: &String| n == name) {
            out.push(name.to_string());
        }
    };
    for (at, _) in compact.match_indices("crate::") {
        let rest = &compact[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group: `a`, `b::c`, nested braces skipped.
            let mut depth = 0;
            let mut word = String::new();
            let mut at_start = true;
            for ch in group.chars() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_start = true,
                    c if depth == 0 && at_start && (c.is_alphanumeric() || c == '_') => {
                        word.push(c)
                    }
                    _ if depth == 0 && at_start && !word.is_empty() => {
                        push(&word);
                        word.clear();
                        at_start = false;
                    }
                    _ => {}
                }
            }
            if !word.is_empty() {
                push(&word);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            push(&name);
        }
    }
    out
}

/// ARCHITECTURE.md's layer list: lines `- **Layer n** a, b, c` under `## Layers of the core`.
fn architecture_layers() -> std::collections::BTreeMap<String, usize> {
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
        .unwrap_or_default();
    let section = text.split("## Layers of the core").nth(1).unwrap_or("");
    let section = section.split("\n## ").next().unwrap_or("");
    let mut layers = std::collections::BTreeMap::new();
    for line in section.lines() {
        let Some(rest) = line.trim().strip_prefix("- **Layer ") else {
            continue;
        };
        let Some((number, names)) = rest.split_once("**") else {
            continue;
        };
        let Ok(layer) = number.trim().parse::<usize>() else {
            continue;
        };
        for name in names.split(',') {
            let name = name
                .trim()
                .trim_matches('`')
                .trim_end_matches('/')
                .to_string();
            if !name.is_empty() {
                layers.insert(name, layer);
            }
        }
    }
    layers
}

/// Issue 15: the core obeys the layers ARCHITECTURE.md lists — a module uses only modules of
/// lower layers — so there is no circle between core modules.
#[test]
fn core_modules_use_only_lower_layers() {
    let modules = core_modules();
    let layers = architecture_layers();
    assert!(
        layers.len() >= 20,
        "ARCHITECTURE.md lists only {} layered modules",
        layers.len()
    );
    let mut problems = Vec::new();
    for name in modules.keys() {
        if !layers.contains_key(name) {
            problems.push(format!("`{name}` is in no layer of ARCHITECTURE.md"));
        }
    }
    for name in layers.keys() {
        if !modules.contains_key(name) {
            problems.push(format!(
                "ARCHITECTURE.md layers `{name}`, which is not a core module"
            ));
        }
    }
    for (name, files) in &modules {
        let own = layers.get(name).copied().unwrap_or(0);
        for path in files {
            let code = code_of(&fs::read_to_string(path).unwrap_or_default());
            for used in named_modules(&code, &modules) {
                let theirs = layers.get(&used).copied().unwrap_or(usize::MAX);
                if used != *name && theirs >= own {
                    problems.push(format!(
                        "{} (layer {own}) uses `{used}` (layer {theirs})",
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_layer_check_reads_groups_and_paths() {
    let modules = core_modules();
    let names = named_modules(
        "use crate::{delta::Draft, message::{ChatMessage, Role}, error};\nlet x = crate::plan::f();",
        &modules,
    );
    assert_eq!(names, ["delta", "message", "error", "plan"]);
}

/// The keys of hidden-role data that no other module needs to spell (words like `source` or
/// `payload`, which other data has too, are caught by the accessor rule above).
const HIDDEN_KEYS: [&str; 9] = [
    "subkind",
    "plan_delta",
    "ui_only",
    "compression",
    "compression_report",
    "incomplete_tool_calls",
    "cut_by",
    "subagent_answers",
    "summarized_source_message_ids",
];

/// Issue 15: hidden-role keys (`event`, `plan`, `compression`, `stopped`, `ui_only`, …) are
/// spelled in `hidden.rs` only; everything else reads them through its typed accessors.
#[test]
fn hidden_role_data_is_read_through_one_module() {
    let mut problems = Vec::new();
    for files in core_modules().values() {
        for path in files {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            if matches!(name.as_str(), "hidden.rs" | "delta.rs" | "message.rs") {
                continue;
            }
            let code: String = code_of(&fs::read_to_string(path).unwrap_or_default())
                .split_whitespace()
                .collect();
            for access in [
                ".extra.get(",
                ".extra.insert(",
                ".extra.contains_key(",
                ".extra.remove(",
                ".event_field(",
            ] {
                if code.contains(access) {
                    problems.push(format!("{}: `{access}`", path.display()));
                }
            }
            // Every other spelling too: the keys as string literals.
            for key in HIDDEN_KEYS {
                if code.contains(&format!("\"{key}\"")) {
                    problems.push(format!("{}: \"{key}\"", path.display()));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "hidden-role keys read outside hidden.rs:\n{}",
        problems.join("\n")
    );
}

/// Issue 15: ARCHITECTURE.md's code map names every file of `crate/src` and `www/`: a file
/// `d/x.rs` in the row of `d/`, `x.rs` or `x` as code; a top-level `x.rs` as `x`; `d/mod.rs` by
/// its folder; a page file by its path under `www/`.
#[test]
fn architecture_names_every_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let whole = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_default();
    // The layer list names every core module too: only the maps count as naming a file.
    let text = whole
        .split("\n## ")
        .filter(|section| section.starts_with("Code map") || section.starts_with("The page"))
        .collect::<Vec<_>>()
        .join("\n");
    let row_of = |folder: &str| -> String {
        text.lines()
            .filter(|l| l.contains(&format!("`{folder}/`")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut missing = Vec::new();
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    for path in &files {
        let relative = path.strip_prefix(src_dir()).unwrap_or(path);
        let parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect();
        let file = parts.last().cloned().unwrap_or_default();
        let stem = file.trim_end_matches(".rs");
        let named = match parts.len() {
            1 => text.contains(&format!("`{stem}`")) || text.contains(&format!("`{file}`")),
            _ if file == "mod.rs" => {
                text.contains(&format!("`{}/`", parts[..parts.len() - 1].join("/")))
            }
            _ => {
                let folder = parts[..parts.len() - 1].join("/");
                let row = row_of(&folder);
                let top = row_of(&parts[0]);
                [row, top].iter().any(|r| {
                    r.contains(&format!("`{file}`"))
                        || r.contains(&format!("`{stem}`"))
                        || r.contains(&format!("`{stem}/`"))
                })
            }
        };
        if !named {
            missing.push(format!("crate/src/{}", parts.join("/")));
        }
    }
    let mut page = Vec::new();
    web_files(&root.join("www"), &root.join("www"), &mut page);
    for file in page {
        if !text.contains(&format!("`{file}`")) {
            missing.push(format!("www/{file}"));
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map does not name:\n{}",
        missing.join("\n")
    );
}

fn web_files(base: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            web_files(base, &path, out);
        } else {
            let relative = path.strip_prefix(base).unwrap_or(&path);
            out.push(relative.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// Every file stays small enough to read: 600 lines of Rust, 400 in the browser host (`web/`)
/// and the page (`www/`). A concept that outgrows it becomes a folder of parts.
#[test]
fn every_file_is_within_its_size_budget() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    let mut page = Vec::new();
    web_files(&root.join("www"), &root.join("www"), &mut page);
    files.extend(
        page.iter()
            .filter(|f| f.ends_with(".js"))
            .map(|f| root.join("www").join(f)),
    );
    let mut over = Vec::new();
    for path in files {
        let lines = fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .count();
        let text = path.to_string_lossy().replace('\\', "/");
        let budget = if text.contains("/src/web/") || text.contains("/www/") {
            400
        } else {
            600
        };
        if lines > budget {
            over.push(format!("{text}: {lines} lines (budget {budget})"));
        }
    }
    assert!(
        over.is_empty(),
        "files over their size budget:\n{}",
        over.join("\n")
    );
}
