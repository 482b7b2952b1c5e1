//! Workspace confinement (SPEC §9, SECURITY A28–A49). A tool path is a workspace-relative string;
//! it is checked as text before anything touches the disk (absolute paths, `..`, NUL, backslash,
//! `:` and drive letters, Windows reserved names, over-long paths are refused), then every file is
//! opened through a `cap_std::fs::Dir` on the workspace root, so a symlink that leads out fails
//! even when it appears between the check and the use. Tool paths are never URL-decoded:
//! `%2e%2e` is a literal name.

use std::fmt;
use std::io;

pub const MAX_PATH_BYTES: usize = 4096;
pub const MAX_COMPONENT_BYTES: usize = 255;

const RESERVED: [&str; 24] = [
    "con", "prn", "aux", "nul", "conin$", "conout$", "com1", "com2", "com3", "com4", "com5",
    "com6", "com7", "com8", "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8",
    "lpt9",
];

/// Why a path was refused, as the `kind` of the JSON error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathErrorKind {
    InvalidPath,
    AbsolutePath,
    PathOutsideWorkspace,
    ReservedName,
    PathTooLong,
    SymlinkEscape,
    NotFound,
    NoSpace,
    Io,
}

impl PathErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PathErrorKind::InvalidPath => "invalid_path",
            PathErrorKind::AbsolutePath => "absolute_path",
            PathErrorKind::PathOutsideWorkspace => "path_outside_workspace",
            PathErrorKind::ReservedName => "reserved_name",
            PathErrorKind::PathTooLong => "path_too_long",
            PathErrorKind::SymlinkEscape => "symlink_escape",
            PathErrorKind::NotFound => "not_found",
            PathErrorKind::NoSpace => "no_space",
            PathErrorKind::Io => "io_error",
        }
    }

    /// The HTTP status for this kind.
    pub fn status(self) -> u16 {
        match self {
            PathErrorKind::SymlinkEscape => 403,
            PathErrorKind::NotFound => 404,
            PathErrorKind::Io => 500,
            PathErrorKind::NoSpace => 507,
            _ => 400,
        }
    }
}

/// A refused or failed path, named only by its workspace-relative spelling (A82).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolPathRejected {
    pub kind: PathErrorKind,
    pub path: String,
    pub reason: String,
}

impl fmt::Display for ToolPathRejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} `{}`: {}",
            self.kind.as_str(),
            self.path.escape_debug(),
            self.reason
        )
    }
}

impl std::error::Error for ToolPathRejected {}

fn reject(kind: PathErrorKind, path: &str, reason: &str) -> ToolPathRejected {
    ToolPathRejected {
        kind,
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

/// A checked workspace-relative path: components with no `.`, `..` or empty parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath {
    components: Vec<String>,
}

impl RelPath {
    /// The workspace root itself.
    pub fn root() -> Self {
        RelPath {
            components: Vec::new(),
        }
    }

    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The path as `cap_std` takes it (`.` for the root).
    pub fn as_str(&self) -> String {
        if self.components.is_empty() {
            ".".to_string()
        } else {
            self.components.join("/")
        }
    }

    pub fn parent(&self) -> Option<RelPath> {
        let (_, rest) = self.components.split_last()?;
        Some(RelPath {
            components: rest.to_vec(),
        })
    }

    pub fn first(&self) -> Option<&str> {
        self.components.first().map(String::as_str)
    }

    pub fn file_name(&self) -> Option<&str> {
        self.components.last().map(String::as_str)
    }

    pub fn join(&self, name: &str) -> RelPath {
        let mut components = self.components.clone();
        components.push(name.to_string());
        RelPath { components }
    }
}

/// Where a path may point: a directory listing may name the root, a file may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    RootAllowed,
    File,
}

/// Checks a tool path as text. Nothing here touches the disk.
pub fn check(path: &str, target: Target) -> Result<RelPath, ToolPathRejected> {
    if path.len() > MAX_PATH_BYTES {
        return Err(reject(
            PathErrorKind::PathTooLong,
            &path[..64.min(path.len())],
            "longer than 4096 bytes",
        ));
    }
    if path.contains('\0') {
        return Err(reject(
            PathErrorKind::InvalidPath,
            path,
            "contains a NUL byte",
        ));
    }
    if path.contains('\\') {
        return Err(reject(
            PathErrorKind::InvalidPath,
            path,
            "backslashes are not path separators here; use `/`",
        ));
    }
    if path.starts_with('/') {
        return Err(reject(
            PathErrorKind::AbsolutePath,
            path,
            "paths are relative to the workspace",
        ));
    }
    if path.contains(':') {
        return Err(reject(
            PathErrorKind::InvalidPath,
            path,
            "`:` (drive letters, streams) is not allowed",
        ));
    }
    let mut components = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => continue,
            ".." => {
                return Err(reject(
                    PathErrorKind::PathOutsideWorkspace,
                    path,
                    "`..` leads outside the workspace",
                ))
            }
            name => components.push(check_component(path, name)?),
        }
    }
    if components.is_empty() && (target == Target::File || path.is_empty()) {
        return Err(reject(
            PathErrorKind::InvalidPath,
            path,
            "names no file in the workspace",
        ));
    }
    Ok(RelPath { components })
}

fn check_component(path: &str, name: &str) -> Result<String, ToolPathRejected> {
    if name.len() > MAX_COMPONENT_BYTES {
        return Err(reject(
            PathErrorKind::PathTooLong,
            path,
            "a path component is longer than 255 bytes",
        ));
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Err(reject(
            PathErrorKind::ReservedName,
            path,
            "a name ending in `.` or a space is not portable",
        ));
    }
    let stem = name
        .split('.')
        .next()
        .unwrap_or(name)
        .trim_end()
        .to_ascii_lowercase();
    if RESERVED.contains(&stem.as_str()) {
        return Err(reject(
            PathErrorKind::ReservedName,
            path,
            "a reserved device name on Windows",
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(reject(
            PathErrorKind::InvalidPath,
            path,
            "contains a control character",
        ));
    }
    if let Some(c) = name.chars().find(|c| is_invisible(*c)) {
        return Err(reject(
            PathErrorKind::InvalidPath,
            path,
            &format!(
                "contains U+{:04X}, an invisible or text-direction character that makes a name look like another",
                u32::from(c)
            ),
        ));
    }
    Ok(name.to_string())
}

/// Characters that change how a name reads without being seen (E11): bidirectional overrides,
/// embeddings and isolates, zero-width characters, the BOM, soft hyphen, the Mongolian vowel
/// separator, and the invisible operators and fillers. (Variation selectors stay: emoji use them.)
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// Maps an IO error of a capability operation to a typed rejection.
pub fn io_error(path: &RelPath, error: &io::Error) -> ToolPathRejected {
    let shown = path.as_str();
    // cap-std reports an escape (a symlink or `..` leading out) as PermissionDenied with this text.
    if error.to_string().contains("outside of the filesystem") {
        return reject(
            PathErrorKind::SymlinkEscape,
            &shown,
            "a symlink leads outside the workspace",
        );
    }
    match error.kind() {
        io::ErrorKind::NotFound => {
            reject(PathErrorKind::NotFound, &shown, "no such file or directory")
        }
        io::ErrorKind::StorageFull => reject(
            PathErrorKind::NoSpace,
            &shown,
            "no space left on the device; the file was not changed",
        ),
        io::ErrorKind::PermissionDenied => reject(
            PathErrorKind::SymlinkEscape,
            &shown,
            "permission denied or outside the workspace",
        ),
        _ => reject(PathErrorKind::Io, &shown, &sanitize(error)),
    }
}

/// An IO error's text without any absolute host path (A82).
fn sanitize(error: &io::Error) -> String {
    let text = error.to_string();
    text.split_whitespace()
        .filter(|word| !word.starts_with('/'))
        .collect::<Vec<_>>()
        .join(" ")
}
