//! The workspace tools of SPEC §9: their JSON schemas and one dispatch. Every tool answers a
//! `ToolReply` that becomes `{content, data?, is_error, error?}`; a refused path carries its typed
//! kind and an HTTP status (400/403/404), a failed tool a clear message.

mod fetch;
mod fs;
mod search;
mod shell;

pub use fetch::is_forbidden_ip;
pub use shell::run_streaming;

use super::confine::ToolPathRejected;
use super::workspace::Workspace;
use crate::tools::WORKSPACE_TOOLS;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    pub status: u16,
    pub content: String,
    pub data: Option<Value>,
    pub is_error: bool,
    pub error: Option<Value>,
}

impl ToolReply {
    pub fn ok(content: String, data: Option<Value>) -> Self {
        ToolReply {
            status: 200,
            content,
            data,
            is_error: false,
            error: None,
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
        }
    }

    pub fn refused(status: u16, kind: &str, message: String) -> Self {
        ToolReply {
            status,
            error: Some(json!({"kind": kind})),
            content: message,
            data: None,
            is_error: true,
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
        }
    }
}

/// What a tool may do beyond the workspace.
#[derive(Debug, Clone)]
pub struct ToolPolicy {
    pub allow_shell: bool,
}

pub fn exists(name: &str, policy: &ToolPolicy) -> bool {
    WORKSPACE_TOOLS.contains(&name) && (name != "run_command" || policy.allow_shell)
}

pub async fn call(
    workspace: Arc<Workspace>,
    policy: &ToolPolicy,
    name: &str,
    args: Value,
) -> ToolReply {
    if !args.is_object() {
        return ToolReply::refused(
            400,
            "invalid_arguments",
            "the arguments must be a JSON object".into(),
        );
    }
    match name {
        "run_command" if !policy.allow_shell => ToolReply::refused(
            403,
            "exec_disabled",
            "run_command is disabled; start `palaver serve --allow-shell` to allow it".into(),
        ),
        "run_command" => shell::run_command(&workspace, &args).await,
        "fetch_url" => fetch::fetch_url(&args).await,
        _ => {
            let name = name.to_string();
            let run = tokio::task::spawn_blocking(move || blocking_tool(&workspace, &name, &args));
            run.await.unwrap_or_else(|e| {
                ToolReply::refused(500, "internal", format!("the tool stopped: {e}"))
            })
        }
    }
}

/// The tools that do blocking file IO; they run on the blocking pool.
fn blocking_tool(workspace: &Workspace, name: &str, args: &Value) -> ToolReply {
    match name {
        "list_dir" => fs::list_dir(workspace, args),
        "read_file" => fs::read_file(workspace, args),
        "write_file" => fs::write_file(workspace, args),
        "edit_file" => fs::edit_file(workspace, args),
        "file_tree" => fs::file_tree(workspace, args),
        "search" => search::search(workspace, args),
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
pub fn specs(policy: &ToolPolicy) -> Vec<Value> {
    let path = json!({"type": "string", "description": "Path relative to the workspace root, with `/` separators."});
    let mut specs = vec![
        spec("list_dir", "List a directory of the workspace.", json!({"path": path}), &[]),
        spec("read_file", "Read a text file, optionally a range of lines (1-based, inclusive).", json!({"path": path, "line_start": {"type": "integer", "minimum": 1}, "line_end": {"type": "integer", "minimum": 1}}), &["path"]),
        spec("write_file", "Create or replace a file with the given content (atomic).", json!({"path": path, "content": {"type": "string"}, "if_match": {"type": "string", "description": "Write only if the file still has this hash (from read_file's data.hash)."}}), &["path", "content"]),
        spec("edit_file", "Replace exactly one occurrence of old_text with new_text in a file.", json!({"path": path, "old_text": {"type": "string"}, "new_text": {"type": "string"}, "if_match": {"type": "string"}}), &["path", "old_text", "new_text"]),
        spec("search", "Search file contents (regex, or literal text) under a directory, respecting .gitignore.", json!({"pattern": {"type": "string"}, "literal": {"type": "boolean"}, "glob": {"type": "string"}, "path": path, "case_insensitive": {"type": "boolean"}, "max_results": {"type": "integer", "minimum": 1, "maximum": 2000}}), &["pattern"]),
        spec("file_tree", "Show the directory tree under a path, respecting .gitignore.", json!({"path": path, "max_depth": {"type": "integer", "minimum": 1, "maximum": 10}}), &[]),
        spec("fetch_url", "Fetch an http(s) URL on the public internet (text, size- and time-capped).", json!({"url": {"type": "string"}}), &["url"]),
    ];
    if policy.allow_shell {
        specs.push(spec("run_command", "Run a program (argv, no shell) in the workspace, with a timeout and an output cap.", json!({"argv": {"type": "array", "items": {"type": "string"}, "minItems": 1}, "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000}}), &["argv"]));
    }
    specs
}

fn spec(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({"name": name, "description": description, "parameters": {"type": "object", "properties": properties, "required": required, "additionalProperties": false}})
}
