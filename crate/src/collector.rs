//! The collector (SPEC §6.2–6.3): what a provider stream's decoded items mean for the reply — the
//! delta ops to apply (adjacent appends batched), whether anything visible streamed, the finish
//! reason, the end marker, a failure. One code path: the session's turn loop collects every
//! chunk with it, and `decode` (the CLI, the wire-oracle tests, the benches) does the same.

use crate::delta::{Assembled, DeltaOp, Draft, StreamFailure};
use crate::provider::{DecodeItem, PromptProgress, ProviderKind, StreamDecoder};

#[derive(Debug, Default, Clone)]
pub struct Collector {
    /// Something the user can see has streamed: a retry would no longer be silent.
    pub visible: bool,
    pub finish_reason: Option<String>,
    pub failure: Option<StreamFailure>,
    /// The provider's explicit end marker arrived.
    pub done: bool,
    /// The model the provider said answered, if it said.
    pub model: Option<String>,
    /// How far the server last said it had read the prompt; gone once the answer has anything
    /// (text, reasoning, a tool call): the prompt is read by then.
    pub prompt_progress: Option<PromptProgress>,
}

impl Collector {
    /// Turns decoder items into ops and records the rest; stops at a failure.
    pub fn collect(&mut self, items: Vec<DecodeItem>) -> Vec<DeltaOp> {
        let mut ops: Vec<DeltaOp> = Vec::new();
        for item in items {
            match item {
                DecodeItem::Op(op) => {
                    self.prompt_progress = None;
                    self.visible |= op.is_visible_content();
                    push_batched(&mut ops, op);
                }
                DecodeItem::Finish(reason) => self.finish_reason = Some(reason),
                DecodeItem::Done => self.done = true,
                DecodeItem::Model(model) => self.model = Some(model),
                DecodeItem::PromptProgress(progress) => self.prompt_progress = Some(progress),
                DecodeItem::Failure(failure) => {
                    self.failure = Some(failure);
                    break;
                }
            }
        }
        ops
    }

    /// The finish reason of a complete stream (the end marker, or Gemini's finish reason);
    /// `None` when the stream is truncated.
    pub fn completion(&self, kind: ProviderKind) -> Option<String> {
        if self.failure.is_some() {
            return None;
        }
        StreamDecoder::completion(kind, self.finish_reason.as_deref(), self.done)
    }

    /// The assembled message of SPEC §6.3 from the draft the ops built: `finish_reason` is
    /// `error` after a failure, else what the provider said.
    pub fn assembled(&self, draft: Draft) -> Assembled {
        let finish_reason = if self.failure.is_some() {
            Some("error")
        } else {
            self.finish_reason.as_deref()
        };
        draft.into_assembled(finish_reason, self.failure.as_ref())
    }
}

fn push_batched(ops: &mut Vec<DeltaOp>, op: DeltaOp) {
    match (ops.last_mut(), op) {
        (Some(DeltaOp::AppendContent { text }), DeltaOp::AppendContent { text: more }) => {
            text.push_str(&more)
        }
        (Some(DeltaOp::AppendReasoning { text }), DeltaOp::AppendReasoning { text: more }) => {
            text.push_str(&more)
        }
        (Some(last @ DeltaOp::SetToolCalls { .. }), op @ DeltaOp::SetToolCalls { .. }) => {
            *last = op
        }
        (_, op) => ops.push(op),
    }
}
