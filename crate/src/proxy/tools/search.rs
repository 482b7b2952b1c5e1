//! `search`: regex or literal search under a workspace directory, in-process with `grep-searcher`
//! — never a shell or `rg`, so a pattern such as `--pre=touch x` is only a pattern. The walk goes
//! through directory handles (`walk`): ignore files are honoured but read only inside the
//! workspace, and every file is opened from its directory's handle, non-blocking, with no symlink
//! following. Files are searched on several threads; matches are sorted by path and line, so the
//! answer does not depend on thread timing unless `max_results` cut it.
//!
//! Bounded (SECURITY E5): the regex and its lazy DFA have size limits (a pattern past them is a
//! `bad_pattern`), a line longer than `LINE_LIMIT` ends that file's search, and every read checks
//! the call's `Budget`, so a pathological pattern stops at the deadline or as soon as the client
//! leaves. The caller caps how many searches run at once.

use super::{str_arg, ToolCapabilities, ToolReply};
use crate::proxy::confine::{self, io_error, Target};
use crate::proxy::walk::{self, Budget, Entry, Kind, Stop, WalkOptions};
use crate::proxy::workspace::Workspace;
use cap_std::fs::MetadataExt;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use serde_json::{json, Value};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

const DEFAULT_RESULTS: usize = 200;
const MAX_RESULTS: usize = 2000;
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// The compiled regex may take this much memory; a larger pattern is refused.
const REGEX_SIZE_LIMIT: usize = 8 * 1024 * 1024;
/// The lazy DFA's cache: past it the regex engine falls back to slower, bounded matching
/// instead of growing (grep's default of 1 GB let one pattern take 640 MB).
const DFA_SIZE_LIMIT: usize = 4 * 1024 * 1024;
/// A line longer than this is not buffered whole; that file's search ends there.
const LINE_LIMIT: usize = 4 * 1024 * 1024;
/// Searcher threads per call (the caller also caps concurrent calls).
const MAX_WORKERS: usize = 4;

pub fn search(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    args: &Value,
    budget: &Budget,
) -> ToolReply {
    let pattern = match str_arg(args, "pattern") {
        Ok(pattern) => pattern,
        Err(reply) => return reply,
    };
    let raw_path = args.get("path").and_then(Value::as_str).unwrap_or(".");
    let path = match confine::check(raw_path, Target::RootAllowed) {
        Ok(path) => path,
        Err(rejected) => return rejected.into(),
    };
    if let Err(e) = walk::open_dir_nofollow(ws.dir(), &path) {
        return io_error(&path, &e).into();
    }
    let matcher = match build_matcher(pattern, args) {
        Ok(matcher) => matcher,
        Err(reply) => return reply,
    };
    let overrides = match args.get("glob").and_then(Value::as_str) {
        Some(glob) => match glob_filter(&path, glob) {
            Ok(overrides) => Some(overrides),
            Err(reply) => return reply,
        },
        None => None,
    };
    let limit = args
        .get("max_results")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_RESULTS, |n| (n as usize).clamp(1, MAX_RESULTS));
    let options = WalkOptions {
        overrides,
        max_depth: None,
        sorted: false,
    };
    let run = Run {
        matcher: &matcher,
        limit,
        budget,
        allow_hard_links: capabilities.allow_hard_links,
        found: AtomicUsize::new(0),
        skipped_links: AtomicUsize::new(0),
        hits: Mutex::new(Vec::new()),
        stopped: Mutex::new(None),
    };
    let stop = match search_parallel(ws, &path, &options, &run) {
        Ok(stop) => stop,
        Err(e) => return io_error(&path, &e).into(),
    };
    let truncated = run.found.load(Ordering::Relaxed) > limit;
    let skipped_links = run.skipped_links.load(Ordering::Relaxed);
    let mut hits = run.hits.into_inner().unwrap_or_else(|p| p.into_inner());
    hits.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    hits.truncate(limit);
    render(&hits, truncated, stop, skipped_links)
}

fn build_matcher(pattern: &str, args: &Value) -> Result<RegexMatcher, ToolReply> {
    let literal = args
        .get("literal")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let pattern = if literal {
        regex::escape(pattern)
    } else {
        pattern.to_string()
    };
    RegexMatcherBuilder::new()
        .case_insensitive(
            args.get("case_insensitive")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        )
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .build(&pattern)
        .map_err(|e| {
            ToolReply::failed(
                "bad_pattern",
                format!("the pattern is not a valid regex (or too large): {e}"),
            )
        })
}

/// `glob` as ripgrep's `--glob`: relative to the searched directory, `!` to exclude.
fn glob_filter(
    path: &confine::RelPath,
    glob: &str,
) -> Result<ignore::overrides::Override, ToolReply> {
    // Relative to the searched directory, as the walker's matchers see it.
    let relative = if path.is_root() {
        String::new()
    } else {
        path.as_str()
    };
    let root = walk::virtual_path(&relative);
    let mut builder = ignore::overrides::OverrideBuilder::new(root);
    builder
        .add(glob)
        .and_then(|b| b.build())
        .map_err(|e| ToolReply::failed("bad_glob", format!("the glob is not valid: {e}")))
}

/// One matching line.
struct Hit {
    path: String,
    line: u64,
    text: String,
}

/// One search call's shared state across its threads.
struct Run<'a> {
    matcher: &'a RegexMatcher,
    limit: usize,
    budget: &'a Budget,
    allow_hard_links: bool,
    found: AtomicUsize,
    skipped_links: AtomicUsize,
    hits: Mutex<Vec<Hit>>,
    /// Set when a worker left a file unsearched because the budget ran out.
    stopped: Mutex<Option<Stop>>,
}

impl Run<'_> {
    /// One match past the limit proves the answer is cut; then everything stops.
    fn full(&self) -> bool {
        self.found.load(Ordering::Relaxed) > self.limit
    }
}

/// The walk feeds files to worker threads, each with its own searcher.
fn search_parallel(
    ws: &Workspace,
    start: &confine::RelPath,
    options: &WalkOptions,
    run: &Run,
) -> std::io::Result<Option<Stop>> {
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, MAX_WORKERS);
    let (sender, receiver) = mpsc::sync_channel::<Entry>(1024);
    let receiver = Mutex::new(receiver);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let receiver = &receiver;
            scope.spawn(move || {
                let mut searcher = SearcherBuilder::new()
                    .binary_detection(BinaryDetection::quit(0))
                    .line_number(true)
                    .heap_limit(Some(LINE_LIMIT))
                    .build();
                loop {
                    let next = receiver
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .recv();
                    let Ok(entry) = next else { return };
                    if !run.full() && run.budget.spent().is_none() {
                        search_entry(&mut searcher, run, &entry);
                    }
                    // Checked after the file too: the budget may have cut its search short.
                    if let Some(stop) = run.budget.spent().filter(|_| !run.full()) {
                        *run.stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(stop);
                    }
                }
            });
        }
        let walked = walk::walk(ws.dir(), start, options, run.budget, &mut |entry| {
            if run.full() {
                return false;
            }
            entry.kind != Kind::File || sender.send(entry).is_ok()
        });
        drop(sender);
        walked
    })
    // The workers may have run out of budget after the walk ended.
    .map(|stop| stop.or(*run.stopped.lock().unwrap_or_else(|p| p.into_inner())))
}

/// A file's bytes, checking the call's budget before every read: a pathological pattern over a
/// large file stops within one buffer of the deadline or the client leaving.
struct BudgetReader<'a, R> {
    inner: R,
    budget: &'a Budget,
}

impl<R: Read> Read for BudgetReader<'_, R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if let Some(stop) = self.budget.spent() {
            return Err(std::io::Error::other(stop.as_str()));
        }
        self.inner.read(buffer)
    }
}

/// Searches one walked file, opened from its directory's handle (no symlink, non-blocking): a
/// name swapped for a symlink or a FIFO during the walk is skipped (A47, E4).
fn search_entry(searcher: &mut Searcher, run: &Run, entry: &Entry) {
    let Ok(file) = walk::open_file_nofollow(&entry.parent, &entry.name) else {
        return;
    };
    let Ok(metadata) = file.metadata() else {
        return;
    };
    if !metadata.is_file() || metadata.len() > MAX_FILE_BYTES {
        return;
    }
    // A hard link may be an outside file's second name (A48, E9).
    if metadata.nlink() > 1 && !run.allow_hard_links {
        run.skipped_links.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let reader = BudgetReader {
        inner: file.into_std(),
        budget: run.budget,
    };
    let mut mine = Vec::new();
    let _ = searcher.search_reader(
        run.matcher,
        reader,
        UTF8(|line, text| {
            if run.found.fetch_add(1, Ordering::Relaxed) >= run.limit {
                return Ok(false);
            }
            mine.push(Hit {
                path: entry.path.clone(),
                line,
                text: text.trim_end_matches(['\n', '\r']).to_string(),
            });
            Ok(true)
        }),
    );
    if !mine.is_empty() {
        run.hits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .extend(mine);
    }
}

fn render(hits: &[Hit], truncated: bool, stop: Option<Stop>, skipped_links: usize) -> ToolReply {
    let mut content = if hits.is_empty() {
        "No matches.".to_string()
    } else {
        hits.iter()
            .map(|h| format!("{}:{}: {}", h.path, h.line, h.text))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if stop == Some(Stop::Deadline) {
        content.push_str("\n[the search stopped at its time limit; narrow the path or pattern]");
    }
    if skipped_links > 0 {
        content.push_str(&format!(
            "\n[{skipped_links} file(s) with several hard links not searched: a hard link can name a file outside the workspace; `palaver serve --allow-hard-links` allows them]"
        ));
    }
    let matches: Vec<Value> = hits
        .iter()
        .map(|h| json!({"path": h.path, "line": h.line, "text": h.text}))
        .collect();
    let mut data = json!({"matches": matches, "truncated": truncated || stop.is_some()});
    if let Some(stop) = stop {
        data["stopped"] = json!(stop.as_str());
    }
    if skipped_links > 0 {
        data["skipped_hard_links"] = json!(skipped_links);
    }
    ToolReply::ok(content, Some(data))
}
