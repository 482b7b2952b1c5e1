//! The browser host (wasm32 only). The thin facade of GUIDE §5: the JS class `Engine` over the
//! sans-IO core — create it with a config, feed it inputs, read snapshots — and the host
//! `Palaver` (`host.rs`); with the `bench` feature (the benchmarks' build only) also
//! `StreamAssembly` (one provider stream decoded outside the engine) and `ContextBench`. Values cross
//! the boundary as plain JSON-compatible objects; the TypeScript types are declared once below.
//! Domain errors travel inside events as data; only a malformed JS value throws, as a JS `Error`
//! whose `name` says the kind (`BadConfig`, `BadInput`).

#[cfg(feature = "bench")]
mod bench;
mod browser;
mod chat_files;
mod chat_list;
mod crossing;
#[cfg(feature = "bench")]
mod decoder;
mod driver;
pub mod host;
pub mod idb;
mod message_search;
mod outbox;
mod ownership;
mod packed;
mod shared;
mod storage;
mod streams;
mod subscribers;
mod sync;
mod tabs;
mod tool_calls;

use crate::engine::{Bytes, Engine, EngineConfig, Input, Step};
use crossing::{from_js, js_error, text_of, to_js};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
/** A provider endpoint without its key; the host adds the auth header. */
export interface ProviderConfig { kind: "openai-chat" | "anthropic" | "gemini" | "openai-responses" | "local"; base_url: string; model: string; headers?: Record<string, string>; n_ctx?: number; max_tokens?: number; temperature?: number; reasoning_effort?: "low" | "medium" | "high"; thinking_budget?: number; max_output_tokens?: number; input_modalities?: string[]; tool_use?: boolean; edit_blocks?: boolean; return_progress?: boolean; }
/** What the host learned about the workspace for the system prompt (`Engine.assembleSystemPrompt`). */
export interface WorkspaceContext { instructions?: { path: string; text: string }[]; files?: string[]; files_truncated?: boolean; date?: string; repo_map?: string; }
export interface Proposals { blocks: { path: string; search: string; replace: string; complete: boolean }[]; shell_commands: string[]; }
export interface ToolSpec { name: string; description?: string; parameters?: object; annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; title?: string }; trust_annotations?: boolean; mcp?: { server: string; tool: string; title?: string }; }
/** An approval rule (SPEC §8.4). */
export type ToolRule = "auto" | "ask" | "deny";
export interface EngineConfig { id_prefix?: string; stall_timeout_ms?: number; providers?: ProviderConfig[]; system_prompt?: string; workspace_tools?: ToolSpec[]; host_tools?: ToolSpec[]; retry_seed?: number; default_n_ctx?: number; retry?: { max_attempts?: number; base_ms?: number }; first_byte_timeout_ms?: number; compact_at?: number | null; tool_rules?: Record<string, ToolRule>; active_provider?: ProviderConfig["kind"] | null; fallback_models?: { provider: ProviderConfig["kind"]; model: string }[]; chat_prompt?: string | null; chat_workspace_prompt?: string | null; edit_blocks_prompt?: string | null; }
/** The error classes of SECURITY D24, in `runtime.error.class` and `runtime.retry.class`. */
export type ErrorClass = "overloaded" | "rate_limited" | "quota" | "auth" | "network" | "truncated" | "idle_timeout" | "first_byte_timeout" | "request_too_large" | "bad_request" | "server_error" | "malformed" | "unsupported" | "other";
/** One input to `Engine.handle`; `input` names the variant (SPEC §0, ARCHITECTURE.md). */
export type Input =
  | { input: "open_chat"; chat_id: string; trajectory?: unknown; stored?: { message_id: string; position: number }[] }
  | { input: "close_chat"; chat_id: string }
  | { input: "reload_chat"; chat_id: string; trajectory: unknown; stored?: { message_id: string; position: number }[] }
  | { input: "command"; chat_id: string; command: { type: string; client_request_id: string; priority?: boolean; [key: string]: unknown } }
  | { input: "stream_bytes"; request_id: string; bytes: string | number[] }
  | { input: "stream_end"; request_id: string }
  | { input: "request_failed"; request_id: string; status?: number; error_type?: string; message?: string; retry_after_ms?: number; headers?: Record<string, string>; context_window?: number; prompt_tokens?: number }
  | { input: "tool_result"; chat_id: string; tool_call_id: string; content: string; tool_failed?: boolean; data?: unknown; session_metadata?: Record<string, unknown>; parts?: unknown[] }
  | { input: "tool_progress"; chat_id: string; tool_call_id: string; stream?: string; text: string }
  | { input: "save_acked"; chat_id: string; version: number }
  | { input: "save_failed"; chat_id: string; version: number; reason?: string }
  | { input: "tick" };
export interface EventEnvelope { chat_id: string; seq: number; type: string; [key: string]: unknown; }
/** `runtime` in a snapshot and in `runtime_updated` (SPEC §2, §3.1): what the page shows, never re-derived. */
export interface Runtime {
  state: "idle" | "generating" | "executing_tools" | "paused" | "waiting_ide" | "waiting_user_input" | "completed" | "error";
  /** A turn is under way: Stop instead of Send, a message now is queued. */
  busy: boolean;
  error?: { kind: string; code: string; message: string; retryable: boolean; class: ErrorClass; attempts?: number; source?: "provider" | "app" | "connection" };
  pause_reasons: { tool_call_id: string; tool_name: string; args: unknown; rule: string }[];
  queue_size: number;
  queued_items: { client_request_id: string; type: string; priority: boolean; preview?: string }[];
  queue_held?: boolean;
  /** The gauge: the history's estimate, the window, and the answer streaming now (`draft_tokens`, also in `stream_delta`). */
  context_usage: { estimated_tokens: number; n_ctx: number; message_count: number; pressure: number; draft_tokens: number; learned?: boolean; output_tokens: number; left_out?: { dropped: number; shortened: number } };
  is_compressing: boolean;
  compression_phase?: "checking" | "running" | "applied" | "skipped" | "failed";
  compression_reason?: string;
  storage_error?: string;
  compression_strength?: string;
  retry?: { attempt: number; max_attempts: number; at_ms?: number; class: ErrorClass; code: string; message: string };
  /** The plan as it stands: base, version and its updates as `[seq, note]`. */
  plan?: { message_id: string; mode: string; version: number; body: string; updates: [number, string][] };
  /** In `waiting_user_input`: the questions of the `ask_questions` call the turn waits on. */
  questions?: string[];
  /** The subagents this chat started, as they stand (the subagent tree). */
  subagents?: { chat_id: string; title: string; task: string; tool_call_id: string; status: "queued" | "running" | "paused" | "waiting" | "done" | "failed" | "stopped"; model: string; tokens: number; started_at_ms: number; ended_at_ms?: number; pause_reasons?: { tool_call_id: string; tool_name: string; args: unknown; rule: string }[] }[];
  /** In `waiting_user_input` after `wait_agents`: the subagents the turn waits for. */
  waiting_for_agents?: string[];
  /** The turn's phase (also in `stream_delta`). */
  phase: "thinking" | "streaming" | "working" | "compacting" | "done";
  /** What the user can do now: the page offers exactly these. */
  offers: ("send" | "queue" | "stop" | "regenerate" | "answer" | "approve" | "reject" | "resume_queue")[];
  /** The current turn's tool calls and where each stands. */
  tool_calls?: { id: string; name: string; status: "pending" | "queued" | "running" | "awaiting_approval" | "waiting_host" | "done" | "failed" | "denied" | "rejected" | "skipped" | "stopped" }[];
  /** The model the next request asks (the chat's pinned one, else Settings'). */
  model?: { provider: ProviderConfig["kind"]; model: string };
  /** What the next request carries: the agent's prompt and tools, or a plain chat's. */
  prompt_profile?: "agent" | "chat" | "edit_blocks";
  /** While `thinking`: how far the server has read the prompt, where it says (llama.cpp). */
  prompt_progress?: { processed: number; total: number };
  /** The last request's stability tiers: estimated tokens of each, the most stable tier it changed, and what moved after it. */
  prompt_tiers?: { l0: number; l1: number; l2: number; l3: number; active: number; broken: "L0" | "L1" | "L2" | "L3" | null; promoted: number; demoted: number; removed: number };
}
export type Effect =
  | { effect: "start_request"; chat_id: string; request_id: string; purpose: "chat" | "compaction"; request: { provider: string; url: string; headers: Record<string, string>; body: unknown } }
  | { effect: "cancel_request"; request_id: string }
  | { effect: "run_tool"; chat_id: string; tool_call_id: string; name: string; args: unknown }
  | { effect: "cancel_tool"; chat_id: string; tool_call_id: string }
  | { effect: "run_host_tool"; chat_id: string; tool_call_id: string; name: string; args: unknown }
  | { effect: "save_trajectory"; save: { chat_id: string; version: number; message_count: number; thread?: unknown; upserts: { index: number; position: number; message: unknown }[]; removed: string[] } }
  | { effect: "wake_at"; at_ms: number };
export interface Step { events: EventEnvelope[]; effects: Effect[]; errors?: unknown[]; }
/** A command for `Palaver.send` (SPEC §2.3); `client_request_id` is added when missing. */
export interface Command { type: string; client_request_id?: string; priority?: boolean; [key: string]: unknown; }
/** `Palaver.listChats()`: stored chats, newest first. */
export interface ChatSummary { id: string; title: string; message_count: number; updated_at: number; parent_id?: string | null; root_chat_id?: string | null; link_type?: string | null; [key: string]: unknown; }
/** `Palaver.tabRole(chatId)`: whether this tab owns the chat, follows another tab, or has it closed. */
/** `Palaver.thread`: a chat's params. */ export interface ThreadParams { title?: string; composer_draft?: string; [key: string]: unknown; }
export interface TabRole { role: "owner" | "follower" | "closed"; note: string | null; }
/** `Palaver.storageStatus()`. */
export interface StorageStatus { persisted: boolean | null; usage: number | null; quota: number | null; near_quota: boolean; data_lost: boolean; tabs_note: string | null; }
/** The last screen of a stored chat (`peekChat`): its newest messages as stored, in order. */
export interface ChatPeek { chat_id: string; title: string; message_count: number; messages: { message_id?: string; role?: string; [key: string]: unknown }[]; }
/** Search inside messages (`searchMessages`, issue 38): the hits, and whether the limit cut them. */
export interface MessageSearch { hits: { chat_id: string; message_id: string; role: string; line: string }[]; more: boolean; }
/** Where a chat's workspace copy stands (`workspaceCopy`, issue 21). */
/** Sync through CouchDB (issue 21). `state`: off, connecting, pushing, pulling, live, retrying, offline or stopped. */
export interface SyncStatus { state: string; error?: { code: "unauthorized" | "forbidden" | "not_couch_db" | "no_database" | "server" | "network" | "storage"; message: string }; retry_at?: number; pushed: number; pulled: number; synced_at?: number; }
export type WorkspaceCopy = { state: "off" | "pending" | "current" | "conflict" | "other_workspace" } | { state: "failed"; error: string };
/** `Palaver.onChatsChanged`: what changed in the chat list. */
export interface ChatsChanged { changed: ChatSummary[]; deleted: string[]; }
/** `workspaceChats()`: the chats kept in `.palaver/chats/`. */
export interface WorkspaceChats { enabled: boolean; chats: { id: string; bytes: number; modified_ms: number }[]; skipped: string[]; }
/** `Palaver.lastRequest(chatId)`: the request as sent, the auth header's value `[redacted]`. */
export interface LastRequest { provider: string; url: string; headers: Record<string, string>; body: unknown; }
"#;

/// A `stream_bytes` input whose `bytes` is a `Uint8Array` (which `JSON.stringify` would turn into
/// an object of indexes), read directly.
fn stream_bytes_input(input: &JsValue) -> Option<Input> {
    let field = |name: &str| js_sys::Reflect::get(input, &JsValue::from_str(name)).ok();
    if field("input")?.as_string()? != "stream_bytes" {
        return None;
    }
    let bytes = field("bytes")?.dyn_into::<js_sys::Uint8Array>().ok()?;
    Some(Input::StreamBytes {
        request_id: field("request_id")?.as_string()?,
        bytes: Bytes(bytes.to_vec()),
    })
}

/// A `WorkspaceContext` from JS (`undefined`: an empty one); `BadInput` when it does not parse.
fn workspace_context(context: &JsValue) -> Result<crate::prompt::WorkspaceContext, JsValue> {
    if context.is_undefined() || context.is_null() {
        return Ok(Default::default());
    }
    from_js(context).map_err(|e| js_error("BadInput", &e))
}

/// The engine, as JS sees it.
#[wasm_bindgen(js_name = Engine)]
pub struct WasmEngine {
    engine: Engine,
}

#[wasm_bindgen(js_class = Engine)]
impl WasmEngine {
    /// `new Engine(config)`; throws `BadConfig` when the config does not parse.
    #[wasm_bindgen(constructor)]
    pub fn new(config: JsValue) -> Result<WasmEngine, JsValue> {
        let config: EngineConfig = if config.is_undefined() || config.is_null() {
            EngineConfig::default()
        } else {
            from_js(&config).map_err(|e| js_error("BadConfig", &e))?
        };
        Ok(WasmEngine {
            engine: Engine::new(config),
        })
    }

    /// Handles one input at time `now` (ms); returns the `Step`. Throws `BadInput` when the value
    /// is not an input.
    #[wasm_bindgen(unchecked_return_type = "Step")]
    pub fn handle(
        &mut self,
        now: f64,
        #[wasm_bindgen(unchecked_param_type = "Input")] input: JsValue,
    ) -> Result<JsValue, JsValue> {
        let input = match stream_bytes_input(&input) {
            Some(input) => input,
            None => from_js(&input).map_err(|e| js_error("BadInput", &e))?,
        };
        self.step(now, input)
    }

    /// Stream bytes straight from a `fetch` body reader, without a JSON detour.
    #[wasm_bindgen(js_name = streamBytes, unchecked_return_type = "Step")]
    pub fn stream_bytes(
        &mut self,
        now: f64,
        request_id: String,
        bytes: &[u8],
    ) -> Result<JsValue, JsValue> {
        self.step(
            now,
            Input::StreamBytes {
                request_id,
                bytes: Bytes(bytes.to_vec()),
            },
        )
    }

    /// The snapshot a new subscriber starts from, or `undefined` for an unknown chat.
    #[wasm_bindgen(unchecked_return_type = "EventEnvelope | undefined")]
    pub fn snapshot(&self, chat_id: &str) -> Result<JsValue, JsValue> {
        match self.engine.snapshot(chat_id) {
            Some(snapshot) => to_js(&snapshot),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// The engine version.
    pub fn version() -> String {
        crate::VERSION.to_string()
    }

    /// The workspace tools and the offered ones (`tools`: what `palaver serve` lists, MCP
    /// servers' tools among them) with their default approval rules (SPEC §8.4),
    /// `{tool: "auto"|"ask"}`: what the settings page lists and pre-selects.
    /// The answer limit every request carries by default for a model with the window `nCtx` (and
    /// its own limit, when the provider says one): what Settings show beside "Max output tokens".
    #[wasm_bindgen(js_name = defaultOutputTokens)]
    pub fn default_output_tokens(n_ctx: f64, model_limit: Option<f64>) -> f64 {
        let config = crate::request::ProviderConfig {
            max_output_tokens: model_limit.filter(|v| *v >= 1.0).map(|v| v as u64),
            ..Default::default()
        };
        config.output_tokens(
            &crate::thread::ThreadParams::default(),
            n_ctx.max(1.0) as u64,
        ) as f64
    }

    #[wasm_bindgen(js_name = defaultToolRules)]
    pub fn default_tool_rules(
        #[wasm_bindgen(unchecked_param_type = "ToolSpec[] | undefined")] tools: JsValue,
    ) -> Result<JsValue, JsValue> {
        let offered: Vec<crate::tools::ToolSpec> = if tools.is_undefined() || tools.is_null() {
            Vec::new()
        } else {
            from_js(&tools).map_err(|e| js_error("BadInput", &e))?
        };
        let rule = |name: &str, read_only: bool| {
            serde_json::to_value(crate::thread::default_rule(name, read_only))
                .unwrap_or(serde_json::Value::Null)
        };
        let mut rules: serde_json::Map<String, serde_json::Value> = crate::tools::WORKSPACE_TOOLS
            .iter()
            .map(|tool| (tool.to_string(), rule(tool, false)))
            .collect();
        for spec in &offered {
            rules.insert(spec.name.clone(), rule(&spec.name, spec.is_read_only()));
        }
        to_js(&serde_json::Value::Object(rules))
    }

    /// The agent prompt used when the user sets none (Settings shows it as the starting text).
    #[wasm_bindgen(js_name = defaultAgentPrompt)]
    pub fn default_agent_prompt() -> String {
        crate::prompt::DEFAULT_AGENT_PROMPT.to_string()
    }

    /// The instruction files looked for in a workspace, in order, then the README fallback.
    #[wasm_bindgen(js_name = instructionFiles, unchecked_return_type = "string[]")]
    pub fn instruction_files() -> Result<JsValue, JsValue> {
        let mut files: Vec<&str> = crate::prompt::INSTRUCTION_FILES.to_vec();
        files.push(crate::prompt::README_FALLBACK);
        to_js(&files)
    }

    /// The plain chat's system prompt (no tools): the chat prompt, the workspace context only
    /// `withWorkspace`, the date.
    #[wasm_bindgen(js_name = assembleChatPrompt)]
    pub fn assemble_chat_prompt(
        #[wasm_bindgen(unchecked_param_type = "WorkspaceContext")] context: JsValue,
        with_workspace: bool,
    ) -> Result<String, JsValue> {
        let context = workspace_context(&context)?;
        Ok(crate::prompt::assemble_chat(&context, with_workspace))
    }

    /// The prompt of a model that changes files with edit blocks: the plain chat's prompt with
    /// the workspace, then the block format (issue 40).
    #[wasm_bindgen(js_name = assembleEditBlocksPrompt)]
    pub fn assemble_edit_blocks_prompt(
        #[wasm_bindgen(unchecked_param_type = "WorkspaceContext")] context: JsValue,
    ) -> Result<String, JsValue> {
        let context = workspace_context(&context)?;
        Ok(crate::prompt::assemble_edit_blocks(&context))
    }

    /// What an answer proposes (issue 40): `{blocks: [{path, search, replace, complete}],
    /// shell_commands}`, read as the engine reads it when the user applies one.
    #[wasm_bindgen(js_name = editBlocks, unchecked_return_type = "Proposals")]
    pub fn edit_blocks(text: &str) -> Result<JsValue, JsValue> {
        to_js(&crate::edit_blocks::parse(text))
    }

    /// The system prompt: the agent prompt (empty: the default) and the workspace context
    /// (instruction files, the flat sorted file tree, the date), capped (SPEC §7).
    #[wasm_bindgen(js_name = assembleSystemPrompt)]
    pub fn assemble_system_prompt(
        agent_prompt: Option<String>,
        #[wasm_bindgen(unchecked_param_type = "WorkspaceContext")] context: JsValue,
    ) -> Result<String, JsValue> {
        let context = workspace_context(&context)?;
        Ok(crate::prompt::assemble(agent_prompt.as_deref(), &context))
    }

    fn step(&mut self, now: f64, input: Input) -> Result<JsValue, JsValue> {
        let now = if now.is_finite() && now > 0.0 {
            now as u64
        } else {
            0
        };
        let step: Step = self.engine.handle(now, input);
        to_js(&step)
    }
}
