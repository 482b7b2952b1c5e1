//! File tools: `list_dir`, `read_file`, `write_file`, `edit_file`, `file_tree`. Every path is
//! checked by `confine::check` and opened through the workspace's directory capability. Writes
//! open the target's directory once, component by component with no symlink following, then do
//! the protection check, the temporary file and the `rename` all relative to that one handle
//! (atomic, under the file's lock; E10), and never follow a symlink. `file_tree` walks directory
//! handles (`walk`). Regular files with several hard links are not read (A48, E9).

use super::{str_arg, ToolCapabilities, ToolReply};
use crate::proxy::confine::{self, io_error, RelPath, Target};
use crate::proxy::content_hash::{content_hash, fnv1a, FNV_OFFSET};
use crate::proxy::walk::{self, Budget, Kind, WalkOptions};
use crate::proxy::workspace::Workspace;
use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt};
use serde_json::{json, Value};
use std::io::{Read, Write};

/// The current file's hash, streamed (no whole-file buffer), or `None` if it does not exist.
/// Opened non-blocking, and only regular files are read, so a FIFO cannot hang the lock holder.
fn current_hash(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    path: &RelPath,
) -> std::io::Result<Option<String>> {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_NONBLOCK);
    let file = match ws.dir().open_with(path.as_str(), &options) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Ok(Some(String::from("not-a-regular-file")));
    }
    // The hash of an outside file reached by a hard link would confirm a guess of its content.
    if metadata.nlink() > 1 && !capabilities.allow_hard_links {
        return Ok(Some(String::from("hard-link")));
    }
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, file.into_std());
    let mut hash = FNV_OFFSET;
    loop {
        let chunk = std::io::BufRead::fill_buf(&mut reader)?;
        if chunk.is_empty() {
            return Ok(Some(format!("{hash:016x}")));
        }
        hash = fnv1a(hash, chunk);
        let n = chunk.len();
        std::io::BufRead::consume(&mut reader, n);
    }
}

/// `if_match`: the write applies only if the file still has the hash the caller read.
fn check_if_match(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    path: &RelPath,
    args: &Value,
) -> Result<(), ToolReply> {
    let Some(expected) = args.get("if_match").and_then(Value::as_str) else {
        return Ok(());
    };
    let current = match current_hash(ws, capabilities, path) {
        Ok(hash) => hash.unwrap_or_default(),
        Err(e) => return Err(io_error(path, &e).into()),
    };
    if current == expected {
        return Ok(());
    }
    let mut reply = ToolReply::refused(
        409,
        "conflict",
        format!(
            "`{}` changed since it was read; read it again",
            path.as_str()
        ),
    );
    reply.data = Some(json!({"current_hash": current}));
    Err(reply)
}

/// Files larger than this are not read whole.
pub const READ_LIMIT: u64 = 4 * 1024 * 1024;
const LIST_LIMIT: usize = 5000;
const TREE_LIMIT: usize = 2000;

fn checked(
    args: &Value,
    key: &str,
    target: Target,
    default: Option<&str>,
) -> Result<RelPath, ToolReply> {
    let raw = match (args.get(key).and_then(Value::as_str), default) {
        (Some(path), _) => path,
        (None, Some(default)) => default,
        (None, None) => {
            return Err(ToolReply::refused(
                400,
                "invalid_arguments",
                format!("`{key}` (a string) is required"),
            ))
        }
    };
    confine::check(raw, target).map_err(ToolReply::from)
}

pub fn list_dir(ws: &Workspace, args: &Value) -> ToolReply {
    let path = match checked(args, "path", Target::RootAllowed, Some(".")) {
        Ok(path) => path,
        Err(reply) => return reply,
    };
    if let Err(reply) = refuse_private(ws, &path) {
        return reply;
    }
    let entries = match ws.dir().read_dir(path.as_str()) {
        Ok(entries) => entries,
        Err(e) => return io_error(&path, &e).into(),
    };
    let mut listed: Vec<(String, &'static str, u64)> = entries
        .flatten()
        .filter(|entry| !private_name(&entry.file_name().to_string_lossy()))
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().to_string();
            let (kind, size) = match entry.file_type() {
                Ok(t) if t.is_symlink() => ("symlink", 0),
                Ok(t) if t.is_dir() => ("dir", 0),
                Ok(_) => ("file", entry.metadata().map(|m| m.len()).unwrap_or(0)),
                Err(_) => ("unknown", 0),
            };
            (name, kind, size)
        })
        .collect();
    listed.sort();
    let truncated = listed.len() > LIST_LIMIT;
    listed.truncate(LIST_LIMIT);
    let text = listed
        .iter()
        .map(|(name, kind, _)| {
            if *kind == "dir" {
                format!("{name}/")
            } else {
                name.clone()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let data = listed
        .iter()
        .map(|(name, kind, size)| json!({"name": name, "kind": kind, "size": size}))
        .collect::<Vec<_>>();
    ToolReply::ok(
        text,
        Some(json!({"path": path.as_str(), "entries": data, "truncated": truncated})),
    )
}

pub fn read_file(ws: &Workspace, capabilities: &ToolCapabilities, args: &Value) -> ToolReply {
    let path = match checked(args, "path", Target::File, None) {
        Ok(path) => path,
        Err(reply) => return reply,
    };
    let bytes = match read_bytes(ws, capabilities, &path) {
        Ok(bytes) => bytes,
        Err(reply) => return reply,
    };
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return ToolReply::failed(
            "binary_file",
            format!(
                "`{}` is a binary file; read_file reads text only",
                path.as_str()
            ),
        );
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let start = args
        .get("line_start")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1) as usize;
    let end = args
        .get("line_end")
        .and_then(Value::as_u64)
        .map_or(total, |e| (e as usize).min(total));
    if start > end.max(1) && total > 0 {
        return ToolReply::failed(
            "bad_range",
            format!("line_start {start} is after line_end {end} (the file has {total} lines)"),
        );
    }
    let content = if args.get("line_start").is_none() && args.get("line_end").is_none() {
        text.to_string()
    } else {
        lines[(start - 1).min(total)..end].join("\n")
    };
    ToolReply::ok(
        content,
        Some(
            json!({"path": path.as_str(), "total_lines": total, "line_start": start, "line_end": end, "hash": content_hash(&bytes)}),
        ),
    )
}

fn read_bytes(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    path: &RelPath,
) -> Result<Vec<u8>, ToolReply> {
    refuse_private(ws, path)?;
    // Non-blocking open: a FIFO without a writer would otherwise hang a blocking thread forever.
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(libc::O_NONBLOCK);
    let file = ws
        .dir()
        .open_with(path.as_str(), &options)
        .map_err(|e| ToolReply::from(io_error(path, &e)))?;
    let metadata = file
        .metadata()
        .map_err(|e| ToolReply::from(io_error(path, &e)))?;
    if metadata.is_dir() {
        return Err(ToolReply::failed(
            "is_a_directory",
            format!("`{}` is a directory; use list_dir", path.as_str()),
        ));
    }
    if !metadata.is_file() {
        return Err(ToolReply::failed(
            "not_a_regular_file",
            format!(
                "`{}` is not a regular file (a FIFO, socket or device)",
                path.as_str()
            ),
        ));
    }
    if metadata.nlink() > 1 && !capabilities.allow_hard_links {
        return Err(ToolReply::refused(
            403,
            "hard_link",
            format!(
                "`{}` has {} hard links; one may be a file outside the workspace, so it is not read. Start `palaver serve --allow-hard-links` to allow reading hard-linked files",
                path.as_str(),
                metadata.nlink()
            ),
        ));
    }
    if metadata.len() > READ_LIMIT {
        return Err(ToolReply::failed(
            "file_too_large",
            format!(
                "`{}` has {} bytes; the read limit is {READ_LIMIT}",
                path.as_str(),
                metadata.len()
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    file.into_std()
        .take(READ_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolReply::from(io_error(path, &e)))?;
    Ok(bytes)
}

pub fn write_file(ws: &Workspace, capabilities: &ToolCapabilities, args: &Value) -> ToolReply {
    let path = match checked(args, "path", Target::File, None) {
        Ok(path) => path,
        Err(reply) => return reply,
    };
    let content = match str_arg(args, "content") {
        Ok(content) => content,
        Err(reply) => return reply,
    };
    let lock = ws.lock_for(&path);
    let _guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Err(reply) = check_if_match(ws, capabilities, &path, args) {
        return reply;
    }
    match atomic_write(ws, &path, content.as_bytes()) {
        Ok(()) => ToolReply::ok(
            format!("Wrote {} bytes to {}", content.len(), path.as_str()),
            Some(json!({"path": path.as_str(), "bytes": content.len()})),
        ),
        Err(reply) => reply,
    }
}

pub fn edit_file(ws: &Workspace, capabilities: &ToolCapabilities, args: &Value) -> ToolReply {
    let path = match checked(args, "path", Target::File, None) {
        Ok(path) => path,
        Err(reply) => return reply,
    };
    if let Err(reply) = refuse_protected(ws, &path) {
        return reply;
    }
    let (old_text, new_text) = match (str_arg(args, "old_text"), str_arg(args, "new_text")) {
        (Ok(old), Ok(new)) => (old, new),
        (Err(reply), _) | (_, Err(reply)) => return reply,
    };
    if old_text.is_empty() {
        return ToolReply::failed(
            "old_text_empty",
            "old_text is empty; say which text to replace".into(),
        );
    }
    let lock = ws.lock_for(&path);
    let _guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Err(reply) = check_if_match(ws, capabilities, &path, args) {
        return reply;
    }
    let text = match read_bytes(ws, capabilities, &path).map(|b| String::from_utf8(b)) {
        Ok(Ok(text)) => text,
        Ok(Err(_)) => {
            return ToolReply::failed("not_utf8", format!("`{}` is not UTF-8 text", path.as_str()))
        }
        Err(reply) => return reply,
    };
    // A CRLF file edited with LF text (an edit block, a model that normalises line ends).
    let crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
    let (old_text, new_text) = match text.contains(old_text) {
        false if text.contains("\r\n") && !old_text.contains('\r') => {
            (crlf(old_text), crlf(new_text))
        }
        _ => (old_text.to_string(), new_text.to_string()),
    };
    let old_text = old_text.as_str();
    match text.matches(old_text).count() {
        0 => ToolReply::failed(
            "old_text_not_found",
            match super::nearest::nearest_match(&text, old_text) {
                Some(near) => format!("old_text was not found in {}; {near}", path.as_str()),
                None => format!(
                    "old_text was not found in {}; read the file again and copy the exact text",
                    path.as_str()
                ),
            },
        ),
        1 => match atomic_write(ws, &path, text.replacen(old_text, &new_text, 1).as_bytes()) {
            Ok(()) => ToolReply::ok(
                format!("Edited {}", path.as_str()),
                Some(json!({"path": path.as_str()})),
            ),
            Err(reply) => reply,
        },
        n => ToolReply::failed(
            "old_text_ambiguous",
            format!(
                "old_text occurs {n} times in {}; include more context so it matches once",
                path.as_str()
            ),
        ),
    }
}

/// Directories a model may not write into: hooks and settings run code (A41).
const PROTECTED: [&str; 2] = [".git", ".palaver"];

fn protected_name(name: &str) -> bool {
    PROTECTED.iter().any(|p| p.eq_ignore_ascii_case(name))
}

/// Whether a write would land in a protected directory: one named so at any depth (nested
/// repositories have hooks too), or one reached through an in-workspace symlink (`h -> .git/hooks`),
/// found by resolving the deepest existing ancestor inside the capability.
fn is_protected(ws: &Workspace, path: &RelPath) -> bool {
    if path.as_str().split('/').any(protected_name) {
        return true;
    }
    let mut ancestor = path.parent();
    while let Some(dir) = ancestor.filter(|d| !d.is_root()) {
        if let Ok(real) = ws.dir().canonicalize(dir.as_str()) {
            return real
                .iter()
                .any(|part| part.to_str().is_none_or(protected_name));
        }
        ancestor = dir.parent();
    }
    false
}

/// `.palaver` holds the user's chats (the workspace copy): the model's tools do not read it
/// either (SECURITY F4), by any name or through any in-workspace symlink.
fn private_name(name: &str) -> bool {
    name.eq_ignore_ascii_case(crate::proxy::chat_files::DIR)
}

fn refuse_private(ws: &Workspace, path: &RelPath) -> Result<(), ToolReply> {
    let named = path.as_str().split('/').any(private_name);
    let reached = ws.dir().canonicalize(path.as_str()).is_ok_and(|real| {
        real.iter()
            .any(|part| part.to_str().is_none_or(private_name))
    });
    if named || reached {
        return Err(ToolReply::refused(
            403,
            "private_path",
            format!(
                "`{}` is private: .palaver holds the user's chats, which the tools do not read",
                path.as_str()
            ),
        ));
    }
    Ok(())
}

pub(crate) fn refuse_protected(ws: &Workspace, path: &RelPath) -> Result<(), ToolReply> {
    if is_protected(ws, path) {
        return Err(protected_refusal(&path.as_str()));
    }
    Ok(())
}

fn protected_refusal(path: &str) -> ToolReply {
    ToolReply::refused(
        403,
        "protected_path",
        format!("`{path}` is protected: the tools do not write into .git or .palaver"),
    )
}

/// Opens the directory a write lands in, once: each component from its parent's handle with no
/// symlink following, created when missing, refused when protected. An in-workspace symlink
/// component is resolved inside the capability and its real path opened the same way, so what
/// is checked is the directory written to, whatever is swapped in meanwhile (E10).
pub(crate) fn open_parent(ws: &Workspace, path: &RelPath) -> Result<Dir, ToolReply> {
    let parent = path.parent().unwrap_or_else(RelPath::root);
    let mut dir = ws
        .dir()
        .try_clone()
        .map_err(|e| ToolReply::from(io_error(&parent, &e)))?;
    let mut walked = RelPath::root();
    for part in parent.as_str().split('/').filter(|p| *p != ".") {
        walked = walked.join(part);
        if protected_name(part) {
            return Err(protected_refusal(&path.as_str()));
        }
        dir = match dir.open_dir_nofollow(part) {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                create_and_open(&dir, part).map_err(|e| ToolReply::from(io_error(&walked, &e)))?
            }
            Err(_) => open_resolved(ws, path, &walked)?,
        };
    }
    Ok(dir)
}

fn create_and_open(dir: &Dir, name: &str) -> std::io::Result<Dir> {
    match dir.create_dir(name) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    dir.open_dir_nofollow(name)
}

/// A directory reached through an in-workspace symlink: its real path, checked and opened with
/// no symlink following (a symlink leading out fails in `canonicalize`).
fn open_resolved(ws: &Workspace, target: &RelPath, walked: &RelPath) -> Result<Dir, ToolReply> {
    let real = ws
        .dir()
        .canonicalize(walked.as_str())
        .map_err(|e| ToolReply::from(io_error(walked, &e)))?;
    let real = real.to_str().map(str::to_string).unwrap_or_default();
    let real = confine::check(&real, Target::RootAllowed).map_err(ToolReply::from)?;
    if real.as_str().split('/').any(protected_name) {
        return Err(protected_refusal(&target.as_str()));
    }
    walk::open_dir_nofollow(ws.dir(), &real).map_err(|e| ToolReply::from(io_error(walked, &e)))
}

/// Writes through a temporary file and a rename in one opened directory, refusing to write
/// through a symlink.
pub(crate) fn atomic_write(ws: &Workspace, path: &RelPath, bytes: &[u8]) -> Result<(), ToolReply> {
    refuse_protected(ws, path)?;
    let dir = open_parent(ws, path)?;
    let name = path.file_name().unwrap_or(".");
    if let Ok(meta) = dir.symlink_metadata(name) {
        if meta.file_type().is_symlink() {
            return Err(ToolReply::refused(
                403,
                "symlink_escape",
                format!(
                    "`{}` is a symlink; writes do not follow symlinks",
                    path.as_str()
                ),
            ));
        }
        if meta.is_dir() {
            return Err(ToolReply::failed(
                "is_a_directory",
                format!("`{}` is a directory", path.as_str()),
            ));
        }
    }
    let temp = temp_name();
    let result = write_temp(&dir, &temp, bytes)
        .and_then(|()| dir.rename(&temp, &dir, name))
        .map_err(|e| ToolReply::from(io_error(path, &e)));
    if result.is_err() {
        let _ = dir.remove_file(&temp);
    }
    // Makes the rename durable (A71). Best effort: the write itself already succeeded.
    result.map(|()| {
        let _ = dir.open(".").and_then(|d| d.sync_all());
    })
}

fn write_temp(dir: &Dir, temp: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    let mut file = dir.open_with(temp, &options)?.into_std();
    file.write_all(bytes).and_then(|()| file.sync_all())
}

/// A short temporary name, whatever the target's length: a 255-byte name must still be writable.
fn temp_name() -> String {
    let mut nonce = [0u8; 8];
    let _ = getrandom::fill(&mut nonce);
    let suffix: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    format!(".palaver-tmp-{suffix}")
}

pub fn file_tree(ws: &Workspace, args: &Value, budget: &Budget) -> ToolReply {
    let path = match checked(args, "path", Target::RootAllowed, Some(".")) {
        Ok(path) => path,
        Err(reply) => return reply,
    };
    if let Err(e) = walk::open_dir_nofollow(ws.dir(), &path) {
        return io_error(&path, &e).into();
    }
    // `flat`: one workspace-relative file path per line, no directories (the system prompt's
    // file tree, seed 002); otherwise an indented tree of names.
    let flat = args.get("flat").and_then(Value::as_bool).unwrap_or(false);
    let depth = args
        .get("max_depth")
        .and_then(Value::as_u64)
        .unwrap_or(if flat { 10 } else { 3 })
        .clamp(1, 10) as usize;
    let options = WalkOptions {
        overrides: None,
        max_depth: Some(depth),
        sorted: true,
    };
    let mut lines = Vec::new();
    let mut truncated = false;
    let walked = walk::walk(ws.dir(), &path, &options, budget, &mut |entry| {
        if flat && entry.kind == Kind::Dir {
            return true;
        }
        if lines.len() == TREE_LIMIT {
            truncated = true;
            return false;
        }
        if flat {
            lines.push(entry.path);
            return true;
        }
        let indent = "  ".repeat(entry.depth.saturating_sub(1));
        let slash = if entry.kind == Kind::Dir { "/" } else { "" };
        lines.push(format!("{indent}{}{slash}", entry.name));
        true
    });
    let stop = match walked {
        Ok(stop) => stop,
        Err(e) => return io_error(&path, &e).into(),
    };
    if truncated {
        lines.push(format!("[truncated after {TREE_LIMIT} entries]"));
    }
    let mut data = json!({"path": path.as_str(), "truncated": truncated || stop.is_some()});
    if let Some(stop) = stop {
        lines.push(format!("[the listing stopped: {}]", stop.as_str()));
        data["stopped"] = json!(stop.as_str());
    }
    ToolReply::ok(lines.join("\n"), Some(data))
}
