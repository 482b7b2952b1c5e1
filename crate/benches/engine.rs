//! Engine benchmarks (native, criterion). Prints:
//! - the cost per `append_content` delta over 100 000 deltas streamed through the engine, and the
//!   ratio of the last 10% to the first 10% (≈1 means appends stay O(delta));
//! - decoding the longest openai-chat transcript of `../shared/wire`, in MB/s.

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use criterion::{black_box, Criterion, Throughput};
    use palaver::decode::decode_stream;
    use palaver::engine::{Bytes, Effect, Engine, EngineConfig, Input};
    use palaver::provider::ProviderKind;
    use serde_json::json;
    use std::path::Path;
    use std::time::Instant;

    const DELTAS: usize = 100_000;

    fn engine_in_a_turn() -> (Engine, String) {
        let config: EngineConfig = serde_json::from_value(json!({
            "providers": [{"kind": "openai-chat", "base_url": "http://127.0.0.1:1/v1", "model": "m"}]
        }))
        .unwrap_or_default();
        let mut engine = Engine::new(config);
        engine.handle(
            0,
            Input::OpenChat {
                chat_id: "c".into(),
                trajectory: None,
                stored: None,
            },
        );
        let step = engine.handle(
            0,
            Input::Command {
                chat_id: "c".into(),
                command: json!({"type": "user_message", "content": "go", "client_request_id": "1"}),
            },
        );
        let request_id = step
            .effects
            .iter()
            .find_map(|e| match e {
                Effect::StartRequest { request_id, .. } => Some(request_id.clone()),
                _ => None,
            })
            .unwrap_or_default();
        (engine, request_id)
    }

    fn chunk(i: usize) -> Vec<u8> {
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}}}}]}}\n\n")
            .into_bytes()
    }

    /// Streams 100 000 one-token chunks through `Engine::handle` and compares the time per delta
    /// of the first and last 10%.
    pub fn append_ratio() {
        let (mut engine, request_id) = engine_in_a_turn();
        let chunks: Vec<Vec<u8>> = (0..DELTAS).map(chunk).collect();
        let mut times = Vec::with_capacity(DELTAS);
        for (i, bytes) in chunks.into_iter().enumerate() {
            let start = Instant::now();
            let step = engine.handle(
                i as u64,
                Input::StreamBytes {
                    request_id: request_id.clone(),
                    bytes: Bytes(bytes),
                },
            );
            black_box(step);
            times.push(start.elapsed().as_nanos() as f64);
        }
        let tenth = DELTAS / 10;
        let first: f64 = times[..tenth].iter().sum::<f64>() / tenth as f64;
        let last: f64 = times[DELTAS - tenth..].iter().sum::<f64>() / tenth as f64;
        println!("append_content through Engine::handle: {DELTAS} deltas, first 10% {first:.0} ns/delta, last 10% {last:.0} ns/delta, ratio last/first = {:.2}", last / first);
    }

    fn longest_openai_chat() -> (String, Vec<u8>) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/wire/openai-chat");
        let mut best = (String::new(), Vec::new());
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "sse") {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if bytes.len() > best.1.len() {
                    best = (
                        path.file_name()
                            .unwrap_or_default()
                            .to_string_lossy()
                            .into(),
                        bytes,
                    );
                }
            }
        }
        best
    }

    pub fn benches(c: &mut Criterion) {
        let mut group = c.benchmark_group("engine");
        group.throughput(Throughput::Elements(1));
        group.bench_function("draft_apply_append_content", |b| {
            let mut draft = palaver::delta::Draft::new("m");
            let op = palaver::delta::DeltaOp::AppendContent {
                text: "token ".into(),
            };
            b.iter(|| draft.apply(black_box(&op)));
        });
        let (name, bytes) = longest_openai_chat();
        assert!(!bytes.is_empty(), "../shared/wire/openai-chat is missing");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(format!("decode_openai_chat/{name}"), |b| {
            b.iter(|| decode_stream(ProviderKind::OpenaiChat, &[black_box(&bytes)]))
        });
        group.finish();
        let start = Instant::now();
        let rounds = 200;
        for _ in 0..rounds {
            black_box(decode_stream(ProviderKind::OpenaiChat, &[&bytes]).ok());
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "decode openai-chat {name} ({} bytes): {:.1} MB/s",
            bytes.len(),
            (bytes.len() * rounds) as f64 / secs / 1e6
        );
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    native::append_ratio();
    let mut criterion = criterion::Criterion::default().configure_from_args();
    native::benches(&mut criterion);
    criterion.final_summary();
}

#[cfg(target_arch = "wasm32")]
fn main() {}
