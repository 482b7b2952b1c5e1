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
        tools::specs(&self.tools.policy)
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
        if !tools::exists(name, &self.tools.policy) {
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

/// `/mcp` on `palaver serve`: the Streamable HTTP endpoint (its guard is the server's).
pub fn http_service(
    tools: Arc<Tools>,
    port: u16,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    PalaverTools,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut config = StreamableHttpServerConfig::default();
    // The server's own guard checks Host and Origin first; rmcp checks them again.
    config.allowed_hosts = vec![
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "127.0.0.1".into(),
        "localhost".into(),
    ];
    StreamableHttpService::new(
        move || Ok(PalaverTools::new(tools.clone())),
        LocalSessionManager::default().into(),
        config,
    )
}
