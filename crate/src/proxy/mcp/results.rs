//! An MCP tool result as Palaver's tools answer (`ToolReply`): text blocks joined; images as image
//! parts (data URLs) the engine sends to providers that take them; audio, embedded resources and
//! resource links described in text (a text resource inline); `structuredContent` kept in `data`
//! and, when the server sent no text, given to the model as JSON; `isError` a failed call the model
//! sees. What a server sends is data: capped (a 10 MB result does not become a 10 MB prompt).

use crate::proxy::tools::ToolReply;
use serde_json::{json, Value};

/// Text given to the model from one result, at most.
pub const TEXT_CAP: usize = 256 * 1024;
/// One image's base64, and all of a result's images together, at most.
pub const IMAGE_CAP: usize = 4 * 1024 * 1024;
pub const IMAGES_CAP: usize = 8 * 1024 * 1024;
/// `structuredContent` kept in `data` (stored with the chat, mirrored, synced), at most, as JSON
/// text (F10): a larger one is left out with a note, its text still reaching the model capped.
pub const STRUCTURED_CAP: usize = 256 * 1024;

pub fn reply(server: &str, tool: &str, result: &Value) -> ToolReply {
    let mut text = String::new();
    let mut parts = Vec::new();
    let mut image_bytes = 0usize;
    let mut notes = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match block_text(block, &mut parts, &mut image_bytes) {
            Some(piece) => push_piece(&mut text, &piece),
            None => notes.push(format!(
                "[a content block of type {} was left out]",
                block.get("type").and_then(Value::as_str).unwrap_or("?")
            )),
        }
    }
    let structured = result.get("structuredContent").filter(|s| !s.is_null());
    if text.trim().is_empty() {
        if let Some(structured) = structured {
            text = serde_json::to_string_pretty(structured).unwrap_or_default();
        }
    }
    for note in notes {
        push_piece(&mut text, &note);
    }
    let total = text.chars().count();
    let truncated = text.len() > TEXT_CAP;
    if truncated {
        let mut cut = TEXT_CAP;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        let kept = text.chars().count();
        text.push_str(&format!("\n[truncated: kept {kept} of {total} characters]"));
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut data = json!({"server": server, "tool": tool});
    if let Some(structured) = structured {
        let size = structured.to_string().len();
        if size <= STRUCTURED_CAP {
            data["structured_content"] = structured.clone();
        } else {
            data["structured_content_left_out"] = json!(format!(
                "{} KB of structured content, over the {} KB kept with a chat",
                size / 1024,
                STRUCTURED_CAP / 1024
            ));
        }
    }
    if truncated {
        data["truncated"] = json!(true);
    }
    ToolReply {
        status: 200,
        content: text,
        data: Some(data),
        is_error,
        error: is_error.then(|| json!({"kind": "tool_error"})),
        parts,
    }
}

fn push_piece(text: &mut String, piece: &str) {
    if !text.is_empty() && !piece.is_empty() {
        text.push('\n');
    }
    text.push_str(piece);
}

/// The text one block contributes (images also become parts); `None` for an unknown type.
fn block_text(block: &Value, parts: &mut Vec<Value>, image_bytes: &mut usize) -> Option<String> {
    let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    match block.get("type").and_then(Value::as_str)? {
        "text" => Some(str_of("text").to_string()),
        "image" => Some(image(
            str_of("data"),
            str_of("mimeType"),
            parts,
            image_bytes,
        )),
        "audio" => Some(format!(
            "[audio ({}, {} bytes) — not shown to the model]",
            str_of("mimeType"),
            str_of("data").len() / 4 * 3
        )),
        "resource_link" => Some(resource_link(block)),
        "resource" => Some(embedded_resource(block.get("resource")?)),
        _ => None,
    }
}

fn image(data: &str, mime: &str, parts: &mut Vec<Value>, image_bytes: &mut usize) -> String {
    let safe_mime = mime.starts_with("image/")
        && mime
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/+.-".contains(&b));
    let base64 = data
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
    if !safe_mime || !base64 || data.is_empty() {
        return format!("[an image the server sent could not be read ({mime})]");
    }
    if data.len() > IMAGE_CAP || *image_bytes + data.len() > IMAGES_CAP {
        return format!(
            "[an image ({mime}, {} KB) was left out: over the size a tool result may carry]",
            data.len() / 1024 * 3 / 4
        );
    }
    *image_bytes += data.len();
    parts.push(
        json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}}),
    );
    format!("[image: {mime}]")
}

fn resource_link(block: &Value) -> String {
    let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or("");
    let mut text = format!("[resource link: {} <{}>", str_of("name"), str_of("uri"));
    if !str_of("mimeType").is_empty() {
        text.push_str(&format!(" ({})", str_of("mimeType")));
    }
    if !str_of("description").is_empty() {
        text.push_str(&format!(" — {}", str_of("description")));
    }
    text.push(']');
    text
}

fn embedded_resource(resource: &Value) -> String {
    let str_of = |key: &str| resource.get(key).and_then(Value::as_str).unwrap_or("");
    if let Some(text) = resource.get("text").and_then(Value::as_str) {
        return format!("[resource {}]\n{text}", str_of("uri"));
    }
    format!(
        "[resource {} ({}, {} bytes) — binary, not shown to the model]",
        str_of("uri"),
        str_of("mimeType"),
        str_of("blob").len() / 4 * 3
    )
}
