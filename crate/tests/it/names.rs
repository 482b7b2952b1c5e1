//! One name, one meaning (ARCHITECTURE.md "Names"): the spellings retired for a second meaning
//! stay out of the code, the page and the documents.

use std::fs;
use std::path::{Path, PathBuf};

/// A retired spelling and the name used instead.
const RETIRED: [(&str, &str); 8] = [
    (
        "ToolPolicy",
        "ToolCapabilities (what palaver serve lets its tools do)",
    ),
    ("MirrorError", "CopyError (the workspace copy)"),
    (
        "workspace mirror",
        "workspace copy (`ChatMirror` is the only mirror)",
    ),
    ("mirror file", "a chat's workspace copy"),
    (
        "IDE tool",
        "host tool (SPEC's wire names `ide_tool_*` stay)",
    ),
    (
        "the proxy",
        "palaver serve (`proxy/` is only the module's name)",
    ),
    ("local proxy", "palaver serve"),
    ("tools proxy", "palaver serve"),
];

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        if path.is_dir() && name != "node_modules" && name != "vendor" {
            files(&path, out);
        } else if ["rs", "js", "mjs", "md", "html", "css"]
            .iter()
            .any(|e| name.ends_with(&format!(".{e}")))
        {
            out.push(path);
        }
    }
}

fn retired_in(text: &str) -> Vec<&'static str> {
    let lower = text.to_lowercase();
    // A match counts at the start of a word only ("beside tool" holds no "IDE tool").
    let starts_word = |at: usize| {
        lower[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric())
    };
    RETIRED
        .iter()
        .filter(|(old, _)| {
            let old = old.to_lowercase();
            lower.match_indices(&old).any(|(at, _)| starts_word(at))
        })
        .map(|(old, _)| *old)
        .collect()
}

#[test]
fn retired_names_are_not_used() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = Vec::new();
    for dir in ["crate/src", "www", "extension", "tests/browser"] {
        files(&root.join(dir), &mut all);
    }
    all.push(root.join("README.md"));
    all.push(root.join("ARCHITECTURE.md"));
    assert!(all.len() > 100, "found only {} files", all.len());
    let mut problems = Vec::new();
    for path in all {
        let text = fs::read_to_string(&path).unwrap_or_default();
        for (number, line) in text.lines().enumerate() {
            for old in retired_in(line) {
                let instead = RETIRED.iter().find(|(o, _)| *o == old).map(|(_, n)| *n);
                problems.push(format!(
                    "{}:{}: `{old}` — say {}",
                    path.strip_prefix(&root).unwrap_or(&path).display(),
                    number + 1,
                    instead.unwrap_or("")
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "retired names:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_check_sees_each_retired_name() {
    assert_eq!(retired_in("use tools::ToolPolicy;"), ["ToolPolicy"]);
    assert_eq!(retired_in("Runs an IDE tool"), ["IDE tool"]);
    assert!(retired_in("ide_tool_required and ChatMirror").is_empty());
    assert!(retired_in("sends it beside tool calls").is_empty());
}
