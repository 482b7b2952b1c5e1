//! `palaver linearize --provider P [--n-ctx N] [--max-tokens M] [--system TEXT] < trajectory.json`:
//! prints the request body the engine would send for a stored trajectory — after the history
//! limit (SPEC §5) and linearize (SPEC §7) — with the engine and workspace tools announced. The
//! compression strength and the estimate go to stderr. A broken trajectory or one that cannot
//! fit: a clear error and exit code 1.

use crate::history_limit::history_budget;
use crate::provider::ProviderKind;
use crate::request::{build_request, fixed_chars, ProviderConfig, RequestInput};
use crate::tools::{engine_tool_specs, ToolSpec};
use std::io::Read;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct LinearizeArgs {
    /// openai-chat, anthropic, gemini, openai-responses or local
    #[arg(long)]
    pub provider: String,
    /// The context window in tokens.
    #[arg(long, default_value_t = 128_000)]
    pub n_ctx: u64,
    /// Output tokens to keep free (default: the thread's, else min(4096, n_ctx / 8)).
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// The system prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// The model (default: the trajectory's).
    #[arg(long)]
    pub model: Option<String>,
}

pub fn run(args: LinearizeArgs) -> ExitCode {
    let Some(kind) = ProviderKind::parse(&args.provider) else {
        eprintln!("palaver linearize: unknown provider `{}` (openai-chat, anthropic, gemini, openai-responses, local)", args.provider);
        return ExitCode::FAILURE;
    };
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("palaver linearize: cannot read stdin: {e}");
        return ExitCode::FAILURE;
    }
    let loaded = match crate::trajectory::load_text("cli", &input) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("palaver linearize: {e}");
            return ExitCode::FAILURE;
        }
    };
    for note in &loaded.notes {
        eprintln!("palaver linearize: repaired on load: {note}");
    }
    let mut thread = loaded.thread;
    thread.provider = kind;
    if let Some(model) = args.model {
        thread.model = model;
    }
    if args.max_tokens.is_some() {
        thread.max_tokens = args.max_tokens;
    }
    let provider = ProviderConfig {
        kind,
        base_url: "https://provider.invalid/v1".into(),
        model: "model".into(),
        headers: Default::default(),
        ..Default::default()
    };
    let tools = all_tools();
    let system = args.system.as_deref();
    let budget = history_budget(args.n_ctx, thread.max_tokens, fixed_chars(system, &tools));
    let built = build_request(&RequestInput {
        provider: &provider,
        thread: &thread,
        system_prompt: system,
        tools: &tools,
        history: &loaded.messages,
        budget: Some(budget),
        tiers: None,
    });
    match built {
        Ok(request) => {
            let strength = serde_json::to_value(request.compression_strength).unwrap_or_default();
            eprintln!(
                "compression strength: {} (history budget {budget} tokens of n_ctx {})",
                strength.as_str().unwrap_or("?"),
                args.n_ctx
            );
            println!(
                "{}",
                serde_json::to_string_pretty(&request.body_json()).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("palaver linearize: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The engine tools and the workspace tools of `palaver serve` (without `run_command`).
fn all_tools() -> Vec<ToolSpec> {
    let mut tools = engine_tool_specs();
    let capabilities = crate::proxy::tools::ToolCapabilities::default();
    tools.extend(
        crate::proxy::tools::specs(&capabilities)
            .into_iter()
            .filter_map(|spec| serde_json::from_value(spec).ok()),
    );
    tools
}
