//! The benches' `palaver serve`: the real server in-process on 127.0.0.1:0, over `root/ws` (with
//! `root/www` and `root/pkg`), on its own runtime thread; returns its port.

use palaver::proxy::{serve, ServeConfig};
use std::path::Path;
use std::time::Duration;

pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";

#[allow(dead_code)] // the scan bench starts a recording one
pub fn start(root: &Path, reaper: Option<std::path::PathBuf>) -> u16 {
    start_with(config(root, reaper))
}

/// The same with `run_command` allowed and every change recorded in `root/store` (issue 39).
#[allow(dead_code)] // not every bench records
pub fn start_recording(root: &Path, reaper: Option<std::path::PathBuf>) -> u16 {
    let mut config = config(root, reaper);
    config.allow_shell = true;
    config.checkpoints = Some(root.join("store"));
    start_with(config)
}

fn config(root: &Path, reaper: Option<std::path::PathBuf>) -> ServeConfig {
    ServeConfig {
        www: root.join("www"),
        pkg: root.join("pkg"),
        models: None,
        mcp: Default::default(),
        workspace: root.join("ws"),
        allowed_origins: Vec::new(),
        allow_shell: false,
        allow_hard_links: false,
        workspace_copy: false,
        reaper,
        token: TOKEN.into(),
        vault: None,
        checkpoints: None,
    }
}

fn start_with(config: ServeConfig) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let _ = tx.send(listener.local_addr().map(|a| a.port()).unwrap_or(0));
            let _ = serve(listener, config, std::future::pending()).await;
        });
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap_or(0)
}
