//! Exporting a chat (SPEC §4): the trajectory as Refact JSON, as OpenAI chat messages, or as
//! Markdown. Exports carry what is stored — never an API key, which the engine never holds.

use crate::linearize::{linearize, Thinking};
use crate::message::{ChatMessage, Role};
use serde_json::{json, Value};

/// `trajectory` (as stored) rendered as `refact`, `openai` or `markdown`.
pub fn export_chat(trajectory: &Value, format: &str) -> Result<String, String> {
    match format {
        "refact" | "json" => serde_json::to_string_pretty(trajectory).map_err(|e| e.to_string()),
        "openai" => {
            let messages = messages_of(trajectory)?;
            let (fixed, _) = crate::history_limit::fix_tool_calls(messages);
            let out: Vec<Value> = linearize(&fixed, Thinking::Off)
                .iter()
                .map(openai)
                .collect();
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())
        }
        "markdown" | "md" => Ok(markdown(trajectory)),
        other => Err(format!(
            "unknown export format {other} (refact, openai, markdown)"
        )),
    }
}

/// The "refact" export of an open chat written straight from its typed messages: the same text
/// as `export_chat` on its trajectory (the thread's keys, `id`, `messages`), without building the
/// chat as a JSON tree first — the workspace copy writes it after every turn, and a tree of a
/// long chat weighed several times its text in the wasm memory, which never shrinks.
pub fn refact_text(
    chat_id: &str,
    thread: &Value,
    messages: &[ChatMessage],
) -> Result<String, String> {
    let mut out = Vec::with_capacity(256 * messages.len() + 256);
    write_refact(&mut out, chat_id, thread, messages)?;
    String::from_utf8(out).map_err(|e| e.to_string())
}

/// [`refact_text`] written to `out` as it is made (the page hands it to JS a piece at a time, so
/// a long chat's copy is never whole in the wasm memory, which never shrinks: issue 41).
pub fn write_refact<W: std::io::Write>(
    out: W,
    chat_id: &str,
    thread: &Value,
    messages: &[ChatMessage],
) -> Result<(), String> {
    use serde::ser::{SerializeMap, Serializer};
    let mut writer = serde_json::Serializer::pretty(out);
    let written = (|| {
        let mut map = writer.serialize_map(None)?;
        if let Value::Object(fields) = thread {
            for (key, value) in fields
                .iter()
                .filter(|(k, _)| *k != "id" && *k != "messages")
            {
                map.serialize_entry(key, value)?;
            }
        }
        map.serialize_entry("id", chat_id)?;
        map.serialize_entry("messages", messages)?;
        map.end()
    })();
    written.map_err(|e| e.to_string())
}

fn messages_of(trajectory: &Value) -> Result<Vec<ChatMessage>, String> {
    crate::trajectory::load("export", trajectory)
        .map(|loaded| loaded.messages)
        .map_err(|e| e.to_string())
}

fn openai(message: &ChatMessage) -> Value {
    let role = match message.role {
        Role::System => "system",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
        _ => "user",
    };
    let mut out = json!({"role": role, "content": message.content});
    if let Some(calls) = &message.tool_calls {
        out["tool_calls"] = json!(calls);
    }
    if let Some(id) = &message.tool_call_id {
        out["tool_call_id"] = json!(id);
    }
    out
}

fn markdown(trajectory: &Value) -> String {
    let title = trajectory["title"].as_str().unwrap_or("Chat");
    let mut out = format!("# {}\n", if title.is_empty() { "Chat" } else { title });
    let messages = messages_of(trajectory).unwrap_or_default();
    for message in messages.iter().filter(|m| !m.is_ui_only()) {
        let heading = match message.role {
            Role::User => "User",
            Role::Assistant => "Assistant",
            Role::Tool | Role::Diff => "Tool result",
            Role::System => "System",
            Role::Plan => "Plan",
            Role::Event => "Event",
            Role::ContextFile => "Context",
            Role::CdInstruction => "Instruction",
            Role::CompressionReport => "Compression",
            Role::Error => "Error",
        };
        out.push_str(&format!("\n## {heading}\n\n"));
        let text = message.content.text();
        if !text.is_empty() {
            out.push_str(&text);
            out.push('\n');
        }
        for call in message.tool_calls() {
            out.push_str(&format!(
                "\n`{}` ```{}```\n",
                call.function.name, call.function.arguments
            ));
        }
        if let Some(note) = ending_note(message) {
            out.push_str(&format!("\n> {note}\n"));
        }
    }
    out
}

/// How an answer ended when it did not end by itself: stopped by the user, cut at the output
/// limit, interrupted (issue 14 §9: marked in every export, as in the page).
fn ending_note(message: &crate::message::ChatMessage) -> Option<&'static str> {
    if message.role != Role::Assistant {
        return None;
    }
    if message.is_stopped() {
        return Some("[stopped by the user: this answer is incomplete]");
    }
    match message.finish_reason.as_deref() {
        Some("length") => Some("[cut at the output token limit: this answer is incomplete]"),
        Some("interrupted") => Some("[interrupted: the page closed while this answer streamed]"),
        _ => None,
    }
}

/// An export with its subagents' chats (`subagents`, as the page writes them) taken apart for an
/// import as chat `new_id`: the parent without them, and each child under its new id with its
/// links moved from the exported parent's id to `new_id` (`{old}~call` becomes `{new}~call`, a
/// grandchild's `{old}~a~b` becomes `{new}~a~b`), so the tree is whole again. A child whose id
/// does not descend from the exported parent's is left out: it has no place in this tree.
pub fn split_subagents(mut export: Value, new_id: &str) -> (Value, Vec<(String, Value)>) {
    let children = match export.as_object_mut() {
        Some(root) => match root.remove("subagents") {
            Some(Value::Array(children)) => children,
            _ => Vec::new(),
        },
        None => Vec::new(),
    };
    let Some(old_id) = export["id"].as_str().map(str::to_string) else {
        return (export, Vec::new());
    };
    let moved = |id: &str| {
        let rest = id.strip_prefix(&old_id)?.strip_prefix('~')?;
        (!rest.is_empty()).then(|| format!("{new_id}~{rest}"))
    };
    let relinked = children
        .into_iter()
        .filter_map(|mut child| {
            let id = moved(child["id"].as_str()?)?;
            let object = child.as_object_mut()?;
            object.insert("id".into(), json!(id));
            for link in ["parent_id", "root_chat_id"] {
                let linked = object.get(link).and_then(Value::as_str);
                let new = match linked {
                    Some(old) if old == old_id => Some(new_id.to_string()),
                    Some(old) => moved(old),
                    None => None,
                };
                match new {
                    Some(new) => object.insert(link.into(), json!(new)),
                    None => object.remove(link),
                };
            }
            Some((id, child))
        })
        .collect();
    (export, relinked)
}
