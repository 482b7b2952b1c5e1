//! What a shell command or an MCP tool changed in the workspace (issue 39). Neither says which
//! files it touches, so around each call the workspace is scanned: every file the walker sees
//! (ignore files honoured, `.git` and `.palaver` skipped, symlinks not followed) with its size
//! and modification time. Only a file whose size or time moved since the last scan is read and
//! hashed — and its content kept in the change store before the call runs, so the call's change
//! can be turned back. Comparing the scans before and after the call gives the files it created,
//! changed and deleted.

use super::confine::{self, RelPath, Target};
use super::walk::{self, Budget, Kind, WalkOptions};
use super::workspace::Workspace;
use foldhash::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

/// Files a scan looks at; past it the scan stops (a workspace that large is recorded in part).
pub const SCAN_FILES_CAP: usize = 100_000;
/// Files counted by one walking thread before it adds them to the scan's shared count.
const COUNT_BATCH: usize = 256;
/// Files larger than this are not kept (the store's per-file limit, as for `write_file`).
pub const KEPT_FILE_CAP: u64 = super::tools::fs::READ_LIMIT;

/// One file as a scan saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub size: u64,
    pub modified: Option<SystemTime>,
    /// The content's SHA-256 as kept in the store; `None` when it could not be kept (too large,
    /// unreadable): such a file's changes are reported, not recorded. Shared, not copied, from
    /// one scan to the next.
    pub hash: Option<Arc<str>>,
}

/// The workspace at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scan {
    /// By path (hashed, with a fast seeded hasher: a sorted map compared long common prefixes on
    /// every lookup).
    pub files: HashMap<String, Seen>,
    /// The scan stopped early (deadline, cap): files past it were not seen.
    pub partial: bool,
    /// The folders it walked (workspace-relative), so they can be watched.
    pub folders: Vec<String>,
}

/// One file a call changed: its content hash before and after (`None`: it did not exist).
#[derive(Debug, Clone, PartialEq)]
pub struct Changed {
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// Scans the workspace; files whose size and time match `previous` keep their hash, the others
/// are read and handed to `keep` (which stores them and returns their hash). The root's folders
/// are walked on as many threads as there are cores (as `git status` reads its index).
pub fn scan(
    ws: &Workspace,
    previous: &Scan,
    budget: &Budget,
    keep: &(dyn Fn(&[u8]) -> Option<String> + Sync),
) -> Scan {
    let seen = AtomicUsize::new(0);
    let mut out = Scan::default();
    let mut folders = Vec::new();
    let top = WalkOptions {
        overrides: None,
        max_depth: Some(1),
        sorted: false,
    };
    let root = RelPath::root();
    let stop = walk::walk(ws.dir(), &root, &top, budget, &mut |entry| {
        if entry.kind == Kind::Dir {
            folders.push(entry.path.clone());
        }
        look(entry, previous, keep, &seen, &mut out)
    });
    out.partial |= !matches!(stop, Ok(None));
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let parts: Vec<Scan> = std::thread::scope(|scope| {
        let walkers: Vec<_> = (0..threads)
            .map(|t| {
                let mine: Vec<&String> = folders.iter().skip(t).step_by(threads).collect();
                let seen = &seen;
                scope.spawn(move || {
                    let mut part = Scan::default();
                    part.files.reserve(previous.files.len() / threads + 1);
                    let all = WalkOptions {
                        overrides: None,
                        max_depth: None,
                        sorted: false,
                    };
                    for folder in mine {
                        let Ok(start) = confine::check(folder, Target::RootAllowed) else {
                            continue;
                        };
                        let stop = walk::walk(ws.dir(), &start, &all, budget, &mut |entry| {
                            look(entry, previous, keep, seen, &mut part)
                        });
                        part.partial |= !matches!(stop, Ok(None));
                    }
                    part
                })
            })
            .collect();
        walkers.into_iter().filter_map(|w| w.join().ok()).collect()
    });
    out.files.reserve(previous.files.len());
    for part in parts {
        out.partial |= part.partial;
        out.files.extend(part.files);
        out.folders.extend(part.folders);
    }
    out
}

/// One walked entry: a regular file is looked at (read only when it moved); `false` stops the
/// walk at the cap.
fn look(
    entry: walk::Entry,
    previous: &Scan,
    keep: &(dyn Fn(&[u8]) -> Option<String> + Sync),
    seen: &AtomicUsize,
    out: &mut Scan,
) -> bool {
    if entry.kind == Kind::Dir {
        out.folders.push(entry.path);
        return true;
    }
    if entry.kind != Kind::File {
        return true;
    }
    // Counted across the walking threads in batches: one shared counter bumped per file made the
    // cores take its cache line from each other 10 000 times a scan.
    if (out.files.len() + 1) % COUNT_BATCH == 0
        && seen.fetch_add(COUNT_BATCH, Ordering::Relaxed) + COUNT_BATCH > SCAN_FILES_CAP
    {
        out.partial = true;
        return false;
    }
    let Ok(meta) = entry.parent.symlink_metadata(&entry.name) else {
        return true;
    };
    let modified = meta.modified().ok().map(|t| t.into_std());
    let (size, path) = (meta.len(), entry.path);
    let hash = match previous.files.get(&path) {
        Some(was) if was.size == size && was.modified == modified && modified.is_some() => {
            was.hash.clone()
        }
        _ if size > KEPT_FILE_CAP => None,
        _ => read(&entry.parent, &entry.name)
            .and_then(|bytes| keep(&bytes))
            .map(Arc::from),
    };
    out.files.insert(
        path,
        Seen {
            size,
            modified,
            hash,
        },
    );
    true
}

/// The files that differ between two scans, by content. A file that could not be kept on one
/// side is left out (its earlier content is unknown, so a restore could not put it back).
pub fn changes(before: &Scan, after: &Scan) -> Vec<Changed> {
    let mut out = Vec::new();
    for (path, seen) in &after.files {
        let was = before.files.get(path);
        let (old, new) = (was.map(|w| w.hash.clone()), seen.hash.clone());
        match (old, new) {
            (Some(old), new) if old == new => {}
            (Some(Some(old)), Some(new)) => out.push(changed(path, Some(old), Some(new))),
            (None, Some(new)) if !before.partial => out.push(changed(path, None, Some(new))),
            _ => {}
        }
    }
    if !after.partial {
        for (path, seen) in &before.files {
            if let (false, Some(old)) = (after.files.contains_key(path), &seen.hash) {
                out.push(changed(path, Some(old.clone()), None));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn changed(path: &str, before: Option<Arc<str>>, after: Option<Arc<str>>) -> Changed {
    Changed {
        path: path.to_string(),
        before: before.map(|h| h.to_string()),
        after: after.map(|h| h.to_string()),
    }
}

/// A regular file's bytes, opened without following a symlink and without blocking on a FIFO.
fn read(dir: &cap_std::fs::Dir, name: &str) -> Option<Vec<u8>> {
    let file = walk::open_file_nofollow(dir, name).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.into_std()
        .take(KEPT_FILE_CAP + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= KEPT_FILE_CAP).then_some(bytes)
}
