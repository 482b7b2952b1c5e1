//! Placeholder decoder (being written): ignores every event.

use super::framed::Events;
use super::DecodeItem;
use crate::error::StreamDecodeError;
use crate::sse::SseEvent;

pub type Decoder = super::framed::Framed<State>;

#[derive(Debug, Default)]
pub struct State;

impl Events for State {
    const PROVIDER: &'static str = "x";
    fn event(&mut self, _: &SseEvent, _: &mut Vec<DecodeItem>) -> Result<(), StreamDecodeError> {
        Ok(())
    }
    fn end(&mut self, _: &mut Vec<DecodeItem>) {}
}
