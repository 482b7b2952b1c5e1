//! MCP in `palaver serve` (issue 17). The user's MCP servers (from their own config file, never
//! the page: `config`) are kept running by rmcp's client (`connection`), their tools offered beside
//! the workspace tools as `mcp__{server}__{tool}` and called through the same guarded API
//! (`McpHub::call`, results mapped by `results`); their resources and prompts are listed and read
//! for the page; `GET /api/mcp` says how each server is. `serve` offers Palaver's own workspace
//! tools to any MCP client (`palaver mcp`, `/mcp`).

mod config;
mod connection;
mod listing;
mod results;
pub mod serve;

pub use config::{parse, resolve, valid_server_name, McpConfig, ServerConfig, Transport};
pub use connection::{State, MAX_FAILURES};

use crate::proxy::tools::ToolReply;
use crate::tools::MCP_PREFIX;
use connection::{lock, CallError, Connection};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::{broadcast, mpsc};

/// The variables a server's process gets from `palaver serve`'s own environment (secrets were
/// scrubbed from it at start); its config's `env` adds the rest.
pub const KEPT_ENV: [&str; 8] = [
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "TMPDIR",
    "USER",
    "NODE_PATH",
];
/// A tool's description as offered, at most (a server's text is data).
const DESCRIPTION_CAP: usize = 4096;

/// What changed, for the page's live view (`GET /api/mcp/events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubEvent {
    Status,
    Tools,
    Resources,
    Prompts,
}

impl HubEvent {
    pub fn name(self) -> &'static str {
        match self {
            HubEvent::Status => "status",
            HubEvent::Tools => "tools_changed",
            HubEvent::Resources => "resources_changed",
            HubEvent::Prompts => "prompts_changed",
        }
    }
}

/// The last lines a server wrote to stderr (and its log messages), capped by bytes.
#[derive(Debug, Default)]
pub struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    pub const CAP: usize = 64 * 1024;
    const LINE_CAP: usize = 2048;

    pub fn push(&mut self, line: &str) {
        let mut line: String = line
            .chars()
            .filter(|c| !c.is_control() || *c == '\t')
            .collect();
        if line.len() > Self::LINE_CAP {
            let mut cut = Self::LINE_CAP;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.bytes > Self::CAP {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    pub fn last_lines(&self, n: usize) -> String {
        let skip = self.lines.len().saturating_sub(n);
        self.lines
            .iter()
            .skip(skip)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Reads a server's stderr into its tail, line by line, however much it writes.
async fn read_stderr(mut stderr: tokio::process::ChildStderr, tail: Arc<Mutex<StderrTail>>) {
    let mut buffer = vec![0u8; 8192];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let n = match stderr.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buffer[..n]);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            lock(&tail).push(String::from_utf8_lossy(&line).trim_end());
        }
        if pending.len() > StderrTail::LINE_CAP {
            lock(&tail).push(&String::from_utf8_lossy(&pending));
            pending.clear();
        }
    }
    if !pending.is_empty() {
        lock(&tail).push(&String::from_utf8_lossy(&pending));
    }
}

/// The user's MCP servers as `palaver serve` runs them.
pub struct McpHub {
    config_path: Option<PathBuf>,
    connections: Vec<Arc<Connection>>,
    refused: Vec<(String, String)>,
    events: broadcast::Sender<HubEvent>,
    /// Bumped whenever the offered tools change (the page asks `/api/tools` again).
    tools_version: Arc<AtomicU64>,
}

impl McpHub {
    /// No servers (no config file).
    pub fn empty() -> Arc<Self> {
        Self::start(McpConfig::default(), None)
    }

    /// Starts every configured server (each on its own task, restarted by its supervisor).
    /// `reaper`: the `palaver` executable, whose `reap` holds each stdio server's process tree.
    pub fn start(config: McpConfig, reaper: Option<PathBuf>) -> Arc<Self> {
        let (events, _) = broadcast::channel(64);
        let tools_version = Arc::new(AtomicU64::new(1));
        let connections: Vec<Arc<Connection>> = config
            .servers
            .into_iter()
            .map(|server| Connection::new(server, events.clone(), tools_version.clone()))
            .collect();
        let hub = Arc::new(McpHub {
            config_path: config.path,
            connections,
            refused: config.refused,
            events,
            tools_version,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            for connection in &hub.connections {
                runtime.spawn(connection.clone().supervise(reaper.clone()));
            }
        }
        hub
    }

    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.events.subscribe()
    }

    pub fn tools_version(&self) -> u64 {
        self.tools_version.load(Ordering::SeqCst)
    }

    /// `GET /api/mcp`: the config file and each server's state, error, stderr tail, tool count
    /// and protocol version. Never an `env` value or a header.
    pub fn status(&self) -> Value {
        let mut refused: Vec<Value> = self
            .refused
            .iter()
            .map(|(name, error)| json!({"name": name, "state": "failed", "error": format!("refused by the config: {error}")}))
            .collect();
        let servers: Vec<Value> = self
            .connections
            .iter()
            .map(|c| {
                let mut status = connection::status(c);
                let skipped = skipped_tools(c);
                if !skipped.is_empty() {
                    status["refused_tools"] = json!(skipped);
                }
                status
            })
            .collect();
        refused.splice(0..0, servers);
        json!({
            "config": self.config_path.as_ref().map(|p| p.display().to_string()),
            "servers": refused,
            "tools_version": self.tools_version(),
        })
    }

    /// The tools of every ready (or restarting) server, named `mcp__{server}__{tool}`, with their schema,
    /// description, annotations and server (what `GET /api/tools` adds to the workspace tools).
    pub fn tool_specs(&self) -> Vec<Value> {
        let mut specs = Vec::new();
        for connection in &self.connections {
            // A server restarting after a crash keeps its tools offered: a call then waits for
            // it (`settle`) rather than the model being told the tool does not exist.
            if !matches!(
                connection.state(),
                State::Ready | State::Starting | State::Restarting { .. }
            ) {
                continue;
            }
            for tool in connection.tools() {
                let Some(name) = offered_name(&connection.config.name, &tool) else {
                    continue;
                };
                let mut spec = spec(&connection.config.name, &name, &tool);
                // Its annotations are the server's own word: they set a default rule only when
                // the user's config trusts this server (F8).
                if connection.config.trust_annotations {
                    spec["trust_annotations"] = json!(true);
                }
                specs.push(spec);
            }
        }
        specs
    }

    /// The server and the server's own tool name of an offered name.
    fn find(&self, name: &str) -> Option<(Arc<Connection>, String)> {
        let rest = name.strip_prefix(MCP_PREFIX)?;
        self.connections.iter().find_map(|c| {
            let tool = rest
                .strip_prefix(c.config.name.as_str())?
                .strip_prefix("__")?;
            Some((c.clone(), tool.to_string()))
        })
    }

    /// Waits (up to `within`) while the server of an offered name is starting or restarting:
    /// a call that arrives just after palaver serve or that server came back is answered by it,
    /// not refused because its tools are not listed yet.
    pub async fn settle(&self, name: &str, within: Duration) {
        let Some((connection, _)) = self.find(name) else {
            return;
        };
        let deadline = tokio::time::Instant::now() + within;
        while matches!(
            connection.state(),
            State::Starting | State::Restarting { .. }
        ) && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn owns(&self, name: &str) -> bool {
        self.find(name).is_some_and(|(connection, tool)| {
            connection
                .tools()
                .iter()
                .any(|t| t.get("name").and_then(Value::as_str) == Some(tool.as_str()))
        })
    }

    /// Calls an offered tool; progress lines go to `progress` while it runs.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        progress: Option<mpsc::Sender<String>>,
    ) -> ToolReply {
        let Some((connection, tool)) = self.find(name) else {
            return ToolReply::refused(
                404,
                "unknown_tool",
                format!("no tool `{}` here", name.escape_debug()),
            );
        };
        let Value::Object(arguments) = args else {
            return ToolReply::refused(
                400,
                "invalid_arguments",
                "the arguments must be a JSON object".into(),
            );
        };
        let server = connection.config.name.clone();
        match connection.call(&tool, arguments, progress).await {
            Ok(result) => results::reply(&server, &tool, &result),
            Err(error) => call_failure(&server, &tool, error),
        }
    }

    /// Every ready server's resources: `[{server, uri, name, description?, mimeType?}]`.
    pub async fn resources(&self) -> Vec<Value> {
        let mut all = Vec::new();
        for connection in self.ready() {
            let Some(peer) = connection.peer() else {
                continue;
            };
            if !serves(&peer, "resources") {
                continue;
            }
            let listed = listing::list("resources", listing::CAPS, |cursor| {
                let peer = peer.clone();
                async move {
                    let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
                    let page = peer
                        .list_resources(Some(params))
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok((listing::values(&page.resources), page.next_cursor))
                }
            })
            .await;
            for mut value in listed.items {
                value["server"] = json!(connection.config.name);
                all.push(value);
            }
        }
        all
    }

    /// One resource's contents as text for the page to attach: `{server, uri, text, mimeType?}`.
    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<Value, (u16, String)> {
        let peer = self.peer_of(server)?;
        let result = peer
            .read_resource(rmcp::model::ReadResourceRequestParams::new(uri.to_string()))
            .await
            .map_err(|e| {
                (
                    502,
                    format!("the MCP server {server} could not read {uri}: {e}"),
                )
            })?;
        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
        let mut text = String::new();
        for content in value["contents"].as_array().into_iter().flatten() {
            match content.get("text").and_then(Value::as_str) {
                Some(t) => text.push_str(t),
                None => text.push_str(&format!(
                    "[{} — binary ({}), not shown]",
                    content["uri"].as_str().unwrap_or(uri),
                    content["mimeType"].as_str().unwrap_or("unknown type")
                )),
            }
        }
        if text.len() > results::TEXT_CAP {
            return Err((
                413,
                format!(
                    "{uri} is over {} KB of text: too large to attach",
                    results::TEXT_CAP / 1024
                ),
            ));
        }
        Ok(
            json!({"server": server, "uri": uri, "text": text, "mimeType": value["contents"][0]["mimeType"]}),
        )
    }

    /// Every ready server's prompts: `[{server, name, description?, arguments?}]`.
    pub async fn prompts(&self) -> Vec<Value> {
        let mut all = Vec::new();
        for connection in self.ready() {
            let Some(peer) = connection.peer() else {
                continue;
            };
            if !serves(&peer, "prompts") {
                continue;
            }
            let listed = listing::list("prompts", listing::CAPS, |cursor| {
                let peer = peer.clone();
                async move {
                    let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
                    let page = peer
                        .list_prompts(Some(params))
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok((listing::values(&page.prompts), page.next_cursor))
                }
            })
            .await;
            for mut value in listed.items {
                value["server"] = json!(connection.config.name);
                all.push(value);
            }
        }
        all
    }

    /// A prompt with its arguments, as text messages: `{server, name, messages: [{role, text}]}`.
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Value, (u16, String)> {
        let peer = self.peer_of(server)?;
        let mut params = rmcp::model::GetPromptRequestParams::new(name.to_string());
        let strings: serde_json::Map<String, Value> = arguments
            .into_iter()
            .filter(|(_, v)| v.is_string())
            .collect();
        if !strings.is_empty() {
            params.arguments = Some(strings);
        }
        let result = peer.get_prompt(params).await.map_err(|e| {
            (
                502,
                format!("the MCP server {server} could not give the prompt {name}: {e}"),
            )
        })?;
        let value = serde_json::to_value(&result).unwrap_or(Value::Null);
        let messages: Vec<Value> = value["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                let content = &m["content"];
                let text = match content.get("type").and_then(Value::as_str) {
                    Some("text") => content["text"].as_str().unwrap_or("").to_string(),
                    Some("resource") => content["resource"]["text"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    Some(other) => format!("[{other} content]"),
                    None => String::new(),
                };
                json!({"role": m["role"], "text": text})
            })
            .collect();
        Ok(
            json!({"server": server, "name": name, "description": value["description"], "messages": messages}),
        )
    }

    fn ready(&self) -> impl Iterator<Item = &Arc<Connection>> {
        self.connections
            .iter()
            .filter(|c| c.state() == State::Ready)
    }

    fn peer_of(
        &self,
        server: &str,
    ) -> Result<rmcp::service::Peer<rmcp::service::RoleClient>, (u16, String)> {
        let connection = self
            .connections
            .iter()
            .find(|c| c.config.name == server)
            .ok_or_else(|| {
                (
                    404,
                    format!("no MCP server named {}", server.escape_debug()),
                )
            })?;
        connection.peer().ok_or_else(|| {
            (
                503,
                format!(
                    "the MCP server {server} is not running ({})",
                    connection.state().name()
                ),
            )
        })
    }

    /// Stops every server and kills what they started (at `palaver serve`'s exit).
    pub fn shutdown(&self) {
        for connection in &self.connections {
            connection.stop();
            connection.kill_process();
        }
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Whether the server said it has `capability` (`resources`, `prompts`).
fn serves(peer: &rmcp::service::Peer<rmcp::service::RoleClient>, capability: &str) -> bool {
    peer.peer_info()
        .and_then(|info| serde_json::to_value(&info.capabilities).ok())
        .is_some_and(|c| c.get(capability).is_some_and(|v| !v.is_null()))
}

/// `mcp__{server}__{tool}` when it is a name providers accept (`[A-Za-z0-9_-]{1,64}`).
fn offered_name(server: &str, tool: &Value) -> Option<String> {
    let tool = tool.get("name").and_then(Value::as_str)?;
    let name = format!("{MCP_PREFIX}{server}__{tool}");
    let valid = name.len() <= 64
        && !tool.is_empty()
        && tool
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    valid.then_some(name)
}

/// The tools of a server that are not offered, and why (shown in the status).
fn skipped_tools(connection: &Connection) -> Vec<Value> {
    connection
        .tools()
        .iter()
        .filter(|t| offered_name(&connection.config.name, t).is_none())
        .map(|t| {
            let name: String = t
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(80)
                .collect();
            json!({"name": name, "reason": "its name is not 1–64 letters, digits, `_` or `-` with the server's prefix, so no provider would take it"})
        })
        .collect()
}

fn spec(server: &str, name: &str, tool: &Value) -> Value {
    let mut description: String = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .chars()
        .take(DESCRIPTION_CAP)
        .collect();
    if description.is_empty() {
        description = format!(
            "The tool {} of the MCP server {server}.",
            tool["name"].as_str().unwrap_or("")
        );
    }
    let parameters = tool
        .get("inputSchema")
        .filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let mut spec = json!({
        "name": name,
        "description": description,
        "parameters": parameters,
        "mcp": {"server": server, "tool": tool["name"], "title": tool.get("title").or_else(|| tool.pointer("/annotations/title"))},
    });
    if let Some(annotations) = tool.get("annotations").filter(|a| a.is_object()) {
        spec["annotations"] = annotations.clone();
    }
    spec
}

fn call_failure(server: &str, tool: &str, error: CallError) -> ToolReply {
    let (kind, message) = match error {
        CallError::Unavailable(state) => (
            "mcp_unavailable",
            format!("The MCP server {server} is not running ({}); its tool {tool} cannot be called now.", state.name()),
        ),
        CallError::Timeout(timeout) => (
            "mcp_timeout",
            format!("The MCP server {server} did not finish {tool} within {} s; the call was cancelled.", timeout.as_secs()),
        ),
        CallError::Crashed(why) => ("mcp_crashed", format!("The MCP server {server} stopped during {tool}: {why}")),
        CallError::Refused(why) => ("mcp_error", format!("The MCP server {server} refused {tool}: {why}")),
        CallError::Failed(why) => ("mcp_error", format!("The call of {tool} on the MCP server {server} failed: {why}")),
    };
    ToolReply::failed(kind, message)
}
