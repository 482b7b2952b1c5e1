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
    let mut chars = content_chars(&message.content) as u64;
    for call in message.tool_calls() {
        chars += (call.function.name.len() + call.function.arguments.len()) as u64;
    }
    let images: u64 = match &message.content {
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

// ---- stage 1: deduplicate context files ----

/// One file range shown in a `context_file` message.
struct FileCopy {
    message: usize,
    entry: usize,
    name: String,
    lines: (u64, u64),
    chars: usize,
}

fn context_entries(content: &Content) -> Option<Vec<Value>> {
    match content {
        Content::Text(text) => serde_json::from_str::<Vec<Value>>(text).ok(),
        Content::Parts(parts) => Some(parts.clone()),
    }
}

fn file_copies(messages: &[LimitedMessage<'_>]) -> Vec<FileCopy> {
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
fn deduplicate_context_files(work: &mut Work) -> bool {
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

fn replace_with_note(work: &mut Work, copy: &FileCopy) -> bool {
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
fn compress_tool_results(work: &mut Work, in_tail: bool) -> bool {
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
fn compressed(preview: &str, chars: usize) -> String {
    let note =
        format!("\n[compressed: kept {PREVIEW_CHARS} of {chars} characters of this tool result]");
    let mut text = String::with_capacity(preview.len() + note.len());
    text.push_str(preview);
    text.push_str(&note);
    text
}

// ---- stage 3: fix tool calls ----

/// Repairs tool-call pairing on the copy; returns how many things it changed. Calls whose
/// arguments are not a JSON object are described in a `cd_instruction` instead (a provider
/// rejects them); a call keeps its place only if it has a result; each result goes right after
/// its call; one result per call; results without a call are dropped.
pub fn fix_tool_calls(messages: Vec<ChatMessage>) -> (Vec<ChatMessage>, usize) {
    let (fixed, _, changes) =
        fix_tool_call_list(messages.into_iter().map(LimitedMessage::changed).collect());
    (
        fixed.into_iter().map(LimitedMessage::into_owned).collect(),
        changes,
    )
}

/// Where stage 3 puts a message of its input.
enum Placed {
    /// As it is.
    Kept(usize),
    /// An assistant message with only the calls at these positions (the others unanswered or
    /// repeated).
    WithCalls(usize, Vec<usize>),
}

/// Stage 3's order for the list, worked out on borrowed ids (no id is copied or moved), and
/// how many repairs it makes.
struct Order {
    placed: Vec<Placed>,
    repairs: usize,
}

/// Stage 3 on the copy: the fixed list, where each message came from in the input when it is
/// unchanged (so its estimate is not computed again), and how many repairs were made. The order
/// is decided first on the borrowed list; then the messages move once, into the output.
#[allow(clippy::type_complexity)]
fn fix_tool_call_list(
    messages: Vec<LimitedMessage<'_>>,
) -> (Vec<LimitedMessage<'_>>, Vec<Option<usize>>, usize) {
    let (messages, described) = describe_bad_arguments(messages);
    let order = order_calls_and_results(&messages);
    let same_indices = described == 0;
    let mut slots: Vec<Option<LimitedMessage<'_>>> = messages.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(order.placed.len());
    let mut origins = Vec::with_capacity(order.placed.len());
    for placed in order.placed {
        match placed {
            Placed::Kept(i) => {
                if let Some(message) = slots.get_mut(i).and_then(Option::take) {
                    out.push(message);
                    origins.push(same_indices.then_some(i));
                }
            }
            Placed::WithCalls(i, keep) => {
                if let Some(message) = slots.get_mut(i).and_then(Option::take) {
                    out.push(LimitedMessage::changed(with_calls(message, &keep)));
                    origins.push(None);
                }
            }
        }
    }
    (out, origins, described + order.repairs)
}

/// Each call's result right after it (the first result per call wins), calls without a result
/// dropped, repeated calls dropped, results without a call dropped; everything else in order.
fn order_calls_and_results(messages: &[LimitedMessage<'_>]) -> Order {
    let mut repairs = 0;
    let mut result_at: FxHashMap<&str, usize> = FxHashMap::default();
    for (i, message) in messages.iter().enumerate() {
        if message.role != Role::Tool {
            continue;
        }
        match message.tool_call_id.as_deref() {
            Some(id) if !result_at.contains_key(id) => {
                result_at.insert(id, i);
            }
            // A duplicated result (the first is kept), or one naming no call at all.
            _ => repairs += 1,
        }
    }
    let called: FxHashSet<&str> = messages
        .iter()
        .filter(|m| m.role != Role::Tool)
        .flat_map(|m| m.tool_calls().iter().map(|c| c.id.as_str()))
        .collect();
    repairs += result_at.keys().filter(|id| !called.contains(*id)).count();
    let mut taken = vec![false; messages.len()];
    let mut placed = Vec::with_capacity(messages.len());
    for (i, message) in messages.iter().enumerate() {
        if message.role == Role::Tool {
            continue;
        }
        let calls = message.tool_calls();
        if message.role != Role::Assistant || calls.is_empty() {
            placed.push(Placed::Kept(i));
            continue;
        }
        let answered = |id: &str| result_at.get(id).is_some_and(|&r| !taken[r]);
        let keep: Vec<usize> = (0..calls.len())
            .filter(|&c| {
                let id = calls[c].id.as_str();
                answered(id) && !calls[..c].iter().any(|earlier| earlier.id == id)
            })
            .collect();
        repairs += calls.len() - keep.len();
        if keep.len() == calls.len() {
            placed.push(Placed::Kept(i));
        } else if !keep.is_empty()
            || !message.content.is_empty()
            || message.thinking_blocks.is_some()
        {
            placed.push(Placed::WithCalls(i, keep.clone()));
        } else {
            continue;
        }
        for &c in &keep {
            if let Some(&r) = result_at.get(calls[c].id.as_str()) {
                if !taken[r] {
                    taken[r] = true;
                    placed.push(Placed::Kept(r));
                }
            }
        }
    }
    Order { placed, repairs }
}

/// The message with only the calls at positions `keep` (none: no `tool_calls` at all).
fn with_calls(message: LimitedMessage<'_>, keep: &[usize]) -> ChatMessage {
    let calls: Vec<ToolCall> = keep
        .iter()
        .filter_map(|&c| message.tool_calls().get(c).cloned())
        .collect();
    let mut message = match message {
        LimitedMessage::Stored(stored) => ChatMessage {
            tool_calls: None,
            ..stored.with_content(stored.content.clone())
        },
        LimitedMessage::Changed(changed) => *changed,
    };
    message.tool_calls = (!calls.is_empty()).then_some(calls);
    message
}

/// Whether a call's arguments are a JSON object (validated without building a value).
fn is_json_object(arguments: &str) -> bool {
    arguments.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(arguments).is_ok()
}

/// Takes calls with non-object arguments out of their message; a `cd_instruction` after it says
/// what the model tried, so it can call again properly. Their results go with them.
fn describe_bad_arguments(messages: Vec<LimitedMessage<'_>>) -> (Vec<LimitedMessage<'_>>, usize) {
    let all_good = messages.iter().all(|m| {
        m.tool_calls()
            .iter()
            .all(|c| is_json_object(&c.function.arguments))
    });
    if all_good {
        return (messages, 0);
    }
    let mut bad_ids = BTreeSet::new();
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        if message.role == Role::Tool
            && message
                .tool_call_id
                .as_ref()
                .is_some_and(|id| bad_ids.contains(id))
        {
            continue;
        }
        if message
            .tool_calls()
            .iter()
            .all(|c| is_json_object(&c.function.arguments))
        {
            out.push(message);
            continue;
        }
        let mut message = message.into_owned();
        let calls = message.tool_calls.take().unwrap_or_default();
        let (good, bad): (Vec<_>, Vec<_>) = calls
            .into_iter()
            .partition(|c| is_json_object(&c.function.arguments));
        message.tool_calls = (!good.is_empty()).then_some(good);
        let id = message.message_id.clone();
        if message.tool_calls.is_some() || !message.content.is_empty() {
            out.push(LimitedMessage::changed(message));
        }
        if bad.is_empty() {
            continue;
        }
        let described: Vec<String> = bad
            .iter()
            .map(|c| {
                bad_ids.insert(c.id.clone());
                let shown: String = c.function.arguments.chars().take(300).collect();
                format!(
                    "- `{}` with arguments that are not a JSON object: {shown}",
                    c.function.name
                )
            })
            .collect();
        out.push(LimitedMessage::changed(ChatMessage::text(
            format!("{id}-bad-args"),
            Role::CdInstruction,
            format!(
                "These tool calls were not run because their arguments are not a JSON object; call the tool again with a JSON object if it is still needed:\n{}",
                described.join("\n")
            ),
        )));
    }
    let changes = bad_ids.len();
    (out, changes)
}

// ---- stage 4: limit history ----

/// Drops aged `DropOnAge` events, surplus `KeepRecentN` events, then the oldest whole turns
/// outside the protected tail — never the system prompt, never a `Never` message.
fn limit_turns(work: &mut Work) -> bool {
    let mut changed = drop_exempt_by_rule(work);
    let tail = work.tail_start();
    let turn_starts: Vec<usize> = work
        .messages
        .iter()
        .enumerate()
        .filter(|(i, m)| m.role == Role::User && *i < tail)
        .map(|(i, _)| i)
        .collect();
    let mut drop = BTreeSet::new();
    let mut dropped_tokens = 0u64;
    // A turn runs from one user message to the next; what precedes the first user message is a
    // turn too (the system prompt in it stays).
    let mut bounds: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for &s in turn_starts.iter().chain(std::iter::once(&tail)) {
        if s > start {
            bounds.push((start, s));
        }
        start = s;
    }
    for (from, to) in bounds {
        if (work.total - dropped_tokens) as f64 * work.calibration <= work.budget as f64 {
            break;
        }
        for i in from..to {
            let message = &work.messages[i];
            if message.role == Role::System || exemption(message) == Exemption::Never {
                continue;
            }
            drop.insert(i);
            dropped_tokens += work.tokens[i];
        }
    }
    changed |= !drop.is_empty();
    work.remove(&drop);
    changed
}

fn drop_exempt_by_rule(work: &mut Work) -> bool {
    let user_turns: Vec<usize> = work
        .messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    let age_limit = user_turns
        .len()
        .checked_sub(DROP_ON_AGE_USER_TURNS)
        .and_then(|k| user_turns.get(k).copied())
        .unwrap_or(0);
    let mut seen_per_subkind: BTreeMap<String, usize> = BTreeMap::new();
    let mut drop = BTreeSet::new();
    for (i, message) in work.messages.iter().enumerate().rev() {
        match exemption(message) {
            Exemption::DropOnAge if i < age_limit => {
                drop.insert(i);
            }
            Exemption::KeepRecentN => {
                let subkind = message.event_subkind().unwrap_or("").to_string();
                let seen = seen_per_subkind.entry(subkind).or_insert(0);
                *seen += 1;
                if *seen > KEEP_RECENT_N {
                    drop.insert(i);
                }
            }
            _ => {}
        }
    }
    let changed = !drop.is_empty();
    work.remove(&drop);
    changed
}

/// The last resort: compress the tail's tool results, then drop its oldest messages after the
/// last user message (a call together with its results), never that user message or a plan.
fn cut_protected_tail(work: &mut Work) -> bool {
    let mut changed = compress_tool_results(work, true);
    let tail = work.tail_start();
    let mut drop = BTreeSet::new();
    let mut dropped_tokens = 0u64;
    // After the last user message, which stays; from the start when there is none.
    let mut i = match work.messages.get(tail) {
        Some(m) if m.role == Role::User => tail + 1,
        _ => tail,
    };
    while i < work.messages.len() {
        if (work.total - dropped_tokens) as f64 * work.calibration <= work.budget as f64 {
            break;
        }
        // A call and its results go together (stage 3 placed them right after it).
        let mut end = i + 1;
        if !work.messages[i].tool_calls().is_empty() {
            while end < work.messages.len() && work.messages[end].role == Role::Tool {
                end += 1;
            }
        }
        for j in i..end {
            if exemption(&work.messages[j]) != Exemption::Never {
                drop.insert(j);
                dropped_tokens += work.tokens[j];
            }
        }
        i = end;
    }
    changed |= !drop.is_empty();
    work.remove(&drop);
    changed
}
