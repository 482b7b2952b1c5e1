//! The workspace copy of chats (issue 21, seed 000's trajectories as files in the project):
//! `.palaver/chats/{chat_id}.json`, each the Refact-style trajectory the export writes, so chats
//! outlive the browser's storage. Files are written whole, through a temporary file and a rename
//! in the opened `chats` directory (a crash leaves the old file or the new one, never half of
//! either). Every step opens directories without following symlinks: a symlinked `.palaver` or
//! `chats`, or a copy replaced by a symlink, a FIFO or a directory, is refused, and nothing
//! outside the workspace is touched. Reads take regular files only, opened non-blocking, up to
//! `MAX_FILE`. `.palaver/` gets a `.gitignore` ignoring everything, which the user may delete to
//! commit chats with the code. `palaver serve --no-workspace-copy` turns all of it off.
//! The model's file tools can neither write nor read here (`tools::fs`, the walker): the copies
//! are the user's chats, not the project's (SECURITY F4).
//!
//! Each workspace has an id (`.palaver/workspace-id`, made once, returned by `/api/health`): the
//! page copies a chat only into the workspace it was used with, and keeps the hashes of its
//! copies per workspace. The workspace copy is written only while git ignores `.palaver/chats/` (`git`), so a
//! repository's own `.palaver/.gitignore` cannot get the chats committed. Files are written
//! 0600; a copy with several hard links is not read (A48: one may be an outside file).

mod git;

use super::workspace::Workspace;
use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use serde::Serialize;
use serde_json::Value;
use std::io::{Read, Write};
use std::sync::Arc;
use thiserror::Error;

pub const DIR: &str = ".palaver";
pub const CHATS: &str = "chats";
/// The largest copy read or written (a 5 000-message chat is about 5 MB).
pub const MAX_FILE: u64 = 64 * 1024 * 1024;
const GITIGNORE: &str =
    "# Palaver's chats (issue 21). Delete this file to commit them with the code.\n*\n";

#[derive(Error, Debug, Clone, PartialEq, Eq)]
pub enum CopyError {
    #[error("the workspace copy is off (palaver serve --no-workspace-copy)")]
    Off,
    #[error("`{0}` is not a chat id (letters, digits, `-`, `_`, `.`, `~`; 1 to 200 characters)")]
    BadId(String),
    #[error("`{0}` is a symlink; the workspace copy does not follow symlinks")]
    Symlink(String),
    #[error("`{0}` is not a regular file")]
    NotAFile(String),
    #[error("`{path}` is {bytes} bytes, over the workspace copy's limit of {limit}")]
    TooLarge {
        path: String,
        bytes: u64,
        limit: u64,
    },
    #[error("not a trajectory: {0}")]
    BadTrajectory(String),
    #[error("no copy for chat `{0}`")]
    NotFound(String),
    #[error("the workspace copy of chat `{0}` changed since this browser wrote it (another browser or a person); it is not overwritten")]
    Conflict(String),
    #[error("git does not ignore .palaver/chats/ in this workspace (a .gitignore of the repository un-ignores it), so `git add -A` would commit your chats: they are not written here. Add `.palaver/` to .gitignore to keep copies of your chats in the workspace")]
    NotIgnored,
    #[error(
        "`{0}` has several hard links (one may be a file outside the workspace); it is not read"
    )]
    HardLinked(String),
    #[error("{0}")]
    Io(String),
}

impl CopyError {
    pub fn code(&self) -> &'static str {
        match self {
            CopyError::Off => "workspace_copy_off",
            CopyError::BadId(_) => "bad_chat_id",
            CopyError::Symlink(_) => "symlink_escape",
            CopyError::NotAFile(_) => "not_a_regular_file",
            CopyError::TooLarge { .. } => "too_large",
            CopyError::BadTrajectory(_) => "bad_trajectory",
            CopyError::NotFound(_) => "not_found",
            CopyError::Conflict(_) => "conflict",
            CopyError::NotIgnored => "not_ignored_by_git",
            CopyError::HardLinked(_) => "hard_link",
            CopyError::Io(_) => "io_error",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            CopyError::Off => 404,
            CopyError::BadId(_) | CopyError::BadTrajectory(_) => 400,
            CopyError::Symlink(_) => 403,
            CopyError::NotAFile(_) => 409,
            CopyError::TooLarge { .. } => 413,
            CopyError::NotFound(_) => 404,
            CopyError::Conflict(_) => 412,
            CopyError::NotIgnored => 409,
            CopyError::HardLinked(_) => 403,
            CopyError::Io(_) => 500,
        }
    }
}

fn io(e: std::io::Error) -> CopyError {
    CopyError::Io(e.to_string())
}

/// One copy as listed.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct CopyEntry {
    pub id: String,
    pub bytes: u64,
    pub modified_ms: u64,
}

/// What the listing holds: the chats, and entries that were skipped and why.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct CopyListing {
    pub enabled: bool,
    pub chats: Vec<CopyEntry>,
    pub skipped: Vec<String>,
}

/// What a write expects to replace, so a browser never overwrites a copy it has not seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// Whatever is there (the user chose this browser's copy).
    Any,
    /// No file yet (`If-None-Match: *`).
    Absent,
    /// The file this browser wrote last, by its hash (`If-Match`).
    Hash(String),
}

/// A copy's content hash, as `PUT` returns it and `GET` sends it (`x-palaver-hash`).
pub fn hash(bytes: &[u8]) -> String {
    super::content_hash::content_hash(bytes)
}

pub struct ChatFiles {
    ws: Arc<Workspace>,
    enabled: bool,
    id: std::sync::OnceLock<Option<String>>,
}

/// The file that names the workspace (`.palaver/workspace-id`).
const ID_FILE: &str = "workspace-id";

impl ChatFiles {
    pub fn new(ws: Arc<Workspace>, enabled: bool) -> Self {
        ChatFiles {
            ws,
            enabled,
            id: std::sync::OnceLock::new(),
        }
    }

    /// This workspace's id (made once, kept in `.palaver/workspace-id`); `None` when the workspace copy
    /// is off or `.palaver` cannot be used (a symlink, not a directory).
    pub fn workspace_id(&self) -> Option<String> {
        if !self.enabled {
            return None;
        }
        self.id.get_or_init(|| self.read_or_make_id()).clone()
    }

    fn read_or_make_id(&self) -> Option<String> {
        let palaver = self.palaver_dir(true).ok()?;
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        if let Ok(file) = palaver.open_with(ID_FILE, &options) {
            let mut text = String::new();
            let meta = file.metadata().ok()?;
            if !meta.is_file() {
                return None;
            }
            file.into_std().take(128).read_to_string(&mut text).ok()?;
            let id = text.trim();
            let valid = (8..=64).contains(&id.len())
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            return valid.then(|| id.to_string());
        }
        let id = format!("ws-{}{}", nonce(), nonce());
        write_new(&palaver, ID_FILE, format!("{id}\n").as_bytes()).ok()?;
        Some(id)
    }

    /// Writes chat `id`'s trajectory (JSON text: an object with a `messages` array whose `id`,
    /// when present, is `id`), whole and atomically, if what is there meets `expect`; returns
    /// the new file's hash.
    pub fn write(
        &self,
        id: &str,
        bytes: &[u8],
        expect: &Precondition,
    ) -> Result<String, CopyError> {
        self.check(id)?;
        check_trajectory(id, bytes)?;
        let name = file_name(id);
        let path = format!("{DIR}/{CHATS}/{name}");
        let lock = self.ws.lock_for(&relpath(&path)?);
        let _held = lock.lock().unwrap_or_else(|p| p.into_inner());
        let dir = self.chats_dir(true)?;
        if !git::ignores(self.ws.root(), &path) {
            return Err(CopyError::NotIgnored);
        }
        let exists = match dir.symlink_metadata(&name) {
            Ok(meta) if meta.file_type().is_symlink() => return Err(CopyError::Symlink(path)),
            Ok(meta) if !meta.is_file() => return Err(CopyError::NotAFile(path)),
            Ok(_) => true,
            Err(_) => false,
        };
        let met = match expect {
            Precondition::Any => true,
            Precondition::Absent => !exists,
            Precondition::Hash(expected) => {
                exists && self.read_in(&dir, id).is_ok_and(|(_, h)| &h == expected)
            }
        };
        if !met {
            return Err(CopyError::Conflict(id.into()));
        }
        let temp = format!(".tmp-{name}-{}", nonce());
        let written = write_new(&dir, &temp, bytes).and_then(|()| dir.rename(&temp, &dir, &name));
        if written.is_err() {
            let _ = dir.remove_file(&temp);
        }
        written.map_err(io)?;
        let _ = dir.open(".").and_then(|d| d.sync_all());
        Ok(hash(bytes))
    }

    /// Chat `id`'s copy as written, and its hash.
    pub fn read(&self, id: &str) -> Result<(Vec<u8>, String), CopyError> {
        self.check(id)?;
        let dir = match self.chats_dir(false) {
            Err(CopyError::NotFound(_)) => return Err(CopyError::NotFound(id.into())),
            other => other?,
        };
        self.read_in(&dir, id)
    }

    fn read_in(&self, dir: &Dir, id: &str) -> Result<(Vec<u8>, String), CopyError> {
        let name = file_name(id);
        let path = format!("{DIR}/{CHATS}/{name}");
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        let file = match dir.open_with(&name, &options) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CopyError::NotFound(id.into()))
            }
            Err(_) if is_symlink(dir, &name) => return Err(CopyError::Symlink(path)),
            Err(e) => return Err(io(e)),
        };
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(CopyError::NotAFile(path));
        }
        if cap_std::fs::MetadataExt::nlink(&meta) > 1 {
            return Err(CopyError::HardLinked(path));
        }
        if meta.len() > MAX_FILE {
            return Err(CopyError::TooLarge {
                path,
                bytes: meta.len(),
                limit: MAX_FILE,
            });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.into_std()
            .take(MAX_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let hash = hash(&bytes);
        Ok((bytes, hash))
    }

    /// Removes chat `id`'s copy (the chat was deleted in the page); absent is fine.
    pub fn remove(&self, id: &str) -> Result<(), CopyError> {
        self.check(id)?;
        let dir = match self.chats_dir(false) {
            Err(CopyError::NotFound(_)) => return Ok(()),
            other => other?,
        };
        match dir.remove_file(file_name(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
            _ => Ok(()),
        }
    }

    /// The chats of the workspace copy; what is not a regular `{id}.json` file is skipped and named.
    pub fn list(&self) -> Result<CopyListing, CopyError> {
        let mut listing = CopyListing {
            enabled: self.enabled,
            ..CopyListing::default()
        };
        if !self.enabled {
            return Ok(listing);
        }
        let dir = match self.chats_dir(false) {
            Err(CopyError::NotFound(_)) => return Ok(listing),
            other => other?,
        };
        for entry in dir.entries().map_err(io)? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(".tmp-") {
                continue;
            }
            let Some(id) = name.strip_suffix(".json").filter(|id| valid_id(id)) else {
                listing
                    .skipped
                    .push(format!("{name}: not a chat file name"));
                continue;
            };
            let meta = match dir.symlink_metadata(&name) {
                Ok(meta) if meta.is_file() => meta,
                _ => {
                    listing.skipped.push(format!("{name}: not a regular file"));
                    continue;
                }
            };
            let modified_ms = meta
                .modified()
                .ok()
                .and_then(|t| t.into_std().duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as u64);
            listing.chats.push(CopyEntry {
                id: id.to_string(),
                bytes: meta.len(),
                modified_ms,
            });
        }
        listing.chats.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(listing)
    }

    fn check(&self, id: &str) -> Result<(), CopyError> {
        if !self.enabled {
            return Err(CopyError::Off);
        }
        if !valid_id(id) {
            return Err(CopyError::BadId(id.chars().take(80).collect()));
        }
        Ok(())
    }

    /// `.palaver/chats`, opened without following symlinks; created (with the `.gitignore`)
    /// when `create`.
    fn chats_dir(&self, create: bool) -> Result<Dir, CopyError> {
        let palaver = self.palaver_dir(create)?;
        open_dir(&palaver, CHATS, &format!("{DIR}/{CHATS}"), create)
    }

    /// `.palaver`, opened without following symlinks; created (0700, with the `.gitignore`)
    /// when `create`.
    fn palaver_dir(&self, create: bool) -> Result<Dir, CopyError> {
        let palaver = open_dir(self.ws.dir(), DIR, DIR, create)?;
        if create && palaver.symlink_metadata(".gitignore").is_err() {
            let _ = write_new(&palaver, ".gitignore", GITIGNORE.as_bytes());
        }
        Ok(palaver)
    }
}

fn open_dir(parent: &Dir, name: &str, shown: &str, create: bool) -> Result<Dir, CopyError> {
    match parent.open_dir_nofollow(name) {
        Ok(dir) => Ok(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
            let mut builder = cap_std::fs::DirBuilder::new();
            cap_std::fs::DirBuilderExt::mode(&mut builder, 0o700);
            match parent.create_dir_with(name, &builder) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io(e)),
                _ => {}
            }
            parent.open_dir_nofollow(name).map_err(io)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(CopyError::NotFound(shown.into()))
        }
        Err(_) if is_symlink(parent, name) => Err(CopyError::Symlink(shown.into())),
        Err(_) => Err(CopyError::NotAFile(shown.into())),
    }
}

fn is_symlink(dir: &Dir, name: &str) -> bool {
    dir.symlink_metadata(name)
        .is_ok_and(|m| m.file_type().is_symlink())
}

/// A new file, readable by its owner only (0600): the chats are private.
fn write_new(dir: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(0o600);
    let mut file = dir.open_with(name, &options)?.into_std();
    file.write_all(bytes).and_then(|()| file.sync_all())
}

fn nonce() -> String {
    let mut bytes = [0u8; 6];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn relpath(path: &str) -> Result<super::confine::RelPath, CopyError> {
    super::confine::check(path, super::confine::Target::File)
        .map_err(|e| CopyError::Io(e.to_string()))
}

/// A chat id as a file name: letters, digits, `-`, `_`, `.` and `~` (a subagent's chat is
/// `{parent}~{call}`), never starting with `.` or `~`.
pub fn valid_id(id: &str) -> bool {
    (1..=200).contains(&id.len())
        && !id.starts_with(['.', '~'])
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~'))
}

fn file_name(id: &str) -> String {
    format!("{id}.json")
}

/// What `check_trajectory` reads of a copy: its `id` and `messages`, unparsed.
#[derive(serde::Deserialize)]
struct TrajectoryShape<'a> {
    #[serde(borrow)]
    id: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    messages: Option<&'a serde_json::value::RawValue>,
}

/// A trajectory as the export writes it: a JSON object with a `messages` array, its `id` (if
/// any) the chat's.
fn check_trajectory(id: &str, bytes: &[u8]) -> Result<(), CopyError> {
    if bytes.len() as u64 > MAX_FILE {
        return Err(CopyError::TooLarge {
            path: file_name(id),
            bytes: bytes.len() as u64,
            limit: MAX_FILE,
        });
    }
    // Its shape only: the messages are checked to be JSON and skipped, never built (a long
    // chat's copy is written after every turn; building it weighed ~10× its size each time).
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(CopyError::BadTrajectory("not a JSON object".into()));
    }
    let shape: TrajectoryShape<'_> =
        serde_json::from_slice(bytes).map_err(|e| CopyError::BadTrajectory(e.to_string()))?;
    if !shape
        .messages
        .is_some_and(|m| m.get().trim_start().starts_with('['))
    {
        return Err(CopyError::BadTrajectory(
            "a trajectory needs a `messages` array".into(),
        ));
    }
    let named = shape
        .id
        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
    match named {
        Some(Value::String(inner)) if inner != id => Err(CopyError::BadTrajectory(format!(
            "its id `{inner}` is not the chat's `{id}`"
        ))),
        _ => Ok(()),
    }
}
