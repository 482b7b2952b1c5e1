//! The `palaver` binary: `serve` (workspace tools and MCP servers for the page), `decode` and `linearize` (engine tools on stdin).
//! Native only; on wasm32 the package is a library and this is an empty shell.

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    palaver::cli::main()
}

#[cfg(target_arch = "wasm32")]
fn main() {}
