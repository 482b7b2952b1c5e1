//! `repo_map {focus?, budget?}`: a map of the workspace's code for the model (seed 002's symbol
//! map, anchored on aider's repository map) — each supported file's definitions and references
//! from tree-sitter (`tags`), files ranked by who uses whom, personalised to the chat's files
//! (`rank`), rendered as a legend and one block per file within a token budget (`render`).
//! The walk is the tools' own (ignore rules, no symlinks, `.git` and `.palaver` skipped, the
//! walking budget); files are read again only when their size or time changed (`TagCache`).

mod rank;
mod render;
mod tags;

use super::{ToolCapabilities, ToolReply};
use crate::proxy::confine::RelPath;
use crate::proxy::walk::{self, Budget, Kind, WalkOptions};
use crate::proxy::workspace::Workspace;
use cap_std::fs::MetadataExt;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::io::Read;
use std::sync::{Arc, Mutex};

pub use render::HEADER;
pub use tags::TagCache;

/// The budget when the call names none, and its bounds (tokens).
const DEFAULT_BUDGET: usize = 1024;
const BUDGET_RANGE: (usize, usize) = (128, 16_384);
/// Files mapped at most, and the largest one read.
const MAX_FILES: usize = 5_000;
const MAX_BYTES: u64 = 1024 * 1024;

/// What the walk found: the files with their tags, and why others were left out.
#[derive(Default)]
struct Found {
    files: Vec<(String, Arc<Vec<tags::Tag>>)>,
    skipped: usize,
    truncated: bool,
}

pub fn repo_map(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    cache: &Mutex<TagCache>,
    args: &Value,
    budget: &Budget,
) -> ToolReply {
    let tokens = args
        .get("budget")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_BUDGET, |b| b as usize)
        .clamp(BUDGET_RANGE.0, BUDGET_RANGE.1);
    let focus_paths: HashSet<String> = match args.get("focus") {
        None | Some(Value::Null) => HashSet::new(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|p| p.trim_start_matches("./").to_string())
            .collect(),
        Some(_) => {
            return ToolReply::refused(
                400,
                "invalid_arguments",
                "`focus` is a list of workspace paths".into(),
            )
        }
    };
    let found = match collect(ws, capabilities, cache, budget) {
        Ok(found) => found,
        Err(e) => {
            return ToolReply::failed("io", format!("the workspace could not be walked: {e}"))
        }
    };
    let focus: rustc_hash::FxHashSet<usize> = found
        .files
        .iter()
        .enumerate()
        .filter(|(_, (path, _))| focus_paths.contains(path))
        .map(|(i, _)| i)
        .collect();
    let ranked = rank::rank(&found.files, &focus);
    let paths: Vec<String> = found.files.iter().map(|(p, _)| p.clone()).collect();
    let map = render::fit(&ranked, &paths, tokens);
    let data = json!({
        "files_mapped": found.files.len(),
        "files_shown": map.files,
        "files_skipped": found.skipped,
        "definitions": ranked.len(),
        "definitions_shown": map.shown,
        "tokens": render::tokens(&map.text),
        "budget": tokens,
        "truncated": found.truncated,
    });
    let mut text = map.text;
    if found.skipped > 0 || found.truncated {
        text.push_str(&format!(
            "\n({} file(s) skipped: too large, not text, or linked elsewhere{})\n",
            found.skipped,
            if found.truncated {
                "; the walk stopped early"
            } else {
                ""
            }
        ));
    }
    ToolReply::ok(text, Some(data))
}

/// Every file of a supported language, with its tags (from the cache when unchanged). The walk
/// lists them; the changed ones are read and parsed on every core (tree-sitter's parse is the cost).
fn collect(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    cache: &Mutex<TagCache>,
    budget: &Budget,
) -> std::io::Result<Found> {
    let options = WalkOptions {
        overrides: None,
        max_depth: None,
        sorted: true,
    };
    let mut found = Found::default();
    let mut listed: Vec<(walk::Entry, tags::Lang)> = Vec::new();
    let stop = walk::walk(ws.dir(), &RelPath::root(), &options, budget, &mut |entry| {
        if entry.kind != Kind::File {
            return true;
        }
        let Some(lang) = tags::Lang::of(&entry.path) else {
            return true;
        };
        if listed.len() == MAX_FILES {
            found.truncated = true;
            return false;
        }
        listed.push((entry, lang));
        true
    })?;
    found.truncated |= stop.is_some();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let chunk = listed.len().div_ceil(threads).max(1);
    let mut results: Vec<Option<Arc<Vec<tags::Tag>>>> = Vec::with_capacity(listed.len());
    std::thread::scope(|scope| {
        let workers: Vec<_> = listed
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(entry, lang)| file_tags(entry, *lang, capabilities, cache, budget))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for (worker, part) in workers.into_iter().zip(listed.chunks(chunk)) {
            // A worker that died leaves its files unread: counted as skipped, never dropped.
            results.extend(worker.join().unwrap_or_else(|_| vec![None; part.len()]));
        }
    });
    // Files left unread when the deadline came are counted as skipped; the map says it stopped.
    found.truncated |= budget.spent().is_some();
    let mut present = HashSet::new();
    for ((entry, _), tags) in listed.into_iter().zip(results) {
        present.insert(entry.path.clone());
        match tags {
            Some(tags) => found.files.push((entry.path, tags)),
            None => found.skipped += 1,
        }
    }
    if !found.truncated {
        lock(cache).keep_only(&present);
    }
    Ok(found)
}

fn lock(cache: &Mutex<TagCache>) -> std::sync::MutexGuard<'_, TagCache> {
    cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One file's tags: from the cache when its size and time are unchanged, else read and parsed.
fn file_tags(
    entry: &walk::Entry,
    lang: tags::Lang,
    capabilities: &ToolCapabilities,
    cache: &Mutex<TagCache>,
    budget: &Budget,
) -> Option<Arc<Vec<tags::Tag>>> {
    let file = walk::open_file_nofollow(&entry.parent, &entry.name).ok()?;
    let metadata = file.metadata().ok()?;
    // A regular file only, not too large, and not a second name of an outside file (A48).
    if !metadata.is_file()
        || metadata.len() > MAX_BYTES
        || (metadata.nlink() > 1 && !capabilities.allow_hard_links)
    {
        return None;
    }
    let modified = metadata.modified().ok()?.into_std();
    if let Some(tags) = lock(cache).get(&entry.path, metadata.len(), modified) {
        return Some(tags);
    }
    if budget.spent().is_some() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES).read_to_end(&mut bytes).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    let tags = Arc::new(tags::tags_of(lang, &bytes)?);
    lock(cache).put(&entry.path, metadata.len(), modified, tags.clone());
    Some(tags)
}
