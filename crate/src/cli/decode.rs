//! `palaver decode --provider P [--ops] < stream.sse`: decodes a provider stream from stdin and
//! prints the assembled message (SPEC §6.3) as JSON, or with `--ops` the delta ops as JSON lines.
//! Malformed input: a clear error on stderr and exit code 1.

use crate::decode::{assemble_stream, decode_stream, DecodeError};
use crate::provider::ProviderKind;
use std::io::{Read, Write};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// openai-chat, anthropic, gemini, openai-responses or local
    #[arg(long)]
    pub provider: String,
    /// Print the delta ops as JSON lines instead of the assembled message.
    #[arg(long)]
    pub ops: bool,
    /// Measure instead: decode the input this many times in 4 KiB chunks and print
    /// `{"bytes", "seconds", "mib_per_s"}` (used by `scripts/bench-sdk.sh`).
    #[arg(long, value_name = "N")]
    pub bench: Option<u32>,
}

pub fn run(args: DecodeArgs) -> ExitCode {
    let Some(kind) = ProviderKind::parse(&args.provider) else {
        eprintln!("palaver decode: unknown provider `{}` (openai-chat, anthropic, gemini, openai-responses, local)", args.provider);
        return ExitCode::FAILURE;
    };
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("palaver decode: cannot read stdin: {e}");
        return ExitCode::FAILURE;
    }
    if let Some(times) = args.bench {
        return bench(kind, &input, times);
    }
    match decode_stream(kind, &[&input]) {
        Ok(decoded) => print(&decoded, args.ops),
        Err(DecodeError::Unsupported(kind)) => {
            eprintln!("palaver decode: no decoder for {} yet", kind.name());
            ExitCode::FAILURE
        }
        Err(DecodeError::Stream { error, partial }) => {
            eprintln!("palaver decode: {error}");
            if args.ops {
                let _ = print(&partial, true);
            }
            ExitCode::FAILURE
        }
    }
}

fn print(decoded: &crate::decode::Decoded, ops: bool) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let result = if ops {
        decoded
            .ops
            .iter()
            .try_for_each(|op| writeln!(out, "{}", serde_json::to_string(op).unwrap_or_default()))
    } else {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&decoded.assembled.to_value()).unwrap_or_default()
        )
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("palaver decode: cannot write: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench(kind: ProviderKind, input: &[u8], times: u32) -> ExitCode {
    let chunks: Vec<&[u8]> = input.chunks(4096).collect();
    let started = std::time::Instant::now();
    for _ in 0..times {
        if let Err(DecodeError::Stream { error, .. }) = assemble_stream(kind, &chunks) {
            // Error transcripts are measured too: they decode up to their error.
            std::hint::black_box(error);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let bytes = input.len() as f64 * f64::from(times);
    println!(
        "{}",
        serde_json::json!({"bytes": bytes, "seconds": seconds, "mib_per_s": bytes / seconds.max(1e-9) / 1048576.0})
    );
    ExitCode::SUCCESS
}
