//! Safe edits (issue 39): before `write_file` or `edit_file` changes a workspace file for a
//! chat's tool call, the file as it was — its pre-image — is kept outside the workspace, in the
//! user's data folder, content-addressed by SHA-256; each change is logged with the chat, the
//! call, the path and the content before and after. A restore puts back the files a chat changed
//! from one call on, as they were before that call: a file changed since the agent wrote it (by
//! the user, another chat, a command) is listed and skipped unless the user confirms. A restore is
//! logged as a change too, so it can itself be turned back.
//!
//! Nothing is written inside the workspace and git's state is never touched: files are read and
//! written through the workspace tools' own checks (no symlinks followed, protected names kept).

use super::confine::{self, io_error, RelPath, Target};
use super::tools::fs::{self, READ_LIMIT};
use super::tools::ToolReply;
use super::walk::Budget;
use super::workspace::Workspace;
use super::workspace_scan::{self, Scan};
use super::workspace_watch::Watch;
use cap_std::fs::{OpenOptions, OpenOptionsExt};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The most bytes the store keeps; past it a change is refused with a sentence (prune first).
pub const STORE_CAP: u64 = 1024 * 1024 * 1024;
const LOG: &str = "changes.jsonl";

/// One recorded change of one file. `before`/`after`: the content's SHA-256, `None` when the
/// file did not exist.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Change {
    pub id: u64,
    pub chat_id: String,
    pub call_id: String,
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
    /// The change of a restore (turned back by restoring from it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restore: bool,
    /// Lines added and removed (as a line diff counts them); `None` for a binary file.
    #[serde(default)]
    pub added: Option<u64>,
    #[serde(default)]
    pub removed: Option<u64>,
    /// When it was recorded (ms since the epoch); `None` in logs written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
}

/// What a prune removed.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Pruned {
    pub changes: usize,
    pub objects: usize,
    pub bytes: u64,
}

/// A change about to happen: the pre-image is kept; `finish` logs it once the tool succeeded.
pub struct Pending {
    chat_id: String,
    call_id: String,
    path: String,
    before: Option<String>,
    restore: bool,
}

/// The store of one workspace: `objects/<sha256>` and the change log.
pub struct Checkpoints {
    dir: PathBuf,
    log: Mutex<()>,
    /// The last scan of the workspace (`workspace_scan`): the next one reads only what moved.
    baseline: Mutex<Arc<Scan>>,
    /// Whether anything moved since that scan (then the scan before a call is not needed).
    watch: Mutex<Watch>,
    /// The objects' total size, counted once and then kept up to date.
    stored: Mutex<Option<u64>>,
}

/// What a restore did: files put back, and files left as they are, each with why.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Restored {
    pub restored: Vec<String>,
    pub skipped: Vec<Value>,
}

impl Checkpoints {
    pub fn new(dir: PathBuf) -> Self {
        Checkpoints {
            dir,
            log: Mutex::new(()),
            baseline: Mutex::new(Arc::default()),
            watch: Mutex::new(Watch::new()),
            stored: Mutex::new(None),
        }
    }

    /// The folder for `workspace` under the user's data folder (`$XDG_DATA_HOME/palaver` or
    /// `~/.local/share/palaver`), one per workspace; `None` without a home.
    pub fn folder_for(workspace: &Path) -> Option<PathBuf> {
        let data = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("share"))
            })?;
        Self::folder_in(&data, workspace)
    }

    /// The folder for `workspace` under the data folder `data`.
    pub fn folder_in(data: &Path, workspace: &Path) -> Option<PathBuf> {
        let real = workspace.canonicalize().ok()?;
        let key = &hex(&Sha256::digest(real.as_os_str().as_encoded_bytes()))[..16];
        Some(data.join("palaver").join("checkpoints").join(key))
    }

    /// Keeps `path`'s content before a tool call changes it.
    pub fn before(
        &self,
        ws: &Workspace,
        chat_id: &str,
        call_id: &str,
        path: &str,
    ) -> Result<Pending, ToolReply> {
        let rel = checked_path(path)?;
        let before = match read_existing(ws, &rel)? {
            Some(bytes) => Some(self.keep(&bytes)?),
            None => None,
        };
        Ok(Pending {
            chat_id: chat_id.to_string(),
            call_id: call_id.to_string(),
            path: rel.as_str().to_string(),
            before,
            restore: false,
        })
    }

    /// Logs a change once the tool wrote the file (its content now is `after`).
    pub fn finish(&self, ws: &Workspace, pending: Pending) -> Result<Change, ToolReply> {
        let rel = checked_path(&pending.path)?;
        let now = read_existing(ws, &rel)?;
        // The content after is kept too, so the change can be shown as a diff; past the store's cap
        // only its hash is logged (the write already happened; the diff view then says so).
        let after = now
            .as_deref()
            .map(|b| self.keep(b).unwrap_or_else(|_| hex(&Sha256::digest(b))));
        let earlier = pending
            .before
            .as_deref()
            .and_then(|h| std::fs::read(self.object(h)).ok());
        let (added, removed) = line_stats(earlier.as_deref(), now.as_deref());
        self.append(|id| Change {
            id,
            chat_id: pending.chat_id,
            call_id: pending.call_id,
            path: pending.path,
            before: pending.before,
            after,
            restore: pending.restore,
            added,
            removed,
            at_ms: None,
        })
    }

    /// Before a shell command or an MCP tool runs: the workspace as it is, every file that moved
    /// since the last scan kept in the store (so the call's changes can be turned back).
    pub fn scan_before(&self, ws: &Workspace, budget: &Budget) -> Arc<Scan> {
        let mut baseline = self.baseline.lock().unwrap_or_else(|p| p.into_inner());
        let mut watch = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        if !baseline.partial && watch.nothing_moved() {
            return baseline.clone();
        }
        let scan = Arc::new(workspace_scan::scan(ws, &baseline, budget, &|b| {
            self.keep(b).ok()
        }));
        watch.watch(ws.root(), &scan.folders);
        *baseline = scan.clone();
        scan
    }

    /// After the call: logs each file it created, changed or deleted under the chat and call.
    pub fn record_scan(
        &self,
        ws: &Workspace,
        chat_id: &str,
        call_id: &str,
        before: &Scan,
        budget: &Budget,
    ) -> Vec<Change> {
        let mut watch = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        // What the call did is seen by this scan: its events are not news for the next call.
        watch.nothing_moved();
        let after = workspace_scan::scan(ws, before, budget, &|b| self.keep(b).ok());
        watch.watch(ws.root(), &after.folders);
        drop(watch);
        let changed = workspace_scan::changes(before, &after);
        *self.baseline.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(after);
        let content = |hash: &Option<String>| {
            hash.as_deref()
                .and_then(|h| std::fs::read(self.object(h)).ok())
        };
        changed
            .into_iter()
            .filter_map(|c| {
                let (added, removed) =
                    line_stats(content(&c.before).as_deref(), content(&c.after).as_deref());
                self.append(|id| Change {
                    id,
                    chat_id: chat_id.to_string(),
                    call_id: call_id.to_string(),
                    path: c.path,
                    before: c.before,
                    after: c.after,
                    restore: false,
                    added,
                    removed,
                    at_ms: None,
                })
                .ok()
            })
            .collect()
    }

    /// The chat's changes, oldest first.
    pub fn changes(&self, chat_id: &str) -> Vec<Change> {
        self.all()
            .into_iter()
            .filter(|c| c.chat_id == chat_id)
            .collect()
    }

    /// Puts the files `chat_id` changed from its call `call_id` on back as they were before it
    /// (`restored` names those it changed).
    /// A file whose content is not what the chat's last change left is skipped unless `force`.
    /// `only`: that one file ("Revert this change" of a file in the report), the others left.
    pub fn restore(
        &self,
        ws: &Workspace,
        chat_id: &str,
        call_id: &str,
        only: Option<&str>,
        force: bool,
    ) -> Result<Restored, ToolReply> {
        let changes = self.changes(chat_id);
        let Some(from) = changes.iter().position(|c| c.call_id == call_id) else {
            return Err(ToolReply::failed(
                "no_recorded_change",
                format!("No change of this chat is recorded for call {call_id} on this machine (it was made before recording began, or by another machine's palaver serve)."),
            ));
        };
        let later = &changes[from..];
        let mut paths: Vec<&str> = later.iter().map(|c| c.path.as_str()).collect();
        paths.dedup();
        paths.sort_unstable();
        paths.dedup();
        paths.retain(|p| only.is_none_or(|one| one == *p));
        if let (Some(one), true) = (only, paths.is_empty()) {
            return Err(ToolReply::failed(
                "no_recorded_change",
                format!("This chat changed no file `{one}` from call {call_id} on."),
            ));
        }
        let mut done = Restored::default();
        for path in paths {
            let first = later.iter().find(|c| c.path == path);
            let last = later.iter().rev().find(|c| c.path == path);
            let (Some(first), Some(last)) = (first, last) else {
                continue;
            };
            match self.put_back(
                ws,
                chat_id,
                call_id,
                path,
                first.before.as_deref(),
                last.after.as_deref(),
                force,
            ) {
                Ok(true) => done.restored.push(path.to_string()),
                Ok(false) => {}
                Err(why) => done.skipped.push(json!({"path": path, "reason": why})),
            }
        }
        Ok(done)
    }

    #[allow(clippy::too_many_arguments)]
    fn put_back(
        &self,
        ws: &Workspace,
        chat_id: &str,
        call_id: &str,
        path: &str,
        target: Option<&str>,
        left: Option<&str>,
        force: bool,
    ) -> Result<bool, String> {
        let rel = checked_path(path).map_err(|r| r.content)?;
        let now = read_existing(ws, &rel)
            .map_err(|r| r.content)?
            .map(|b| hex(&Sha256::digest(&b)));
        if now.as_deref() == target {
            return Ok(false);
        }
        if !force && now.as_deref() != left {
            return Err("changed since the agent wrote it".into());
        }
        let mut pending = self
            .before(ws, chat_id, &format!("restore:{call_id}"), path)
            .map_err(|r| r.content)?;
        pending.restore = true;
        match target {
            Some(hash) => {
                let bytes = std::fs::read(self.object(hash))
                    .map_err(|e| format!("its earlier content is not in the store ({e})"))?;
                write_restored(ws, &rel, &bytes).map_err(|r| r.content)?;
            }
            None => remove_restored(ws, &rel).map_err(|r| r.content)?,
        }
        self.finish(ws, pending).map_err(|r| r.content)?;
        Ok(true)
    }

    /// Keeps `bytes` as an object; its SHA-256 (hex) names it.
    fn keep(&self, bytes: &[u8]) -> Result<String, ToolReply> {
        let hash = hex(&Sha256::digest(bytes));
        let path = self.object(&hash);
        if path.exists() {
            return Ok(hash);
        }
        let mut stored = self.stored.lock().unwrap_or_else(|p| p.into_inner());
        let size = *stored.get_or_insert_with(|| self.size());
        if size + bytes.len() as u64 > STORE_CAP {
            return Err(ToolReply::failed(
                "change_store_full",
                format!("The store of earlier file contents is full ({} MB): the change was not made, so it can still be undone. Remove old entries from {} and try again.", STORE_CAP / 1024 / 1024, self.dir.display()),
            ));
        }
        let written = (|| {
            std::fs::create_dir_all(self.dir.join("objects"))?;
            let temp = self.dir.join("objects").join(format!(".{hash}.tmp"));
            std::fs::write(&temp, bytes)?;
            std::fs::rename(&temp, &path)
        })();
        written.map_err(|e| store_error(&self.dir, &e))?;
        *stored = Some(size + bytes.len() as u64);
        Ok(hash)
    }

    /// One side of one of the chat's changes (`hash` is a `before` or `after` it logged), for a
    /// diff view; `None` when the chat logged no such content or it is no longer kept.
    pub fn content(&self, chat_id: &str, hash: &str) -> Option<Vec<u8>> {
        let named = |side: &Option<String>| side.as_deref() == Some(hash);
        let logged = self
            .changes(chat_id)
            .iter()
            .any(|c| named(&c.before) || named(&c.after));
        let well_formed = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
        if !(logged && well_formed) {
            return None;
        }
        std::fs::read(self.object(hash)).ok()
    }

    fn object(&self, hash: &str) -> PathBuf {
        self.dir.join("objects").join(hash)
    }

    /// The kept contents' total size, in bytes.
    pub fn size(&self) -> u64 {
        std::fs::read_dir(self.dir.join("objects"))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    fn all(&self) -> Vec<Change> {
        std::fs::read_to_string(self.dir.join(LOG))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Every recorded change of the workspace, oldest first (`palaver changes list`).
    pub fn list(&self) -> Vec<Change> {
        self.all()
    }

    /// Forgets the changes `drop` selects, then every kept content no remaining change names
    /// (`palaver changes prune`). The log is rewritten whole, through a temporary file.
    pub fn prune(&self, drop: impl Fn(&Change) -> bool) -> std::io::Result<Pruned> {
        let _held = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let all = self.all();
        let (gone, kept): (Vec<Change>, Vec<Change>) = all.into_iter().partition(|c| drop(c));
        let mut pruned = Pruned {
            changes: gone.len(),
            ..Pruned::default()
        };
        let text: String = kept
            .iter()
            .filter_map(|c| serde_json::to_string(c).ok())
            .map(|line| line + "\n")
            .collect();
        std::fs::create_dir_all(&self.dir)?;
        let temp = self.dir.join(format!(".{LOG}.tmp"));
        std::fs::write(&temp, text)?;
        std::fs::rename(&temp, self.dir.join(LOG))?;
        let named: std::collections::BTreeSet<&str> = kept
            .iter()
            .flat_map(|c| [c.before.as_deref(), c.after.as_deref()])
            .flatten()
            .collect();
        for entry in std::fs::read_dir(self.dir.join("objects"))
            .into_iter()
            .flatten()
        {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().to_string();
            if named.contains(name.as_str()) {
                continue;
            }
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            if std::fs::remove_file(entry.path()).is_ok() {
                pruned.objects += 1;
                pruned.bytes += size;
            }
        }
        *self.stored.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self.baseline.lock().unwrap_or_else(|p| p.into_inner()) = Arc::default();
        *self.watch.lock().unwrap_or_else(|p| p.into_inner()) = Watch::new();
        Ok(pruned)
    }

    fn append(&self, make: impl FnOnce(u64) -> Change) -> Result<Change, ToolReply> {
        let _held = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let id = self.all().last().map_or(1, |c| c.id + 1);
        let mut change = make(id);
        change.at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_millis() as u64);
        let line = serde_json::to_string(&change).unwrap_or_default();
        let written = (|| {
            std::fs::create_dir_all(&self.dir)?;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(LOG))?;
            writeln!(file, "{line}")
        })();
        written.map_err(|e| store_error(&self.dir, &e))?;
        Ok(change)
    }
}

/// Lines added and removed from `before` to `after` (either may not exist); `None` when either
/// is not text.
fn line_stats(before: Option<&[u8]>, after: Option<&[u8]>) -> (Option<u64>, Option<u64>) {
    let (Some(before), Some(after)) = (as_text(before), as_text(after)) else {
        return (None, None);
    };
    let diff = similar::TextDiff::from_lines(before, after);
    let count = |tag| diff.iter_all_changes().filter(|c| c.tag() == tag).count() as u64;
    (
        Some(count(similar::ChangeTag::Insert)),
        Some(count(similar::ChangeTag::Delete)),
    )
}

/// A file's text (`""` when it does not exist), `None` when it is not UTF-8.
fn as_text(bytes: Option<&[u8]>) -> Option<&str> {
    match bytes {
        None => Some(""),
        Some(bytes) => std::str::from_utf8(bytes).ok(),
    }
}

fn store_error(dir: &Path, error: &std::io::Error) -> ToolReply {
    ToolReply::failed(
        "change_store_unwritable",
        format!("The store of earlier file contents ({}) cannot be written: {error}. The change was not made.", dir.display()),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A workspace path as the file tools check it.
fn checked_path(raw: &str) -> Result<RelPath, ToolReply> {
    confine::check(raw, Target::File).map_err(ToolReply::from)
}

/// A file's bytes as they are, `None` when it does not exist: a regular file
/// within the read limit; a symlink, FIFO or directory is an error, never followed.
fn read_existing(ws: &Workspace, path: &RelPath) -> Result<Option<Vec<u8>>, ToolReply> {
    match ws.dir().symlink_metadata(path.as_str()) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ToolReply::from(io_error(path, &e))),
        Ok(meta) if !meta.is_file() => {
            let what = format!(
                "`{}` is not a regular file (a symlink, directory, FIFO or device)",
                path.as_str()
            );
            return Err(ToolReply::failed("not_a_regular_file", what));
        }
        Ok(meta) if meta.len() > READ_LIMIT => {
            let what = format!(
                "`{}` has {} bytes; earlier contents are kept up to {READ_LIMIT}",
                path.as_str(),
                meta.len()
            );
            return Err(ToolReply::failed("file_too_large", what));
        }
        Ok(_) => {}
    }
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    let mut bytes = Vec::new();
    ws.dir()
        .open_with(path.as_str(), &options)
        .and_then(|file| file.into_std().take(READ_LIMIT + 1).read_to_end(&mut bytes))
        .map_err(|e| ToolReply::from(io_error(path, &e)))?;
    Ok(Some(bytes))
}

/// Writes a restored file (the write tools' own atomic, checked write).
fn write_restored(ws: &Workspace, path: &RelPath, bytes: &[u8]) -> Result<(), ToolReply> {
    fs::atomic_write(ws, path, bytes)
}

/// Removes a file a restore takes back to not existing (a regular file only).
fn remove_restored(ws: &Workspace, path: &RelPath) -> Result<(), ToolReply> {
    fs::refuse_protected(ws, path)?;
    let dir = fs::open_parent(ws, path)?;
    let name = path.file_name().unwrap_or(".");
    match dir.symlink_metadata(name) {
        Ok(meta) if meta.is_file() => dir
            .remove_file(name)
            .map_err(|e| ToolReply::from(io_error(path, &e))),
        Ok(_) => Err(ToolReply::failed(
            "not_a_regular_file",
            format!("`{}` is not a regular file now", path.as_str()),
        )),
        Err(_) => Ok(()),
    }
}
