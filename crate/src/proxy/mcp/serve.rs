//! Palaver's workspace tools as an MCP server (issue 17): `palaver mcp --workspace DIR` over
//! stdio, and `/mcp` on `palaver serve` over Streamable HTTP behind the same guard as `/api`
//! (Host, fetch metadata, Origin, token). The tools are the same code as the HTTP API's
//! (`proxy::tools::call`): the same confinement, caps and refusals; a refused path or a failed
//! tool is a tool error the client shows (`isError`), an unknown tool a protocol error.

use crate::proxy::tools::{self, Tools};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ServerHandler;
use serde_json::{json, Value};
use std::sync::Arc;

#[derive(Clone)]
pub struct PalaverTools {
    tools: Arc<Tools>,
}

impl PalaverTools {
    pub fn new(tools: Arc<Tools>) -> Self {
        PalaverTools { tools }
    }

    /// The tools in MCP's shape, with hints of what each does.
    pub fn list(&self) -> Vec<Tool> {
        tools::specs(&self.tools.capabilities)
            .into_iter()
            .filter_map(|spec| {
                let name = spec["name"].as_str().unwrap_or("").to_string();
                let tool = json!({
                    "name": name,
                    "description": spec["description"],
                    "inputSchema": spec["parameters"],
                    "annotations": annotations(&name),
                });
                serde_json::from_value(tool).ok()
            })
            .collect()
    }

    pub async fn call(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, Value>>,
    ) -> Result<CallToolResult, ErrorData> {
        if !tools::exists(name, &self.tools.capabilities) {
            return Err(ErrorData::invalid_params(
                format!("no tool named {}", name.escape_debug()),
                None,
            ));
        }
        let args = Value::Object(arguments.unwrap_or_default());
        let reply = tools::call(&self.tools, name, args).await;
        let content = vec![ContentBlock::text(reply.content.clone())];
        let mut result = if reply.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        let mut structured = serde_json::Map::new();
        if let Some(data) = reply.data {
            structured.insert("data".into(), data);
        }
        if let Some(error) = reply.error {
            structured.insert("error".into(), error);
        }
        if !structured.is_empty() {
            result.structured_content = Some(Value::Object(structured));
        }
        Ok(result)
    }
}

/// MCP's hints: which tools only read, which change files, which reach the open web.
fn annotations(name: &str) -> Value {
    match name {
        "list_dir" | "read_file" | "search" | "file_tree" => {
            json!({"readOnlyHint": true, "openWorldHint": false})
        }
        "write_file" | "edit_file" => {
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": false})
        }
        "fetch_url" => json!({"readOnlyHint": true, "openWorldHint": true}),
        _ => json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true}),
    }
}

impl ServerHandler for PalaverTools {
    fn get_info(&self) -> InitializeResult {
        let mut capabilities = ServerCapabilities::default();
        capabilities.tools = Some(Default::default());
        let mut info = InitializeResult::new(capabilities);
        info.server_info = Implementation::new("palaver", crate::VERSION);
        info.instructions = Some(
            "Palaver's workspace tools: read, search and change the files of one workspace folder (paths are relative to it and cannot leave it). Writes are atomic; run_command exists only when the server allows a shell."
                .into(),
        );
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut result = ListToolsResult::default();
        result.tools = self.list();
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(&request.name, request.arguments)
            .await
            .map(Into::into)
    }
}

/// `palaver mcp`: serves the tools of `tools` on stdin/stdout until the client closes.
pub async fn serve_stdio(tools: Arc<Tools>) -> Result<(), String> {
    use rmcp::ServiceExt;
    let server = PalaverTools::new(tools)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the MCP handshake failed: {e}"))?;
    server
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| format!("the MCP server stopped: {e}"))
}

/// At most this many `/mcp` sessions are kept (F10): a new one past it closes the oldest.
pub const MAX_SESSIONS: usize = 64;

type Manager = rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// The `/mcp` sessions in the order they began, so the oldest can be closed to make room.
pub struct Sessions {
    manager: Arc<Manager>,
    order: std::sync::Mutex<std::collections::VecDeque<Arc<str>>>,
}

impl Sessions {
    /// Closes the oldest sessions until one more fits (sessions closed by their clients or
    /// timed out are forgotten first).
    async fn make_room(&self) {
        use rmcp::transport::streamable_http_server::session::SessionManager;
        let live: std::collections::HashSet<Arc<str>> =
            self.manager.sessions.read().await.keys().cloned().collect();
        let evicted: Vec<Arc<str>> = {
            let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
            order.retain(|id| live.contains(id));
            let excess = (order.len() + 1).saturating_sub(MAX_SESSIONS);
            order.drain(..excess).collect()
        };
        for id in evicted {
            let _ = self.manager.close_session(&id).await;
        }
    }

    fn began(&self, id: &str) {
        self.order
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(Arc::from(id));
    }
}

/// The guard's middleware for `/mcp`: a request without a session id starts one (an
/// `initialize`), so room is made first and its id remembered after.
pub async fn cap_sessions(
    axum::extract::State(sessions): axum::extract::State<Arc<Sessions>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let starts = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if starts {
        sessions.make_room().await;
    }
    let response = next.run(request).await;
    if starts {
        if let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            sessions.began(id);
        }
    }
    response
}

/// `/mcp` on `palaver serve`: the Streamable HTTP endpoint (its guard is the server's), and its
/// sessions, capped by `cap_sessions`.
pub fn http_service(
    tools: Arc<Tools>,
    port: u16,
) -> (
    rmcp::transport::streamable_http_server::StreamableHttpService<PalaverTools, Manager>,
    Arc<Sessions>,
) {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut config = StreamableHttpServerConfig::default();
    // The server's own guard checks Host and Origin first; rmcp checks them again.
    config.allowed_hosts = vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "127.0.0.1".into(),
        "localhost".into(),
    ];
    let manager = Arc::new(Manager::default());
    let service = StreamableHttpService::new(
        move || Ok(PalaverTools::new(tools.clone())),
        manager.clone(),
        config,
    );
    let sessions = Arc::new(Sessions {
        manager,
        order: std::sync::Mutex::new(std::collections::VecDeque::new()),
    });
    (service, sessions)
}
