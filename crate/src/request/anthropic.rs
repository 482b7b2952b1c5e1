//! The Anthropic Messages request (SPEC §6.1, §6.5): system prompt as a text block, tools as
//! `input_schema`, images as base64 or URL sources, tool calls as `tool_use` blocks and their
//! results as `tool_result` blocks in the next user turn, roles strictly alternating.
//!
//! Thinking blocks of the open tool-use turn (after the last user message) go back unchanged —
//! byte for byte, with their signatures — minus the engine's own `index` merge key; elsewhere
//! they are stripped (SPEC §3.3, §7). Blocks without a signature (a stopped partial) never go.

use super::body::RequestBody;
use super::common::{data_url, image_parts, laid_out, model_of};
use super::tiers::TierEnd;
use super::{ProviderRequest, RequestInput};
use crate::history_limit::LimitedMessage;
use crate::linearize::{Linear, Thinking};
use crate::message::{Content, Role};
use crate::provider::ProviderKind;
use crate::tools::ToolSpec;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Anthropic requires `max_tokens`; this is used when the thread sets none.
pub const DEFAULT_MAX_TOKENS: u64 = 8192;

pub(super) fn anthropic(input: &RequestInput, history: &[LimitedMessage<'_>]) -> ProviderRequest {
    let thinking = if input.thread.thinking_budget.is_some() {
        Thinking::KeepCurrentTurn
    } else {
        Thinking::Off
    };
    let layout = laid_out(input, history, thinking);
    let mut system: Vec<SystemBlock> = layout
        .system
        .as_deref()
        .map(|text| SystemBlock {
            kind: "text",
            text,
            cache_control: None,
        })
        .into_iter()
        .collect();
    let (mut messages, ends) = turns(&layout.messages, &layout.tier_ends);
    let mut tools: Vec<Tool> = input.tools.iter().map(Tool::of).collect();
    place_cache_breakpoints(&mut system, &mut tools, &mut messages, &ends);
    let budget = input.thread.thinking_budget;
    let body = Body {
        model: model_of(input),
        max_tokens: input.thread.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        system: (!system.is_empty()).then_some(system),
        messages,
        tools,
        thinking: budget.map(|budget_tokens| ThinkingConfig {
            kind: "enabled",
            budget_tokens,
        }),
        temperature: input.thread.temperature.filter(|_| budget.is_none()),
        stream: true,
    };
    let mut headers = input.provider.headers.clone();
    headers.insert("anthropic-version".into(), "2023-06-01".into());
    headers.insert(
        "anthropic-dangerous-direct-browser-access".into(),
        "true".into(),
    );
    ProviderRequest {
        provider: ProviderKind::Anthropic,
        url: format!("{}/messages", input.provider.base_url.trim_end_matches('/')),
        headers,
        body: RequestBody::write(&body),
        compression_strength: Default::default(),
        left_out: Default::default(),
        tiers: layout.tiers,
    }
}

/// The body, written straight from the linearized history (issue 20); keys in the API's order,
/// `cache_control` last in a block (the golden files hold it byte for byte).
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<Vec<SystemBlock<'a>>>,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    stream: bool,
}

#[derive(Serialize)]
struct ThinkingConfig {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u64,
}

/// `{"type": "ephemeral"}`: a prompt-cache breakpoint.
#[derive(Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Option<CacheControl> = Some(CacheControl { kind: "ephemeral" });

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

impl<'a> Tool<'a> {
    fn of(spec: &'a ToolSpec) -> Self {
        Tool {
            name: &spec.name,
            description: &spec.description,
            input_schema: &spec.parameters,
            cache_control: None,
        }
    }
}

#[derive(Serialize)]
struct Turn<'a> {
    role: &'static str,
    content: Vec<Marked<'a>>,
}

/// A content block and whether a cache breakpoint sits on it.
struct Marked<'a> {
    block: Block<'a>,
    cache: bool,
}

enum Block<'a> {
    Text(Cow<'a, str>),
    Image(Image<'a>),
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: ResultContent<'a>,
        is_error: bool,
    },
    /// As the provider sent it, minus the engine's `index`.
    Thinking(Map<String, Value>),
}

enum Image<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url(&'a str),
}

#[derive(Serialize)]
#[serde(untagged)]
enum ResultContent<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

impl Serialize for Marked<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.block.entries(&mut map)?;
        if self.cache {
            map.serialize_entry("cache_control", &EPHEMERAL)?;
        }
        map.end()
    }
}

impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.entries(&mut map)?;
        map.end()
    }
}

impl Block<'_> {
    fn entries<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        match self {
            Block::Text(text) => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)
            }
            Block::Image(image) => {
                map.serialize_entry("type", "image")?;
                map.serialize_entry("source", image)
            }
            Block::ToolUse { id, name, input } => {
                map.serialize_entry("type", "tool_use")?;
                map.serialize_entry("id", id)?;
                map.serialize_entry("name", name)?;
                map.serialize_entry("input", input)
            }
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                map.serialize_entry("type", "tool_result")?;
                map.serialize_entry("tool_use_id", tool_use_id)?;
                map.serialize_entry("content", content)?;
                if *is_error {
                    map.serialize_entry("is_error", &true)?;
                }
                Ok(())
            }
            Block::Thinking(block) => block
                .iter()
                .try_for_each(|(key, value)| map.serialize_entry(key, value)),
        }
    }

    /// Thinking blocks cannot be marked; every other content block can.
    fn can_carry_cache_control(&self) -> bool {
        !matches!(self, Block::Thinking(_))
    }
}

impl Serialize for Image<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Image::Base64 { media_type, data } => {
                map.serialize_entry("type", "base64")?;
                map.serialize_entry("media_type", media_type)?;
                map.serialize_entry("data", data)?;
            }
            Image::Url(url) => {
                map.serialize_entry("type", "url")?;
                map.serialize_entry("url", url)?;
            }
        }
        map.end()
    }
}

/// At most 4 `cache_control` breakpoints: one on the last turn, always (it moves every round
/// and is read back whole by the next one when nothing before it changed: a tool loop's rounds
/// and an unchanged prompt stay cached), and seed 002's at the end of the cached tiers, most
/// stable first, with the three left — L0 on the system prompt (which caches the tools before
/// it, SPEC §6.5) or on L0's last history message; when L1, L2 and L3 all hold something, L3's
/// end goes without (a change there is read back from L2's end). Without a system prompt the
/// tools' end takes L0's place.
fn place_cache_breakpoints(
    system: &mut [SystemBlock],
    tools: &mut [Tool],
    messages: &mut [Turn],
    ends: &[BlockEnd],
) {
    const MOST: usize = 4;
    let mut used = 0;
    if let Some(turn) = messages.len().checked_sub(1) {
        let block = messages[turn].content.len().saturating_sub(1);
        used += usize::from(mark(messages, turn, block));
    }
    if system.is_empty() {
        if let Some(last_tool) = tools.last_mut() {
            last_tool.cache_control = EPHEMERAL;
            used += 1;
        }
    }
    for end in ends {
        if used == MOST {
            break;
        }
        match *end {
            BlockEnd::System => {
                if let Some(block) = system.last_mut() {
                    block.cache_control = EPHEMERAL;
                    used += 1;
                }
            }
            BlockEnd::Block(turn, block) => used += usize::from(mark(messages, turn, block)),
        }
    }
}

/// Marks the block at `(turn, block)`, or the nearest one before it in its turn that can carry
/// a marker; whether one was newly marked.
fn mark(messages: &mut [Turn], turn: usize, block: usize) -> bool {
    let Some(turn) = messages.get_mut(turn) else {
        return false;
    };
    let upto = (block + 1).min(turn.content.len());
    match turn.content[..upto]
        .iter_mut()
        .rev()
        .find(|m| m.block.can_carry_cache_control())
    {
        Some(marked) if !marked.cache => {
            marked.cache = true;
            true
        }
        _ => false,
    }
}

/// Linearized messages → alternating `user`/`assistant` turns of content blocks, and the turn
/// each tier ends in (a message's turn may have merged with the next messages of its role).
fn turns<'a>(history: &'a [Linear<'a>], ends: &[TierEnd]) -> (Vec<Turn<'a>>, Vec<BlockEnd>) {
    let mut turns: Vec<Turn> = Vec::new();
    // Where each message's last block sits: (turn, block); `None` before any block.
    let mut last_block: Vec<Option<(usize, usize)>> = Vec::with_capacity(history.len());
    for message in history {
        last_block.push(
            turns
                .last()
                .map(|t| (turns.len() - 1, t.content.len().saturating_sub(1))),
        );
        let at = last_block.len() - 1;
        let (role, blocks) = match message.role {
            Role::Assistant => ("assistant", assistant_blocks(message)),
            Role::Tool => ("user", vec![tool_result(message)]),
            _ => ("user", content_blocks(&message.content)),
        };
        if blocks.is_empty() {
            continue;
        }
        let blocks = blocks.into_iter().map(|block| Marked {
            block,
            cache: false,
        });
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => turns.push(Turn {
                role,
                content: blocks.collect(),
            }),
        }
        last_block[at] = turns.last().map(|t| (turns.len() - 1, t.content.len() - 1));
    }
    let ends = ends
        .iter()
        .filter_map(|end| match end {
            TierEnd::System => Some(BlockEnd::System),
            TierEnd::Message(i) => last_block
                .get(*i)
                .copied()
                .flatten()
                .map(|(turn, block)| BlockEnd::Block(turn, block)),
        })
        .collect();
    (turns, ends)
}

/// A tier's end in the body: the system prompt, or a block of a turn.
#[derive(Clone, Copy, PartialEq)]
enum BlockEnd {
    System,
    Block(usize, usize),
}

fn assistant_blocks<'a>(message: &'a Linear<'a>) -> Vec<Block<'a>> {
    let mut blocks: Vec<Block> = message
        .thinking_blocks
        .into_iter()
        .flatten()
        .filter_map(thinking_block)
        .collect();
    let text = message.content.as_text();
    if !text.is_empty() {
        blocks.push(Block::Text(text));
    }
    for call in message.tool_calls() {
        let input = serde_json::from_str::<Value>(&call.function.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| Value::Object(Map::new()));
        blocks.push(Block::ToolUse {
            id: &call.id,
            name: &call.function.name,
            input,
        });
    }
    blocks
}

/// A thinking block as Anthropic sent it: without the engine's `index`; only when complete.
fn thinking_block(block: &Value) -> Option<Block<'static>> {
    let mut block = block.as_object()?.clone();
    block.remove("index");
    let complete = match block.get("type").and_then(Value::as_str) {
        Some("thinking") => block
            .get("signature")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty()),
        Some("redacted_thinking") => block.get("data").and_then(Value::as_str).is_some(),
        _ => false,
    };
    complete.then_some(Block::Thinking(block))
}

fn tool_result<'a>(message: &'a Linear<'a>) -> Block<'a> {
    let content = if image_parts(&message.content).is_empty() {
        ResultContent::Text(message.content.as_text())
    } else {
        // Anthropic takes images inside a tool result.
        ResultContent::Blocks(content_blocks(&message.content))
    };
    Block::ToolResult {
        tool_use_id: message.tool_call_id.unwrap_or_default(),
        content,
        is_error: message.tool_failed == Some(true),
    }
}

fn content_blocks(content: &Content) -> Vec<Block<'_>> {
    match content {
        Content::Text(text) if text.is_empty() => Vec::new(),
        Content::Text(text) => vec![Block::Text(Cow::Borrowed(text))],
        Content::Parts(parts) => parts.iter().filter_map(part_block).collect(),
    }
}

fn part_block(part: &Value) -> Option<Block<'_>> {
    match part.get("type").and_then(Value::as_str)? {
        "text" => Some(Block::Text(Cow::Borrowed(part.get("text")?.as_str()?))),
        "image_url" => image_block(part.get("image_url")?.get("url")?.as_str()?),
        _ => None,
    }
}

/// `data:<mime>;base64,<data>` → a base64 source; an http(s) URL → a URL source.
fn image_block(url: &str) -> Option<Block<'_>> {
    if url.starts_with("data:") {
        let (media_type, data) = data_url(url)?;
        return Some(Block::Image(Image::Base64 { media_type, data }));
    }
    Some(Block::Image(Image::Url(url)))
}
