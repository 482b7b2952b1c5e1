//! The user's MCP servers (issue 17), from a config file on the user's machine in the shape other
//! clients use: `{"mcpServers": {"name": {"command", "args", "env", "cwd"} | {"url", "headers"}}}`
//! (`disabled`, `timeout` and `max_call_ms` in ms, `type`, and `trust_annotations` are read too;
//! unknown keys are ignored).
//!
//! Where it comes from: `palaver serve --mcp FILE`, else the user's config directory
//! (`$XDG_CONFIG_HOME/palaver/mcp.json`, `~/.config/palaver/mcp.json`). Never a file of the
//! workspace unless the user names it: a cloned repository must not be able to start processes
//! (the project-config auto-start flaw other clients had), so the default file is not read when
//! it lies inside the workspace. The page can never add, change or start a server.
//!
//! `env` values and `headers` are secrets: they reach the server's process or request only —
//! never `Debug`, a status, a log or the page.
//!
//! Where a stdio server runs (SECURITY F1): never in the workspace by default. `npx`, `uvx`,
//! `python -m` and relative paths resolve against the working directory, so a server started in a
//! cloned repository would run that repository's own `node_modules/`, `*.py` or scripts. Each
//! server's `cwd` is resolved here: a relative one against the config file's folder, none → that
//! folder (or `$HOME`). A `cwd` inside the workspace is refused unless the user named the config
//! with `--mcp`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one tool call may take unless the server's config says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a call may run at most, however much progress it reports, unless the config says.
pub const DEFAULT_HARD_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, PartialEq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// Where it runs: resolved when the config is read (never left to `palaver serve`'s own).
        cwd: PathBuf,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    pub timeout: Duration,
    /// How long a call may run however much progress it reports (`max_call_ms`; default ten
    /// minutes, or `timeout` when longer): progress resets `timeout`, never this (F10).
    pub hard_timeout: Duration,
    /// `trust_annotations: true`: the user trusts this server's tool annotations, so a tool it
    /// marks `readOnlyHint` runs without asking by default (F8). Off unless the config says so.
    pub trust_annotations: bool,
}

/// Without the values of `env` and `headers`.
impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("ServerConfig");
        out.field("name", &self.name);
        match &self.transport {
            Transport::Stdio {
                command, args, env, ..
            } => out
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>()),
            Transport::Http { url, headers } => out
                .field("url", &redact_url(url))
                .field("headers", &headers.keys().collect::<Vec<_>>()),
        };
        out.finish()
    }
}

impl ServerConfig {
    /// What the status shows of how it runs: the program and its arguments, or the URL without
    /// its user, password, query and fragment (F6: they may carry keys).
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http { url, .. } => redact_url(url),
        }
    }

    pub fn transport_name(&self) -> &'static str {
        match self.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "streamable-http",
        }
    }
}

/// A URL as it may be shown: `scheme://host[:port]/path` (user, password, query and fragment
/// dropped: an `?api_key=` is as secret as a header).
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(parsed) => {
            let host = parsed.host_str().unwrap_or("");
            let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{host}{port}{}", parsed.scheme(), parsed.path())
        }
        Err(_) => "(not a URL)".to_string(),
    }
}

/// `text` with every appearance of `url` (and of its query) replaced by the redacted URL: error
/// messages of HTTP clients quote the URL they were given.
pub fn redact_text(text: &str, url: &str) -> String {
    let mut out = text.replace(url, &redact_url(url));
    if let Ok(parsed) = url::Url::parse(url) {
        if let Some(query) = parsed.query().filter(|q| !q.is_empty()) {
            out = out.replace(query, "…");
        }
    }
    out
}

/// The servers of one config file, and the ones it names that cannot run (with why).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpConfig {
    pub path: Option<PathBuf>,
    pub servers: Vec<ServerConfig>,
    /// `(name, reason)` of entries refused: a bad name, no command or URL, an unsupported type.
    pub refused: Vec<(String, String)>,
}

/// A server's name, as it appears in its tools' names (`mcp__{server}__{tool}`): what providers
/// accept in a function name, without `__` (it separates the parts).
pub fn valid_server_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__")
}

/// Where a config file came from: named by the user (`--mcp`) or found in their config folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Named,
    Default,
}

/// What the servers' working directories are resolved against (SECURITY F1).
#[derive(Debug, Clone)]
pub struct Placement {
    /// The folder of the config file (relative `cwd`s resolve against it; none → it).
    pub folder: Option<PathBuf>,
    pub workspace: PathBuf,
    pub origin: Origin,
}

impl Placement {
    /// For a config file at `path` (`None`: given as text, e.g. in tests: `$HOME` is the folder).
    pub fn of(path: Option<&Path>, workspace: &Path, origin: Origin) -> Placement {
        let folder = path
            .map(|p| {
                absolute(p)
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default()
            })
            .filter(|f| !f.as_os_str().is_empty());
        Placement {
            folder,
            workspace: workspace.to_path_buf(),
            origin,
        }
    }

    /// The directory a server with `cwd` (as written in the config) runs in, or why it may not.
    fn working_dir(&self, cwd: Option<&str>) -> Result<PathBuf, String> {
        let base = self
            .folder
            .clone()
            .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/"));
        let dir = match cwd {
            Some(cwd) if Path::new(cwd).is_absolute() => PathBuf::from(cwd),
            Some(cwd) => base.join(cwd),
            None => base,
        };
        if self.origin == Origin::Default && inside(&dir, &self.workspace) {
            return Err(format!(
                "its cwd {} is inside the workspace, where a repository's own files would run (npx, uvx and python -m resolve against it); name the config with --mcp to allow it",
                dir.display()
            ));
        }
        Ok(dir)
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Reads the config: the file given on the command line (it must exist and parse), else the
/// default file when it exists and is outside the workspace. `Ok(None)`: no MCP servers.
pub fn resolve(given: Option<&Path>, workspace: &Path) -> Result<Option<McpConfig>, String> {
    if let Some(path) = given {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("--mcp {}: {e}", path.display()))?;
        let placement = Placement::of(Some(path), workspace, Origin::Named);
        return parse(&text, Some(path), &placement).map(Some);
    }
    let Some(path) = default_path() else {
        return Ok(None);
    };
    if !path.is_file() {
        return Ok(None);
    }
    if inside(&path, workspace) {
        eprintln!(
            "palaver serve: not reading {} (it is inside the workspace, which the model can write); name it with --mcp to use it",
            path.display()
        );
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let placement = Placement::of(Some(&path), workspace, Origin::Default);
    parse(&text, Some(&path), &placement).map(Some)
}

/// `$XDG_CONFIG_HOME/palaver/mcp.json`, else `~/.config/palaver/mcp.json`.
pub fn default_path() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .map(|dir| dir.join("palaver").join("mcp.json"))
}

/// Whether `path` is `dir` or below it, after resolving symlinks (of the part that exists).
fn inside(path: &Path, dir: &Path) -> bool {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| absolute(p));
    real(path).starts_with(real(dir))
}

/// Parses a config file's text. A file that is not JSON or has no `mcpServers` object is an
/// error (it names the problem); a bad entry is refused on its own and the others run.
pub fn parse(text: &str, path: Option<&Path>, placement: &Placement) -> Result<McpConfig, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the MCP config is not JSON: {e}"))?;
    let Some(servers) = value.get("mcpServers").and_then(|s| s.as_object()) else {
        return Err("the MCP config has no \"mcpServers\" object".into());
    };
    let mut config = McpConfig {
        path: path.map(Path::to_path_buf),
        ..Default::default()
    };
    for (name, entry) in servers {
        if entry.get("disabled").and_then(|d| d.as_bool()) == Some(true) {
            continue;
        }
        match server(name, entry, placement) {
            Ok(server) => config.servers.push(server),
            Err(reason) => config.refused.push((printable(name), reason)),
        }
    }
    Ok(config)
}

/// A name as it may be shown: control and invisible characters replaced.
fn printable(name: &str) -> String {
    name.chars()
        .take(64)
        .map(|c| {
            if c.is_control() || !c.is_ascii() {
                '?'
            } else {
                c
            }
        })
        .collect()
}

fn server(
    name: &str,
    entry: &serde_json::Value,
    placement: &Placement,
) -> Result<ServerConfig, String> {
    if !valid_server_name(name) {
        return Err(
            "its name must be 1–32 letters, digits, `_` or `-` (no `__`): it names its tools"
                .into(),
        );
    }
    let strings = |key: &str| -> BTreeMap<String, String> {
        entry
            .get(key)
            .and_then(|m| m.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let timeout = entry
        .get("timeout")
        .and_then(|t| t.as_u64())
        .filter(|ms| *ms > 0)
        .map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis);
    let hard_timeout = entry
        .get("max_call_ms")
        .and_then(|t| t.as_u64())
        .filter(|ms| *ms > 0)
        .map_or(DEFAULT_HARD_TIMEOUT.max(timeout), Duration::from_millis);
    let kind = entry.get("type").and_then(|t| t.as_str()).unwrap_or("");
    if kind == "sse" {
        return Err("the old HTTP+SSE transport is not supported: use the server's Streamable HTTP endpoint".into());
    }
    let transport = if let Some(command) = entry.get("command").and_then(|c| c.as_str()) {
        if command.is_empty() || command.contains('\0') {
            return Err("its command is empty".into());
        }
        let args = entry
            .get("args")
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Transport::Stdio {
            command: command.to_string(),
            args,
            env: strings("env"),
            cwd: placement.working_dir(entry.get("cwd").and_then(|c| c.as_str()))?,
        }
    } else if let Some(url) = entry.get("url").and_then(|u| u.as_str()) {
        let parsed = url::Url::parse(url).map_err(|e| format!("its url is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("its url must be http or https".into());
        }
        Transport::Http {
            url: url.to_string(),
            headers: strings("headers"),
        }
    } else {
        return Err("it has neither a \"command\" nor a \"url\"".into());
    };
    Ok(ServerConfig {
        name: name.to_string(),
        transport,
        timeout,
        hard_timeout,
        trust_annotations: entry.get("trust_annotations").and_then(|t| t.as_bool()) == Some(true),
    })
}
