//! Context pipeline benchmarks (native, criterion) on `../shared/bench/history-5k.json.gz`, a
//! 5 000-message Refact trajectory with tools, duplicated context files and deliberate defects.
//! Prints ms per step: load (JSON → messages, tolerant), repair (the always-on fix stage alone),
//! compress (the four stages at n_ctx 128 000 and 32 000), and the whole request (history limit +
//! linearize + body) for openai-chat and anthropic. For scale: Refact's own native code takes
//! about 17 ms to repair this history and 48 ms to compress it.

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use criterion::{black_box, Criterion};
    use palaver::history_limit::{history_budget, limit_history};
    use palaver::message::ChatMessage;
    use palaver::provider::ProviderKind;
    use palaver::request::{build_request, ProviderConfig, RequestInput};
    use palaver::thread::ThreadParams;
    use palaver::tools::engine_tool_specs;
    use std::io::Read;
    use std::time::Instant;

    fn trajectory_text() -> String {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/bench/history-5k.json.gz"
        );
        let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut text = String::new();
        flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        text
    }

    /// The typed load the product uses for JSON text.
    fn load(text: &str) -> Vec<ChatMessage> {
        palaver::trajectory::load_text("bench", text)
            .unwrap_or_else(|e| panic!("{e}"))
            .messages
    }

    /// The load through a parsed `Value` (what a trajectory already held as JSON goes through).
    fn load_via_value(text: &str) -> Vec<ChatMessage> {
        let value: serde_json::Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON: {e}"));
        palaver::trajectory::load("bench", &value)
            .unwrap_or_else(|e| panic!("{e}"))
            .messages
    }

    fn request(kind: ProviderKind, history: &[ChatMessage], n_ctx: u64) -> usize {
        let provider = ProviderConfig {
            kind,
            base_url: "https://provider.invalid/v1".into(),
            model: "m".into(),
            headers: Default::default(),
            ..Default::default()
        };
        let thread = ThreadParams {
            provider: kind,
            ..serde_json::from_value(serde_json::json!({})).unwrap_or_else(|e| panic!("{e}"))
        };
        let tools = engine_tool_specs();
        // As a chat sends it: laid out in stability tiers (the exchanges hashed, the tracker
        // updated), from a fresh tracker.
        let tracker = palaver::stability::Tracker::default();
        let built = build_request(&RequestInput {
            provider: &provider,
            thread: &thread,
            system_prompt: Some("You are Palaver."),
            tools: &tools,
            history,
            budget: Some(history_budget(n_ctx, None, 2000)),
            tiers: Some(&tracker),
        });
        built.map_or(0, |r| r.body.len())
    }

    fn ms_per(label: &str, rounds: u32, mut f: impl FnMut()) {
        f();
        let start = Instant::now();
        for _ in 0..rounds {
            f();
        }
        let ms = start.elapsed().as_secs_f64() * 1000.0 / f64::from(rounds);
        println!("history-5k {label}: {ms:.2} ms");
    }

    pub fn run(c: &mut Criterion) {
        let text = trajectory_text();
        let history = load(&text);
        assert_eq!(history.len(), 5000);
        let report = |n_ctx: u64| {
            limit_history(&history, Some(history_budget(n_ctx, None, 2000)))
                .map(|l| {
                    format!(
                        "{:?}, {} messages left, ~{} tokens",
                        l.strength,
                        l.messages.len(),
                        l.estimated_tokens
                    )
                })
                .unwrap_or_else(|e| e.to_string())
        };
        println!("history-5k at n_ctx 128000: {}", report(128_000));
        println!("history-5k at n_ctx 32000: {}", report(32_000));
        let repairs = limit_history(&history, None).map_or(0, |l| l.repairs);
        println!("history-5k repairs made by the fix stage: {repairs}");
        ms_per("load (typed parse + tolerant load)", 10, || {
            black_box(load(&text));
        });
        ms_per(
            "load via Value (parse to Value, then tolerant load)",
            10,
            || {
                black_box(load_via_value(&text));
            },
        );
        ms_per("reference: serde_json::Value parse alone", 10, || {
            black_box(serde_json::from_str::<serde_json::Value>(&text).ok());
        });
        ms_per("repair (fix stage only)", 20, || {
            black_box(limit_history(&history, None).ok());
        });
        ms_per("compress (four stages, n_ctx 128000)", 20, || {
            black_box(limit_history(&history, Some(history_budget(128_000, None, 2000))).ok());
        });
        ms_per("compress (four stages, n_ctx 32000)", 20, || {
            black_box(limit_history(&history, Some(history_budget(32_000, None, 2000))).ok());
        });
        for kind in [ProviderKind::OpenaiChat, ProviderKind::Anthropic] {
            ms_per(
                &format!(
                    "request {} (limit + linearize + body, n_ctx 128000)",
                    kind.name()
                ),
                20,
                || {
                    black_box(request(kind, &history, 128_000));
                },
            );
        }
        let mut group = c.benchmark_group("history_5k");
        group.sample_size(10);
        group.bench_function("repair", |b| {
            b.iter(|| limit_history(black_box(&history), None).ok())
        });
        group.bench_function("compress_128k", |b| {
            b.iter(|| {
                limit_history(
                    black_box(&history),
                    Some(history_budget(128_000, None, 2000)),
                )
                .ok()
            })
        });
        group.bench_function("request_openai_chat_128k", |b| {
            b.iter(|| request(ProviderKind::OpenaiChat, black_box(&history), 128_000))
        });
        group.finish();
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    let mut criterion = criterion::Criterion::default().configure_from_args();
    native::run(&mut criterion);
    criterion.final_summary();
}

#[cfg(target_arch = "wasm32")]
fn main() {}
