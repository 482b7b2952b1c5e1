//! What an answer proposes, acted on by the user (issue 40): its edit blocks applied or skipped,
//! its suggested shell commands run. Each is read from the answer's text by `edit_blocks` when
//! the user acts (the stored answer is the one truth; nothing parsed is stored beside it),
//! performed as a workspace tool call whose id names the answer and the block, and its result
//! kept on the answer (`proposal_results`), where the page shows it and the model reads it
//! right after that answer. The user's click is the approval; a tool the Settings deny is
//! refused all the same.

use super::*;
use crate::command::Command;
use crate::edit_blocks::{self, ProposalKind, ProposalResult, ProposalStatus};
use crate::error::Refusal;
use crate::thread::ToolRule;
use serde_json::json;

/// Calls made for proposals: `proposal~{kind}~{index}~{message_id}`.
const CALL_PREFIX: &str = "proposal~";
/// What a command's result keeps of its output, for the model and the page.
const OUTPUT_KEPT: usize = 4_000;

impl ChatSession {
    /// Refusals of `apply_edit_block`, `skip_edit_block` and `run_suggested_command` before
    /// anything changes: an unknown answer or block, one already acted on or under way.
    pub(super) fn check_proposal(&self, command: &Command) -> Result<(), Refusal> {
        let Some((message_id, kind, index)) = proposal_of(command) else {
            return Ok(());
        };
        let message = self
            .message_index(message_id)
            .map(|at| &self.messages[at])
            .filter(|m| m.role == Role::Assistant)
            .ok_or_else(|| Refusal::UnknownMessage {
                message_id: message_id.to_string(),
            })?;
        let proposals = edit_blocks::parse(&message.content.text());
        let count = match kind {
            ProposalKind::Edit => proposals.blocks.len(),
            ProposalKind::Shell => proposals.shell_commands.len(),
        };
        let invalid = |reason: String| Err(Refusal::InvalidCommand { reason });
        if index >= count {
            return invalid(format!("that answer has no {} {}", noun(kind), index + 1));
        }
        if self
            .proposals_running
            .contains(&call_id(message_id, kind, index))
        {
            return invalid(format!("{} {} is under way", noun(kind), index + 1));
        }
        let done = message.proposal_results();
        let applied = |r: &ProposalResult| {
            (r.kind, r.index, r.status) == (kind, index, ProposalStatus::Passed)
        };
        if kind == ProposalKind::Edit && done.iter().any(applied) {
            return invalid(format!("edit block {} is already applied", index + 1));
        }
        Ok(())
    }

    /// Performs a checked proposal command.
    pub(super) fn act_on_proposal(&mut self, ctx: &mut Ctx, command: &Command) {
        let Some((message_id, kind, index)) = proposal_of(command) else {
            return;
        };
        let Some(at) = self.message_index(message_id) else {
            return;
        };
        let proposals = edit_blocks::parse(&self.messages[at].content.text());
        let call = match (command, kind) {
            (Command::SkipEditBlock { .. }, _) => None,
            (_, ProposalKind::Edit) => proposals.blocks.get(index).map(edit_call),
            (_, ProposalKind::Shell) => proposals.shell_commands.get(index).map(|c| {
                let args = json!({"argv": ["sh", "-c", c]});
                Ok(("run_command", args))
            }),
        };
        let label = label_of(&proposals, kind, index);
        let result = |status, detail: &str| ProposalResult {
            kind,
            index,
            status,
            label: label.clone(),
            detail: detail.to_string(),
            call_id: String::new(),
        };
        match call {
            None => self.keep_result(at, result(ProposalStatus::Skipped, "")),
            Some(Err(why)) => self.keep_result(at, result(ProposalStatus::Failed, &why)),
            Some(Ok((tool, _))) if self.denied(ctx, tool) => {
                let why = format!("`{tool}` is denied in Settings → tool rules");
                self.keep_result(at, result(ProposalStatus::Failed, &why));
            }
            Some(Ok((tool, args))) => {
                let tool_call_id = call_id(message_id, kind, index);
                self.proposals_running.push(tool_call_id.clone());
                self.effect(Effect::RunTool {
                    chat_id: self.chat_id.clone(),
                    tool_call_id,
                    name: tool.to_string(),
                    args,
                });
            }
        }
    }

    /// A tool's result: a proposal's is kept on its answer (whatever the chat is doing);
    /// any other drives the state machine.
    pub fn tool_result(&mut self, ctx: &mut Ctx, tool_call_id: String, outcome: ToolOutcome) {
        if !self.take_proposal_result(&tool_call_id, &outcome) {
            let trigger = Trigger::ToolResult {
                tool_call_id,
                outcome,
            };
            self.transition(ctx, trigger);
        }
    }

    /// True when the result was a proposal's (then kept on its answer).
    fn take_proposal_result(&mut self, tool_call_id: &str, outcome: &ToolOutcome) -> bool {
        let Some(running) = self
            .proposals_running
            .iter()
            .position(|id| id == tool_call_id)
        else {
            return false;
        };
        self.proposals_running.remove(running);
        let Some((kind, index, message_id)) = parse_call_id(tool_call_id) else {
            return true;
        };
        let Some(at) = self.message_index(message_id) else {
            return true; // the answer was removed meanwhile: nothing to keep it on
        };
        let proposals = edit_blocks::parse(&self.messages[at].content.text());
        let label = label_of(&proposals, kind, index);
        let status = if outcome.failed {
            ProposalStatus::Failed
        } else {
            ProposalStatus::Passed
        };
        let detail = match (kind, status) {
            (ProposalKind::Edit, ProposalStatus::Passed) => String::new(),
            _ => kept_output(&outcome.content),
        };
        let result = ProposalResult {
            kind,
            index,
            status,
            label,
            detail,
            call_id: tool_call_id.to_string(),
        };
        self.keep_result(at, result);
        true
    }

    fn keep_result(&mut self, at: usize, result: ProposalResult) {
        let mut message = self.messages[at].clone();
        message.set_proposal_result(result);
        self.replace_message(at, message);
    }

    fn denied(&self, ctx: &Ctx, tool: &str) -> bool {
        self.thread.rule_for(&ctx.config.tool_rules, tool, false) == ToolRule::Deny
    }
}

/// What a result names: the block's file, or the command.
fn label_of(proposals: &edit_blocks::Proposals, kind: ProposalKind, index: usize) -> String {
    match kind {
        ProposalKind::Edit => proposals.blocks.get(index).map(|b| b.path.clone()),
        ProposalKind::Shell => proposals.shell_commands.get(index).cloned(),
    }
    .unwrap_or_default()
}

/// The answer, kind and index a proposal command is about.
fn proposal_of(command: &Command) -> Option<(&str, ProposalKind, usize)> {
    match command {
        Command::ApplyEditBlock { message_id, index }
        | Command::SkipEditBlock { message_id, index } => {
            Some((message_id, ProposalKind::Edit, *index))
        }
        Command::RunSuggestedCommand { message_id, index } => {
            Some((message_id, ProposalKind::Shell, *index))
        }
        _ => None,
    }
}

/// The workspace call that applies a block: `edit_file`, or `write_file` of a file that must
/// not exist yet for an empty SEARCH.
fn edit_call(block: &edit_blocks::EditBlock) -> Result<(&'static str, Value), String> {
    if !block.complete {
        return Err("the answer stopped before the block's end; nothing was written".into());
    }
    if block.path.is_empty() {
        return Err("the block names no file (put the path alone on the line before it)".into());
    }
    if block.search.is_empty() {
        let args = json!({"path": block.path, "content": block.replace, "if_match": ""});
        return Ok(("write_file", args));
    }
    let args = json!({"path": block.path, "old_text": block.search, "new_text": block.replace});
    Ok(("edit_file", args))
}

fn noun(kind: ProposalKind) -> &'static str {
    match kind {
        ProposalKind::Edit => "edit block",
        ProposalKind::Shell => "suggested command",
    }
}

fn call_id(message_id: &str, kind: ProposalKind, index: usize) -> String {
    let kind = match kind {
        ProposalKind::Edit => "edit",
        ProposalKind::Shell => "shell",
    };
    format!("{CALL_PREFIX}{kind}~{index}~{message_id}")
}

fn parse_call_id(id: &str) -> Option<(ProposalKind, usize, &str)> {
    let mut parts = id.strip_prefix(CALL_PREFIX)?.splitn(3, '~');
    let kind = match parts.next()? {
        "edit" => ProposalKind::Edit,
        "shell" => ProposalKind::Shell,
        _ => return None,
    };
    let index = parts.next()?.parse().ok()?;
    Some((kind, index, parts.next()?))
}

/// A command's output as kept: its end, where errors and summaries are.
fn kept_output(text: &str) -> String {
    let text = text.trim();
    if text.len() <= OUTPUT_KEPT {
        return text.to_string();
    }
    let mut from = text.len() - OUTPUT_KEPT;
    while !text.is_char_boundary(from) {
        from += 1;
    }
    format!("…{}", &text[from..])
}
