//! Proxy benchmark: `read_file` of a 100 KB file and `search` over a generated 10 000-file
//! workspace, through HTTP on 127.0.0.1 (the real server, in-process), p50/p99 — and the same
//! search with `rg` on the same tree when `rg` is installed (`apt-get install ripgrep`).

#[cfg(not(target_arch = "wasm32"))]
#[path = "support/serve.rs"]
mod serve_support;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use super::serve_support::{start as start_serve, TOKEN};

    fn start(root: &Path) -> u16 {
        start_serve(root, Some(env!("CARGO_BIN_EXE_palaver").into()))
    }

    fn workspace() -> PathBuf {
        let root = std::env::temp_dir().join(format!("palaver-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for d in 0..100 {
            let dir = root.join(format!("ws/dir{d:03}"));
            std::fs::create_dir_all(&dir).unwrap_or_default();
            for f in 0..100 {
                let mut text = String::new();
                for line in 0..30 {
                    text.push_str(&format!(
                        "fn item_{d}_{f}_{line}() {{ let value = {line} * {f}; }}\n"
                    ));
                }
                if (d * 100 + f) % 97 == 0 {
                    text.push_str("// the needle_marker is here\n");
                }
                std::fs::write(dir.join(format!("file{f:03}.rs")), text).unwrap_or_default();
            }
        }
        let big: String = (0..2000)
            .map(|i| format!("line {i:05} of a one-hundred-kilobyte file.\n"))
            .collect();
        std::fs::write(root.join("ws/big.txt"), &big[..100_000.min(big.len())]).unwrap_or_default();
        std::fs::create_dir_all(root.join("www")).unwrap_or_default();
        std::fs::create_dir_all(root.join("pkg")).unwrap_or_default();
        root
    }

    /// The `(path, line)` of every match `search` answers.
    fn search_matches(port: u16, pattern: &str) -> std::collections::BTreeSet<(String, u64)> {
        let body = format!(r#"{{"pattern":"{pattern}","max_results":100000}}"#);
        let reply = call_body(port, "search", &body);
        let json_start = reply.find("\r\n\r\n").map_or(0, |i| i + 4);
        let value: serde_json::Value =
            serde_json::from_str(&reply[json_start..]).unwrap_or_default();
        value["data"]["matches"]
            .as_array()
            .map(|m| {
                m.iter()
                    .map(|m| {
                        (
                            m["path"].as_str().unwrap_or("").to_string(),
                            m["line"].as_u64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The same from `rg --hidden --glob '!.git'`.
    fn rg_matches(dir: &Path, pattern: &str) -> std::collections::BTreeSet<(String, u64)> {
        let out = std::process::Command::new("rg")
            .args(["--hidden", "--glob", "!.git", "-n", "--no-heading", pattern])
            .current_dir(dir)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.lines()
            .filter_map(|l| {
                let mut parts = l.splitn(3, ':');
                let path = parts.next()?.trim_start_matches("./").to_string();
                let line = parts.next()?.parse().ok()?;
                Some((path, line))
            })
            .collect()
    }

    fn call_body(port: u16, tool: &str, body: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let request = format!("POST /api/tools/{tool} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        let _ = stream.write_all(request.as_bytes());
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        String::from_utf8_lossy(&response).into_owned()
    }

    fn call(port: u16, tool: &str, body: &str) -> usize {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let request = format!("POST /api/tools/{tool} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        let _ = stream.write_all(request.as_bytes());
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        assert!(
            response.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&response[..200.min(response.len())])
        );
        response.len()
    }

    fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
        samples.sort();
        let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
        (at(0.50), at(0.99))
    }

    fn measure(runs: usize, mut f: impl FnMut()) -> (Duration, Duration) {
        f();
        let samples = (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect();
        percentiles(samples)
    }

    pub fn run() {
        let root = workspace();
        let port = start(&root);
        let (p50, p99) = measure(300, || {
            call(port, "read_file", r#"{"path":"big.txt"}"#);
        });
        println!(
            "read_file 100 KB over HTTP: p50 {:.3} ms, p99 {:.3} ms",
            ms(p50),
            ms(p99)
        );
        let (s50, s99) = measure(30, || {
            call(
                port,
                "search",
                r#"{"pattern":"needle_marker","max_results":2000}"#,
            );
        });
        println!(
            "search over 10 000 files over HTTP: p50 {:.2} ms, p99 {:.2} ms",
            ms(s50),
            ms(s99)
        );
        let rg_ok = std::process::Command::new("rg")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if rg_ok {
            let (r50, r99) = measure(30, || {
                let _ = std::process::Command::new("rg")
                    .args(["--hidden", "--glob", "!.git", "-n", "needle_marker"])
                    .current_dir(root.join("ws"))
                    .output();
            });
            println!("rg on the same tree (process spawn included): p50 {:.2} ms, p99 {:.2} ms; palaver/rg p50 ratio {:.2}", ms(r50), ms(r99), ms(s50) / ms(r50));
            let ours = search_matches(port, "needle_marker");
            let theirs = rg_matches(&root.join("ws"), "needle_marker");
            println!(
                "same matches as rg --hidden --glob '!.git': {} (palaver {}, rg {})",
                if ours == theirs { "yes" } else { "NO" },
                ours.len(),
                theirs.len()
            );
        } else {
            println!("rg not installed (apt-get install ripgrep) — no side-by-side number");
        }
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
