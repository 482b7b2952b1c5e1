//! The one support module of the proxy tests: a real server on 127.0.0.1:0 in its own thread
//! over a temporary tree (`www/`, `pkg/`, `ws/`), the symlink-laden workspace of A.4.6, raw-TCP
//! requests (bytes exactly as written), JSON tool calls, and process liveness checks.

use palaver::proxy::{serve_with_limits, Limits, ServeConfig};
use serde_json::Value;
use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

pub const TOKEN: &str = "5d41402abc4b2a76b9719d911017c5925d41402abc4b2a76b9719d911017c592";

/// A running server; dropping it stops it, then removes its temporary tree if it owns one.
pub struct Server {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: Option<TempDir>,
}

/// A temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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

/// A running server and its temporary tree (`www/`, `pkg/`, `ws/`), which the server removes
/// when it is dropped.
pub struct Fixture {
    pub server: Server,
    pub root: PathBuf,
}

impl Fixture {
    pub fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }
}

/// The temporary tree of a test: `www/` (an index and a script), `pkg/` (a wasm header),
/// `ws/sub/file.txt`. Unique per process and thread.
pub fn temp_dir(name: &str) -> TempDir {
    let root = std::env::temp_dir().join(format!(
        "palaver-pt-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    for dir in ["www", "pkg", "ws/sub"] {
        std::fs::create_dir_all(root.join(dir)).unwrap_or_else(|e| panic!("{e}"));
    }
    let write = |path: &str, bytes: &[u8]| {
        std::fs::write(root.join(path), bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
    };
    write("www/index.html", b"<!doctype html><title>t</title>");
    write("www/app.js", b"export {}");
    write("pkg/palaver_bg.wasm", b"\0asm\x01\0\0\0");
    write("ws/sub/file.txt", b"inside\n");
    TempDir(root)
}

/// The configuration of a server over a temporary tree, its workspace `ws/`.
pub fn config_for(dir: &TempDir, allow_shell: bool) -> ServeConfig {
    ServeConfig {
        www: dir.0.join("www"),
        pkg: dir.0.join("pkg"),
        models: None,
        mcp: Default::default(),
        workspace: dir.0.join("ws"),
        allowed_origins: Vec::new(),
        allow_shell,
        allow_hard_links: false,
        workspace_copy: true,
        reaper: Some(env!("CARGO_BIN_EXE_palaver").into()),
        token: TOKEN.into(),
        vault: None,
        checkpoints: None,
    }
}

pub fn fixture(name: &str, allow_shell: bool) -> Fixture {
    fixture_with(name, allow_shell, false, Limits::default())
}

/// A fixture with the hard-link capabilities and server limits given.
pub fn fixture_with(
    name: &str,
    allow_shell: bool,
    allow_hard_links: bool,
    limits: Limits,
) -> Fixture {
    let dir = temp_dir(name);
    let root = dir.0.clone();
    let config = ServeConfig {
        allow_hard_links,
        ..config_for(&dir, allow_shell)
    };
    Fixture {
        server: start_with_limits(config, dir, limits),
        root,
    }
}

/// Runs the real server on 127.0.0.1:0 in its own thread until the `Server` is dropped; the
/// server owns `dir` and removes it after stopping.
pub fn start_with(config: ServeConfig, dir: TempDir) -> Server {
    start_with_limits(config, dir, Limits::default())
}

pub fn start_with_limits(config: ServeConfig, dir: TempDir, limits: Limits) -> Server {
    let mut server = start_limited(config, limits);
    server._dir = Some(dir);
    server
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
        _dir: None,
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

/// A JSON reply: status, lower-cased head, parsed body (`null` when it is not JSON).
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: Value,
}

/// A request with a JSON body and the headers given, exactly as written.
pub fn request(port: u16, method: &str, path: &str, extra_headers: &str, body: &str) -> Reply {
    let text = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}",
        body.len()
    );
    let (status, head, body) = raw(port, &text);
    Reply {
        status,
        head,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    }
}

pub fn get(port: u16, path: &str, host: &str) -> (u16, String, Vec<u8>) {
    raw(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    )
}

pub fn tool_with(port: u16, token: &str, name: &str, args: &Value) -> Reply {
    let body = args.to_string();
    let request = format!(
        "POST /api/tools/{name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, head, body) = raw(port, &request);
    Reply {
        status,
        head,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    }
}

pub fn tool(port: u16, name: &str, args: Value) -> Reply {
    tool_with(port, TOKEN, name, &args)
}

/// A shell fragment that starts `program` in the background and writes its pid to `file` *as
/// this machine numbers it*: a command runs in its own PID namespace (SECURITY F3), where `$!` is
/// the namespace's number; `/proc` is the host's mount, so `/proc/self/stat` read by the shell
/// itself names it as the host does, and `exec` keeps that pid for `program`.
pub fn background_with_pid(program: &str, file: &str) -> String {
    format!("sh -c 'read -r p rest < /proc/self/stat; echo $p > {file}; exec {program}' &")
}

/// The pid a `background_with_pid` job wrote to `path`, waiting up to 10 s for it (the job
/// writes concurrently with the command's output); empty if it never does.
pub fn read_pid(path: &std::path::Path) -> String {
    let mut pid = String::new();
    eventually(10, || {
        pid = std::fs::read_to_string(path)
            .unwrap_or_default()
            .trim()
            .to_string();
        !pid.is_empty()
    });
    pid
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// Runs the real binary with `HTTP_PROXY`/`ALL_PROXY` pointing at a listener of ours and asks
/// it to fetch a name that does not resolve: the listener must see no connection.
pub fn fetch_through_env_proxy_is_not_used() {
    let dir = temp_dir("envproxy");
    let root = dir.0.clone();
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
    let dir = temp_dir("firstline");
    let root = dir.0.clone();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_palaver"))
        .env("XDG_CONFIG_HOME", root.join("config"))
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
    serve_binary_in(root, &std::env::temp_dir(), extra, env)
}

/// `serve_binary` started in `cwd` (as a person starts it: in the workspace). Its config folder
/// (`XDG_CONFIG_HOME`) is `root/config` unless `env` names another: a test never touches the
/// user's own.
pub fn serve_binary_in(
    root: &std::path::Path,
    cwd: &std::path::Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, u16) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_palaver"))
        .current_dir(cwd)
        .env("XDG_CONFIG_HOME", root.join("config"))
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
    let swapper = Swapper::start(ws, dir, target);
    (swapper.stop, swapper.handle)
}

/// A thread that swaps a directory for a symlink and back, counting its swaps (`flips`), so a
/// test can show that a request overlapped one (E10).
pub struct Swapper {
    pub stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub flips: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub handle: std::thread::JoinHandle<()>,
}

impl Swapper {
    pub fn start(ws: &std::path::Path, dir: &str, target: &std::path::Path) -> Swapper {
        use std::sync::atomic::Ordering::Relaxed;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flips = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (real, parked, link) = (ws.join(dir), ws.join("parked"), ws.join("link"));
        let _ = std::os::unix::fs::symlink(target, &link);
        let (flag, count) = (stop.clone(), flips.clone());
        let handle = std::thread::spawn(move || {
            while !flag.load(Relaxed) {
                let _ = std::fs::rename(&real, &parked);
                let _ = std::fs::rename(&link, &real);
                std::thread::yield_now();
                let _ = std::fs::rename(&real, &link);
                let _ = std::fs::rename(&parked, &real);
                count.fetch_add(1, Relaxed);
            }
        });
        Swapper {
            stop,
            flips,
            handle,
        }
    }

    pub fn flips(&self) -> u64 {
        self.flips.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn finish(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = self.handle.join();
    }
}

/// A workspace `T/ws` with a sibling `T/ws-secret`, an outside file, and the symlinks of A.4.6.
/// Returns the server and `T`.
pub fn symlink_fixture(name: &str, allow_shell: bool, origins: &[&str]) -> (Server, PathBuf) {
    let dir = temp_dir(name);
    let t = dir.0.clone();
    let ws = t.join("ws");
    let write = |p: &Path, text: &str| {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    };
    write(&ws.join("README.md"), "# readme\nline two\nline three\n");
    write(&ws.join("sub/file.txt"), "inside\n");
    write(&ws.join("..test"), "dots\n");
    write(&ws.join("report_50%.pdf"), "pct\n");
    write(&t.join("ws-secret/secret.txt"), "SECRET-SIBLING\n");
    write(&t.join("outside.txt"), "SECRET-OUTSIDE\n");
    std::fs::write(ws.join("bin.dat"), b"abc\0def").unwrap_or_else(|e| panic!("{e}"));
    symlink("/etc", ws.join("etc_link")).unwrap_or_default();
    symlink(&t, ws.join("abs_out")).unwrap_or_default();
    symlink(t.join("outside.txt"), ws.join("file_out")).unwrap_or_default();
    symlink(t.join("new/x"), ws.join("dangling")).unwrap_or_default();
    symlink("sub/file.txt", ws.join("in")).unwrap_or_default();
    symlink("chain2", ws.join("chain1")).unwrap_or_default();
    symlink("..", ws.join("chain2")).unwrap_or_default();
    symlink(".", ws.join("loop")).unwrap_or_default();
    let config = ServeConfig {
        www: t.join("www"),
        pkg: t.join("pkg"),
        models: None,
        mcp: Default::default(),
        workspace: ws,
        allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
        allow_shell,
        allow_hard_links: false,
        workspace_copy: true,
        reaper: Some(env!("CARGO_BIN_EXE_palaver").into()),
        token: TOKEN.into(),
        vault: None,
        checkpoints: None,
    };
    (start_with(config, dir), t)
}
