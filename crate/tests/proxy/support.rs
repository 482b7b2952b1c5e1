//! Test support: a real server on 127.0.0.1:0 in its own thread over a temporary tree
//! (`www/`, `pkg/`, `ws/`), raw-TCP requests, and process liveness checks.

use palaver::proxy::{serve_with_limits, Limits, ServeConfig};
use serde_json::Value;
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

pub const TOKEN: &str = "5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592";

pub struct Server {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A running server and its temporary tree, removed on drop (server first).
pub struct Fixture {
    pub server: Server,
    pub root: PathBuf,
}

impl Fixture {
    pub fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(thread) = self.server.thread.take() {
            if let Some(stop) = self.server.stop.take() {
                let _ = stop.send(());
            }
            let _ = thread.join();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub fn temp_tree(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("palaver-pt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for dir in ["www", "pkg", "ws/sub"] {
        std::fs::create_dir_all(root.join(dir)).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(
        root.join("www/index.html"),
        "<!doctype html><title>t</title>",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("www/app.js"), "export {}").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("ws/sub/file.txt"), "inside\n").unwrap_or_else(|e| panic!("{e}"));
    root
}

pub fn fixture(name: &str, allow_shell: bool) -> Fixture {
    fixture_with(name, allow_shell, false, Limits::default())
}

/// A fixture with the hard-link policy and server limits given.
pub fn fixture_with(
    name: &str,
    allow_shell: bool,
    allow_hard_links: bool,
    limits: Limits,
) -> Fixture {
    let root = temp_tree(name);
    let config = ServeConfig {
        www: root.join("www"),
        pkg: root.join("pkg"),
        workspace: root.join("ws"),
        allowed_origins: Vec::new(),
        allow_shell,
        allow_hard_links,
        reaper: Some(env!("CARGO_BIN_EXE_palaver").into()),
        token: TOKEN.into(),
    };
    Fixture {
        server: start_limited(config, limits),
        root,
    }
}

pub fn start_limited(config: ServeConfig, limits: Limits) -> Server {
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let _ = port_tx.send(listener.local_addr().map(|a| a.port()).unwrap_or(0));
            let _ = serve_with_limits(listener, config, limits, async move {
                let _ = stop_rx.await;
            })
            .await;
        });
        runtime.shutdown_timeout(Duration::from_secs(1));
    });
    let port = port_rx
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("server did not start: {e}"));
    Server {
        port,
        stop: Some(stop_tx),
        thread: Some(thread),
    }
}

/// Opens a connection and writes the request bytes exactly as given.
pub fn send(port: u16, request: &str) -> TcpStream {
    let mut stream =
        TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("connect: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_default();
    stream
        .write_all(request.as_bytes())
        .unwrap_or_else(|e| panic!("write: {e}"));
    stream
}

/// Sends raw request bytes; returns (status, lower-cased head, body).
pub fn raw(port: u16, request: &str) -> (u16, String, Vec<u8>) {
    let mut stream = send(port, request);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(response.len());
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let body = response.get(split + 4..).unwrap_or_default().to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body)
}

pub struct Reply {
    pub status: u16,
    pub body: Value,
}

pub fn tool_with(port: u16, token: &str, name: &str, args: &Value) -> Reply {
    let body = args.to_string();
    let request = format!(
        "POST /api/tools/{name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, _, body) = raw(port, &request);
    Reply {
        status,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    }
}

pub fn tool(port: u16, name: &str, args: Value) -> Reply {
    tool_with(port, TOKEN, name, &args)
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// Runs the real binary with `HTTP_PROXY`/`ALL_PROXY` pointing at a listener of ours and asks
/// it to fetch a name that does not resolve: the listener must see no connection.
pub fn fetch_through_env_proxy_is_not_used() {
    let root = temp_tree("envproxy");
    let trap = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    trap.set_nonblocking(true).unwrap_or_default();
    let proxy = format!(
        "http://127.0.0.1:{}",
        trap.local_addr().map_or(0, |a| a.port())
    );
    // NO_PROXY unset (an empty value) so nothing exempts the fetch from the proxy.
    let (mut child, port) = serve_binary(
        &root,
        &[],
        &[
            ("HTTP_PROXY", &proxy),
            ("http_proxy", &proxy),
            ("HTTPS_PROXY", &proxy),
            ("ALL_PROXY", &proxy),
            ("NO_PROXY", ""),
            ("no_proxy", ""),
        ],
    );
    let reply = tool(
        port,
        "fetch_url",
        serde_json::json!({"url": "http://palaver-proxy-test.invalid/"}),
    );
    let reached_proxy = trap.accept().is_ok();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&root);
    assert!(
        !reached_proxy,
        "fetch_url went through the environment's proxy"
    );
    assert_eq!(reply.body["is_error"], true, "{}", reply.body);
}

/// The one line `palaver serve --port 0` prints, with a fresh token.
pub fn first_line_of_serve() -> String {
    let root = temp_tree("firstline");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_palaver"))
        .args(["serve", "--port", "0", "--www"])
        .arg(root.join("www"))
        .arg("--pkg")
        .arg(root.join("pkg"))
        .arg("--workspace")
        .arg(root.join("ws"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&root);
    line.trim().to_string()
}

/// `GET /api/health` → how many tool calls are still working (abandoned ones included).
pub fn running_tools(port: u16) -> u64 {
    let request = format!(
        "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    let (_, _, body) = raw(port, &request);
    serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["running_tools"].as_u64())
        .unwrap_or(u64::MAX)
}

/// Waits until `check` holds or `seconds` pass; returns whether it held.
pub fn eventually(seconds: u64, mut check: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(seconds);
    while std::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}

/// The real binary serving `root/ws` (app from `root/www`, `root/pkg`) with extra arguments and
/// environment; returns the child and its port.
pub fn serve_binary(
    root: &std::path::Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, u16) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_palaver"))
        .args(["serve", "--port", "0", "--token-file"])
        .arg(write_token_file(root))
        .arg("--www")
        .arg(root.join("www"))
        .arg("--pkg")
        .arg(root.join("pkg"))
        .arg("--workspace")
        .arg(root.join("ws"))
        .args(extra)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    let port = line
        .trim()
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    (child, port)
}

/// A private token file holding `TOKEN` (the server refuses a file others can read).
fn write_token_file(root: &std::path::Path) -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let path = root.join("token");
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap_or_else(|e| panic!("{e}"));
    file.write_all(TOKEN.as_bytes()).unwrap_or_default();
    path
}

/// Swaps `ws/{dir}` with a symlink to `target` and back, as fast as it can, until the returned
/// flag is set (the race of A47 and E10); join the handle after setting it.
pub fn swap_with_symlink(
    ws: &std::path::Path,
    dir: &str,
    target: &std::path::Path,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<()>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (real, parked, link) = (ws.join(dir), ws.join("parked"), ws.join("link"));
    let _ = std::os::unix::fs::symlink(target, &link);
    let flag = stop.clone();
    let handle = std::thread::spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = std::fs::rename(&real, &parked);
            let _ = std::fs::rename(&link, &real);
            std::thread::yield_now();
            let _ = std::fs::rename(&real, &link);
            let _ = std::fs::rename(&parked, &real);
        }
    });
    (stop, handle)
}
