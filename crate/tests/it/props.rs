//! Property tests (GUIDE §8): random command sequences against the engine, and every wire
//! transcript re-chunked at every byte boundary and at random multi-splits.

use crate::support::harness::{openai_reply, Harness};
use crate::wire::{cases, chunks_at, decode};
use palaver::decode::Decoded;
use palaver::engine::{Effect, Input};
use palaver::event::Event;
use proptest::prelude::*;
use serde_json::{json, Value};

#[derive(Debug, Clone)]
enum Op {
    User { text: String, priority: bool },
    ReplyText(String),
    ReplyTools(Vec<&'static str>),
    ReplyPartial(String),
    ToolResult { pick: usize, failed: bool },
    Approve,
    Reject,
    IdeResult,
    BogusApprove,
    Abort,
    Tick(u64),
    Fail(u16),
    Regenerate,
    Truncate(usize),
    SetDraft(String),
    CancelQueued(usize),
    BadContent,
    Duplicate,
    SaveAck,
    SaveFail,
}

const TOOLS: [&str; 6] = [
    "read_file",
    "write_file",
    "read_tab",
    "ask_questions",
    "task_done",
    "list_dir",
];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        ("[a-z ]{0,12}", any::<bool>()).prop_map(|(text, priority)| Op::User { text, priority }),
        "[a-zA-Z ]{0,20}".prop_map(Op::ReplyText),
        proptest::collection::vec(0..TOOLS.len(), 1..4)
            .prop_map(|idx| Op::ReplyTools(idx.into_iter().map(|i| TOOLS[i]).collect())),
        "[a-z]{1,10}".prop_map(Op::ReplyPartial),
        (0..4usize, any::<bool>()).prop_map(|(pick, failed)| Op::ToolResult { pick, failed }),
        Just(Op::Approve),
        Just(Op::Reject),
        Just(Op::IdeResult),
        Just(Op::BogusApprove),
        Just(Op::Abort),
        (0..200_000u64).prop_map(Op::Tick),
        prop_oneof![Just(400u16), Just(429), Just(500), Just(529)].prop_map(Op::Fail),
        Just(Op::Regenerate),
        (0..8usize).prop_map(Op::Truncate),
        "[a-z]{0,8}".prop_map(Op::SetDraft),
        (0..4usize).prop_map(Op::CancelQueued),
        Just(Op::BadContent),
        Just(Op::Duplicate),
        Just(Op::SaveAck),
        Just(Op::SaveFail),
    ]
}

struct Driver {
    h: Harness,
    counter: u32,
    running_tools: Vec<String>,
    pending: Vec<(String, String)>,
    save: Option<u64>,
    bodies: Vec<Value>,
}

impl Driver {
    fn new() -> Self {
        let mut h = Harness::with_config_patch(&json!({}));
        h.open("c", None);
        Driver {
            h,
            counter: 0,
            running_tools: Vec::new(),
            pending: Vec::new(),
            save: None,
            bodies: Vec::new(),
        }
    }

    fn id(&mut self) -> String {
        self.counter += 1;
        format!("p{}", self.counter)
    }

    fn send(&mut self, mut command: Value) {
        if command.get("client_request_id").is_none() {
            command["client_request_id"] = json!(self.id());
        }
        let before = state_without_seq(&self.h);
        let step = self.h.command("c", command.clone());
        // The receipt ack is the first ack with this id; a queued command refused later, when
        // popped, gets a second one (its refusal then follows changes made by other commands).
        let receipt = step.events.iter().find_map(|e| match &e.event {
            Event::Ack {
                accepted,
                client_request_id,
                ..
            } if Some(client_request_id.as_str()) == command["client_request_id"].as_str() => {
                Some(*accepted)
            }
            _ => None,
        });
        let refused = receipt == Some(false);
        if refused {
            assert_eq!(
                step.events.len(),
                1,
                "a refused command emits only its ack: {:?}",
                step.events
            );
            assert!(step.effects.is_empty(), "a refused command has no effects");
            assert_eq!(
                before,
                state_without_seq(&self.h),
                "a refused command changes nothing"
            );
        }
        self.observe(&step);
    }

    fn observe(&mut self, step: &palaver::Step) {
        for effect in &step.effects {
            match effect {
                Effect::RunTool { tool_call_id, .. } => {
                    self.running_tools.push(tool_call_id.clone())
                }
                Effect::CancelTool { tool_call_id, .. } => {
                    self.running_tools.retain(|t| t != tool_call_id)
                }
                Effect::SaveTrajectory { save } => self.save = Some(save.version),
                Effect::StartRequest { request, .. } => self.bodies.push(request.body_json()),
                _ => {}
            }
        }
        for event in &step.events {
            if let Event::PauseRequired { reasons } = &event.event {
                self.pending = reasons
                    .iter()
                    .map(|r| (r.tool_call_id.clone(), r.tool_name.clone()))
                    .collect();
            }
        }
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::User { text, priority } => self.send(json!({"type": "user_message", "content": text, "priority": priority})),
            Op::ReplyText(text) => self.reply(&json!({"text": text})),
            Op::ReplyTools(tools) => {
                let calls: Vec<Value> = tools.iter().map(|name| json!({"id": self.id(), "name": name, "arguments": {"path": "a", "questions": ["q"], "summary": "s", "content": "x"}})).collect();
                self.reply(&json!({"tool_calls": calls}));
            }
            Op::ReplyPartial(text) => {
                let step = self.h.stream(openai_reply(&json!({"text": text, "partial": true})).as_bytes());
                self.observe(&step);
            }
            Op::ToolResult { pick, failed } => {
                if !self.running_tools.is_empty() {
                    let id = self.running_tools.remove(pick % self.running_tools.len());
                    let step = self.h.handle(Input::ToolResult { chat_id: "c".into(), tool_call_id: id, content: "r".into(), tool_failed: failed, data: None, session_metadata: None, parts: Vec::new() });
                    self.observe(&step);
                }
            }
            Op::Approve => {
                let ids: Vec<String> = self.pending.iter().map(|p| p.0.clone()).collect();
                self.send(json!({"type": "approve_tools", "tool_call_ids": ids}));
            }
            Op::Reject => {
                let ids: Vec<String> = self.pending.iter().take(1).map(|p| p.0.clone()).collect();
                self.send(json!({"type": "reject_tools", "tool_call_ids": ids}));
            }
            Op::IdeResult => {
                let snapshot = serde_json::to_value(self.h.engine.snapshot("c")).unwrap_or(Value::Null);
                let last_tab = snapshot["messages"].as_array().and_then(|m| {
                    m.iter().rev().find_map(|m| m["tool_calls"].as_array()?.iter().find(|c| c["function"]["name"] == "read_tab").map(|c| c["id"].clone()))
                });
                self.send(json!({"type": "ide_tool_result", "tool_call_id": last_tab.unwrap_or(json!("none")), "content": "tab"}));
            }
            Op::BogusApprove => self.send(json!({"type": "approve_tools", "tool_call_ids": ["bogus"]})),
            Op::Abort => self.send(json!({"type": "abort"})),
            Op::Tick(ms) => {
                self.h.now += ms;
                let step = self.h.handle(Input::Tick {});
                self.observe(&step);
            }
            Op::Fail(status) => {
                let request_id = self.h.request_id();
                let step = self.h.handle(Input::RequestFailed { request_id, status: Some(status), error_type: None, message: "x".into(), retry_after_ms: None, headers: Default::default(), context_window: None, prompt_tokens: None });
                self.observe(&step);
            }
            Op::Regenerate => self.send(json!({"type": "regenerate"})),
            Op::Truncate(i) => self.send(json!({"type": "truncate_messages", "from_index": i})),
            Op::SetDraft(text) => self.send(json!({"type": "set_draft", "text": text})),
            Op::CancelQueued(i) => self.send(json!({"type": "cancel_queued", "client_request_id": format!("p{}", i + 1)})),
            Op::BadContent => self.send(json!({"type": "user_message", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,!!"}}]})),
            Op::Duplicate => self.send(json!({"type": "set_draft", "text": "d", "client_request_id": "p1"})),
            Op::SaveAck => {
                if let Some(version) = self.save {
                    let step = self.h.handle(Input::SaveAcked { chat_id: "c".into(), version });
                    self.observe(&step);
                }
            }
            Op::SaveFail => {
                if let Some(version) = self.save {
                    let step = self.h.handle(Input::SaveFailed { chat_id: "c".into(), version, reason: "quota".into() });
                    self.observe(&step);
                }
            }
        }
    }

    fn reply(&mut self, reply: &Value) {
        let step = self.h.stream(openai_reply(reply).as_bytes());
        self.observe(&step);
        let step = self.h.stream_end();
        self.observe(&step);
    }
}

fn state_without_seq(h: &Harness) -> Value {
    let mut snapshot = serde_json::to_value(h.engine.snapshot("c")).unwrap_or(Value::Null);
    snapshot["seq"] = Value::Null;
    snapshot
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Never panics; seq +1 per event and snapshot+events == snapshot are checked by the
    /// harness after every step; refused commands change nothing (checked in `send`).
    #[test]
    fn random_command_sequences_keep_the_stream_rules(ops in proptest::collection::vec(op(), 1..60)) {
        let mut driver = Driver::new();
        for op in ops {
            driver.run(op);
        }
        // Whatever the history went through, every request sent pairs each tool call with
        // exactly one result right after it.
        for body in &driver.bodies {
            let messages = body["messages"].as_array().cloned().unwrap_or_default();
            for (i, m) in messages.iter().enumerate() {
                let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
                for (k, call) in calls.iter().enumerate() {
                    let next = messages.get(i + 1 + k);
                    prop_assert_eq!(next.map(|n| &n["tool_call_id"]), Some(&call["id"]), "call {} not answered right after it", call["id"]);
                }
                if m["role"] == "tool" {
                    let answered = messages[..i].iter().rev().find(|p| p["role"] != "tool").and_then(|p| p["tool_calls"].as_array()).is_some_and(|c| c.iter().any(|c| c["id"] == m["tool_call_id"]));
                    prop_assert!(answered, "result {} without its call", m["tool_call_id"]);
                }
            }
        }
    }

    #[test]
    fn wire_cases_survive_random_multi_splits(seed_cuts in proptest::collection::vec(any::<u16>(), 0..40)) {
        for case in cases() {
            let bytes = case.sse.as_bytes();
            let mut cuts: Vec<usize> = seed_cuts.iter().map(|c| *c as usize % bytes.len().max(1)).collect();
            cuts.sort_unstable();
            let whole = outcome(&decode(&case, &[bytes]));
            let pieces = outcome(&decode(&case, &chunks_at(bytes, &cuts)));
            prop_assert_eq!(&whole, &pieces, "{} differs when cut at {:?}", case.name, cuts);
        }
    }
}

/// What a chunking must not change: the assembled message and whether the stream completed (the
/// ops themselves are batched per chunk, as the engine streams them).
fn outcome(decoded: &Decoded) -> (Value, bool) {
    (decoded.assembled.to_value(), decoded.complete)
}

/// Every byte boundary: each case fed one byte at a time, and split in two at every offset
/// (every offset for transcripts up to 20 KB, every 61st for the longer ones).
#[test]
fn wire_cases_survive_every_byte_boundary() {
    for case in cases() {
        let bytes = case.sse.as_bytes();
        let whole = outcome(&decode(&case, &[bytes]));
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(
            whole,
            outcome(&decode(&case, &singles)),
            "{} differs fed byte by byte",
            case.name
        );
        let stride = if bytes.len() <= 20_000 { 1 } else { 61 };
        for cut in (1..bytes.len()).step_by(stride) {
            let split = outcome(&decode(&case, &[&bytes[..cut], &bytes[cut..]]));
            assert_eq!(
                whole, split,
                "{} differs when split at byte {cut}",
                case.name
            );
        }
    }
}

/// SECURITY D9: every transcript cut at every byte offset (every 61st above 20 KB) decodes
/// without a panic; the result is complete only when the end arrived, and otherwise its text
/// and reasoning are prefixes of the whole stream's.
#[test]
fn d09_every_truncation_is_complete_or_a_typed_prefix() {
    use palaver::decode::{decode_stream, DecodeError};
    for case in cases() {
        let bytes = case.sse.as_bytes();
        let whole = decode(&case, &[bytes]);
        let text = |v: &Value, key: &str| v[key].as_str().unwrap_or("").to_string();
        let stride = if bytes.len() <= 20_000 { 1 } else { 61 };
        let mut saw_incomplete = false;
        for cut in (0..bytes.len()).step_by(stride) {
            let prefix = match decode_stream(case.provider, &[&bytes[..cut]]) {
                Ok(decoded) => decoded,
                Err(DecodeError::Stream { partial, .. }) => Decoded {
                    complete: false,
                    ..partial
                },
                Err(other) => panic!("{}: {other:?}", case.name),
            };
            for key in ["content", "reasoning_content"] {
                let (part, all) = (
                    text(&prefix.assembled.to_value(), key),
                    text(&whole.assembled.to_value(), key),
                );
                if prefix.complete {
                    assert_eq!(
                        part, all,
                        "{} cut at {cut} is complete but differs",
                        case.name
                    );
                } else {
                    assert!(
                        all.starts_with(&part),
                        "{} cut at {cut}: {key} is not a prefix",
                        case.name
                    );
                }
            }
            saw_incomplete |= !prefix.complete;
        }
        assert!(
            saw_incomplete,
            "{}: no cut was seen as truncated",
            case.name
        );
    }
}

/// One random history element for the history-limit properties.
#[derive(Debug, Clone)]
enum Piece {
    User(usize),
    Assistant(usize),
    /// A round of calls; each `true` gets a result, `false` stays unanswered.
    Calls(Vec<bool>, usize),
    OrphanResult,
    DuplicateLastResult,
    BadArguments,
    Plan,
    PlanDelta,
    Event(&'static str),
    ContextFile(u8, usize),
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        4 => (1usize..3000).prop_map(Piece::User),
        4 => (1usize..3000).prop_map(Piece::Assistant),
        4 => (proptest::collection::vec(any::<bool>(), 1..4), 1usize..4000).prop_map(|(a, n)| Piece::Calls(a, n)),
        1 => Just(Piece::OrphanResult),
        1 => Just(Piece::DuplicateLastResult),
        1 => Just(Piece::BadArguments),
        1 => Just(Piece::Plan),
        1 => Just(Piece::PlanDelta),
        1 => prop_oneof![Just("tick"), Just("mode_switch"), Just("process_completed"), Just("cron_fire"), Just("system_notice")].prop_map(Piece::Event),
        1 => (0u8..3, 1usize..3000).prop_map(|(f, n)| Piece::ContextFile(f, n)),
    ]
}

fn build_history(pieces: &[Piece]) -> Vec<palaver::message::ChatMessage> {
    let mut out: Vec<Value> = Vec::new();
    let mut last_result: Option<Value> = None;
    for (i, piece) in pieces.iter().enumerate() {
        let id = format!("m{i}");
        match piece {
            Piece::User(n) => out.push(json!({"message_id": id, "role": "user", "content": "u".repeat(*n)})),
            Piece::Assistant(n) => out.push(json!({"message_id": id, "role": "assistant", "content": "a".repeat(*n)})),
            Piece::Calls(answered, n) => {
                let calls: Vec<Value> = answered.iter().enumerate().map(|(k, _)| json!({"id": format!("{id}-c{k}"), "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}})).collect();
                out.push(json!({"message_id": id, "role": "assistant", "content": "", "tool_calls": calls}));
                for (k, yes) in answered.iter().enumerate() {
                    if *yes {
                        let result = json!({"message_id": format!("{id}-r{k}"), "role": "tool", "tool_call_id": format!("{id}-c{k}"), "content": "r".repeat(*n)});
                        last_result = Some(result.clone());
                        out.push(result);
                    }
                }
            }
            Piece::OrphanResult => out.push(json!({"message_id": id, "role": "tool", "tool_call_id": "nobody", "content": "orphan"})),
            Piece::DuplicateLastResult => {
                if let Some(mut dup) = last_result.clone() {
                    dup["message_id"] = json!(id);
                    out.push(dup);
                }
            }
            Piece::BadArguments => out.push(json!({"message_id": id, "role": "assistant", "content": "", "tool_calls": [{"id": format!("{id}-bad"), "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"cut"}}]})),
            Piece::Plan => out.push(json!({"message_id": id, "role": "plan", "content": "plan body", "plan": {"mode": "agent", "version": 1}})),
            Piece::PlanDelta => out.push(json!({"message_id": id, "role": "event", "content": "note", "event": {"subkind": "plan_delta", "source": "update_plan", "payload": {"seq": 1}}})),
            Piece::Event(kind) => out.push(json!({"message_id": id, "role": "event", "content": "e", "event": {"subkind": kind, "source": "test"}})),
            Piece::ContextFile(f, n) => out.push(json!({"message_id": id, "role": "context_file", "content": json!([{"file_name": format!("f{f}.rs"), "file_content": "c".repeat(*n), "line1": 1, "line2": 50}]).to_string()})),
        }
    }
    serde_json::from_value(Value::Array(out)).unwrap_or_else(|e| panic!("{e}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// SPEC §5 on random histories: every call has exactly one result right after it, no plan
    /// or plan delta is ever lost, user messages keep their order, and the output fits the
    /// budget or the error says why.
    #[test]
    fn the_history_limit_keeps_its_promises(pieces in proptest::collection::vec(piece(), 0..60), budget in 50u64..20_000) {
        use palaver::history_limit::{estimate_tokens, limit_history, HistoryLimitError};
        use palaver::message::Role;
        let history = build_history(&pieces);
        match limit_history(&history, Some(budget)) {
            Ok(limited) => {
                let out: Vec<&palaver::message::ChatMessage> = limited.messages.iter().map(|m| &**m).collect();
                let total: u64 = out.iter().map(|m| estimate_tokens(m)).sum();
                prop_assert!(total <= budget, "{total} > {budget}");
                // The running estimate (kept across stages, reused for unchanged messages) is
                // the one computed afresh on the output.
                let owned: Vec<palaver::message::ChatMessage> = out.iter().map(|m| (*m).clone()).collect();
                prop_assert_eq!(limited.estimated_tokens, palaver::history_limit::estimate_history(&owned));
                for (i, m) in out.iter().enumerate() {
                    for (k, call) in m.tool_calls().iter().enumerate() {
                        let next = out.get(i + 1 + k);
                        prop_assert_eq!(next.and_then(|n| n.tool_call_id.as_deref()), Some(call.id.as_str()));
                        prop_assert!(serde_json::from_str::<Value>(&call.function.arguments).is_ok_and(|v| v.is_object()));
                    }
                    if m.role == Role::Tool {
                        let owner = out[..i].iter().rev().find(|p| p.role != Role::Tool);
                        let answered = owner.is_some_and(|p| p.tool_calls().iter().any(|c| Some(c.id.as_str()) == m.tool_call_id.as_deref()));
                        prop_assert!(answered, "result {:?} without its call right before", m.tool_call_id);
                    }
                }
                let results: Vec<&str> = out.iter().filter_map(|m| m.tool_call_id.as_deref()).collect();
                let mut unique = results.clone();
                unique.sort_unstable();
                unique.dedup();
                prop_assert_eq!(results.len(), unique.len(), "one result per call");
                let never = |m: &palaver::message::ChatMessage| m.role == Role::Plan || m.extra.get("event").and_then(|e| e.get("subkind")).and_then(Value::as_str) == Some("plan_delta");
                let kept: Vec<&str> = out.iter().filter(|m| never(m)).map(|m| m.message_id.as_str()).collect();
                let all: Vec<&str> = history.iter().filter(|m| never(m)).map(|m| m.message_id.as_str()).collect();
                prop_assert_eq!(kept, all, "plans are never lost");
                let users_out: Vec<&str> = out.iter().filter(|m| m.role == Role::User).map(|m| m.message_id.as_str()).collect();
                let users_in: Vec<&str> = history.iter().filter(|m| m.role == Role::User).map(|m| m.message_id.as_str()).collect();
                let mut rest = users_in.iter();
                for id in &users_out {
                    prop_assert!(rest.any(|u| u == id), "user messages keep their order");
                }
            }
            Err(HistoryLimitError::TooLarge { estimated, budget: b }) => {
                prop_assert_eq!(b, budget);
                prop_assert!(estimated > budget, "the error says why: {estimated} vs {budget}");
            }
        }
    }
}

/// Issue 18: random steps across a parent and its subagents.
#[derive(Debug, Clone)]
enum AgentOp {
    /// The chat `pick` answers with `spawn_agent` calls (`true`: waits for the answer).
    Spawn {
        pick: usize,
        waits: Vec<bool>,
    },
    WaitAgents(usize),
    Text(usize, String),
    Write(usize),
    Approve(usize),
    Reject(usize),
    Abort(usize),
    User(usize, String),
    Fail(usize, u16),
    Tick(u64),
}

fn agent_op() -> impl Strategy<Value = AgentOp> {
    prop_oneof![
        (0..6usize, proptest::collection::vec(any::<bool>(), 1..4))
            .prop_map(|(pick, waits)| AgentOp::Spawn { pick, waits }),
        (0..6usize).prop_map(AgentOp::WaitAgents),
        (0..6usize, "[a-z ]{0,10}").prop_map(|(p, t)| AgentOp::Text(p, t)),
        (0..6usize).prop_map(AgentOp::Write),
        (0..6usize).prop_map(AgentOp::Approve),
        (0..6usize).prop_map(AgentOp::Reject),
        (0..6usize).prop_map(AgentOp::Abort),
        (0..6usize, "[a-z]{1,8}").prop_map(|(p, t)| AgentOp::User(p, t)),
        (
            0..6usize,
            prop_oneof![Just(401u16), Just(429), Just(500), Just(529)]
        )
            .prop_map(|(p, s)| AgentOp::Fail(p, s)),
        (0..120_000u64).prop_map(AgentOp::Tick),
    ]
}

struct Tree {
    h: Harness,
    chats: Vec<String>,
    counter: u32,
    /// Every message id each chat ever showed: none may disappear (no op here removes one).
    seen: std::collections::BTreeMap<String, Vec<String>>,
}

impl Tree {
    fn chat(&self, pick: usize) -> String {
        self.chats[pick % self.chats.len()].clone()
    }

    fn id(&mut self) -> String {
        self.counter += 1;
        format!("k{}", self.counter)
    }

    fn absorb(&mut self, step: &palaver::Step) {
        for event in &step.events {
            if let Event::SubagentSpawned { child, .. } = &event.event {
                self.chats.push(child.clone());
            }
        }
    }

    fn reply_in(&mut self, chat: &str, reply: &Value) {
        self.h.aim_at(chat);
        let step = self.h.stream(openai_reply(reply).as_bytes());
        self.absorb(&step);
        self.h.aim_at(chat);
        let step = self.h.stream_end();
        self.absorb(&step);
    }

    fn command(&mut self, chat: &str, mut command: Value) {
        command["client_request_id"] = json!(self.id());
        let step = self.h.command(chat, command);
        self.absorb(&step);
    }

    fn pending(&self, chat: &str) -> Vec<Value> {
        let snapshot = serde_json::to_value(self.h.engine.snapshot(chat)).unwrap_or(Value::Null);
        snapshot["runtime"]["pause_reasons"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|r| r["tool_call_id"].clone())
            .collect()
    }

    fn run(&mut self, op: AgentOp) {
        match op {
            AgentOp::Spawn { pick, waits } => {
                let chat = self.chat(pick);
                let calls: Vec<Value> = waits
                    .iter()
                    .map(|wait| json!({"id": self.id(), "name": "spawn_agent", "arguments": {"task": "do a part", "wait": wait}}))
                    .collect();
                self.reply_in(&chat, &json!({"tool_calls": calls}));
            }
            AgentOp::WaitAgents(pick) => {
                let chat = self.chat(pick);
                let call = json!({"id": self.id(), "name": "wait_agents", "arguments": {}});
                self.reply_in(&chat, &json!({"tool_calls": [call]}));
            }
            AgentOp::Text(pick, text) => {
                let chat = self.chat(pick);
                self.reply_in(&chat, &json!({"text": text}));
            }
            AgentOp::Write(pick) => {
                let chat = self.chat(pick);
                let call = json!({"id": self.id(), "name": "write_file", "arguments": {"path": "a", "content": "x"}});
                self.reply_in(&chat, &json!({"tool_calls": [call]}));
            }
            AgentOp::Approve(pick) => {
                let chat = self.chat(pick);
                let ids = self.pending(&chat);
                self.command(
                    &chat,
                    json!({"type": "approve_tools", "tool_call_ids": ids}),
                );
            }
            AgentOp::Reject(pick) => {
                let chat = self.chat(pick);
                let ids = self.pending(&chat);
                self.command(&chat, json!({"type": "reject_tools", "tool_call_ids": ids}));
            }
            AgentOp::Abort(pick) => {
                let chat = self.chat(pick);
                self.command(&chat, json!({"type": "abort"}));
            }
            AgentOp::User(pick, text) => {
                let chat = self.chat(pick);
                self.command(&chat, json!({"type": "user_message", "content": text}));
            }
            AgentOp::Fail(pick, status) => {
                let chat = self.chat(pick);
                self.h.aim_at(&chat);
                let request_id = self.h.request_id();
                let step = self.h.handle(Input::RequestFailed {
                    request_id,
                    status: Some(status),
                    error_type: None,
                    message: "x".into(),
                    retry_after_ms: None,
                    headers: Default::default(),
                    context_window: None,
                    prompt_tokens: None,
                });
                self.absorb(&step);
            }
            AgentOp::Tick(ms) => {
                self.h.now += ms;
                let step = self.h.handle(Input::Tick {});
                self.absorb(&step);
            }
        }
    }

    /// No message a chat showed is gone; every chat's snapshot `seq` is its last event's.
    fn check(&mut self) -> Result<(), TestCaseError> {
        for chat in self.chats.clone() {
            let Some(snapshot) = self.h.engine.snapshot(&chat) else {
                return Err(TestCaseError::fail(format!("chat {chat} vanished")));
            };
            let seen_seq = self.h.seen_seqs().get(&chat).copied().unwrap_or(0);
            prop_assert_eq!(
                snapshot.seq,
                seen_seq,
                "{}: snapshot seq is not its last event's",
                chat
            );
            let value = serde_json::to_value(&snapshot).unwrap_or(Value::Null);
            let ids: Vec<String> = value["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(|m| m["message_id"].as_str().map(str::to_string))
                .collect();
            for old in self.seen.get(&chat).cloned().unwrap_or_default() {
                prop_assert!(ids.contains(&old), "{}: message {} was lost", chat, old);
            }
            self.seen.insert(chat, ids);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    /// Issue 18: random steps across a parent and its children never break `seq` (the harness
    /// checks +1 per event for every chat, and the parent's view against its snapshot) and
    /// never lose a message; the engine never panics.
    #[test]
    fn subagent_trees_keep_the_stream_rules(ops in proptest::collection::vec(agent_op(), 1..50)) {
        let mut tree = Tree {
            h: Harness::with_config_patch(&json!({"retry": {"max_attempts": 2}})),
            chats: vec!["c".into()],
            counter: 0,
            seen: Default::default(),
        };
        tree.h.open("c", None);
        tree.command("c", json!({"type": "set_params", "patch": {"fallback_models": [{"provider": "openai-chat", "model": "backup"}]}}));
        tree.command("c", json!({"type": "user_message", "content": "start"}));
        for op in ops {
            tree.run(op);
            tree.check()?;
        }
    }
}
