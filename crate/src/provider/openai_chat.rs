//! The OpenAI Chat Completions decoder (SPEC §6.2), also for every OpenAI-compatible server.
//!
//! Only choice 0 is assembled (`n > 1` streams interleave choices). Tool-call fragments are
//! accumulated by their `index`, whatever number it starts from; `id`, `type` and `name` are set
//! once, never concatenated (some servers repeat them in every fragment); `arguments` append.
//! Reasoning comes as `reasoning_content` (DeepSeek, xAI) or `reasoning` (OpenRouter, Groq).
//! llama.cpp's server, asked with `return_progress`, says how far it has read the prompt in
//! `prompt_progress` (`{total, cache, processed, time_ms}`) before the first token.
//! A chunk with an `error` object ends the round as a failure carrying the provider's words.
//!
//! The common chunk (choice deltas, no usage, no error) is read typed, borrowing its strings
//! (issue 20: a `Value` tree per token was most of the decode time); anything else — a usage or
//! error chunk, a field of an unexpected type — goes through the lenient `Value` reading, and
//! both feed the same `Delta`.

use super::framed::{failure_from, json_object, non_empty_str, Events, Framed};
use super::{usage, DecodeItem, PromptProgress};
use crate::delta::DeltaOp;
use crate::error::StreamDecodeError;
use crate::message::ToolCall;
use crate::sse::SseEvent;
use litemap::LiteMap;
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

const PROVIDER: &str = "openai-chat";

/// The openai-chat stream decoder: the shared framing around `State`.
pub type Decoder = Framed<State>;

#[derive(Debug, Default)]
pub struct State {
    tool_calls: LiteMap<u64, ToolCall>,
    refusal_marked: bool,
    model_said: bool,
}

impl Events for State {
    const PROVIDER: &'static str = PROVIDER;

    fn event(
        &mut self,
        event: &SseEvent,
        items: &mut Vec<DecodeItem>,
    ) -> Result<(), StreamDecodeError> {
        if event.data.trim() == "[DONE]" {
            items.push(DecodeItem::Done);
            return Ok(());
        }
        if let Some(chunk) = TypedChunk::read(&event.data) {
            self.decode_typed(chunk, items);
            return Ok(());
        }
        let Some(chunk) = json_object(event, PROVIDER)? else {
            return Ok(());
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            // OpenRouter bills the failed generation and says so in the error chunk (SECURITY D4).
            if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
                items.push(DecodeItem::Op(DeltaOp::SetUsage {
                    usage: usage::openai_chat(usage),
                }));
            }
            items.push(DecodeItem::Failure(failure_from(error, "provider_error")));
            return Ok(());
        }
        self.decode_chunk(&chunk, items);
        Ok(())
    }

    fn end(&mut self, _items: &mut Vec<DecodeItem>) {}
}

/// A chunk with the common shape, its strings borrowed from the event's data.
#[derive(Deserialize)]
struct TypedChunk<'a> {
    #[serde(borrow)]
    choices: Vec<TypedChoice<'a>>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    /// Present (not null): the chunk is read as a `Value` instead.
    error: Option<IgnoredAny>,
    usage: Option<IgnoredAny>,
    prompt_progress: Option<TypedProgress>,
}

#[derive(Deserialize)]
struct TypedProgress {
    processed: u64,
    total: u64,
}

impl TypedProgress {
    fn item(&self) -> Option<DecodeItem> {
        (self.total > 0).then(|| {
            DecodeItem::PromptProgress(PromptProgress {
                processed: self.processed.min(self.total),
                total: self.total,
            })
        })
    }
}

#[derive(Deserialize)]
struct TypedChoice<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    delta: Option<TypedDelta<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct TypedDelta<'a> {
    #[serde(borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    refusal: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool_calls: Option<Vec<TypedFragment<'a>>>,
}

#[derive(Deserialize)]
struct TypedFragment<'a> {
    index: Option<u64>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: Option<TypedFunction<'a>>,
}

#[derive(Deserialize)]
struct TypedFunction<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<Cow<'a, str>>,
}

impl<'a> TypedChunk<'a> {
    /// The chunk, if it has the common shape: choices only, every read field of its type.
    fn read(data: &'a str) -> Option<Self> {
        // A JSON array would fill the struct by position; only an object is a chunk.
        if !data.trim_start().starts_with('{') {
            return None;
        }
        let chunk: TypedChunk = serde_json::from_str(data).ok()?;
        (chunk.error.is_none() && chunk.usage.is_none()).then_some(chunk)
    }
}

/// What one choice's delta says, however it was read.
#[derive(Default)]
struct Delta<'a> {
    reasoning: [Option<&'a str>; 2],
    content: Option<&'a str>,
    refusal: Option<&'a str>,
    tool_calls: Option<Vec<Fragment<'a>>>,
}

/// One tool-call fragment: `index` may be absent (see `index_without_one`).
struct Fragment<'a> {
    index: Option<u64>,
    id: Option<&'a str>,
    kind: Option<&'a str>,
    name: Option<&'a str>,
    arguments: Option<&'a str>,
}

fn non_empty<'a>(text: &'a Option<Cow<'_, str>>) -> Option<&'a str> {
    text.as_deref().filter(|s| !s.is_empty())
}

impl<'a> Delta<'a> {
    fn from_typed(delta: &'a TypedDelta<'_>) -> Self {
        Delta {
            reasoning: [
                non_empty(&delta.reasoning_content),
                non_empty(&delta.reasoning),
            ],
            content: non_empty(&delta.content),
            refusal: non_empty(&delta.refusal),
            tool_calls: delta.tool_calls.as_ref().map(|fragments| {
                fragments
                    .iter()
                    .map(|f| Fragment {
                        index: f.index,
                        id: non_empty(&f.id),
                        kind: non_empty(&f.kind),
                        name: f.function.as_ref().and_then(|f| non_empty(&f.name)),
                        arguments: f.function.as_ref().and_then(|f| f.arguments.as_deref()),
                    })
                    .collect()
            }),
        }
    }

    fn from_value(delta: &'a Value) -> Self {
        Delta {
            reasoning: [
                non_empty_str(delta.get("reasoning_content")),
                non_empty_str(delta.get("reasoning")),
            ],
            content: non_empty_str(delta.get("content")),
            refusal: non_empty_str(delta.get("refusal")),
            tool_calls: delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|fragments| {
                    fragments
                        .iter()
                        .map(|f| {
                            let function = f.get("function");
                            Fragment {
                                index: f.get("index").and_then(Value::as_u64),
                                id: non_empty_str(f.get("id")),
                                kind: non_empty_str(f.get("type")),
                                name: non_empty_str(function.and_then(|f| f.get("name"))),
                                arguments: function
                                    .and_then(|f| f.get("arguments"))
                                    .and_then(Value::as_str),
                            }
                        })
                        .collect()
                }),
        }
    }
}

impl State {
    /// The model, from the first chunk that names one.
    fn say_model(&mut self, model: Option<&str>, items: &mut Vec<DecodeItem>) {
        if let Some(model) = model.filter(|m| !self.model_said && !m.is_empty()) {
            self.model_said = true;
            items.push(DecodeItem::Model(model.to_string()));
        }
    }

    fn decode_typed(&mut self, chunk: TypedChunk<'_>, items: &mut Vec<DecodeItem>) {
        self.say_model(chunk.model.as_deref(), items);
        items.extend(chunk.prompt_progress.as_ref().and_then(TypedProgress::item));
        let Some(choice) = chunk.choices.iter().find(|c| c.index.unwrap_or(0) == 0) else {
            return;
        };
        if let Some(delta) = &choice.delta {
            self.decode_delta(Delta::from_typed(delta), items);
        }
        if let Some(reason) = non_empty(&choice.finish_reason) {
            items.push(DecodeItem::Finish(reason.to_string()));
        }
    }

    fn decode_chunk(&mut self, chunk: &Value, items: &mut Vec<DecodeItem>) {
        self.say_model(chunk.get("model").and_then(Value::as_str), items);
        let progress = chunk.get("prompt_progress");
        items.extend(
            progress
                .and_then(|p| TypedProgress::deserialize(p).ok())
                .as_ref()
                .and_then(TypedProgress::item),
        );
        if let Some(choice) = first_choice(chunk) {
            if let Some(delta) = choice.get("delta") {
                self.decode_delta(Delta::from_value(delta), items);
            }
            if let Some(reason) = non_empty_str(choice.get("finish_reason")) {
                items.push(DecodeItem::Finish(reason.to_string()));
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            items.push(DecodeItem::Op(DeltaOp::SetUsage {
                usage: usage::openai_chat(usage),
            }));
        }
    }

    fn decode_delta(&mut self, delta: Delta<'_>, items: &mut Vec<DecodeItem>) {
        for text in delta.reasoning.into_iter().flatten() {
            super::push_reasoning(items, &text);
        }
        if let Some(text) = delta.content {
            super::push_content(items, &text);
        }
        if let Some(text) = delta.refusal {
            self.decode_refusal(text, items);
        }
        if let Some(fragments) = delta.tool_calls {
            self.decode_tool_fragments(&fragments, items);
        }
    }

    /// A refusal is shown as the content (SPEC §6.3), marked once in `extra.refusal`.
    fn decode_refusal(&mut self, text: &str, items: &mut Vec<DecodeItem>) {
        if !self.refusal_marked {
            self.refusal_marked = true;
            let mut extra = Map::new();
            extra.insert("refusal".into(), Value::Bool(true));
            items.push(DecodeItem::Op(DeltaOp::MergeExtra { extra }));
        }
        items.push(DecodeItem::Op(DeltaOp::AppendContent {
            text: text.to_string(),
        }));
    }

    fn decode_tool_fragments(&mut self, fragments: &[Fragment<'_>], items: &mut Vec<DecodeItem>) {
        for (position, fragment) in fragments.iter().enumerate() {
            let index = fragment
                .index
                .unwrap_or_else(|| self.index_without_one(fragment, position));
            let call = self
                .tool_calls
                .entry(index)
                .or_insert_with(|| ToolCall::new("", "", ""));
            merge_fragment(call, fragment);
        }
        let tool_calls = self.tool_calls.values().cloned().collect();
        items.push(DecodeItem::Op(DeltaOp::SetToolCalls { tool_calls }));
    }
}

impl State {
    /// Some servers (Gemini's and Ollama's OpenAI endpoints, small routers) send no `index`:
    /// a fragment with a known `id` continues that call, one with a new `id` starts the next
    /// call, and one with neither continues the last call (or is the call at its position).
    fn index_without_one(&self, fragment: &Fragment<'_>, position: usize) -> u64 {
        let last = self.tool_calls.keys().next_back().copied();
        match fragment.id {
            Some(id) => self
                .tool_calls
                .iter()
                .find(|(_, call)| call.id == id)
                .map(|(index, _)| *index)
                .unwrap_or_else(|| last.map_or(position as u64, |i| (i + 1).max(position as u64))),
            None => last.unwrap_or(position as u64).max(position as u64),
        }
    }
}

fn first_choice(chunk: &Value) -> Option<&Value> {
    chunk
        .get("choices")?
        .as_array()?
        .iter()
        .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
}

fn merge_fragment(call: &mut ToolCall, fragment: &Fragment<'_>) {
    if let Some(id) = fragment.id {
        if call.id.is_empty() {
            call.id = id.to_string();
        }
    }
    if let Some(kind) = fragment.kind {
        call.kind = kind.to_string();
    }
    if let Some(name) = fragment.name {
        if call.function.name.is_empty() {
            call.function.name = name.to_string();
        }
    }
    if let Some(arguments) = fragment.arguments {
        call.function.arguments.push_str(arguments);
    }
}
