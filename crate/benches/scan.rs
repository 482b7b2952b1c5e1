//! The scans around a shell command (issue 39): `run_command` on a 10 000-file workspace through
//! HTTP (the real server, in-process), recorded (a scan before and after) and not, with nothing
//! changed and with 10 files changed — beside `git status --porcelain` on the same tree in the
//! same run, after the same changes. Then the first (cold) scan, and the change store's size after
//! 100 turns of edits. Prints p50/p99.

#[cfg(not(target_arch = "wasm32"))]
#[path = "support/serve.rs"]
mod serve_support;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use super::serve_support::{start_recording, TOKEN};
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::{Duration, Instant};

    fn workspace() -> PathBuf {
        let root = std::env::temp_dir().join(format!("palaver-bench-scan-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for d in 0..100 {
            let dir = root.join(format!("ws/dir{d:03}"));
            std::fs::create_dir_all(&dir).unwrap_or_default();
            for f in 0..100 {
                let text: String = (0..30)
                    .map(|l| format!("line {l} of file {d}/{f}\n"))
                    .collect();
                std::fs::write(dir.join(format!("file{f:03}.txt")), text).unwrap_or_default();
            }
        }
        std::fs::create_dir_all(root.join("www")).unwrap_or_default();
        std::fs::create_dir_all(root.join("pkg")).unwrap_or_default();
        let ws = root.join("ws");
        git(&ws, &["init", "-q"]);
        git(&ws, &["add", "-A"]);
        git(
            &ws,
            &[
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@b",
                "commit",
                "-qm",
                "start",
            ],
        );
        root
    }

    fn git(ws: &Path, args: &[&str]) -> String {
        let out = Command::new("git").args(args).current_dir(ws).output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// `run_command` with `argv`; recorded (chat and call named) or not.
    fn command(port: u16, argv: &[&str], recorded: Option<&str>) {
        let body = serde_json::json!({"argv": argv}).to_string();
        let named = recorded
            .map(|call| format!("x-palaver-chat: bench\r\nx-palaver-call: {call}\r\n"))
            .unwrap_or_default();
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let request = format!("POST /api/tools/run_command HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n{named}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        let _ = stream.write_all(request.as_bytes());
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        assert!(
            response.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&response)
        );
    }

    fn measure(runs: usize, mut f: impl FnMut(usize)) -> (f64, f64) {
        f(0);
        let mut samples: Vec<Duration> = (1..=runs)
            .map(|i| {
                let start = Instant::now();
                f(i);
                start.elapsed()
            })
            .collect();
        samples.sort();
        let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
        (ms(at(0.5)), ms(at(0.99)))
    }

    const TEN_FILES: &str =
        "for i in 0 1 2 3 4 5 6 7 8 9; do echo \"$1\" >> dir0$i$i/file00$i.txt; done";

    fn changes(port: u16) -> usize {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let request = format!("GET /api/changes?chat=bench HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n");
        let _ = stream.write_all(request.as_bytes());
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response.matches("\"call_id\"").count()
    }

    pub fn run() {
        let root = workspace();
        let ws = root.join("ws");
        let port = start_recording(&root, Some(env!("CARGO_BIN_EXE_palaver").into()));
        let cold = Instant::now();
        command(port, &["true"], Some("cold"));
        println!(
            "first recorded command (every file read and kept once): {:.0} ms",
            ms(cold.elapsed())
        );
        let (bare50, bare99) = measure(30, |_| command(port, &["true"], None));
        let (still50, still99) =
            measure(30, |i| command(port, &["true"], Some(&format!("still{i}"))));
        let (git50, git99) = measure(30, |_| {
            git(&ws, &["status", "--porcelain"]);
        });
        println!("run_command `true`, not recorded: p50 {bare50:.1} ms, p99 {bare99:.1} ms");
        println!("run_command `true`, recorded, nothing changed: p50 {still50:.1} ms, p99 {still99:.1} ms → recording (the scan before, skipped when inotify saw nothing move, and the scan after) adds {:.1} ms", still50 - bare50);
        println!("git status --porcelain, nothing changed: p50 {git50:.1} ms, p99 {git99:.1} ms; recording/git status {:.2}", (still50 - bare50) / git50);
        let before = changes(port);
        let (ten50, ten99) = measure(30, |i| {
            command(
                port,
                &["sh", "-c", TEN_FILES, "sh", &format!("turn {i}")],
                Some(&format!("ten{i}")),
            );
        });
        let (bare_ten50, _) = measure(30, |i| {
            command(
                port,
                &["sh", "-c", TEN_FILES, "sh", &format!("bare {i}")],
                None,
            )
        });
        let (git_ten50, git_ten99) = measure(30, |i| {
            let _ = Command::new("sh")
                .args(["-c", TEN_FILES, "sh", &format!("git {i}")])
                .current_dir(&ws)
                .status();
            git(&ws, &["status", "--porcelain"]);
        });
        let recorded = changes(port) - before;
        println!("run_command changing 10 files, recorded: p50 {ten50:.1} ms, p99 {ten99:.1} ms ({recorded} changes logged over 31 runs; 10 per run expected) → recording adds {:.1} ms", ten50 - bare_ten50);
        println!("the same 10 changes then git status --porcelain: p50 {git_ten50:.1} ms, p99 {git_ten99:.1} ms");
        for turn in 0..100 {
            command(
                port,
                &["sh", "-c", TEN_FILES, "sh", &format!("store {turn}")],
                Some(&format!("store{turn}")),
            );
        }
        let size: u64 = std::fs::read_dir(root.join("store/objects"))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        let workspace_size: u64 = 10_000 * 30 * 20;
        println!("the change store after the cold scan and {} more turns of 10 edits: {:.1} MB (the workspace is about {:.1} MB)", 100 + 92, size as f64 / 1e6, workspace_size as f64 / 1e6);
        let _ = std::fs::remove_dir_all(&root);
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1000.0
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    native::run();
}

#[cfg(target_arch = "wasm32")]
fn main() {}
