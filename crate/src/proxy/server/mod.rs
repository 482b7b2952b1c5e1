//! The HTTP server: guards (see `guard`), the tools API, the web app's static files, and an accept
//! loop on hyper with a header-read timeout (slowloris), a whole-request timeout and a cap on
//! concurrent connections. The safe response headers wrap everything, Host refusals included.

use super::chat_files::{self, ChatFiles, CopyError};
use super::guard::{self, json_error, GuardConfig};
use super::mcp::{self, McpConfig, McpHub};
use super::tools::{self, ToolCapabilities, Tools};
use super::workspace::Workspace;
use crate::tools::MCP_PREFIX;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;

mod change_routes;
mod chat_routes;
mod mcp_routes;

use change_routes::*;
use chat_routes::*;
use mcp_routes::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tower::Layer;
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::services::ServeDir;
use tower_http::timeout::TimeoutLayer;

pub const BODY_LIMIT: usize = 8 * 1024 * 1024;
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
pub const MAX_CONNECTIONS: usize = 256;
/// How long a call waits for its MCP server while that server starts or restarts (its first
/// restart comes a second after a crash; node servers start in about one more).
const MCP_SETTLE: Duration = Duration::from_secs(15);
/// Open connections, idle ones included; far above `MAX_CONNECTIONS` and far below the fd limit.
pub const MAX_OPEN_CONNECTIONS: usize = 4096;

/// Server limits; `Default` is what `palaver serve` uses.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The whole request, body included, must be handled within this (A53).
    pub request_timeout: Duration,
    /// Requests handled at once; more wait for a slot (A56). A slot is taken when a request's
    /// head has arrived, never by a connection that has sent nothing (E8).
    pub max_connections: usize,
    /// Connections open at once, idle or not; past it, new ones wait in the accept queue. An idle
    /// connection is closed after `HEADER_TIMEOUT`.
    pub max_open_connections: usize,
    /// How long a walking tool (`search`, `file_tree`) may work.
    pub walk_deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_timeout: REQUEST_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            max_open_connections: MAX_OPEN_CONNECTIONS,
            walk_deadline: tools::WALK_DEADLINE,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub www: PathBuf,
    pub pkg: PathBuf,
    /// GGUF models for the model in the page, served at `/models/` (`--models`; issue 16).
    pub models: Option<PathBuf>,
    pub workspace: PathBuf,
    pub allowed_origins: Vec<String>,
    pub allow_shell: bool,
    /// Read and search files with several hard links (`--allow-hard-links`, A48).
    pub allow_hard_links: bool,
    /// Keep the page's chats in `.palaver/chats/` (off with `--no-workspace-copy`; issue 21).
    pub workspace_copy: bool,
    /// The `palaver` executable, run as `run_command`'s process reaper (`proxy::reaper`).
    pub reaper: Option<PathBuf>,
    /// The user's MCP servers (issue 17), from their own config file.
    pub mcp: McpConfig,
    pub token: String,
    /// The secret that locks the page's remembered keys (F7; `None`: not offered).
    pub vault: Option<Arc<super::vault::VaultSecret>>,
    /// Where earlier file contents are kept for restores (issue 39; `None`: not recorded).
    pub checkpoints: Option<PathBuf>,
}

/// What the API's handlers share: the workspace tools and the user's MCP servers.
pub struct Api {
    pub tools: Arc<Tools>,
    pub mcp: Arc<McpHub>,
    pub chats: Arc<ChatFiles>,
    /// The vault secret (F7), handed to the page behind the token.
    pub vault: Option<Arc<super::vault::VaultSecret>>,
    /// The store of earlier file contents (issue 39).
    pub checkpoints: Option<Arc<super::checkpoints::Checkpoints>>,
}

/// Refuses to serve the app from inside the workspace, or the workspace from inside the app: the
/// model can write the workspace, and a script written there would run at the tools API's own
/// origin, with its token (E3).
pub fn check_app_outside_workspace(config: &ServeConfig) -> std::io::Result<()> {
    let real = |path: &std::path::Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let workspace = real(&config.workspace);
    let models = config.models.iter().map(|dir| ("models", dir));
    for (name, dir) in [("www", &config.www), ("pkg", &config.pkg)]
        .into_iter()
        .chain(models)
    {
        let dir = real(dir);
        if dir.starts_with(&workspace) || workspace.starts_with(&dir) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the app's {name}/ ({}) and the workspace ({}) overlap: the model can write the workspace, so a script it wrote would run as the app. Serve the app from outside the workspace (--www and --pkg; scripts/dev.sh does this) or choose another --workspace",
                    dir.display(),
                    workspace.display()
                ),
            ));
        }
    }
    Ok(())
}

pub fn router(config: &ServeConfig, port: u16, limits: Limits) -> std::io::Result<Router> {
    let hub = McpHub::start(config.mcp.clone(), config.reaper.clone());
    router_with(config, port, limits, hub)
}

fn router_with(
    config: &ServeConfig,
    port: u16,
    limits: Limits,
    hub: Arc<McpHub>,
) -> std::io::Result<Router> {
    check_app_outside_workspace(config)?;
    let guard_config = Arc::new(GuardConfig {
        port,
        token: config.token.clone(),
        allowed_origins: config.allowed_origins.clone(),
    });
    let workspace = Arc::new(Workspace::open(&config.workspace)?);
    let tools = Arc::new(Tools::new(
        workspace.clone(),
        ToolCapabilities {
            allow_shell: config.allow_shell,
            allow_hard_links: config.allow_hard_links,
            walk_deadline: limits.walk_deadline,
            reaper: config.reaper.clone(),
        },
    ));
    let api = Arc::new(Api {
        tools: tools.clone(),
        mcp: hub,
        chats: Arc::new(ChatFiles::new(workspace, config.workspace_copy)),
        vault: config.vault.clone(),
        checkpoints: config
            .checkpoints
            .clone()
            .map(|dir| Arc::new(super::checkpoints::Checkpoints::new(dir))),
    });
    // Copies are whole trajectories: their own, larger body limit.
    let chat_routes = Router::new()
        .route("/chats", get(list_chats))
        .route(
            "/chats/{id}",
            get(read_chat).put(write_chat).delete(delete_chat),
        )
        .with_state(api.clone())
        .layer(DefaultBodyLimit::max(chat_files::MAX_FILE as usize))
        .layer(RequestBodyLimitLayer::new(chat_files::MAX_FILE as usize));
    let api_routes = Router::new()
        .route("/health", get(health))
        .route("/vault", get(vault_secret))
        .route("/tools", get(list_tools))
        .route("/tools/{name}", post(call_tool))
        .route("/changes", get(list_changes))
        .route("/changes/content", get(change_content))
        .route("/changes/restore", post(restore_changes))
        .route("/mcp", get(mcp_status))
        .route("/mcp/events", get(mcp_events))
        .route("/mcp/resources", get(mcp_resources))
        .route("/mcp/resources/read", post(mcp_read_resource))
        .route("/mcp/prompts", get(mcp_prompts))
        .route("/mcp/prompts/get", post(mcp_get_prompt))
        .fallback(|| async { json_error(StatusCode::NOT_FOUND, "not_found", "no such API route") })
        .with_state(api)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT))
        .merge(chat_routes)
        .layer(middleware::from_fn_with_state(
            guard_config.clone(),
            guard::check_api,
        ));
    // Palaver's tools for any MCP client, behind the same guard as /api (token, Host, Origin).
    let (mcp_service, sessions) = mcp::serve::http_service(tools, port);
    let mcp_endpoint = Router::new()
        .fallback_service(mcp_service)
        .layer(middleware::from_fn_with_state(
            sessions,
            mcp::serve::cap_sessions,
        ))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(
            guard_config.clone(),
            guard::check_api,
        ));
    let mut app = Router::new()
        .nest("/api", api_routes)
        .nest_service("/mcp", mcp_endpoint);
    if let Some(models) = &config.models {
        // Large files, fetched once and kept by the page: ranges (a cut download resumes), no
        // compression (GGUF does not shrink), behind the API's guard (token, Origin: F9).
        app = app.nest(
            "/models",
            Router::new()
                .route("/{name}", get(super::models::model_file))
                .fallback(|| async {
                    json_error(StatusCode::NOT_FOUND, "not_found", "no such model file")
                })
                .with_state(Arc::new(models.clone()))
                .layer(middleware::from_fn_with_state(
                    guard_config.clone(),
                    guard::check_api,
                )),
        );
    }
    Ok(app
        // The app is static and mostly wasm: gzip makes its transfer a third of its size. The
        // build also writes each built file's brotli at its highest quality beside it (`.br`,
        // scripts/precompress.mjs), a fifth less than gzip: sent as it is to a browser that
        // takes it, and never compressed again (the layer leaves an encoded answer alone).
        // `www/` is edited in place, so it has no `.br` to go stale: a browser that takes brotli
        // gets it made on the fly (`ON_THE_FLY`).
        .nest_service(
            "/pkg",
            compressed().layer(ServeDir::new(&config.pkg).precompressed_br()),
        )
        .fallback_service(compressed().layer(ServeDir::new(&config.www)))
        .layer(middleware::map_response(javascript_type))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        // A slot per request in flight, taken once its head has arrived (A56, E8).
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(
            limits.max_connections.max(1),
        ))
        .layer(middleware::map_response(json_error_bodies))
        .layer(middleware::from_fn_with_state(
            guard_config,
            guard::check_host,
        ))
        // Outermost, so refusals of the Host guard carry the safe headers too (A15, A16).
        .layer(middleware::from_fn(guard::security_headers)))
}

/// Serves until `shutdown` resolves. The listener must be bound to a loopback address.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_limits(listener, config, Limits::default(), shutdown).await
}

/// `serve` with explicit limits (tests use short ones).
pub async fn serve_with_limits(
    listener: tokio::net::TcpListener,
    config: ServeConfig,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let hub = McpHub::start(config.mcp.clone(), config.reaper.clone());
    // Whichever way this returns, the MCP servers it started are stopped and killed.
    let _servers = StopServers(hub.clone());
    let app = router_with(&config, port, limits, hub)?;
    let slots = Arc::new(tokio::sync::Semaphore::new(
        limits.max_open_connections.max(1),
    ));
    tokio::pin!(shutdown);
    loop {
        // Past the cap of open connections, new ones queue in the backlog. Request slots are
        // taken per request, so idle sockets cannot starve requests (E8).
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit,
            () = &mut shutdown => return Ok(()),
        };
        let Ok(permit) = permit else { return Ok(()) };
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let service = TowerToHyperService::new(app.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    let connection = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_TIMEOUT)
                        .max_buf_size(64 * 1024)
                        .serve_connection(TokioIo::new(stream), service);
                    let _ = connection.await;
                });
            }
            () = &mut shutdown => return Ok(()),
        }
    }
}

/// JavaScript is `text/javascript` (RFC 9239); the MIME table still says `application/javascript`
/// for `.mjs`, which module workers accept but some checkers do not.
async fn javascript_type(mut response: Response) -> Response {
    let headers = response.headers_mut();
    if headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/javascript"))
    {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/javascript; charset=utf-8"),
        );
    }
    response
}

/// Every error answer is JSON (E11): the layers below (body limit 413, body read 400, method
/// 405, timeout 408, static 404) answer with plain text or nothing.
async fn json_error_bodies(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (kind, message) = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ("body_too_large", "the request body is too large"),
        StatusCode::METHOD_NOT_ALLOWED => ("method_not_allowed", "this method is not served here"),
        StatusCode::REQUEST_TIMEOUT => ("request_timeout", "the request took too long"),
        StatusCode::NOT_FOUND => ("not_found", "no such file or route"),
        StatusCode::BAD_REQUEST => ("bad_request", "the request could not be read"),
        _ if status.is_server_error() => ("internal", "the server failed"),
        _ => ("refused", "the request was refused"),
    };
    let mut json = json_error(status, kind, message);
    // Keep the headers the layers set (Allow on 405, Retry-After…), but not a stale length.
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            json.headers_mut().insert(name.clone(), value.clone());
        }
    }
    json
}

async fn health(State(api): State<Arc<Api>>) -> Json<serde_json::Value> {
    let chats = api.chats.clone();
    // Made on first use (it writes `.palaver/workspace-id`): off the async workers.
    let workspace_id = tokio::task::spawn_blocking(move || chats.workspace_id())
        .await
        .ok()
        .flatten();
    Json(
        serde_json::json!({"ok": true, "version": crate::VERSION, "running_tools": api.tools.running(), "workspace_id": workspace_id}),
    )
}

/// `GET /api/vault`: the secret that locks the page's remembered keys (F7), behind the token.
async fn vault_secret(State(api): State<Arc<Api>>) -> Response {
    match &api.vault {
        Some(vault) => Json(serde_json::json!({"secret": vault.encoded()})).into_response(),
        None => json_error(
            StatusCode::NOT_FOUND,
            "no_vault",
            "this palaver serve keeps no vault secret (no user config folder)",
        ),
    }
}

/// The tools, with the MCP tools version they were listed at (`x-palaver-tools-version`, read
/// before the list: a change while it is made leaves it older, never newer). The page's events
/// stream starts with that version's `hello`, which it then need not fetch this list again for.
async fn list_tools(State(api): State<Arc<Api>>) -> Response {
    let version = api.mcp.tools_version();
    let mut specs = tools::specs(&api.tools.capabilities);
    specs.extend(api.mcp.tool_specs());
    ([(TOOLS_VERSION, version.to_string())], Json(specs)).into_response()
}

/// Brotli made on the fly at quality 6: `www/`'s 67 files 122 KB against 130 KB gzipped, in
/// ~15 ms for all of them (issue 41); the layer's own default, 4, is larger than gzip (132 KB),
/// and 9 and up cost ten times the time for nothing more. Gzip stays at its level 6.
const ON_THE_FLY: i32 = 6;

fn compressed() -> CompressionLayer {
    CompressionLayer::new().quality(tower_http::CompressionLevel::Precise(ON_THE_FLY))
}

/// The header `GET /api/tools` says its tools version in (exposed to an allowed origin).
pub const TOOLS_VERSION: &str = "x-palaver-tools-version";

async fn call_tool(
    State(api): State<Arc<Api>>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let is_mcp = name.starts_with(MCP_PREFIX);
    let known = if is_mcp {
        api.mcp.settle(&name, MCP_SETTLE).await;
        api.mcp.owns(&name)
    } else {
        tools::exists(&name, &api.tools.capabilities)
    };
    if !known {
        let (status, kind) = if name == "run_command" {
            (StatusCode::FORBIDDEN, "exec_disabled")
        } else {
            (StatusCode::NOT_FOUND, "unknown_tool")
        };
        let sentence = match kind {
            "exec_disabled" => {
                "run_command is disabled; start `palaver serve --allow-shell` to allow it".into()
            }
            _ => format!("no tool `{}` here", name.escape_debug()),
        };
        return json_error(status, kind, &sentence);
    }
    let args: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(args) => args,
        Err(e) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                &format!("the body is not JSON: {e}"),
            )
        }
    };
    let wants_lines = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/x-ndjson"));
    let scanning = scan_before(&api, &name, &headers).await;
    if wants_lines && is_mcp && args.is_object() {
        return stream_mcp(api, name, args, scanning);
    }
    if wants_lines && name == "run_command" && args.is_object() {
        return stream_lines(api, &args, scanning);
    }
    let recording = match record_before(&api, &name, &headers, &args) {
        Ok(recording) => recording,
        Err(refusal) => return refusal,
    };
    let reply = if is_mcp {
        api.mcp.call(&name, args, None).await
    } else {
        tools::call(&api.tools, &name, args).await
    };
    record_after(&api, recording, !reply.is_error);
    scan_after(&api, scanning).await;
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(reply.body())).into_response()
}

/// `run_command` output as NDJSON while the program runs (`Accept: application/x-ndjson`).
fn stream_lines(api: Arc<Api>, args: &serde_json::Value, scanning: Option<Scanning>) -> Response {
    let tools = &api.tools;
    let receiver = match tools::run_streaming(&tools.workspace, &tools.capabilities, args) {
        Ok(receiver) => receiver,
        Err(reply) => {
            let status =
                StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (status, Json(reply.body())).into_response();
        }
    };
    ndjson(recorded_lines(api.clone(), scanning, receiver))
}

fn ndjson(receiver: tokio::sync::mpsc::Receiver<String>) -> Response {
    let lines = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|line| (Ok::<_, std::convert::Infallible>(line), receiver))
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/x-ndjson")],
        axum::body::Body::from_stream(lines),
    )
        .into_response()
}

/// Stops the MCP servers when `serve` returns, however it returns.
struct StopServers(Arc<McpHub>);

impl Drop for StopServers {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}
