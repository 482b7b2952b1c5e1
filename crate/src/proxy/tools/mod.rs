//! The workspace tools of SPEC §9 (and `repo_map`, seed 002): their JSON schemas and one dispatch. Every tool answers a
//! `ToolReply` that becomes `{content, data?, is_error, error?}`; a refused path carries its typed
//! kind and an HTTP status (400/403/404), a failed tool a clear message.

mod fetch;
pub(crate) mod fs;
mod nearest;
pub mod repo_map;
mod search;
mod shell;

pub use fetch::{is_forbidden_ip, is_own_address, own_addresses};
pub use shell::run_streaming;

use super::confine::ToolPathRejected;
use super::walk::{Budget, CancelOnDrop};
use super::workspace::Workspace;
use crate::tools::WORKSPACE_TOOLS;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a walking tool (`search`, `file_tree`) may work before it answers with what it has.
pub const WALK_DEADLINE: Duration = Duration::from_secs(20);
/// Walking tools running at once; more wait for a slot, then are told the server is busy.
pub const WALK_SLOTS: usize = 2;
/// How long a walking call waits for a slot.
const SLOT_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    pub status: u16,
    pub content: String,
    pub data: Option<Value>,
    pub is_error: bool,
    pub error: Option<Value>,
    /// Image parts beside the text (an MCP tool's images), `{type: "image_url", …}`.
    pub parts: Vec<Value>,
}

impl ToolReply {
    pub fn ok(content: String, data: Option<Value>) -> Self {
        ToolReply {
            status: 200,
            content,
            data,
            is_error: false,
            error: None,
            parts: Vec::new(),
        }
    }

    /// A tool that ran and failed: HTTP 200, `is_error: true`, the message for the model.
    pub fn failed(kind: &str, message: String) -> Self {
        ToolReply {
            status: 200,
            error: Some(json!({"kind": kind})),
            content: message,
            data: None,
            is_error: true,
            parts: Vec::new(),
        }
    }

    pub fn refused(status: u16, kind: &str, message: String) -> Self {
        ToolReply {
            status,
            error: Some(json!({"kind": kind})),
            content: message,
            data: None,
            is_error: true,
            parts: Vec::new(),
        }
    }

    pub fn body(&self) -> Value {
        let mut body = json!({"content": self.content, "is_error": self.is_error});
        if let Some(data) = &self.data {
            body["data"] = data.clone();
        }
        if let Some(error) = &self.error {
            body["error"] = error.clone();
        }
        if !self.parts.is_empty() {
            body["parts"] = Value::Array(self.parts.clone());
        }
        body
    }
}

impl From<ToolPathRejected> for ToolReply {
    fn from(rejected: ToolPathRejected) -> Self {
        ToolReply {
            status: rejected.kind.status(),
            content: rejected.to_string(),
            data: None,
            is_error: true,
            error: Some(json!({"kind": rejected.kind.as_str(), "path": rejected.path})),
            parts: Vec::new(),
        }
    }
}

/// What a tool may do beyond the workspace, and its limits.
#[derive(Debug, Clone)]
pub struct ToolCapabilities {
    pub allow_shell: bool,
    /// Read and search regular files with more than one hard link (A48: one may be an outside
    /// file's second name). Off unless `palaver serve --allow-hard-links`.
    pub allow_hard_links: bool,
    /// The deadline of a walking tool.
    pub walk_deadline: Duration,
    /// The `palaver` executable, run as the process reaper of `run_command` (its children cannot
    /// escape it by `setsid` or outlive the server).
    pub reaper: Option<std::path::PathBuf>,
}

impl Default for ToolCapabilities {
    fn default() -> Self {
        ToolCapabilities {
            allow_shell: false,
            allow_hard_links: false,
            walk_deadline: WALK_DEADLINE,
            reaper: None,
        }
    }
}

/// The tools of one server: the workspace, the capabilities, the slots of the walking tools, and how
/// many calls run now (shown by `/api/health`, so a test can see abandoned work stop).
pub struct Tools {
    pub workspace: Arc<Workspace>,
    pub capabilities: ToolCapabilities,
    /// The repository map's tags per file, kept while files are unchanged.
    repo_map: Arc<std::sync::Mutex<repo_map::TagCache>>,
    walk_slots: Arc<tokio::sync::Semaphore>,
    running: Arc<AtomicUsize>,
}

/// Counts a running call for as long as it lives (the blocking work included).
struct Running(Arc<AtomicUsize>);

impl Running {
    fn start(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Running(counter.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Tools {
    pub fn new(workspace: Arc<Workspace>, capabilities: ToolCapabilities) -> Self {
        Tools {
            workspace,
            capabilities,
            repo_map: Default::default(),
            walk_slots: Arc::new(tokio::sync::Semaphore::new(WALK_SLOTS)),
            running: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Tool calls whose work has not ended (blocking work still running counts).
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}

pub fn exists(name: &str, capabilities: &ToolCapabilities) -> bool {
    WORKSPACE_TOOLS.contains(&name) && (name != "run_command" || capabilities.allow_shell)
}

pub async fn call(tools: &Tools, name: &str, args: Value) -> ToolReply {
    let (workspace, capabilities) = (tools.workspace.clone(), &tools.capabilities);
    if !args.is_object() {
        return ToolReply::refused(
            400,
            "invalid_arguments",
            "the arguments must be a JSON object".into(),
        );
    }
    match name {
        "run_command" if !capabilities.allow_shell => ToolReply::refused(
            403,
            "exec_disabled",
            "run_command is disabled; start `palaver serve --allow-shell` to allow it".into(),
        ),
        "run_command" => {
            let _running = Running::start(&tools.running);
            shell::run_command(&workspace, capabilities, &args).await
        }
        "fetch_url" => fetch::fetch_url(&args).await,
        _ => blocking(tools, name, args).await,
    }
}

/// The tools that do blocking file IO run on the blocking pool, with a budget: a deadline, and a
/// cancel flag set when this future is dropped (the client left, or the request timed out), so
/// abandoned work stops at its next check instead of burning a thread (E4, E5).
async fn blocking(tools: &Tools, name: &str, args: Value) -> ToolReply {
    let walking = matches!(name, "search" | "file_tree" | "repo_map");
    let _slot = if walking {
        match tokio::time::timeout(SLOT_WAIT, tools.walk_slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(permit),
            _ => {
                return ToolReply::refused(
                    503,
                    "busy",
                    format!("{WALK_SLOTS} searches are running; try again when one ends"),
                )
            }
        }
    } else {
        None
    };
    let cancelled = Arc::new(AtomicBool::new(false));
    let _cancel = CancelOnDrop(cancelled.clone());
    let budget = Budget::new(Instant::now() + tools.capabilities.walk_deadline, cancelled);
    let running = Running::start(&tools.running);
    let (workspace, capabilities, name, map_cache) = (
        tools.workspace.clone(),
        tools.capabilities.clone(),
        name.to_string(),
        tools.repo_map.clone(),
    );
    let run = tokio::task::spawn_blocking(move || {
        let _running = running;
        if name == "repo_map" {
            return repo_map::repo_map(&workspace, &capabilities, &map_cache, &args, &budget);
        }
        blocking_tool(&workspace, &capabilities, &name, &args, &budget)
    });
    run.await
        .unwrap_or_else(|e| ToolReply::refused(500, "internal", format!("the tool stopped: {e}")))
}

fn blocking_tool(
    workspace: &Workspace,
    capabilities: &ToolCapabilities,
    name: &str,
    args: &Value,
    budget: &Budget,
) -> ToolReply {
    match name {
        "list_dir" => fs::list_dir(workspace, args),
        "read_file" => fs::read_file(workspace, capabilities, args),
        "write_file" => fs::write_file(workspace, capabilities, args),
        "edit_file" => fs::edit_file(workspace, capabilities, args),
        "file_tree" => fs::file_tree(workspace, args, budget),
        "search" => search::search(workspace, capabilities, args, budget),
        other => ToolReply::refused(404, "unknown_tool", format!("no tool named `{other}`")),
    }
}

pub fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolReply> {
    args.get(key).and_then(Value::as_str).ok_or_else(|| {
        ToolReply::refused(
            400,
            "invalid_arguments",
            format!("`{key}` (a string) is required"),
        )
    })
}

/// The tools' schemas, as `GET /api/tools` lists them.
pub fn specs(capabilities: &ToolCapabilities) -> Vec<Value> {
    let path = json!({"type": "string", "description": "Path relative to the workspace root, with `/` separators."});
    let mut specs = vec![
        spec("list_dir", "List a directory of the workspace.", json!({"path": path}), &[]),
        spec("read_file", "Read a text file, optionally a range of lines (1-based, inclusive).", json!({"path": path, "line_start": {"type": "integer", "minimum": 1}, "line_end": {"type": "integer", "minimum": 1}}), &["path"]),
        spec("write_file", "Create or replace a file with the given content (atomic).", json!({"path": path, "content": {"type": "string"}, "if_match": {"type": "string", "description": "Write only if the file still has this hash (from read_file's data.hash)."}}), &["path", "content"]),
        spec("edit_file", "Replace exactly one occurrence of old_text with new_text in a file.", json!({"path": path, "old_text": {"type": "string"}, "new_text": {"type": "string"}, "if_match": {"type": "string"}}), &["path", "old_text", "new_text"]),
        spec("search", "Search file contents (regex, or literal text) under a directory, respecting .gitignore.", json!({"pattern": {"type": "string"}, "literal": {"type": "boolean"}, "glob": {"type": "string"}, "path": path, "case_insensitive": {"type": "boolean"}, "max_results": {"type": "integer", "minimum": 1, "maximum": 2000}}), &["pattern"]),
        spec("file_tree", "Show the directory tree under a path, respecting .gitignore (flat: one file path per line).", json!({"path": path, "max_depth": {"type": "integer", "minimum": 1, "maximum": 10}, "flat": {"type": "boolean"}}), &[]),
        spec("repo_map", "A map of the repository's code: the definitions (functions, types, classes, headings) of its most used files, ranked by how other files use them and by the files in `focus`, fitted to `budget` tokens.", json!({"focus": {"type": "array", "items": {"type": "string"}, "description": "Workspace paths the work is about: the map centres on them."}, "budget": {"type": "integer", "minimum": 128, "maximum": 16384}}), &[]),
        spec("fetch_url", "Fetch an http(s) URL on the public internet (text, size- and time-capped).", json!({"url": {"type": "string"}}), &["url"]),
    ];
    if capabilities.allow_shell {
        specs.push(spec("run_command", "Run a program (argv, no shell) in the workspace, with a timeout and an output cap.", json!({"argv": {"type": "array", "items": {"type": "string"}, "minItems": 1}, "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000}}), &["argv"]));
    }
    specs
}

fn spec(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"name": name, "description": description, "parameters": {"type": "object", "properties": properties, "required": required, "additionalProperties": false}})
}
