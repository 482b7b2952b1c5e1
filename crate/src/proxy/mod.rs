//! The proxy: `palaver serve`. Serves `www/` and `pkg/` and the workspace tools on 127.0.0.1.
//! Native only. (Placeholder: built out by the proxy issue.)

use std::process::ExitCode;

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Port to bind on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
}

pub fn run_serve(_args: ServeArgs) -> ExitCode {
    eprintln!("palaver serve: not built yet");
    ExitCode::FAILURE
}
