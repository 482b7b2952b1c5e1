//! The repository map (seed 002, issue 40) through the real server: definitions of several
//! languages read with tree-sitter, the most used file first, the map centred on `focus`, fitted
//! to the budget, ignored and unreadable files left out (and counted), a changed file read again.

use super::support::{fixture, tool};
use serde_json::{json, Value};
use std::fs;

fn write(root: &std::path::Path, path: &str, text: &str) {
    let path = root.join(path);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
}

/// A small project: a core used by everyone, a helper used by one file, code in six languages.
fn project(ws: &std::path::Path) {
    write(ws, "src/core.rs", "pub struct LedgerBook { pub lines: Vec<u32> }\n\npub fn open_ledger_book() -> LedgerBook {\n    LedgerBook { lines: Vec::new() }\n}\n");
    write(ws, "src/report.rs", "use crate::core::open_ledger_book;\n\npub fn print_ledger_report() {\n    let book = open_ledger_book();\n    let _ = book;\n}\n");
    write(ws, "src/audit.rs", "pub fn audit_ledger_twice() {\n    let a = open_ledger_book();\n    let b = open_ledger_book();\n    print_ledger_report();\n    let _ = (a, b);\n}\n");
    write(
        ws,
        "src/lonely.rs",
        "pub fn lonely_helper_nobody_calls() {}\n",
    );
    write(ws, "tools/stats.py", "class LedgerStats:\n    def total_amount(self):\n        return 0\n\ndef load_ledger_stats():\n    return LedgerStats()\n");
    write(ws, "web/app.js", "export function renderLedgerPage() {\n  return loadLedgerRows();\n}\nfunction loadLedgerRows() { return []; }\n");
    write(ws, "web/types.ts", "export interface LedgerRow { id: number }\nexport function parseLedgerRow(text: string): LedgerRow { return { id: Number(text) }; }\n");
    write(ws, "cmd/main.go", "package main\n\nfunc ComputeLedgerSum(values []int) int {\n\treturn 0\n}\n\nfunc main() { ComputeLedgerSum(nil) }\n");
    write(
        ws,
        "docs/GUIDE.md",
        "# Ledger guide\n\n```\n# not a heading\n```\n\n## Closing the books\n",
    );
    write(
        ws,
        "generated/big.rs",
        "pub fn generated_and_ignored() {}\n",
    );
    write(ws, ".gitignore", "generated/\n");
    write(ws, "data/blob.rs", "fn x() {}\0binary");
}

fn map(port: u16, args: Value) -> (String, Value) {
    let reply = tool(port, "repo_map", args);
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    (
        reply.body["content"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        reply.body["data"].clone(),
    )
}

#[test]
fn the_map_shows_every_languages_definitions_ranked_by_use_within_the_budget() {
    let fx = fixture("repo-map", false);
    project(&fx.ws());
    let (text, data) = map(fx.server.port, json!({"budget": 2000}));
    for expected in [
        "# Repository Structure",
        "Legend:",
        "open_ledger_book",
        "LedgerBook",
        "print_ledger_report",
        "LedgerStats",
        "load_ledger_stats",
        "renderLedgerPage",
        "parseLedgerRow",
        "ComputeLedgerSum",
        "Closing the books",
    ] {
        assert!(
            text.contains(expected),
            "`{expected}` missing from the map:\n{text}"
        );
    }
    assert!(
        !text.contains("not a heading"),
        "a fenced line is not a heading:\n{text}"
    );
    assert!(
        !text.contains("generated_and_ignored"),
        "ignored files stay out:\n{text}"
    );
    assert_eq!(
        data["files_skipped"], 1,
        "the binary file is skipped and counted: {data}"
    );
    // The file everyone uses comes first; its function says who uses it.
    let first_block = text
        .lines()
        .find(|l| l.ends_with(".rs:") || l.ends_with(".py:") || l.ends_with(".js:"));
    assert_eq!(
        first_block,
        Some("src/core.rs:"),
        "the most used file first:\n{text}"
    );
    assert!(
        text.contains("open_ledger_book :3 ←2"),
        "used by two other files:\n{text}"
    );
    assert!(
        data["tokens"].as_u64().unwrap_or(u64::MAX) <= 2000,
        "{data}"
    );
}

#[test]
fn a_small_budget_keeps_the_best_and_focus_moves_the_centre() {
    let fx = fixture("repo-map-budget", false);
    project(&fx.ws());
    let (small, data) = map(fx.server.port, json!({"budget": 128}));
    assert!(
        data["tokens"].as_u64().unwrap_or(u64::MAX) <= 128,
        "{data}\n{small}"
    );
    assert!(
        data["definitions_shown"].as_u64().unwrap_or(0) < data["definitions"].as_u64().unwrap_or(0),
        "{data}"
    );
    assert!(
        small.contains("open_ledger_book"),
        "the most used definition stays:\n{small}"
    );
    assert!(
        !small.contains("lonely_helper_nobody_calls"),
        "an unused one goes first:\n{small}"
    );
    // Centred on the Python file: its definitions come before the Rust core's.
    let (centred, _) = map(
        fx.server.port,
        json!({"budget": 2000, "focus": ["tools/stats.py"]}),
    );
    let at = |name: &str| centred.find(name).unwrap_or(usize::MAX);
    assert!(
        at("load_ledger_stats") < at("open_ledger_book"),
        "focus first:\n{centred}"
    );
    let bad = tool(fx.server.port, "repo_map", json!({"focus": "src/core.rs"}));
    assert_eq!(bad.status, 400, "{:?}", bad.body);
}

#[test]
fn a_changed_file_is_read_again_and_a_removed_one_leaves_the_map() {
    let fx = fixture("repo-map-change", false);
    project(&fx.ws());
    let (before, _) = map(fx.server.port, json!({"budget": 4000}));
    assert!(before.contains("lonely_helper_nobody_calls"));
    write(
        &fx.ws(),
        "src/lonely.rs",
        "pub fn lonely_helper_renamed_now() {}\n// longer than before\n",
    );
    fs::remove_file(fx.ws().join("tools/stats.py")).unwrap_or_else(|e| panic!("{e}"));
    let (after, _) = map(fx.server.port, json!({"budget": 4000}));
    assert!(
        after.contains("lonely_helper_renamed_now")
            && !after.contains("lonely_helper_nobody_calls"),
        "{after}"
    );
    assert!(!after.contains("LedgerStats"), "{after}");
}
