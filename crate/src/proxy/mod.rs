//! `palaver serve` (SPEC's "proxy", hence the module's name). Serves the web app (`www/`, `pkg/`) on 127.0.0.1 only, with the
//! Host check that defeats DNS rebinding and the security headers of SPEC §9 on every response.
//! Native only. `server::serve` takes an already-bound listener, so tests run the real server on
//! port 0. The tools API (`/api/tools`) is behind the token, Origin and fetch-metadata guards.

pub mod chat_files;
pub mod checkpoints;
pub mod confine;
mod content_hash;
mod guard;
pub mod mcp;
mod memory;
mod models;
mod process_env;
pub mod reaper;
mod server;
mod token;
pub mod tools;
pub mod vault;
mod walk;
mod workspace;
mod workspace_scan;
mod workspace_watch;

pub use guard::{APP_CSP, MODEL_WORKER_CSP, MODEL_WORKER_PATH};
use process_env::protect_environment;
pub use process_env::{absolute_path_var, install_tls, is_secret_name};
pub use server::{
    router, serve, serve_with_limits, Limits, ServeConfig, BODY_LIMIT, HEADER_TIMEOUT,
};

use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Port to bind on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 8787)]
    pub port: u16,
    /// The workspace the tools may touch (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// The static web app (default: ./www, else the repository's www/).
    #[arg(long)]
    pub www: Option<PathBuf>,
    /// The wasm package (default: ./pkg, else the repository's pkg/).
    #[arg(long)]
    pub pkg: Option<PathBuf>,
    /// GGUF models for the model in the page, served at /models/ (default: the folder the
    /// scripts download the default model to, `$XDG_CACHE_HOME/palaver/models` or
    /// `~/.cache/palaver/models`, when it exists).
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// A web origin allowed to call the API besides `palaver serve`'s own (repeatable, exact match).
    #[arg(long = "allow-origin")]
    pub allow_origin: Vec<String>,
    /// Allow `run_command`.
    #[arg(long)]
    pub allow_shell: bool,
    /// Read and search files that have several hard links (one may be an outside file's name).
    #[arg(long)]
    pub allow_hard_links: bool,
    /// Read the token from this file instead of making a fresh one (never from argv).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Do not keep the page's chats in `.palaver/chats/` of the workspace (issue 21).
    /// (`--no-mirror` is its older spelling, still accepted.)
    #[arg(long, alias = "no-mirror")]
    pub no_workspace_copy: bool,
    /// The MCP servers to run for the page (`{"mcpServers": {…}}`; default: the user's
    /// `~/.config/palaver/mcp.json` when it exists outside the workspace — never a file of the
    /// workspace unless named here).
    #[arg(long)]
    pub mcp: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct McpArgs {
    /// The workspace the tools may touch (default: the current directory).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
    /// Allow `run_command`.
    #[arg(long)]
    pub allow_shell: bool,
    /// Read and search files that have several hard links.
    #[arg(long)]
    pub allow_hard_links: bool,
}

/// `palaver mcp`: Palaver's workspace tools as an MCP server on stdin/stdout (issue 17).
pub fn run_mcp(args: McpArgs) -> ExitCode {
    protect_environment();
    install_tls();
    let workspace = match args
        .workspace
        .clone()
        .map_or_else(std::env::current_dir, Ok)
    {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("palaver mcp: no current directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("palaver mcp: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = runtime.block_on(async {
        let workspace = std::sync::Arc::new(
            workspace::Workspace::open(&workspace)
                .map_err(|e| format!("{}: {e}", workspace.display()))?,
        );
        let capabilities = tools::ToolCapabilities {
            allow_shell: args.allow_shell,
            allow_hard_links: args.allow_hard_links,
            reaper: std::env::current_exe().ok(),
            ..Default::default()
        };
        mcp::serve::serve_stdio(std::sync::Arc::new(tools::Tools::new(
            workspace,
            capabilities,
        )))
        .await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("palaver mcp: {e}");
            ExitCode::FAILURE
        }
    }
}

pub fn run_serve(args: ServeArgs) -> ExitCode {
    memory::limit_arenas();
    protect_environment();
    install_tls();
    // Refused before anything is bound or printed: no address to open for a server that stops.
    let config = match config_from(&args).and_then(|config| {
        server::check_app_outside_workspace(&config)
            .map(|()| config)
            .map_err(|e| e.to_string())
    }) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("palaver serve: {message}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("palaver serve: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(bind_and_serve(args.port, config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("palaver serve: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn bind_and_serve(port: u16, config: ServeConfig) -> std::io::Result<()> {
    // Orphans of a child that killed its reaper come back here and are swept (SECURITY F3's
    // fallback where no PID namespace is granted). Only the binary does this: an embedder's other
    // children are not ours to kill.
    reaper::orphans::become_subreaper();
    tokio::spawn(reaper::orphans::run_sweeper());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let port = listener.local_addr()?.port();
    println!("http://127.0.0.1:{port}/#token={}", config.token);
    use std::io::Write;
    std::io::stdout().flush()?;
    serve(listener, config, shutdown_signal()).await
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    eprintln!("palaver serve: shutting down");
}

fn config_from(args: &ServeArgs) -> Result<ServeConfig, String> {
    let token = match &args.token_file {
        Some(path) => token::read(path)?,
        None => token::fresh()?,
    };
    let workspace = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    let mcp = mcp::resolve(args.mcp.as_deref(), &workspace)?.unwrap_or_default();
    Ok(ServeConfig {
        www: static_dir(args.www.as_deref(), "www")?,
        pkg: static_dir(args.pkg.as_deref(), "pkg")?,
        models: models_dir(args.models.as_deref(), &workspace)?,
        allowed_origins: args.allow_origin.clone(),
        allow_shell: args.allow_shell,
        allow_hard_links: args.allow_hard_links,
        workspace_copy: !args.no_workspace_copy,
        reaper: std::env::current_exe().ok(),
        mcp,
        checkpoints: checkpoints::Checkpoints::folder_for(&workspace),
        workspace,
        token,
        vault: vault_secret(),
    })
}

/// The vault secret in the user's config folder (F7); without one the page cannot remember keys
/// (it says so), and `palaver serve` says why here.
fn vault_secret() -> Option<std::sync::Arc<vault::VaultSecret>> {
    let folder = vault::default_folder()?;
    match vault::VaultSecret::load_or_create(&folder) {
        Ok(secret) => Some(std::sync::Arc::new(secret)),
        Err(e) => {
            eprintln!("palaver serve: remembered keys cannot be unlocked: {e}");
            None
        }
    }
}

/// The models folder: the one given (it must exist), else the scripts' download folder when it
/// exists and does not overlap the workspace (then it is simply not served, with a note).
fn models_dir(given: Option<&Path>, workspace: &Path) -> Result<Option<PathBuf>, String> {
    if let Some(dir) = given {
        return dir
            .is_dir()
            .then(|| Some(dir.to_path_buf()))
            .ok_or_else(|| format!("--models {} is not a directory", dir.display()));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")));
    let Some(dir) = cache.map(|c| c.join("palaver").join("models")) else {
        return Ok(None);
    };
    if !dir.is_dir() {
        return Ok(None);
    }
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let (models, workspace) = (real(&dir), real(workspace));
    if models.starts_with(&workspace) || workspace.starts_with(&models) {
        eprintln!(
            "palaver serve: not serving {} (it overlaps the workspace); pass --models DIR",
            dir.display()
        );
        return Ok(None);
    }
    Ok(Some(dir))
}

/// The given directory, else `./NAME`, else the repository's `NAME/` next to this crate.
fn static_dir(given: Option<&Path>, name: &str) -> Result<PathBuf, String> {
    if let Some(dir) = given {
        return dir
            .is_dir()
            .then(|| dir.to_path_buf())
            .ok_or_else(|| format!("{} is not a directory", dir.display()));
    }
    let local = PathBuf::from(name);
    if local.is_dir() {
        return Ok(local);
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name);
    repo.is_dir()
        .then_some(repo)
        .ok_or_else(|| format!("no {name}/ directory here; pass --{name} DIR"))
}
