//! `ContextBench` for JS: the context pipeline's steps on one loaded trajectory, so the bench
//! page and `scripts/bench-context.sh` can time each in wasm (SPEC §5, issue 4's benchmark).

use super::js_error;
use crate::history_limit::{history_budget, limit_history};
use crate::message::ChatMessage;
use crate::prompt::WorkspaceContext;
use crate::provider::ProviderKind;
use crate::request::{build_request, ProviderConfig, RequestInput};
use crate::thread::ThreadParams;
use crate::tools::{engine_tool_specs, ToolSpec};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(js_name = ContextBench)]
pub struct WasmContextBench {
    messages: Vec<ChatMessage>,
}

#[wasm_bindgen(js_class = ContextBench)]
impl WasmContextBench {
    /// Loads a trajectory (JSON text) tolerantly, as the engine opens a stored chat (the host
    /// gives it the stored text: `trajectory::load_text`); throws `BadInput` when it cannot.
    #[wasm_bindgen(constructor)]
    pub fn new(trajectory_json: &js_sys::JsString) -> Result<WasmContextBench, JsValue> {
        // The text crosses as the host's stored chats do (`text_of`), so the boundary is timed too.
        let text = super::text_of(trajectory_json).unwrap_or_default();
        let loaded = crate::trajectory::load_text("bench", &text)
            .map_err(|e| js_error("BadInput", &e.to_string()))?;
        Ok(WasmContextBench {
            messages: loaded.messages,
        })
    }

    /// The load through a parsed `Value` (`trajectory::load`, the path the engine took before
    /// issue 20, and still what an imported trajectory given as a value takes): the message count.
    #[wasm_bindgen(js_name = loadViaValue)]
    pub fn load_via_value(trajectory_json: &str) -> Result<usize, JsValue> {
        let value: serde_json::Value = serde_json::from_str(trajectory_json)
            .map_err(|e| js_error("BadInput", &e.to_string()))?;
        crate::trajectory::load("bench", &value)
            .map(|loaded| loaded.messages.len())
            .map_err(|e| js_error("BadInput", &e.to_string()))
    }

    /// The reference: `serde_json::Value` parsing alone, in the same wasm.
    #[wasm_bindgen(js_name = parseValue)]
    pub fn parse_value(trajectory_json: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(trajectory_json).is_ok()
    }

    #[wasm_bindgen(js_name = messageCount)]
    pub fn message_count(&self) -> usize {
        self.messages.len()
    }

    /// The always-on fix stage alone; returns the repairs made.
    pub fn repair(&self) -> usize {
        limit_history(&self.messages, None).map_or(0, |l| l.repairs)
    }

    /// The four stages for a context of `n_ctx` tokens; returns the messages left (0: too large).
    pub fn compress(&self, n_ctx: f64) -> usize {
        let budget = history_budget(n_ctx as u64, None, 2000);
        limit_history(&self.messages, Some(budget)).map_or(0, |l| l.messages.len())
    }

    /// History limit + linearize + body for `kind`; returns the body's length in bytes.
    pub fn request(&self, kind: &str, n_ctx: f64) -> Result<usize, JsValue> {
        let tools = engine_tool_specs();
        self.body_length(kind, n_ctx, "You are Palaver.", &tools, None)
    }

    /// The whole request as a chat in a workspace sends it (issue 41, goal 6): the engine's tools
    /// and the workspace's and MCP servers' (`tools_json`, as `GET /api/tools` lists them), the
    /// agent's system prompt with the workspace context (`context_json`, as the page reads it:
    /// the repository map, the file list, the instruction files, the date), laid out in stability
    /// tiers from a fresh tracker. Returns `[body bytes, system prompt characters, tools]`.
    #[wasm_bindgen(js_name = requestWithPrompt)]
    pub fn request_with_prompt(
        &self,
        kind: &str,
        n_ctx: f64,
        tools_json: &str,
        context_json: &str,
    ) -> Result<Vec<usize>, JsValue> {
        let mut tools = engine_tool_specs();
        let workspace: Vec<ToolSpec> = serde_json::from_str(tools_json)
            .map_err(|e| js_error("BadInput", &format!("tools: {e}")))?;
        tools.extend(workspace);
        let context: WorkspaceContext = serde_json::from_str(context_json)
            .map_err(|e| js_error("BadInput", &format!("workspace context: {e}")))?;
        let prompt = crate::prompt::assemble(None, &context);
        let tracker = crate::stability::Tracker::default();
        let body = self.body_length(kind, n_ctx, &prompt, &tools, Some(&tracker))?;
        Ok(vec![body, prompt.chars().count(), tools.len()])
    }

    fn body_length(
        &self,
        kind: &str,
        n_ctx: f64,
        system_prompt: &str,
        tools: &[ToolSpec],
        tiers: Option<&crate::stability::Tracker>,
    ) -> Result<usize, JsValue> {
        let kind = ProviderKind::parse(kind)
            .ok_or_else(|| js_error("BadConfig", &format!("unknown provider kind {kind}")))?;
        let provider = ProviderConfig {
            kind,
            base_url: "https://provider.invalid/v1".into(),
            model: "m".into(),
            headers: Default::default(),
            ..Default::default()
        };
        let thread = ThreadParams {
            provider: kind,
            ..ThreadParams::default()
        };
        build_request(&RequestInput {
            provider: &provider,
            thread: &thread,
            system_prompt: Some(system_prompt),
            tools,
            history: &self.messages,
            budget: Some(history_budget(n_ctx as u64, None, 2000)),
            tiers,
        })
        .map(|r| r.body.len())
        .map_err(|e| js_error("TooLarge", &e.to_string()))
    }
}
