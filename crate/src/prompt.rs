//! The system prompt (SPEC §7, seed 002 "prompt assembly"): the agent prompt — the default below,
//! or the user's own from Settings or `set_params` — then the workspace context the host fetched
//! through `palaver serve`: its instruction files (capped), a flat sorted file list
//! (`# File Tree (N files)`, capped) and the date. The whole text is the stable, cached prefix of
//! every request (Anthropic's first breakpoint sits after it), so it changes only when the
//! workspace's files or the day change. Pure: the host brings the texts, this only assembles.

use serde::{Deserialize, Serialize};

/// The agent prompt used when the user sets none.
pub const DEFAULT_AGENT_PROMPT: &str = "You are Palaver, a coding agent working in the user's workspace through tools.

- Look before you act: use `file_tree`, `search`, `list_dir` and `read_file` to learn the code you are asked about. Quote paths as they appear in the workspace.
- Change files with `edit_file` (one exact replacement) or `write_file` (a whole file). Writes, edits, shell commands and web fetches are shown to the user, who approves each one unless they chose otherwise: say what you are about to change and why before you call the tool.
- `run_command` runs a program without a shell (an argv list) when the user started `palaver serve --allow-shell`; `fetch_url` reads a public web page.
- For work of several steps, keep a plan with `set_plan` and `update_plan`; ask the user with `ask_questions` when a decision is theirs.
- A large task with independent parts can be delegated: `spawn_agent` gives one self-contained part to a subagent (its own chat, your tools or fewer) and returns its answer; with `wait: false` several run at once and `wait_agents` collects them.
- Keep answers short and concrete. Use fenced code blocks with a language. When you are unsure, say so.";

/// The plain chat's prompt (issue 35: a chat without tools, and the small model in the page,
/// get a short prompt, not the coding agent's).
pub const DEFAULT_CHAT_PROMPT: &str =
    "You are a helpful assistant. Answer the user's question directly, clearly and briefly.";

/// What a model without tools is taught when its provider is set to edit blocks (issue 40, seed
/// 002): the block format `edit_blocks` reads, and fenced shell commands the user may run.
pub const EDIT_BLOCKS_PROMPT: &str = "You cannot call tools, but you can change files in the user's workspace. For each change, write the file's path alone on a line, then an edit block:

<<<<<<< SEARCH
the exact lines of the file to replace, copied character for character
=======
the new lines
>>>>>>> REPLACE

Keep SEARCH short but unique in the file; use one block per change. To create a file, leave SEARCH empty. The user reviews every block and applies it; you are told which applied and which failed. To suggest a shell command, put it alone in a ```sh fenced block: the user may run it, and you are told what it printed.";

/// The instruction files a workspace may carry, in the order they are looked for; the README is
/// read only when none of them exists.
pub const INSTRUCTION_FILES: [&str; 4] = [
    "AGENTS.md",
    "CLAUDE.md",
    ".cursorrules",
    ".github/copilot-instructions.md",
];
pub const README_FALLBACK: &str = "README.md";

/// Characters of one instruction file, and of all of them together.
pub const INSTRUCTION_FILE_CAP: usize = 8_000;
pub const INSTRUCTIONS_CAP: usize = 16_000;
/// Files listed in the tree (the count still says how many there are).
pub const FILE_TREE_CAP: usize = 400;
/// The repository map's share of the system prompt, in characters (~4 000 tokens).
pub const REPO_MAP_CAP: usize = 16_000;

/// The header `palaver serve` starts the repository map with (seed 002's `REPO_MAP_HEADER`).
pub const REPO_MAP_HEADER: &str = "# Repository Structure\n\nBelow is a map of the repository showing classes, functions, and their relationships.\nUse this to understand the codebase structure and find relevant code.\n\n";
/// The file list's header (seed 002's `FILE_TREE_HEADER`).
pub const FILE_TREE_HEADER: &str =
    "# Repository Files\n\nComplete list of files in the repository:\n\n";
const DATE_PREFIX: &str = "Today's date: ";

/// What the host learned about the workspace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct WorkspaceContext {
    /// Instruction files found: `{path, text}`.
    #[serde(default)]
    pub instructions: Vec<InstructionFile>,
    /// Every file of the workspace (relative paths); sorted and capped here.
    #[serde(default)]
    pub files: Vec<String>,
    /// Whether the host's listing itself was cut (so the count is a lower bound).
    #[serde(default)]
    pub files_truncated: bool,
    /// Today's date as the host sees it (`2026-11-23`); the core reads no clock.
    #[serde(default)]
    pub date: String,
    /// The repository map `palaver serve` rendered (seed 002's legend and symbol blocks, its own
    /// header included); capped here at `REPO_MAP_CAP` characters.
    #[serde(default)]
    pub repo_map: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct InstructionFile {
    pub path: String,
    pub text: String,
}

/// The system prompt: the agent prompt (`None` or blank: the default), then the context.
pub fn assemble(agent_prompt: Option<&str>, context: &WorkspaceContext) -> String {
    let agent = agent_prompt
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or(DEFAULT_AGENT_PROMPT);
    let mut parts = vec![agent.to_string()];
    if let Some(instructions) = instructions_section(&context.instructions) {
        parts.push(instructions);
    }
    parts.extend(repo_map_section(&context.repo_map));
    if let Some(tree) = file_tree_section(&context.files, context.files_truncated) {
        parts.push(tree);
    }
    if !context.date.trim().is_empty() {
        parts.push(format!("{DATE_PREFIX}{}.", context.date.trim()));
    }
    parts.join("\n\n")
}

/// The plain chat's system prompt: the chat prompt, the workspace context only when the chat
/// asks for it (`with_workspace`), the date.
pub fn assemble_chat(context: &WorkspaceContext, with_workspace: bool) -> String {
    let mut parts = vec![DEFAULT_CHAT_PROMPT.to_string()];
    if with_workspace {
        parts.extend(instructions_section(&context.instructions));
        parts.extend(repo_map_section(&context.repo_map));
        parts.extend(file_tree_section(&context.files, context.files_truncated));
    }
    if !context.date.trim().is_empty() {
        parts.push(format!("{DATE_PREFIX}{}.", context.date.trim()));
    }
    parts.join("\n\n")
}

/// The prompt of a model that changes files with edit blocks: the plain chat's prompt with the
/// workspace (it must know the files), then the block format.
pub fn assemble_edit_blocks(context: &WorkspaceContext) -> String {
    format!("{}\n\n{EDIT_BLOCKS_PROMPT}", assemble_chat(context, true))
}

/// The map as `palaver serve` drew it (seed 002: after the instructions, before the file list),
/// cut at a line within `REPO_MAP_CAP`.
fn repo_map_section(map: &str) -> Option<String> {
    let map = map.trim();
    if map.is_empty() {
        return None;
    }
    let (text, cut) = cut_at(map, REPO_MAP_CAP);
    let text = if cut {
        text.rsplit_once('\n').map_or(text, |(kept, _)| kept)
    } else {
        text
    };
    Some(text.to_string())
}

fn instructions_section(files: &[InstructionFile]) -> Option<String> {
    let mut room = INSTRUCTIONS_CAP;
    let mut blocks = Vec::new();
    for file in files.iter().filter(|f| !f.text.trim().is_empty()) {
        if room == 0 {
            break;
        }
        let cap = INSTRUCTION_FILE_CAP.min(room);
        let (text, cut) = cut_at(file.text.trim(), cap);
        room = room.saturating_sub(text.len());
        let marker = if cut {
            format!("\n[… {} cut at {cap} characters]", file.path)
        } else {
            String::new()
        };
        blocks.push(format!("## {}\n\n{text}{marker}", file.path));
    }
    (!blocks.is_empty()).then(|| {
        format!(
            "# Workspace Instructions\n\nThe workspace's own instructions for agents:\n\n{}",
            blocks.join("\n\n")
        )
    })
}

fn file_tree_section(files: &[String], truncated: bool) -> Option<String> {
    let mut sorted: Vec<&str> = files
        .iter()
        .map(|f| f.trim())
        .filter(|f| !f.is_empty())
        .collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_unstable();
    sorted.dedup();
    let count = sorted.len();
    let shown = &sorted[..count.min(FILE_TREE_CAP)];
    let plus = if truncated { "+" } else { "" };
    let mut text = format!(
        "{FILE_TREE_HEADER}# File Tree ({count}{plus} files)\n\n{}",
        shown.join("\n")
    );
    if count > shown.len() {
        text.push_str(&format!(
            "\n[… {} more files; use file_tree or search to see them]",
            count - shown.len()
        ));
    }
    Some(text)
}

/// At most `cap` bytes of `text`, cut at a character boundary; whether it was cut.
fn cut_at(text: &str, cap: usize) -> (&str, bool) {
    if text.len() <= cap {
        return (text, false);
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

/// A system prompt taken apart for the stability tiers (issue 40, seed 002): what stays (the
/// agent prompt, the instructions, the edit-block format), the map's legend and its per-file
/// blocks (each tiered on its own), and what changes with the workspace (the file list, the
/// date), which is sent after the cached tiers. A prompt without these sections is all `core`.
#[derive(Debug, PartialEq, Eq, Default)]
pub struct Sections<'a> {
    pub core: Vec<&'a str>,
    /// The map's header, legend and path aliases.
    pub map_legend: Option<&'a str>,
    /// One per file: its (aliased) path line and its definitions.
    pub map_blocks: Vec<&'a str>,
    /// The file list and the date line, in prompt order.
    pub volatile: Vec<&'a str>,
}

#[derive(Clone, Copy, PartialEq)]
enum Part {
    Map,
    Tree,
    Date,
}

/// The sections of a prompt `assemble`, `assemble_chat` or `assemble_edit_blocks` wrote. Each
/// section starts a paragraph with its own header; text outside them is core, in order.
pub fn sections(text: &str) -> Sections<'_> {
    let mut starts: Vec<(usize, Part)> = [
        (REPO_MAP_HEADER, Part::Map),
        (FILE_TREE_HEADER, Part::Tree),
        (DATE_PREFIX, Part::Date),
    ]
    .into_iter()
    .filter_map(|(header, part)| paragraph_start(text, header).map(|at| (at, part)))
    .collect();
    starts.sort_by_key(|(at, _)| *at);
    let mut out = Sections::default();
    let mut rest_from = 0;
    for (i, &(start, part)) in starts.iter().enumerate() {
        let next = starts.get(i + 1).map_or(text.len(), |(at, _)| *at);
        let end = match part {
            Part::Date => text[start..next].find('\n').map_or(next, |n| start + n),
            _ => next,
        };
        push_core(&mut out.core, &text[rest_from..start]);
        let body = text[start..end].trim_end();
        match part {
            Part::Map => map_parts(body, &mut out),
            Part::Tree | Part::Date => out.volatile.push(body),
        }
        rest_from = end;
    }
    if starts.is_empty() {
        out.core.push(text);
    } else {
        push_core(&mut out.core, &text[rest_from..]);
    }
    out
}

/// Where the last paragraph starting with `header` begins (the text's start or after a blank
/// line): the last, because the sections come after the agent prompt and the instruction files,
/// whose text may quote a header.
fn paragraph_start(text: &str, header: &str) -> Option<usize> {
    match text.rfind(&format!("\n\n{header}")) {
        Some(at) => Some(at + 2),
        None => text.starts_with(header).then_some(0),
    }
}

fn push_core<'a>(core: &mut Vec<&'a str>, text: &'a str) {
    let text = text.trim_matches('\n');
    if !text.trim().is_empty() {
        core.push(text);
    }
}

/// The map: header and legend up to the first blank line after the header, then one block per
/// line that does not start with a space.
fn map_parts<'a>(map: &'a str, out: &mut Sections<'a>) {
    let after_header = REPO_MAP_HEADER.len().min(map.len());
    let legend_end = map[after_header..]
        .find("\n\n")
        .map_or(map.len(), |at| after_header + at);
    out.map_legend = Some(map[..legend_end].trim_end());
    let blocks = map[legend_end..].trim_start_matches('\n');
    let mut block_start = None;
    let mut offset = 0;
    for line in blocks.split_inclusive('\n') {
        // A line not indented starts a block (its path); a blank one only ends the last.
        if !line.starts_with(' ') {
            if let Some(start) = block_start.take() {
                out.map_blocks.push(blocks[start..offset].trim_end());
            }
            if !line.trim().is_empty() {
                block_start = Some(offset);
            }
        }
        offset += line.len();
    }
    if let Some(start) = block_start {
        out.map_blocks.push(blocks[start..].trim_end());
    }
}
