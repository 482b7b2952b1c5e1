//! `palaver decode`: placeholder.
use std::process::ExitCode;
#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    #[arg(long)]
    pub provider: String,
}
pub fn run(_a: DecodeArgs) -> ExitCode {
    ExitCode::FAILURE
}
