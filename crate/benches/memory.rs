//! What the engine keeps over a long session (issue 41, goal 4), natively: N turns (default
//! 1 000), each a `read_file` call and an answer as `bench-memory.mjs` sends them, through
//! `Engine::handle`; saves acknowledged as a host does. Every 100 turns, from a counting
//! allocator: the bytes the engine holds live, the most it held at once since the last line (a
//! request's body built beside the chat), and the chat's own stored size (its messages as JSON).
//! The browser's wasm memory only grows to the high-water mark, so it follows the second number;
//! the first says what the engine itself keeps. Prints numbers.
//! cargo bench --bench memory [-- turns]

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use palaver::engine::{Bytes, Effect, Engine, EngineConfig, Input, Step};
    use palaver::trajectory::TrajectoryText;
    use serde_json::{json, Value};
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    /// The system allocator, counting the bytes live and the most live at once.
    pub struct Counting;
    static LIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let live = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(live, Relaxed);
            // SAFETY: the layout is the caller's, passed on unchanged.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            LIVE.fetch_sub(layout.size(), Relaxed);
            // SAFETY: `ptr` came from `alloc` above with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    const NOTES: &str = "A line of notes the model reads on every turn.\n";
    const FILLER: &str = "The notes say what they say, and this answer repeats a little of them. ";

    fn sse(delta: Value, finish: Option<&str>) -> String {
        let mut out = format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
        );
        out.push_str(&format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
        ));
        out
    }

    struct Session {
        engine: Engine,
        now: u64,
    }

    impl Session {
        /// Feeds `input` and answers what the step asks as a host would: saves acknowledged,
        /// `read_file` answered with the notes; returns the request the step started, if any.
        fn feed(&mut self, input: Input) -> Option<String> {
            self.now += 10;
            let step: Step = self.engine.handle(self.now, input);
            let mut started = None;
            for effect in step.effects {
                match effect {
                    Effect::StartRequest { request_id, .. } => started = Some(request_id),
                    Effect::SaveTrajectory { save } => {
                        let ack = Input::SaveAcked {
                            chat_id: save.chat_id,
                            version: save.version,
                        };
                        if let Some(id) = self.feed(ack) {
                            started = Some(id);
                        }
                    }
                    Effect::RunTool {
                        chat_id,
                        tool_call_id,
                        ..
                    } => {
                        let result = Input::ToolResult {
                            chat_id,
                            tool_call_id,
                            content: NOTES.repeat(40),
                            tool_failed: false,
                            data: None,
                            session_metadata: None,
                            parts: Vec::new(),
                        };
                        if let Some(id) = self.feed(result) {
                            started = Some(id);
                        }
                    }
                    _ => {}
                }
            }
            started
        }

        fn answer(&mut self, request_id: String, reply: String) -> Option<String> {
            self.feed(Input::StreamBytes {
                request_id: request_id.clone(),
                bytes: Bytes(reply.into_bytes()),
            });
            self.feed(Input::StreamEnd { request_id })
        }

        fn turn(&mut self, n: usize) -> Result<(), String> {
            let command = json!({"type": "user_message", "content": format!("Read the notes, turn {n}"), "client_request_id": format!("u{n}")});
            let first = self
                .feed(Input::Command {
                    chat_id: "c".into(),
                    command,
                })
                .ok_or("no request for the message")?;
            let call = sse(
                json!({"tool_calls": [{"index": 0, "id": format!("call{n}"), "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]}),
                Some("tool_calls"),
            );
            let second = self
                .answer(first, call)
                .ok_or("no request after the tool's result")?;
            self.answer(
                second,
                sse(json!({"content": FILLER.repeat(3)}), Some("stop")),
            );
            Ok(())
        }

        /// The chat as stored: its messages as JSON.
        fn stored_bytes(&self) -> usize {
            self.engine
                .snapshot("c")
                .map_or(0, |s| serde_json::to_string(&s).map_or(0, |t| t.len()))
        }
    }

    pub fn run(turns: usize) {
        let config: EngineConfig = serde_json::from_value(json!({
            "providers": [{"kind": "openai-chat", "base_url": "http://127.0.0.1:1/v1", "model": "m"}],
            "workspace_tools": [{"name": "read_file", "description": "Reads a file", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]
        }))
        .unwrap_or_default();
        let mut session = Session {
            engine: Engine::new(config),
            now: 0,
        };
        session.feed(Input::OpenChat {
            chat_id: "c".into(),
            trajectory: None,
            stored: None,
        });
        let mb = |b: usize| b as f64 / 1_048_576.0;
        println!(
            "a message's own size: {} B",
            std::mem::size_of::<palaver::message::ChatMessage>()
        );
        let start = LIVE.load(Relaxed);
        println!(
            "{:>6}  {:>14}  {:>22}  {:>12}  {:>8}",
            "turn", "engine live", "most at once (since)", "chat stored", "live/chat"
        );
        for n in 1..=turns {
            PEAK.store(LIVE.load(Relaxed), Relaxed);
            if let Err(problem) = session.turn(n) {
                println!("turn {n}: {problem}");
                return;
            }
            if n % 100 == 0 || n == 1 {
                let live = LIVE.load(Relaxed) - start;
                let most = PEAK.load(Relaxed) - start;
                let stored = session.stored_bytes();
                println!(
                    "{n:>6}  {:>11.2} MB  {:>19.2} MB  {:>9.2} MB  {:>8.2}",
                    mb(live),
                    mb(most),
                    mb(stored),
                    live as f64 / stored.max(1) as f64
                );
            }
        }
        // Its messages by role, then its last quarter, last half and all of them opened from
        // storage in a new engine: what the messages alone cost once typed, against what the
        // session that wrote them holds (the same, when nothing else grows).
        let messages = session
            .engine
            .snapshot("c")
            .and_then(|s| serde_json::to_value(&s).ok())
            .and_then(|v| find_messages(&v))
            .unwrap_or_default();
        let all = messages.as_array().cloned().unwrap_or_default();
        by_role(&all);
        for part in [4, 2, 1] {
            let some = &all[all.len() - all.len() / part..];
            let (stored, typed) = opened(some);
            println!(
                "{} of its messages ({:.2} MB) opened in a new engine: {:.2} MB live ({:.2}x)",
                some.len(),
                mb(stored),
                mb(typed),
                typed as f64 / stored.max(1) as f64
            );
        }
    }

    /// What a message of each role costs once typed, against its JSON: the fixed part (the
    /// struct, its id, its notes) weighs most in the short ones.
    fn by_role(all: &[Value]) {
        for role in ["user", "assistant", "tool", "event"] {
            let some: Vec<Value> = all.iter().filter(|m| m["role"] == role).cloned().collect();
            if some.is_empty() {
                continue;
            }
            let (stored, typed) = opened(&some);
            println!(
                "{role}: {} messages, {} B JSON each, {} B typed each",
                some.len(),
                stored / some.len(),
                typed / some.len()
            );
        }
    }

    /// `messages` stored as a chat and opened in a new engine: their JSON's size and what the
    /// engine holds once they are open. Counted from before the text: opening parses it and
    /// lets it go, and that must not be subtracted from what the messages hold.
    fn opened(messages: &[Value]) -> (usize, usize) {
        let before = LIVE.load(Relaxed);
        let text = TrajectoryText::from_value(&json!({"id": "c", "messages": messages}));
        let stored = text.get().len();
        let mut engine = Engine::new(EngineConfig::default());
        engine.handle(
            0,
            Input::OpenChat {
                chat_id: "c".into(),
                trajectory: Some(text),
                stored: None,
            },
        );
        let typed = LIVE.load(Relaxed) - before;
        drop(engine);
        (stored, typed)
    }

    fn find_messages(value: &Value) -> Option<Value> {
        match value {
            Value::Object(map) => map
                .get("messages")
                .filter(|m| m.is_array())
                .cloned()
                .or_else(|| map.values().find_map(find_messages)),
            _ => None,
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
#[global_allocator]
static COUNTING: native::Counting = native::Counting;

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    native::run(
        std::env::args()
            .filter_map(|a| a.parse().ok())
            .next()
            .unwrap_or(1000),
    );
}
