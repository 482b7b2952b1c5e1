//! Command-line entry of the native `palaver` binary. Parses arguments and hands each subcommand
//! to its host: `serve` to `palaver serve` (`proxy/`), `changes` to its change store, `decode` to the provider decoders, `linearize` to the
//! context pipeline.

mod changes;
mod decode;
mod linearize;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "palaver",
    version,
    about = "Palaver chat-agent engine: palaver serve (workspace tools, MCP) and engine tools"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the web app and the workspace tools on 127.0.0.1.
    Serve(crate::proxy::ServeArgs),
    /// Serve the workspace tools to an MCP client over stdin/stdout.
    Mcp(crate::proxy::McpArgs),
    /// List or prune what `palaver serve` recorded of the agent's changes in a workspace.
    Changes(changes::ChangesArgs),
    /// Decode a provider SSE stream from stdin and print the assembled message as JSON.
    Decode(decode::DecodeArgs),
    /// Print the request body the engine would send for a trajectory read from stdin.
    Linearize(linearize::LinearizeArgs),
    /// Internal: run a program as `run_command`'s process reaper (see `proxy::reaper`).
    #[command(hide = true)]
    Reap {
        /// `namespace` (a PID namespace when the kernel grants one) or `group`.
        #[arg(long, default_value = "namespace")]
        isolation: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        argv: Vec<String>,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => crate::proxy::run_serve(args),
        Command::Mcp(args) => crate::proxy::run_mcp(args),
        Command::Changes(args) => changes::run(args),
        Command::Decode(args) => decode::run(args),
        Command::Linearize(args) => linearize::run(args),
        Command::Reap { isolation, argv } => {
            crate::proxy::reaper::run(&argv, crate::proxy::reaper::Isolation::parse(&isolation))
        }
    }
}
