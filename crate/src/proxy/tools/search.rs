//! `search`: regex or literal search under a workspace directory, in-process with `ignore`
//! (respects `.gitignore`, never follows symlinks) and `grep-searcher` — never a shell or `rg`, so
//! a pattern such as `--pre=touch x` is only a pattern. Files are opened through the workspace's
//! directory capability, never by host path.

use super::{str_arg, ToolReply};
use crate::proxy::confine::{self, io_error, Target};
use crate::proxy::workspace::Workspace;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde_json::{json, Value};

const DEFAULT_RESULTS: usize = 200;
const MAX_RESULTS: usize = 2000;
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

pub fn search(ws: &Workspace, args: &Value) -> ToolReply {
    let pattern = match str_arg(args, "pattern") {
        Ok(pattern) => pattern,
        Err(reply) => return reply,
    };
    let raw_path = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let path = match confine::check(raw_path, Target::RootAllowed) {
        Ok(path) => path,
        Err(rejected) => return rejected.into(),
    };
    if let Err(e) = ws.dir().open_dir(path.as_str()) {
        return io_error(&path, &e).into();
    }
    let literal = args
        .get("literal")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let pattern = if literal {
        regex::escape(pattern)
    } else {
        pattern.to_string()
    };
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(
            args.get("case_insensitive")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        )
        .build(&pattern)
    {
        Ok(matcher) => matcher,
        Err(e) => {
            return ToolReply::failed(
                "bad_pattern",
                format!("the pattern is not a valid regex: {e}"),
            )
        }
    };
    let limit = args
        .get("max_results")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_RESULTS, |n| (n as usize).clamp(1, MAX_RESULTS));
    let mut walker = ignore::WalkBuilder::new(ws.host_path(&path));
    walker
        .follow_links(false)
        .require_git(false)
        .hidden(false)
        .filter_entry(|e| e.file_name() != ".git");
    if let Some(glob) = args.get("glob").and_then(Value::as_str) {
        let mut overrides = ignore::overrides::OverrideBuilder::new(ws.host_path(&path));
        if let Err(e) = overrides.add(glob) {
            return ToolReply::failed("bad_glob", format!("the glob is not valid: {e}"));
        }
        match overrides.build() {
            Ok(built) => {
                walker.overrides(built);
            }
            Err(e) => return ToolReply::failed("bad_glob", format!("the glob is not valid: {e}")),
        }
    }
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let mut hits: Vec<Value> = Vec::new();
    let mut lines = Vec::new();
    let mut truncated = false;
    for entry in walker.build().flatten() {
        if hits.len() >= limit {
            truncated = true;
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file())
            || entry.metadata().map_or(true, |m| m.len() > MAX_FILE_BYTES)
        {
            continue;
        }
        // The walk yields host paths; the content is read through the workspace capability, so a
        // directory swapped for a symlink during the walk cannot leak outside text (A47).
        let Some(relative) = workspace_relative(ws, entry.path()) else {
            continue;
        };
        let Ok(file) = ws.dir().open(&relative) else {
            continue;
        };
        let _ = searcher.search_file(
            &matcher,
            &file.into_std(),
            UTF8(|line_number, line| {
                if hits.len() >= limit {
                    return Ok(false);
                }
                let text = line.trim_end_matches(['\n', '\r']);
                lines.push(format!("{relative}:{line_number}: {text}"));
                hits.push(json!({"path": relative, "line": line_number, "text": text}));
                Ok(true)
            }),
        );
    }
    let content = if lines.is_empty() {
        "No matches.".to_string()
    } else {
        lines.join("\n")
    };
    ToolReply::ok(
        content,
        Some(json!({"matches": hits, "truncated": truncated})),
    )
}

/// The walked entry's path relative to the workspace root, with `/` separators.
fn workspace_relative(ws: &Workspace, path: &std::path::Path) -> Option<String> {
    let relative = path.strip_prefix(ws.root()).ok()?;
    let parts: Option<Vec<&str>> = relative.iter().map(|part| part.to_str()).collect();
    Some(parts?.join("/"))
}
