//! Stages 1 and 2 of the history limit: a context file shown more than once keeps its newest
//! copy (the others become a note), then long tool results become a preview.

use super::*;

/// One file range shown in a `context_file` message.
pub(super) struct FileCopy {
    message: usize,
    entry: usize,
    name: String,
    lines: (u64, u64),
    chars: usize,
}

pub(super) fn context_entries(content: &Content) -> Option<Vec<Value>> {
    match content {
        Content::Text(text) => serde_json::from_str::<Vec<Value>>(text).ok(),
        Content::Parts(parts) => Some(parts.clone()),
    }
}

pub(super) fn file_copies(messages: &[LimitedMessage<'_>]) -> Vec<FileCopy> {
    let mut copies = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        if message.role != Role::ContextFile {
            continue;
        }
        for (e, file) in context_entries(&message.content)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let Some(name) = file.get("file_name").and_then(Value::as_str) else {
                continue;
            };
            let line1 = file.get("line1").and_then(Value::as_u64).unwrap_or(1);
            let line2 = file
                .get("line2")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let chars = file
                .get("file_content")
                .and_then(Value::as_str)
                .map_or(0, |c| c.chars().count());
            copies.push(FileCopy {
                message: m,
                entry: e,
                name: name.to_string(),
                lines: (line1, line2.max(line1)),
                chars,
            });
        }
    }
    copies
}

/// An older copy of a file range that a later or larger copy covers is replaced by a note
/// naming the file; of overlapping copies the largest stays (the newest among equals).
pub(super) fn deduplicate_context_files(work: &mut Work) -> bool {
    let copies = file_copies(&work.messages);
    let mut changed = false;
    for (i, copy) in copies.iter().enumerate() {
        if !work.over() {
            break;
        }
        let superseded = copies.iter().enumerate().any(|(j, other)| {
            j != i
                && other.name == copy.name
                && other.lines.0 <= copy.lines.1
                && copy.lines.0 <= other.lines.1
                && (other.chars > copy.chars || (other.chars == copy.chars && j > i))
        });
        if superseded && replace_with_note(work, copy) {
            changed = true;
        }
    }
    changed
}

pub(super) fn replace_with_note(work: &mut Work, copy: &FileCopy) -> bool {
    let Some(message) = work.messages.get(copy.message) else {
        return false;
    };
    let Some(mut entries) = context_entries(&message.content) else {
        return false;
    };
    let Some(entry) = entries.get_mut(copy.entry) else {
        return false;
    };
    let note = format!(
        "[{} is shown again later in this chat; this older copy was removed]",
        copy.name
    );
    if entry.get("file_content").and_then(Value::as_str) == Some(note.as_str()) {
        return false;
    }
    entry["file_content"] = Value::String(note);
    let content = match &message.content {
        Content::Text(_) => Content::Text(Value::Array(entries).to_string()),
        Content::Parts(_) => Content::Parts(entries),
    };
    work.messages[copy.message].set_content(content);
    work.refresh(copy.message);
    true
}

// ---- stage 2: compress tool results ----

/// Results over 500 characters become a 200-character preview and a note, oldest first; outside
/// the protected tail unless `in_tail`.
pub(super) fn compress_tool_results(work: &mut Work, in_tail: bool) -> bool {
    let tail = work.tail_start();
    let range = if in_tail {
        tail..work.messages.len()
    } else {
        0..tail
    };
    let mut changed = false;
    for index in range {
        if !work.over() {
            break;
        }
        let message = &work.messages[index];
        if message.role != Role::Tool {
            continue;
        }
        // Borrowed for plain text: most results are, and copying each to measure it cost much.
        let text: Cow<str> = match &message.content {
            Content::Text(text) => Cow::Borrowed(text),
            parts => Cow::Owned(parts.text()),
        };
        // A char is at least one byte: a short text needs no count.
        if text.len() <= COMPRESS_OVER_CHARS {
            continue;
        }
        let chars = text.chars().count();
        if chars <= COMPRESS_OVER_CHARS {
            continue;
        }
        let preview_end = text
            .char_indices()
            .nth(PREVIEW_CHARS)
            .map_or(text.len(), |(end, _)| end);
        let content = Content::Text(compressed(&text[..preview_end], chars));
        work.messages[index].set_content(content);
        work.refresh(index);
        changed = true;
    }
    changed
}

/// A compressed result: its preview and a note of what was cut.
pub(super) fn compressed(preview: &str, chars: usize) -> String {
    let note =
        format!("\n[compressed: kept {PREVIEW_CHARS} of {chars} characters of this tool result]");
    let mut text = String::with_capacity(preview.len() + note.len());
    text.push_str(preview);
    text.push_str(&note);
    text
}
