//! The workspace walker for `search` and `file_tree`. It walks directory *handles*, never host
//! paths: every directory is opened from its parent's handle with no symlink following, so a
//! directory swapped for a symlink mid-walk fails to open instead of leading out (A47). Ignore files
//! (`.gitignore`, `.ignore`) are read the same way — regular files only, opened non-blocking,
//! size-capped — and only inside the workspace, never from its parent directories: a symlink to
//! `/dev/zero`, a FIFO or an outside file named `.ignore` is skipped (SECURITY E2, E4). Every step
//! checks a `Budget` (a deadline and a cancel flag the request sets when its client leaves).

use super::confine::RelPath;
use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, OpenOptions, OpenOptionsExt};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Ignore files larger than this are not read (a real one is a few KiB).
pub const IGNORE_FILE_CAP: u64 = 256 * 1024;
/// The ignore files a directory may have, the later taking precedence (as ripgrep does).
const IGNORE_FILES: [&str; 2] = [".gitignore", ".ignore"];
/// Entries of one folder walked between two looks at the budget (the folder itself is one).
const BUDGET_EVERY: usize = 32;

/// A tool call's limits: a deadline, and a flag set when the call is abandoned (client gone).
#[derive(Debug, Clone)]
pub struct Budget {
    deadline: Instant,
    cancelled: Arc<AtomicBool>,
}

/// Why a walk or a search stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Deadline,
    Cancelled,
}

impl Stop {
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Deadline => "deadline",
            Stop::Cancelled => "cancelled",
        }
    }
}

impl Budget {
    pub fn new(deadline: Instant, cancelled: Arc<AtomicBool>) -> Self {
        Budget {
            deadline,
            cancelled,
        }
    }

    /// Whether the work must stop now, and why.
    pub fn spent(&self) -> Option<Stop> {
        if self.cancelled.load(Ordering::Relaxed) {
            Some(Stop::Cancelled)
        } else if Instant::now() >= self.deadline {
            Some(Stop::Deadline)
        } else {
            None
        }
    }
}

/// Sets the cancel flag when dropped: the future of a tool call is dropped when its client leaves
/// or its request times out, and the blocking work sees the flag at its next check.
pub struct CancelOnDrop(pub Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// One walked entry: its workspace-relative path, depth below the start (1 = a child), kind, and
/// the handle of its directory with its name, to open it without a second path resolution.
pub struct Entry {
    pub path: String,
    pub depth: usize,
    pub kind: Kind,
    pub parent: Arc<Dir>,
    pub name: String,
}

/// Opens a file by name in an opened directory: no symlink, non-blocking (a FIFO cannot hang).
pub fn open_file_nofollow(dir: &Dir, name: &str) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .follow(FollowSymlinks::No)
        .custom_flags(libc::O_NONBLOCK);
    dir.open_with(name, &options)
}

/// Opens a workspace directory one component at a time, following no symlink.
pub fn open_dir_nofollow(root: &Dir, path: &RelPath) -> std::io::Result<Dir> {
    let mut dir = root.try_clone()?;
    if path.is_root() {
        return Ok(dir);
    }
    for part in path.as_str().split('/') {
        dir = dir.open_dir_nofollow(part)?;
    }
    Ok(dir)
}

/// The ignore rules of one directory.
struct Rules {
    matchers: Vec<Gitignore>,
}

impl Rules {
    /// Reads a directory's ignore files through its handle. `virtual_root` names the directory
    /// for the matcher only (it never touches the disk).
    fn read(dir: &Dir, virtual_root: &Path) -> Rules {
        let mut matchers = Vec::new();
        for name in IGNORE_FILES {
            let Some(text) = read_ignore_file(dir, name) else {
                continue;
            };
            let mut builder = GitignoreBuilder::new(virtual_root);
            for line in text.lines() {
                // A bad line is skipped, as git does; the others still apply.
                let _ = builder.add_line(None, line);
            }
            if let Ok(matcher) = builder.build() {
                if !matcher.is_empty() {
                    matchers.push(matcher);
                }
            }
        }
        // Later files take precedence: check `.ignore` before `.gitignore`.
        matchers.reverse();
        Rules { matchers }
    }
}

/// An ignore file's text: a regular file of at most `IGNORE_FILE_CAP` bytes, else nothing.
fn read_ignore_file(dir: &Dir, name: &str) -> Option<String> {
    let file = open_file_nofollow(dir, name).ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() > IGNORE_FILE_CAP {
        return None;
    }
    let mut bytes = Vec::new();
    file.into_std()
        .take(IGNORE_FILE_CAP)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// What to walk and how.
pub struct WalkOptions {
    /// A glob filter (`search`'s `glob`), checked before the ignore files, as ripgrep does.
    pub overrides: Option<ignore::overrides::Override>,
    /// Depth below the start directory (1 = its children only); `None` = no limit.
    pub max_depth: Option<usize>,
    /// Visit each directory's entries sorted by name (the tree needs it; search does not).
    pub sorted: bool,
}

/// The virtual absolute path that ignore matchers see for a workspace-relative path.
pub fn virtual_path(relative: &str) -> PathBuf {
    if relative.is_empty() {
        PathBuf::from("/")
    } else {
        PathBuf::from(format!("/{relative}"))
    }
}

/// Whether the innermost rule that matches says "ignored".
fn ignored(stack: &[Rules], relative: &str, is_dir: bool) -> bool {
    // Most folders have no ignore file: no path to build for them.
    if stack.iter().all(|rules| rules.matchers.is_empty()) {
        return false;
    }
    let path = virtual_path(relative);
    for rules in stack.iter().rev() {
        for matcher in &rules.matchers {
            match matcher.matched(&path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
    }
    false
}

/// Walks `start` (already checked) depth-first. `visit` returns `false` to stop. The `.git`
/// and `.palaver` directories are skipped; hidden files are walked; symlinks are reported, never
/// followed.
pub fn walk(
    root: &Dir,
    start: &RelPath,
    options: &WalkOptions,
    budget: &Budget,
    visit: &mut dyn FnMut(Entry) -> bool,
) -> std::io::Result<Option<Stop>> {
    // The rules of the workspace's own directories above the start apply too; nothing above
    // the workspace root is read.
    let mut stack = Vec::new();
    let mut dir = root.try_clone()?;
    stack.push(Rules::read(&dir, &virtual_path("")));
    let mut prefix = String::new();
    if !start.is_root() {
        for part in start.as_str().split('/') {
            dir = dir.open_dir_nofollow(part)?;
            prefix = join(&prefix, part);
            stack.push(Rules::read(&dir, &virtual_path(&prefix)));
        }
    }
    let mut walker = Walker {
        options,
        budget,
        visit,
        stack,
    };
    Ok(walker.directory(Arc::new(dir), &prefix, 0).err().flatten())
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

struct Walker<'a> {
    options: &'a WalkOptions,
    budget: &'a Budget,
    visit: &'a mut dyn FnMut(Entry) -> bool,
    stack: Vec<Rules>,
}

/// `Err` ends the whole walk: `Some(stop)` when the budget ran out, `None` when `visit` asked.
type Walked = Result<(), Option<Stop>>;

impl Walker<'_> {
    fn directory(&mut self, dir: Arc<Dir>, prefix: &str, depth: usize) -> Walked {
        if let Some(stop) = self.budget.spent() {
            return Err(Some(stop));
        }
        let Ok(entries) = dir.entries() else {
            return Ok(());
        };
        let mut children: Vec<(String, Kind)> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let kind = match entry.file_type() {
                    Ok(t) if t.is_symlink() => Kind::Symlink,
                    Ok(t) if t.is_dir() => Kind::Dir,
                    Ok(t) if t.is_file() => Kind::File,
                    _ => Kind::Other,
                };
                Some((name, kind))
            })
            .collect();
        if self.options.sorted {
            children.sort_by(|a, b| a.0.cmp(&b.0));
        }
        for (i, (name, kind)) in children.into_iter().enumerate() {
            // The clock is read every few entries, not for each (a scan sees 10 000 files).
            if i % BUDGET_EVERY == BUDGET_EVERY - 1 {
                if let Some(stop) = self.budget.spent() {
                    return Err(Some(stop));
                }
            }
            // `.git` is not the project's text; `.palaver` holds the user's chats, which the
            // model's tools never see (SECURITY F4).
            if name == ".git" || name.eq_ignore_ascii_case(crate::proxy::chat_files::DIR) {
                continue;
            }
            let path = join(prefix, &name);
            let is_dir = kind == Kind::Dir;
            let by_glob = self.options.overrides.as_ref().map_or(Match::None, |o| {
                o.matched(virtual_path(&path), is_dir).map(|_| ())
            });
            let skip = match by_glob {
                Match::Ignore(()) => true,
                Match::Whitelist(()) => false,
                Match::None => ignored(&self.stack, &path, is_dir),
            };
            if skip {
                continue;
            }
            // A file's path and name go to `visit`; only a folder's are needed after it.
            let descend = (kind == Kind::Dir).then(|| (path.clone(), name.clone()));
            let entry = Entry {
                path,
                depth: depth + 1,
                kind,
                parent: dir.clone(),
                name,
            };
            if !(self.visit)(entry) {
                // `visit` stops the walk; the caller knows why (a limit it counted).
                return Err(None);
            }
            let Some((path, name)) = descend else {
                continue;
            };
            if self.options.max_depth.is_none_or(|max| depth + 1 < max) {
                // Opened from the parent's handle with no symlink following: a swap to a
                // symlink between the listing and here fails to open and is skipped.
                let Ok(child) = dir.open_dir_nofollow(&name) else {
                    continue;
                };
                self.stack.push(Rules::read(&child, &virtual_path(&path)));
                let result = self.directory(Arc::new(child), &path, depth + 1);
                self.stack.pop();
                result?;
            }
        }
        Ok(())
    }
}
