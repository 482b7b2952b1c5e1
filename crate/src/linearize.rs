//! Linearize (SPEC §7): the stored history → the provider-neutral message list a request is
//! built from. Deterministic: the same history gives the same output, byte for byte.
//!
//! Output roles are only `system`, `user`, `assistant` and `tool`: hidden roles are rendered as
//! `<plan>`, `<plan-update>` and `<event>` text, context roles are folded into a neighbour, and
//! UI-only, report and summary-suppressed messages are left out.

use crate::hidden::summarized_sources;
use crate::message::{ChatMessage, Content, Role, ToolCall};
use serde_json::Value;
use std::borrow::{Borrow, Cow};
use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// Keep thinking blocks and reasoning on assistant messages after the last user message.
    KeepCurrentTurn,
    /// Strip them everywhere.
    Off,
}

/// A message as linearize leaves it: `system`, `user`, `assistant` or `tool`, borrowing from the
/// history everything it sends unchanged (issue 20: a long chat's request copied every text
/// once here, again into the body). Folded and merged content is its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Linear<'a> {
    /// The source message's id; empty for a user message made of several.
    pub message_id: &'a str,
    pub role: Role,
    pub content: Cow<'a, Content>,
    pub tool_calls: Option<&'a [ToolCall]>,
    pub tool_call_id: Option<&'a str>,
    pub tool_failed: Option<bool>,
    /// Only on the current turn's assistant messages, with `Thinking::KeepCurrentTurn`.
    pub thinking_blocks: Option<&'a [Value]>,
    pub reasoning_content: Option<&'a str>,
}

impl<'a> Linear<'a> {
    fn new(message_id: &'a str, role: Role, content: Cow<'a, Content>) -> Self {
        Linear {
            message_id,
            role,
            content,
            tool_calls: None,
            tool_call_id: None,
            tool_failed: None,
            thinking_blocks: None,
            reasoning_content: None,
        }
    }

    /// A message the request builder writes itself (seed 002's tier blocks and their "Ok.").
    pub fn written(role: Role, text: String) -> Self {
        Linear::new("", role, Cow::Owned(Content::Text(text)))
    }

    pub fn tool_calls(&self) -> &'a [ToolCall] {
        self.tool_calls.unwrap_or(&[])
    }

    /// As a message of its own (the CLI's and export's output).
    pub fn to_message(&self) -> ChatMessage {
        let mut out = ChatMessage::new(
            self.message_id,
            self.role,
            self.content.clone().into_owned(),
        );
        out.tool_calls = self.tool_calls.map(<[ToolCall]>::to_vec);
        out.tool_call_id = self.tool_call_id.map(str::to_string);
        out.tool_failed = self.tool_failed;
        out.set_thinking_blocks(self.thinking_blocks.map(<[Value]>::to_vec));
        out.set_reasoning_content(self.reasoning_content.map(str::to_string));
        out
    }
}

/// Linearized messages as messages of their own (see [`linear`]).
pub fn linearize<M: Borrow<ChatMessage>>(history: &[M], thinking: Thinking) -> Vec<ChatMessage> {
    linear(history, thinking)
        .iter()
        .map(Linear::to_message)
        .collect()
}

/// How many messages a request's layout may add to the linearized history (two per tier of the
/// repository map, two for the volatile listing).
const ROOM_FOR_TIERS: usize = 8;

/// The history → provider-neutral messages, borrowing from it (the request builders' input).
pub fn linear<M: Borrow<ChatMessage>>(history: &[M], thinking: Thinking) -> Vec<Linear<'_>> {
    let suppressed = summarized_sources(history);
    let summary_at = summary_positions(history);
    let last_user = history.iter().rposition(|m| m.borrow().role == Role::User);
    // Room for the few messages a request adds (the stability tiers' map and listing): growing
    // later would copy the vector, both copies alive at once (issue 41).
    let mut out: Vec<Linear> = Vec::with_capacity(history.len() + ROOM_FOR_TIERS);
    let mut pending_context: Vec<String> = Vec::new();
    for (index, message) in history.iter().enumerate() {
        let message: &ChatMessage = message.borrow();
        // A summary speaks where its sources were, as context the user gives.
        if let Some(summary) = summary_at.get(&index) {
            let text = format!(
                "[Summary of the earlier conversation]\n{}",
                summary.content.text()
            );
            push_user(
                &mut out,
                &mut pending_context,
                Cow::Owned(Content::Text(text)),
            );
        }
        if is_left_out(message, &suppressed) || message.is_summary() {
            continue;
        }
        match message.role {
            Role::ContextFile | Role::CdInstruction => {
                fold_context(&mut out, &mut pending_context, context_text(message))
            }
            Role::Plan | Role::Event => push_user(
                &mut out,
                &mut pending_context,
                Cow::Owned(Content::Text(hidden_text(message))),
            ),
            Role::User => push_user(
                &mut out,
                &mut pending_context,
                Cow::Borrowed(&message.content),
            ),
            Role::Assistant => {
                flush_context(&mut out, &mut pending_context);
                let keep = thinking == Thinking::KeepCurrentTurn
                    && last_user.is_some_and(|u| index > u)
                    && !message.is_stopped();
                out.push(assistant(message, keep));
                if let Some(results) = proposal_results_text(message) {
                    push_user(&mut out, &mut pending_context, Cow::Owned(results));
                }
            }
            Role::Tool | Role::System => {
                flush_context(&mut out, &mut pending_context);
                out.push(plain(message, message.role));
            }
            Role::Diff => {
                flush_context(&mut out, &mut pending_context);
                out.push(plain(message, Role::Tool));
            }
            Role::CompressionReport | Role::Error => {}
        }
    }
    flush_context(&mut out, &mut pending_context);
    out
}

fn is_left_out(message: &ChatMessage, suppressed: &BTreeSet<String>) -> bool {
    message.is_ui_only()
        || message.role == Role::CompressionReport
        || suppressed.contains(&message.message_id)
}

/// For each summary, the history index of its earliest source: where it is rendered.
fn summary_positions<M: Borrow<ChatMessage>>(
    history: &[M],
) -> std::collections::BTreeMap<usize, &ChatMessage> {
    let mut at = std::collections::BTreeMap::new();
    for summary in history
        .iter()
        .map(Borrow::borrow)
        .filter(|m| m.is_summary())
    {
        let sources: BTreeSet<&str> = summary.summarized_source_ids().collect();
        if let Some(first) = history
            .iter()
            .position(|m| sources.contains(m.borrow().message_id.as_str()))
        {
            at.insert(first, summary);
        }
    }
    at
}

fn plain(message: &ChatMessage, role: Role) -> Linear<'_> {
    let mut out = Linear::new(&message.message_id, role, Cow::Borrowed(&message.content));
    out.tool_call_id = message.tool_call_id.as_deref();
    out.tool_failed = message.tool_failed;
    out
}

fn assistant(message: &ChatMessage, keep_thinking: bool) -> Linear<'_> {
    let mut out = plain(message, Role::Assistant);
    out.tool_calls = message.tool_calls.as_deref();
    if keep_thinking {
        out.thinking_blocks = message.thinking_blocks();
        out.reasoning_content = message.reasoning_content();
    }
    out
}

/// Context goes into the preceding tool result if there is one, else waits for the next user.
fn fold_context(out: &mut [Linear<'_>], pending: &mut Vec<String>, text: String) {
    match out.last_mut() {
        Some(last) if last.role == Role::Tool && pending.is_empty() => {
            append_text(last.content.to_mut(), &text)
        }
        _ => pending.push(text),
    }
}

/// Context with no user message after it becomes a user message of its own.
fn flush_context(out: &mut Vec<Linear<'_>>, pending: &mut Vec<String>) {
    if !pending.is_empty() {
        let text = std::mem::take(pending).join("\n\n");
        out.push(Linear::new("", Role::User, Cow::Owned(Content::Text(text))));
    }
}

/// Adds a user message, merged into the previous one when that is a user message too.
/// What became of the answer's edit blocks and commands (issue 40), read by the model right
/// after that answer; none for an answer with tool calls (its results are tool messages).
fn proposal_results_text(message: &ChatMessage) -> Option<Content> {
    let results = message.proposal_results();
    if results.is_empty() || !message.tool_calls().is_empty() {
        return None;
    }
    let lines: Vec<String> = results
        .iter()
        .map(|r| format!("- {}", r.sentence()))
        .collect();
    Some(Content::Text(format!(
        "<event subkind=\"edit_results\" source=\"user\">\n{}\n</event>",
        lines.join("\n")
    )))
}

fn push_user<'a>(out: &mut Vec<Linear<'a>>, pending: &mut Vec<String>, content: Cow<'a, Content>) {
    let mut content = content;
    if !pending.is_empty() {
        let context = std::mem::take(pending).join("\n\n");
        content = Cow::Owned(prepend_text(content.into_owned(), &context));
    }
    match out.last_mut() {
        Some(last) if last.role == Role::User => {
            merge_content(last.content.to_mut(), content.into_owned())
        }
        _ => out.push(Linear::new("", Role::User, content)),
    }
}

fn append_text(content: &mut Content, text: &str) {
    match content {
        Content::Text(existing) => {
            if !existing.is_empty() {
                existing.push_str("\n\n");
            }
            existing.push_str(text);
        }
        Content::Parts(parts) => parts.push(serde_json::json!({"type": "text", "text": text})),
    }
}

fn prepend_text(content: Content, text: &str) -> Content {
    let mut merged = Content::Text(text.to_string());
    merge_content(&mut merged, content);
    merged
}

/// Strings joined by a blank line; parts concatenated (a string joins as a text part).
fn merge_content(into: &mut Content, next: Content) {
    match (into, next) {
        (Content::Text(a), Content::Text(b)) => {
            if !a.is_empty() && !b.is_empty() {
                a.push_str("\n\n");
            }
            a.push_str(&b);
        }
        (Content::Parts(a), Content::Parts(b)) => a.extend(b),
        (Content::Parts(a), Content::Text(b)) => {
            a.push(serde_json::json!({"type": "text", "text": b}))
        }
        (into @ Content::Text(_), Content::Parts(b)) => {
            let Content::Text(text) = std::mem::take(into) else {
                return;
            };
            let mut parts = Vec::with_capacity(b.len() + 1);
            if !text.is_empty() {
                parts.push(serde_json::json!({"type": "text", "text": text}));
            }
            parts.extend(b);
            *into = Content::Parts(parts);
        }
    }
}

fn context_text(message: &ChatMessage) -> String {
    if message.role == Role::CdInstruction {
        return message.content.text();
    }
    let files = match &message.content {
        Content::Text(text) => serde_json::from_str::<Vec<Value>>(text).unwrap_or_default(),
        Content::Parts(parts) => parts.clone(),
    };
    if files.is_empty() {
        return message.content.text();
    }
    files
        .iter()
        .map(context_file_text)
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn context_file_text(file: &Value) -> String {
    let name = file.get("file_name").and_then(Value::as_str).unwrap_or("");
    let body = file
        .get("file_content")
        .and_then(Value::as_str)
        .unwrap_or("");
    let line1 = file.get("line1").and_then(Value::as_u64).unwrap_or(1);
    let line2 = file.get("line2").and_then(Value::as_u64).unwrap_or(line1);
    format!("File {name}:{line1}-{line2}\n```\n{body}\n```")
}

/// `<plan>`, `<plan-update>` or `<event>` text for a hidden message.
fn hidden_text(message: &ChatMessage) -> String {
    if message.role == Role::Plan {
        let plan = message.plan_meta();
        let mode = plan
            .and_then(|p| p.get("mode"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let version = plan
            .and_then(|p| p.get("version"))
            .map(scalar_text)
            .unwrap_or_default();
        let body = escape_body(&message.content.text());
        return format!(
            "<plan mode=\"{}\" version=\"{}\">\n{body}\n</plan>",
            escape_attr(mode),
            escape_attr(&version)
        );
    }
    let subkind = message.event_subkind().unwrap_or_default().to_string();
    let body = if message.content.is_empty() {
        message
            .event_payload()
            .map(payload_text)
            .unwrap_or_default()
    } else {
        message.content.text()
    };
    if message.is_plan_delta() {
        let seq = message
            .event_payload()
            .and_then(|p| p.get("seq"))
            .map(scalar_text)
            .unwrap_or_default();
        return format!(
            "<plan-update seq=\"{}\">{}</plan-update>",
            escape_attr(&seq),
            escape_body(&body)
        );
    }
    format!(
        "<event subkind=\"{}\" source=\"{}\">{}</event>",
        escape_attr(&subkind),
        escape_attr(&message.event_source().map(scalar_text).unwrap_or_default()),
        escape_body(&body)
    )
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn payload_text(payload: &Value) -> String {
    match payload {
        Value::String(s) => s.clone(),
        Value::Object(map) => map
            .get("note")
            .or_else(|| map.get("text"))
            .map(scalar_text)
            .unwrap_or_else(|| payload.to_string()),
        other => other.to_string(),
    }
}

/// Bodies with `<` or `>` go in CDATA (with `]]>` split); others are XML-escaped.
pub fn escape_body(body: &str) -> String {
    if body.contains('<') || body.contains('>') {
        format!("<![CDATA[{}]]>", body.replace("]]>", "]]]]><![CDATA[>"))
    } else {
        body.replace('&', "&amp;")
    }
}

fn escape_attr(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
