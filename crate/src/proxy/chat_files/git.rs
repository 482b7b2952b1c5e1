//! Whether git ignores the workspace copy of the chats (SECURITY F4). Chats are the user's, not
//! the project's: a repository that ships its own `.palaver/.gitignore` (say `!chats/`) would get
//! them committed by the next `git add -A`. So the workspace copy is written only while git ignores
//! `.palaver/chats/`, judged as git does: the `.gitignore` files from the repository's root down
//! to `.palaver/chats/`, and `.git/info/exclude`; the deepest file that matches decides, and an
//! ignored directory ignores all below it. A workspace in no repository has nothing to commit.
//! Ignore files are read, never followed through symlinks, and capped in size.

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use std::path::{Path, PathBuf};

/// The largest ignore file read (larger ones are treated as matching nothing).
const IGNORE_FILE_CAP: u64 = 1024 * 1024;

/// Whether git would leave `relative` (a file below `workspace`, `/`-separated) out of a commit:
/// `true` when the workspace is in no git repository.
pub fn ignores(workspace: &Path, relative: &str) -> bool {
    let Ok(workspace) = workspace.canonicalize() else {
        return false;
    };
    let Some(repo) = repository_root(&workspace) else {
        return true;
    };
    let Ok(inside) = workspace.strip_prefix(&repo) else {
        return true;
    };
    let target = inside.join(relative);
    let parts: Vec<_> = target.iter().collect();
    // Each directory on the way, then the file: the first one ignored ignores the rest.
    (1..=parts.len()).any(|n| {
        let path: PathBuf = parts[..n].iter().collect();
        let is_dir = n < parts.len();
        ignored_here(&repo, &path, is_dir)
    })
}

/// The workspace's repository: the nearest of it and its parents that holds `.git`.
fn repository_root(workspace: &Path) -> Option<PathBuf> {
    workspace
        .ancestors()
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .map(Path::to_path_buf)
}

/// Whether `path` (relative to the repository root) itself is ignored: the ignore files of its
/// parent directories, deepest first, then `.git/info/exclude`; the first that matches decides.
fn ignored_here(repo: &Path, path: &Path, is_dir: bool) -> bool {
    let mut dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    loop {
        let matcher = matcher(&repo.join(&dir), &repo.join(&dir).join(".gitignore"));
        match matcher.matched(repo.join(path), is_dir) {
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
            Match::None => {}
        }
        if !dir.pop() {
            break;
        }
    }
    let exclude = matcher(repo, &repo.join(".git").join("info").join("exclude"));
    exclude.matched(repo.join(path), is_dir).is_ignore()
}

/// The patterns of one ignore file, rooted at `root`; nothing when it is missing, a symlink,
/// not a regular file or too large.
fn matcher(root: &Path, file: &Path) -> Gitignore {
    let mut builder = GitignoreBuilder::new(root);
    if let Some(text) = read_regular(file) {
        for line in text.lines() {
            let _ = builder.add_line(None, line);
        }
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

fn read_regular(file: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file)
        .ok()?;
    let meta = opened.metadata().ok()?;
    if !meta.is_file() || meta.len() > IGNORE_FILE_CAP {
        return None;
    }
    let mut text = String::new();
    opened
        .take(IGNORE_FILE_CAP)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}
