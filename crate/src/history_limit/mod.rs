//! The history limit (SPEC §5), run on a copy before every request; the stored trajectory keeps
//! everything. Four stages in order, each running only while the estimate is over the budget,
//! except **fix tool calls**, which always runs:
//! 1. deduplicate context files, 2. compress tool results, 3. fix tool calls, 4. limit history.
//! Exemptions (seed 001) decide what stage 4 may drop. `CompressionStrength` says how far it
//! went; a history that still does not fit is an error, and the request is not sent.

use crate::message::{ChatMessage, Content, Role, ToolCall};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::{Borrow, Cow};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

mod context_files;
mod tool_calls;
mod turns;

use context_files::{compress_tool_results, deduplicate_context_files};
use tool_calls::fix_tool_call_list;
pub use tool_calls::fix_tool_calls;
use turns::{cut_protected_tail, limit_turns};

/// How far the limit had to go (SPEC §5).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
#[serde(rename_all = "snake_case")]
pub enum CompressionStrength {
    /// Nothing was compressed (repairs of stage 3 do not count).
    #[default]
    Absent,
    /// Context files were deduplicated or tool results compressed (stages 1–2).
    Low,
    /// Whole old turns were dropped (stage 4).
    Medium,
    /// The protected tail (the last user message and after) itself had to be cut.
    High,
}

use crate::hidden::{exemption, Exemption};
use crate::provider::ProviderKind;

pub const DROP_ON_AGE_USER_TURNS: usize = 2;
pub const KEEP_RECENT_N: usize = 3;
/// Stage 2 compresses results longer than this into a preview of `PREVIEW_CHARS`.
pub const COMPRESS_OVER_CHARS: usize = 500;
pub const PREVIEW_CHARS: usize = 200;

#[derive(Error, Debug, Clone, PartialEq, Eq, Serialize)]
pub enum HistoryLimitError {
    #[error("the history needs about {estimated} tokens even after every compression stage; the budget is {budget} (n_ctx − max_tokens − reserve): start a new chat, remove large messages, or raise the context size")]
    TooLarge { estimated: u64, budget: u64 },
}

/// Output tokens kept free when the thread sets no `max_tokens` (at most an eighth of n_ctx).
pub const DEFAULT_OUTPUT_TOKENS: u64 = 4096;

/// Tokens the history may take (SPEC §5): `n_ctx − max_tokens − reserve` (reserve: 2% of
/// n_ctx), less what the system prompt and tool schemas take (`fixed_chars` / 4).
pub fn history_budget(n_ctx: u64, max_tokens: Option<u64>, fixed_chars: usize) -> u64 {
    let output = max_tokens.unwrap_or_else(|| DEFAULT_OUTPUT_TOKENS.min(n_ctx / 8));
    let reserve = n_ctx / 50;
    n_ctx.saturating_sub(output + reserve + fixed_chars as u64 / 4)
}

/// The copy a request is built from, and what it took. Messages no stage touched are borrowed
/// from the stored history, so limiting a long chat copies only what it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Limited<'a> {
    pub messages: Vec<LimitedMessage<'a>>,
    pub strength: CompressionStrength,
    pub estimated_tokens: u64,
    /// Repairs made by stage 3 (calls and results removed, moved or described).
    pub repairs: usize,
}

/// A message of the limited copy: the stored one, borrowed, until a stage changes it; then its
/// changed copy, boxed — the stages reorder and cut a list of small handles, not of whole
/// messages (issue 20: moving 5 000 messages of a few hundred bytes each was a tenth of a request).
#[derive(Debug, Clone, PartialEq)]
pub enum LimitedMessage<'a> {
    Stored(&'a ChatMessage),
    Changed(Box<ChatMessage>),
}

impl std::ops::Deref for LimitedMessage<'_> {
    type Target = ChatMessage;

    fn deref(&self) -> &ChatMessage {
        match self {
            LimitedMessage::Stored(message) => message,
            LimitedMessage::Changed(message) => message,
        }
    }
}

impl Borrow<ChatMessage> for LimitedMessage<'_> {
    fn borrow(&self) -> &ChatMessage {
        self
    }
}

impl LimitedMessage<'_> {
    fn changed(message: ChatMessage) -> Self {
        LimitedMessage::Changed(Box::new(message))
    }

    /// Gives the message new content without copying the old.
    fn set_content(&mut self, content: Content) {
        match self {
            LimitedMessage::Stored(message) => {
                *self = LimitedMessage::changed(message.with_content(content))
            }
            LimitedMessage::Changed(message) => message.content = content,
        }
    }

    pub fn into_owned(self) -> ChatMessage {
        match self {
            LimitedMessage::Stored(message) => message.clone(),
            LimitedMessage::Changed(message) => *message,
        }
    }
}

/// SPEC §5's estimate for one message: characters / 4 + 10, and each image as a middle-ground
/// provider counts it (`images::image_tokens`; 1 000 when its size cannot be read).
pub fn estimate_tokens(message: &ChatMessage) -> u64 {
    estimate_tokens_for(message, None)
}

/// [`estimate_tokens`] with the images counted as provider `kind` counts them.
pub fn estimate_tokens_for(message: &ChatMessage, kind: Option<ProviderKind>) -> u64 {
    estimate_parts(&message.content, message.tool_calls(), kind)
}

/// The same estimate of a message's content and tool calls (a linearized message's too).
pub fn estimate_parts(
    content: &Content,
    calls: &[crate::message::ToolCall],
    kind: Option<ProviderKind>,
) -> u64 {
    let mut chars = content_chars(content) as u64;
    for call in calls {
        chars += (call.function.name.len() + call.function.arguments.len()) as u64;
    }
    let images: u64 = match content {
        Content::Parts(parts) => parts
            .iter()
            .filter(|p| crate::message::is_image_part(p))
            .map(|p| crate::images::part_tokens(image_rule(kind), p))
            .sum(),
        Content::Text(_) => 0,
    };
    chars / 4 + 10 + images
}

/// How `kind` counts images (the middle ground where no provider is named).
fn image_rule(kind: Option<ProviderKind>) -> crate::images::ImageRule {
    use crate::images::ImageRule;
    match kind {
        Some(ProviderKind::OpenaiChat | ProviderKind::OpenaiResponses) => ImageRule::OpenAi,
        Some(ProviderKind::Gemini) => ImageRule::Gemini,
        _ => ImageRule::Anthropic,
    }
}

fn content_chars(content: &Content) -> usize {
    match content {
        Content::Text(text) => text.chars().count(),
        Content::Parts(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .map(|t| t.chars().count() + 1)
            .sum(),
    }
}

/// Whether linearize sends the message at all (UI-only, reports and summarized sources are not).
fn is_sent(message: &ChatMessage, suppressed: &BTreeSet<String>) -> bool {
    !message.is_ui_only()
        && message.role != Role::CompressionReport
        && !suppressed.contains(&message.message_id)
}

/// The running estimate of a copy being limited.
struct Work<'a> {
    messages: Vec<LimitedMessage<'a>>,
    tokens: Vec<u64>,
    total: u64,
    budget: u64,
    /// Provider-reported tokens per estimated token (1.0 until usage is known).
    calibration: f64,
    suppressed: BTreeSet<String>,
    /// Whose accounting the images get (the provider the request is for).
    kind: Option<ProviderKind>,
}

/// The estimate of what a request for `history` would send (SPEC §5): what linearize leaves
/// out counts nothing, and the sum is calibrated by the provider's last reported usage.
pub fn estimate_history(history: &[ChatMessage]) -> u64 {
    let (tokens, calibration, _) = token_table(history, None);
    (tokens.iter().sum::<u64>() as f64 * calibration).ceil() as u64
}

fn token_table<M: Borrow<ChatMessage>>(
    messages: &[M],
    kind: Option<ProviderKind>,
) -> (Vec<u64>, f64, BTreeSet<String>) {
    let suppressed = crate::hidden::summarized_sources(messages);
    let tokens: Vec<u64> = messages
        .iter()
        .map(|m| {
            let m = m.borrow();
            if is_sent(m, &suppressed) {
                estimate_tokens_for(m, kind)
            } else {
                0
            }
        })
        .collect();
    let calibration = calibration(messages, &tokens);
    (tokens, calibration, suppressed)
}

impl<'a> Work<'a> {
    fn new(messages: Vec<LimitedMessage<'a>>, budget: u64, kind: Option<ProviderKind>) -> Self {
        let (tokens, calibration, suppressed) = token_table(&messages, kind);
        let total = tokens.iter().sum();
        Work {
            messages,
            tokens,
            total,
            budget,
            calibration,
            suppressed,
            kind,
        }
    }

    fn estimated(&self) -> u64 {
        (self.total as f64 * self.calibration).ceil() as u64
    }

    fn over(&self) -> bool {
        self.estimated() > self.budget
    }

    /// The work after stage 3 reordered and repaired the list: an unchanged message keeps its
    /// estimate (`origins[j]`: its index before), the others are estimated again.
    fn rebuilt(self, messages: Vec<LimitedMessage<'a>>, origins: &[Option<usize>]) -> Self {
        let suppressed = crate::hidden::summarized_sources(&messages);
        if suppressed != self.suppressed {
            return Work::new(messages, self.budget, self.kind);
        }
        let tokens: Vec<u64> = messages
            .iter()
            .zip(origins)
            .map(
                |(m, origin)| match origin.and_then(|i| self.tokens.get(i)) {
                    Some(&known) => known,
                    None if is_sent(m, &suppressed) => estimate_tokens_for(m, self.kind),
                    None => 0,
                },
            )
            .collect();
        let calibration = calibration(&messages, &tokens);
        Work {
            total: tokens.iter().sum(),
            messages,
            tokens,
            budget: self.budget,
            calibration,
            suppressed,
            kind: self.kind,
        }
    }

    fn refresh(&mut self, index: usize) {
        let Some(message) = self.messages.get(index) else {
            return;
        };
        let new = if is_sent(message, &self.suppressed) {
            estimate_tokens_for(message, self.kind)
        } else {
            0
        };
        self.total = self.total - self.tokens[index] + new;
        self.tokens[index] = new;
    }

    /// Removes the messages whose index is in `drop`, keeping the estimate right.
    fn remove(&mut self, drop: &BTreeSet<usize>) {
        if drop.is_empty() {
            return;
        }
        // In place, walking the sorted indexes beside the list: a long history is not copied
        // into new vectors for each cut, nor is each index looked up.
        self.total -= drop.iter().filter_map(|&i| self.tokens.get(i)).sum::<u64>();
        retain_unlisted(&mut self.messages, drop);
        retain_unlisted(&mut self.tokens, drop);
    }

    /// Where the protected tail starts: the last user message (everything, if there is none).
    fn tail_start(&self) -> usize {
        self.messages
            .iter()
            .rposition(|m| m.role == Role::User)
            .unwrap_or(0)
    }
}

/// Keeps the items whose index is not in `drop` (sorted), in order.
fn retain_unlisted<T>(items: &mut Vec<T>, drop: &BTreeSet<usize>) {
    let mut dropped = drop.iter().peekable();
    let mut index = 0;
    items.retain(|_| {
        let keep = dropped.next_if_eq(&&index).is_none();
        index += 1;
        keep
    });
}

/// The ratio of the provider's last reported `prompt_tokens` to our estimate of the messages it
/// covered, kept within [0.5, 4] so one odd report cannot swing the limit wildly. A report from
/// before the last summary counted messages no longer sent, so it does not count.
fn calibration<M: Borrow<ChatMessage>>(messages: &[M], tokens: &[u64]) -> f64 {
    let Some(anchor) = messages.iter().rposition(|m| {
        m.borrow()
            .usage
            .as_ref()
            .and_then(|u| u.prompt_tokens)
            .is_some()
    }) else {
        return 1.0;
    };
    let last_summary = messages.iter().rposition(|m| m.borrow().is_compression());
    if last_summary.is_some_and(|s| s > anchor) {
        return 1.0;
    }
    let reported = messages[anchor]
        .borrow()
        .usage
        .as_ref()
        .and_then(|u| u.prompt_tokens)
        .unwrap_or(0) as f64;
    let estimated: u64 = tokens[..anchor].iter().sum();
    if estimated == 0 || reported == 0.0 {
        return 1.0;
    }
    (reported / estimated as f64).clamp(0.5, 4.0)
}

/// Runs the four stages on a copy of `history` for a request with `budget` tokens for messages
/// (`None`: no limit, only the repairs of stage 3).
pub fn limit_history(
    history: &[ChatMessage],
    budget: Option<u64>,
) -> Result<Limited<'_>, HistoryLimitError> {
    limit_history_for(history, budget, None)
}

/// [`limit_history`] for a request to provider `kind` (its images counted its way).
pub fn limit_history_for(
    history: &[ChatMessage],
    budget: Option<u64>,
    kind: Option<ProviderKind>,
) -> Result<Limited<'_>, HistoryLimitError> {
    let copy = history
        .iter()
        .map(|message| {
            if message.role == Role::Diff {
                let mut result = message.clone();
                result.role = Role::Tool;
                LimitedMessage::changed(result)
            } else {
                LimitedMessage::Stored(message)
            }
        })
        .collect();
    let mut work = Work::new(copy, budget.unwrap_or(u64::MAX), kind);
    let mut strength = CompressionStrength::Absent;
    if work.over() && deduplicate_context_files(&mut work) {
        strength = CompressionStrength::Low;
    }
    if work.over() && compress_tool_results(&mut work, false) {
        strength = CompressionStrength::Low;
    }
    let (fixed, origins, repairs) = fix_tool_call_list(std::mem::take(&mut work.messages));
    work = work.rebuilt(fixed, &origins);
    if work.over() && limit_turns(&mut work) {
        strength = CompressionStrength::Medium;
    }
    if work.over() && cut_protected_tail(&mut work) {
        strength = CompressionStrength::High;
    }
    if work.over() {
        return Err(HistoryLimitError::TooLarge {
            estimated: work.estimated(),
            budget: work.budget,
        });
    }
    Ok(Limited {
        estimated_tokens: work.estimated(),
        messages: work.messages,
        strength,
        repairs,
    })
}
