//! Repository map benchmark (seed 002, issue 40): `repo_map` over a real ~150 k-line Rust project —
//! tokio's source as Cargo fetched it for this crate (pinned by Cargo.lock), copied to a temporary
//! workspace — cold, then again with nothing changed, then after one file changed; side by side
//! with Universal Ctags (`ctags -R`, Debian `universal-ctags`) over the same tree in the same run.
//! Prints numbers; `cargo bench --bench repo_map`.

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
        start_serve(root, None)
    }

    /// tokio's source in Cargo's registry (any version there).
    fn tokio_source() -> Option<PathBuf> {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
        let registry = home.join("registry/src");
        let mut found: Vec<PathBuf> = std::fs::read_dir(registry)
            .ok()?
            .flatten()
            .flat_map(|index| {
                std::fs::read_dir(index.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("tokio-1."))
            })
            .collect();
        found.sort();
        found.pop()
    }

    fn copy_tree(from: &Path, to: &Path) -> (usize, usize) {
        let (mut files, mut lines) = (0, 0);
        for entry in std::fs::read_dir(from).into_iter().flatten().flatten() {
            let path = entry.path();
            let target = to.join(entry.file_name());
            if path.is_dir() {
                let _ = std::fs::create_dir_all(&target);
                let (f, l) = copy_tree(&path, &target);
                files += f;
                lines += l;
            } else if let Ok(text) = std::fs::read(&path) {
                if path.extension().is_some_and(|e| e == "rs") {
                    files += 1;
                    lines += text.iter().filter(|b| **b == b'\n').count();
                }
                let _ = std::fs::write(&target, text);
            }
        }
        (files, lines)
    }

    /// One `repo_map` call: its time and its `data`.
    fn map(port: u16) -> (Duration, serde_json::Value) {
        let body = r#"{"budget":2048}"#;
        let started = Instant::now();
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let request = format!("POST /api/tools/repo_map HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        let _ = stream.write_all(request.as_bytes());
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let took = started.elapsed();
        let text = String::from_utf8_lossy(&response);
        let json = text.find("\r\n\r\n").map_or("", |i| &text[i + 4..]);
        let value: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
        (took, value["data"].clone())
    }

    fn ctags(dir: &Path) -> Option<(Duration, usize)> {
        let started = Instant::now();
        let out = std::process::Command::new("ctags")
            .args(["-R", "--languages=Rust", "-f", "-"])
            .current_dir(dir)
            .output()
            .ok()?;
        out.status.success().then(|| {
            (
                started.elapsed(),
                out.stdout.iter().filter(|b| **b == b'\n').count(),
            )
        })
    }

    pub fn run() {
        let Some(source) = tokio_source() else {
            println!("repo_map bench: no tokio source in Cargo's registry (build the crate first)");
            return;
        };
        let root = std::env::temp_dir().join(format!("palaver-map-bench-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["www", "pkg", "ws"] {
            let _ = std::fs::create_dir_all(root.join(dir));
        }
        let (files, lines) = copy_tree(&source, &root.join("ws"));
        let port = start(&root);
        println!(
            "repo_map over {} ({files} Rust files, {lines} lines):",
            source.display()
        );
        let (cold, data) = map(port);
        println!(
            "  cold (parse every file):         {:>8.1} ms  {data}",
            cold.as_secs_f64() * 1e3
        );
        let (warm, _) = map(port);
        println!(
            "  again, nothing changed:          {:>8.1} ms",
            warm.as_secs_f64() * 1e3
        );
        let lib = root.join("ws/src/lib.rs");
        let mut text = std::fs::read_to_string(&lib).unwrap_or_default();
        text.push_str("\npub fn added_by_the_bench() {}\n");
        let _ = std::fs::write(&lib, text);
        let (update, _) = map(port);
        println!(
            "  after one file changed:          {:>8.1} ms",
            update.as_secs_f64() * 1e3
        );
        match ctags(&root.join("ws")) {
            Some((took, tags)) => println!(
                "  ctags -R (Universal Ctags), same tree: {:>8.1} ms ({tags} tags; it ranks nothing)",
                took.as_secs_f64() * 1e3
            ),
            None => println!("  ctags: not installed (apt-get install universal-ctags)"),
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    native::run();
}
