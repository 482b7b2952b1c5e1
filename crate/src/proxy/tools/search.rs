//! `search`: regex or literal search under a workspace directory, in-process with `ignore`
//! (respects `.gitignore`, never follows symlinks) and `grep-searcher` — never a shell or `rg`, so
//! a pattern such as `--pre=touch x` is only a pattern. Files are opened through the workspace's
//! directory capability, never by host path. The walk runs on all cores; matches are sorted by
//! path and line, so the answer does not depend on thread timing unless `max_results` cut it.

use super::{str_arg, ToolReply};
use crate::proxy::confine::{self, io_error, Target};
use crate::proxy::workspace::Workspace;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkState;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
    let (mut hits, truncated) = search_parallel(ws, walker, &matcher, limit);
    hits.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    hits.truncate(limit);
    render(&hits, truncated)
}

/// One matching line.
struct Hit {
    path: String,
    line: u64,
    text: String,
}

/// Walks on all cores; each thread has its own searcher. Stops once `limit` lines matched.
fn search_parallel(
    ws: &Workspace,
    walker: ignore::WalkBuilder,
    matcher: &RegexMatcher,
    limit: usize,
) -> (Vec<Hit>, bool) {
    let hits = Mutex::new(Vec::new());
    let found = AtomicUsize::new(0);
    walker.build_parallel().run(|| {
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .build();
        let (hits, found) = (&hits, &found);
        Box::new(move |entry| {
            // One match past the limit proves the answer is cut; then stop.
            if found.load(Ordering::Relaxed) > limit {
                return WalkState::Quit;
            }
            if let Ok(entry) = entry {
                let mine = search_entry(ws, &mut searcher, matcher, &entry, limit, found);
                if !mine.is_empty() {
                    hits.lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .extend(mine);
                }
            }
            WalkState::Continue
        })
    });
    let hits = hits.into_inner().unwrap_or_else(|p| p.into_inner());
    let truncated = found.load(Ordering::Relaxed) > limit;
    (hits, truncated)
}

/// Searches one walked file, opened through the workspace capability: a directory swapped for a
/// symlink during the walk cannot leak outside text (A47).
fn search_entry(
    ws: &Workspace,
    searcher: &mut grep_searcher::Searcher,
    matcher: &RegexMatcher,
    entry: &ignore::DirEntry,
    limit: usize,
    found: &AtomicUsize,
) -> Vec<Hit> {
    let mut hits = Vec::new();
    if !entry.file_type().is_some_and(|t| t.is_file())
        || entry.metadata().map_or(true, |m| m.len() > MAX_FILE_BYTES)
    {
        return hits;
    }
    let Some(relative) = workspace_relative(ws, entry.path()) else {
        return hits;
    };
    let Ok(file) = ws.dir().open(&relative) else {
        return hits;
    };
    let _ = searcher.search_file(
        matcher,
        &file.into_std(),
        UTF8(|line, text| {
            if found.fetch_add(1, Ordering::Relaxed) >= limit {
                return Ok(false);
            }
            let text = text.trim_end_matches(['\n', '\r']).to_string();
            hits.push(Hit {
                path: relative.clone(),
                line,
                text,
            });
            Ok(true)
        }),
    );
    hits
}

fn render(hits: &[Hit], truncated: bool) -> ToolReply {
    let content = if hits.is_empty() {
        "No matches.".to_string()
    } else {
        hits.iter()
            .map(|h| format!("{}:{}: {}", h.path, h.line, h.text))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let matches: Vec<Value> = hits
        .iter()
        .map(|h| json!({"path": h.path, "line": h.line, "text": h.text}))
        .collect();
    ToolReply::ok(
        content,
        Some(json!({"matches": matches, "truncated": truncated})),
    )
}

/// The walked entry's path relative to the workspace root, with `/` separators.
fn workspace_relative(ws: &Workspace, path: &std::path::Path) -> Option<String> {
    let relative = path.strip_prefix(ws.root()).ok()?;
    let parts: Option<Vec<&str>> = relative.iter().map(|part| part.to_str()).collect();
    Some(parts?.join("/"))
}
