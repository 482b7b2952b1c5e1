//! What the history limit leaves out of a request (SPEC §5, issue 35): the runtime carries the
//! counts of the last request sent, so the context gauge always says how much is left out, and
//! the chat holds a `history_limited` marker where it begins and wherever it has doubled or
//! halved since the last marker said.
//!
//! Why not a marker at every change: once a long chat outgrows its window, every request leaves
//! one more message out (two a turn with a tool call). A marker each time filled the chat with
//! "136 …", "137 …" notes that named the same first 50 messages, was stored and synced each
//! time, and was what grew a long session's memory fastest (issue 41).

use super::{ChatSession, Ctx};
use crate::event::LeftOutCounts;
use crate::request::LeftOut;

/// How many of the messages left out a marker names (the page lists them; the rest are counted).
const LEFT_OUT_LISTED: usize = 50;

/// The last request's counts and what the last marker said.
#[derive(Debug, Default, Clone)]
pub(super) struct LeftOutShown {
    pub(super) last: LeftOutCounts,
    marked: Option<LeftOutCounts>,
}

/// Whether `now` deserves a new marker after one that said `marked`: when something starts
/// being left out, a kind (messages dropped, tool results shortened) appears, or the total
/// has doubled or halved since — so a chat of any length holds a handful.
pub(crate) fn worth_a_marker(marked: Option<LeftOutCounts>, now: LeftOutCounts) -> bool {
    if now.is_empty() {
        return false;
    }
    let Some(marked) = marked else {
        return true;
    };
    let new_kind =
        (marked.dropped == 0 && now.dropped > 0) || (marked.shortened == 0 && now.shortened > 0);
    let (was, is) = (marked.total(), now.total());
    new_kind || is >= was * 2 || is * 2 <= was
}

impl ChatSession {
    /// Keeps the counts of the request being sent for the runtime, and marks the chat where the
    /// limit begins or has doubled or halved (`worth_a_marker`).
    pub(super) fn show_left_out(&mut self, ctx: &mut Ctx, left_out: &LeftOut) {
        let now = LeftOutCounts {
            dropped: left_out.dropped.len(),
            shortened: left_out.shortened.len(),
        };
        self.left_out.last = now;
        if now.is_empty() {
            // Nothing left out any more (a compaction, a larger window): should the limit
            // begin again, it is marked again.
            self.left_out.marked = None;
            return;
        }
        if !worth_a_marker(self.left_out.marked, now) {
            return;
        }
        self.left_out.marked = Some(now);
        let text = marker_text(now);
        let mut marker = self.new_message(
            ctx,
            crate::message::Role::Event,
            crate::message::Content::Text(text),
        );
        // The first few of each, with the counts: a marker stays small in a 5,000-message chat
        // (it is stored and synced like any message).
        let first = |ids: &[String]| {
            ids.iter()
                .take(LEFT_OUT_LISTED)
                .cloned()
                .collect::<Vec<_>>()
        };
        marker.set_event(
            "history_limited",
            "engine",
            serde_json::json!({
                "dropped": first(&left_out.dropped),
                "dropped_count": now.dropped,
                "shortened": first(&left_out.shortened),
                "shortened_count": now.shortened,
            }),
        );
        marker.mark_ui_only();
        self.push_message(marker);
    }
}

/// "12 earlier messages are left out of what the model sees, to fit its window; 3 tool results
/// are sent shortened."
fn marker_text(now: LeftOutCounts) -> String {
    let plural = |n: usize| if n == 1 { ("", "is") } else { ("s", "are") };
    let mut text = String::new();
    if now.dropped > 0 {
        let (s, verb) = plural(now.dropped);
        text.push_str(&format!(
            "{} earlier message{s} {verb} left out of what the model sees, to fit its window",
            now.dropped
        ));
    }
    if now.shortened > 0 {
        let (s, verb) = plural(now.shortened);
        let separator = if now.dropped > 0 { "; " } else { "" };
        text.push_str(&format!(
            "{separator}{} tool result{s} {verb} sent shortened",
            now.shortened
        ));
    }
    text.push('.');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(dropped: usize, shortened: usize) -> LeftOutCounts {
        LeftOutCounts { dropped, shortened }
    }

    #[test]
    fn a_marker_when_the_limit_begins_a_kind_appears_or_the_total_doubles_or_halves() {
        assert!(worth_a_marker(None, counts(0, 1)));
        assert!(!worth_a_marker(None, counts(0, 0)));
        assert!(worth_a_marker(Some(counts(0, 40)), counts(1, 40)));
        assert!(!worth_a_marker(Some(counts(0, 40)), counts(0, 79)));
        assert!(worth_a_marker(Some(counts(0, 40)), counts(0, 80)));
        assert!(!worth_a_marker(Some(counts(10, 30)), counts(5, 21)));
        assert!(worth_a_marker(Some(counts(10, 30)), counts(5, 15)));
        assert!(worth_a_marker(Some(counts(0, 1)), counts(0, 2)));
    }

    #[test]
    fn a_growing_limit_is_marked_a_handful_of_times() {
        let mut marked = None;
        let mut markers = 0;
        for shortened in 1..=5_000 {
            let now = counts(shortened / 10, shortened);
            if worth_a_marker(marked, now) {
                marked = Some(now);
                markers += 1;
            }
        }
        assert!(markers <= 16, "{markers} markers");
    }

    #[test]
    fn the_marker_says_both_counts_in_words() {
        assert_eq!(
            marker_text(counts(1, 0)),
            "1 earlier message is left out of what the model sees, to fit its window."
        );
        assert_eq!(
            marker_text(counts(12, 3)),
            "12 earlier messages are left out of what the model sees, to fit its window; 3 tool results are sent shortened."
        );
    }
}
