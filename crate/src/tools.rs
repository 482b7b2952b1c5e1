//! Tools (SPEC §8): which kind each tool is, the engine tools' schemas and what they do, and the
//! tool step of a round — which calls wait for approval, run, or already have their result.
//!
//! Invariant: results are added to the history in call order, whatever order they arrive in, and
//! a hidden message produced during the step (a decision, a plan change) goes after all of them.

use crate::message::{ChatMessage, Role, ToolCall};
use litemap::LiteMap;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeSet, VecDeque};

/// At most this many workspace tools run at once.
pub const MAX_PARALLEL_TOOLS: usize = 8;
pub const DENIED_BY_USER: &str = "Tool call denied by user.";
pub const SKIPPED_AFTER_REJECT: &str = "Skipped: a related tool call was rejected.";
pub const DENIED_BY_POLICY: &str = "Tool call denied by policy.";

pub const WORKSPACE_TOOLS: [&str; 9] = [
    "list_dir",
    "read_file",
    "write_file",
    "edit_file",
    "search",
    "file_tree",
    "repo_map",
    "run_command",
    "fetch_url",
];

/// The names of MCP servers' tools as `palaver serve` offers them: `mcp__{server}__{tool}`.
pub const MCP_PREFIX: &str = "mcp__";

/// A tool as announced to the model.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// What the tool's server says of it (MCP annotations: `readOnlyHint`, …); never sent to a
    /// provider, read for the default approval rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Whether the user trusts the server's annotations (`trust_annotations` in their MCP config,
    /// SECURITY F8): only then does `readOnlyHint` make the tool auto-approved by default.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trust_annotations: bool,
}

impl ToolSpec {
    pub fn new(name: &str, description: &str, parameters: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
            annotations: None,
            trust_annotations: false,
        }
    }

    /// A server the user trusts says the tool only reads (MCP `readOnlyHint: true`).
    pub fn is_read_only(&self) -> bool {
        self.trust_annotations
            && self
                .annotations
                .as_ref()
                .and_then(|a| a.get("readOnlyHint"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
    }
}

fn empty_object_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Runs inside the core.
    Engine(EngineTool),
    /// Runs in `palaver serve`, through a `run_tool` effect.
    Workspace,
    /// Runs in the page; announced with `ide_tool_required`.
    Host,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineTool {
    AskQuestions,
    TaskDone,
    SetPlan,
    UpdatePlan,
    GetPlan,
    /// Starts a subagent: a child chat with its own turn loop (issue 18).
    SpawnAgent,
    /// Waits for subagents started without waiting.
    WaitAgents,
}

impl EngineTool {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "ask_questions" => Some(EngineTool::AskQuestions),
            "task_done" => Some(EngineTool::TaskDone),
            "set_plan" => Some(EngineTool::SetPlan),
            "update_plan" => Some(EngineTool::UpdatePlan),
            "get_plan" => Some(EngineTool::GetPlan),
            "spawn_agent" => Some(EngineTool::SpawnAgent),
            "wait_agents" => Some(EngineTool::WaitAgents),
            _ => None,
        }
    }
}

/// The engine tools' schemas, announced in every request.
pub fn engine_tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "set_plan",
            "Write the plan for this task (once; later changes go through update_plan). At most 96 KiB of text.",
            json!({"type": "object", "properties": {"content": {"type": "string", "description": "The plan, as Markdown."}, "summary": {"type": "string", "description": "One line for the user."}}, "required": ["content"]}),
        ),
        ToolSpec::new(
            "update_plan",
            "Record a change or progress on the plan (a note, at most 16 KiB).",
            json!({"type": "object", "properties": {"note": {"type": "string", "description": "What changed or was done."}, "summary": {"type": "string", "description": "One line for the user."}}, "required": ["note"]}),
        ),
        ToolSpec::new(
            "get_plan",
            "Read the current plan with all its updates.",
            json!({"type": "object", "properties": {}}),
        ),
        ToolSpec::new(
            "ask_questions",
            "Ask the user one or more questions and wait for the answer.",
            json!({"type": "object", "properties": {"questions": {"type": "array", "items": {"type": "string"}}}, "required": ["questions"]}),
        ),
        ToolSpec::new(
            "task_done",
            "Declare the task finished, with a short summary for the user.",
            json!({"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}),
        ),
        ToolSpec::new(
            "spawn_agent",
            "Start a subagent: another agent with its own chat and tool loop that does one task and answers with the result. By default you wait for its answer; with wait: false it runs while you go on, and wait_agents collects its answer. Give it a self-contained task.",
            json!({"type": "object", "properties": {
                "task": {"type": "string", "description": "What the subagent must do and answer, self-contained."},
                "title": {"type": "string", "description": "A short name for its chat."},
                "tools": {"type": "array", "items": {"type": "string"}, "description": "The tools it may use (a subset of yours); all of yours when absent."},
                "model": {"type": "string", "description": "The model to answer with (the same provider); yours when absent."},
                "wait": {"type": "boolean", "description": "Wait for its answer (default true)."}
            }, "required": ["task"]}),
        ),
        ToolSpec::new(
            "wait_agents",
            "Wait for subagents started with wait: false, and get their answers. Without agent_ids, waits for all of them.",
            json!({"type": "object", "properties": {"agent_ids": {"type": "array", "items": {"type": "string"}}}}),
        ),
    ]
}

/// What running an engine tool did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepStop {
    /// `task_done`: the turn ends `completed`.
    Completed,
    /// `ask_questions`: the turn waits for the user's answer.
    AskUser,
    /// `wait_agents`: the turn waits for subagents (`ToolStep::waiting_agents`).
    WaitAgents,
}

/// Runs `ask_questions` or `task_done`; the plan tools need the history and run in the step.
pub fn run_engine_tool(tool: EngineTool, args: &Value) -> (ToolOutcome, Option<StepStop>) {
    match tool {
        EngineTool::SetPlan | EngineTool::UpdatePlan | EngineTool::GetPlan => (
            ToolOutcome::failed("plan tools run with the chat's history"),
            None,
        ),
        EngineTool::SpawnAgent | EngineTool::WaitAgents => (
            ToolOutcome::failed("subagent tools run in the engine"),
            None,
        ),
        EngineTool::TaskDone => {
            let summary = args.get("summary").and_then(Value::as_str).unwrap_or("");
            (
                ToolOutcome::ok(
                    format!("Task marked as done. {summary}")
                        .trim_end()
                        .to_string(),
                ),
                Some(StepStop::Completed),
            )
        }
        EngineTool::AskQuestions => (
            ToolOutcome::ok(
                "The questions were shown to the user; the answer comes as the next user message."
                    .into(),
            ),
            Some(StepStop::AskUser),
        ),
    }
}

/// The questions of the last `ask_questions` call since the last user message (what the turn
/// waits on in `waiting_user_input`); `None` when there is none. A question that is not a
/// string is shown as its JSON; arguments that do not parse give no questions.
pub fn pending_questions(history: &[ChatMessage]) -> Option<Vec<String>> {
    for message in history.iter().rev() {
        if message.role == Role::User {
            return None;
        }
        let Some(call) = message
            .tool_calls()
            .iter()
            .find(|c| c.function.name == "ask_questions")
        else {
            continue;
        };
        let args: Value = serde_json::from_str(&call.function.arguments).unwrap_or(Value::Null);
        let text = |q: &Value| q.as_str().map_or_else(|| q.to_string(), str::to_string);
        return Some(match args.get("questions") {
            Some(Value::Array(list)) => list.iter().map(text).collect(),
            Some(Value::Null) | None => Vec::new(),
            Some(one) => vec![text(one)],
        });
    }
    None
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub content: String,
    pub failed: bool,
    pub data: Option<Value>,
    /// Merged into the thread when the result is added (SPEC §8.3).
    pub session_metadata: Option<serde_json::Map<String, Value>>,
    /// Image parts beside the text (an MCP tool's images).
    pub parts: Vec<Value>,
}

impl ToolOutcome {
    pub fn ok(content: String) -> Self {
        ToolOutcome {
            content,
            failed: false,
            data: None,
            session_metadata: None,
            parts: Vec::new(),
        }
    }

    pub fn failed(content: impl Into<String>) -> Self {
        ToolOutcome {
            content: content.into(),
            failed: true,
            data: None,
            session_metadata: None,
            parts: Vec::new(),
        }
    }
}

/// The tool calls of one round, from the assistant message that made them to their results.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolStep {
    pub round: u32,
    pub assistant_message_id: String,
    pub calls: Vec<ToolCall>,
    pub results: LiteMap<String, ToolOutcome>,
    /// `ask` calls the user has not decided yet.
    pub awaiting_approval: BTreeSet<String>,
    /// Approved calls not started yet (the parallelism cap holds them back).
    pub to_run: VecDeque<String>,
    pub in_flight: BTreeSet<String>,
    /// Host tools announced with `ide_tool_required`, not answered yet.
    pub waiting_host: BTreeSet<String>,
    /// Hidden messages produced during the step; added after all the results.
    pub hidden: Vec<ChatMessage>,
    pub stop: Option<StepStop>,
    /// With `StepStop::WaitAgents`: the subagents the turn then waits for.
    pub waiting_agents: Vec<String>,
    /// `spawn_agent` / `wait_agents` calls the engine has not answered yet.
    pub awaiting_agents: BTreeSet<String>,
}

impl ToolStep {
    pub fn call(&self, id: &str) -> Option<&ToolCall> {
        self.calls.iter().find(|call| call.id == id)
    }

    pub fn is_complete(&self) -> bool {
        self.calls
            .iter()
            .all(|call| self.results.contains_key(&call.id))
    }

    pub fn record(&mut self, id: &str, outcome: ToolOutcome) {
        self.in_flight.remove(id);
        self.waiting_host.remove(id);
        self.awaiting_agents.remove(id);
        self.results.entry(id.to_string()).or_insert(outcome);
    }

    /// Every call without a result gets `outcome`; used when a rejection ends the step.
    pub fn settle_remaining(&mut self, outcome: &ToolOutcome) {
        let open: Vec<String> = self
            .calls
            .iter()
            .filter(|c| !self.results.contains_key(&c.id))
            .map(|c| c.id.clone())
            .collect();
        for id in open {
            self.record(&id, outcome.clone());
        }
        self.awaiting_approval.clear();
        self.to_run.clear();
    }
}

/// Parses a call's arguments; only a JSON object is a valid argument list.
pub fn parse_arguments(call: &ToolCall) -> Result<Value, String> {
    let text = if call.function.arguments.trim().is_empty() {
        "{}"
    } else {
        call.function.arguments.as_str()
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err(format!(
            "The arguments of `{}` are not a JSON object.",
            call.function.name
        )),
        Err(e) => Err(format!(
            "The arguments of `{}` are not valid JSON: {e}",
            call.function.name
        )),
    }
}

/// What a session's engine tools ask of the engine.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentRequest {
    Spawn {
        call_id: String,
        task: String,
        title: Option<String>,
        tools: Option<Vec<String>>,
        model: Option<String>,
        wait: bool,
    },
    Wait {
        call_id: String,
        agent_ids: Vec<String>,
    },
}

impl AgentRequest {
    /// Reads a `spawn_agent` call's arguments; a task is required.
    pub fn spawn(call_id: &str, args: &Value) -> Result<AgentRequest, String> {
        let task = args
            .get("task")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or("spawn_agent needs a `task`: what the subagent must do and answer.")?;
        let tools = match args.get("tools") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|t| t.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("spawn_agent's `tools` must be a list of tool names.")?,
            ),
            Some(_) => return Err("spawn_agent's `tools` must be a list of tool names.".into()),
        };
        let text = |key: &str| {
            args.get(key)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Ok(AgentRequest::Spawn {
            call_id: call_id.to_string(),
            task: task.to_string(),
            title: text("title"),
            tools,
            model: text("model"),
            wait: args.get("wait").and_then(Value::as_bool).unwrap_or(true),
        })
    }

    /// Reads a `wait_agents` call's arguments: no ids means every subagent not collected yet.
    pub fn wait(call_id: &str, args: &Value) -> Result<AgentRequest, String> {
        let agent_ids = match args.get("agent_ids") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|t| t.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or("wait_agents' `agent_ids` must be a list of subagent ids.")?,
            Some(_) => {
                return Err("wait_agents' `agent_ids` must be a list of subagent ids.".into())
            }
        };
        Ok(AgentRequest::Wait {
            call_id: call_id.to_string(),
            agent_ids,
        })
    }
}
