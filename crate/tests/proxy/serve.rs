//! `palaver serve`'s static part against the real server on port 0, with raw TCP requests so the
//! Host header is exactly what the test writes (a client library would normalize it).

use crate::support::{config_for, get, raw, start_with, temp_dir, Server, TOKEN};
use std::io::Read;

fn start(name: &str) -> Server {
    let dir = temp_dir(name);
    start_with(config_for(&dir, false), dir)
}

#[test]
fn serves_the_app_with_the_right_types_and_headers() {
    let server = start("types");
    let host = format!("127.0.0.1:{}", server.port);
    let (status, head, body) = get(server.port, "/", &host);
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    assert!(
        head.contains("cross-origin-resource-policy: same-origin"),
        "{head}"
    );
    assert!(String::from_utf8_lossy(&body).contains("<title>t</title>"));
    let (status, head, _) = get(server.port, "/pkg/palaver_bg.wasm", &host);
    assert_eq!(status, 200);
    assert!(head.contains("content-type: application/wasm"), "{head}");
    let (_, head, _) = get(
        server.port,
        "/app.js",
        &format!("localhost:{}", server.port),
    );
    assert!(head.contains("content-type: text/javascript"), "{head}");
    let health_request = format!("GET /api/health HTTP/1.1\r\nHost: [::1]:{}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n", server.port);
    let (status, head, body) = raw(server.port, &health_request);
    assert_eq!(status, 200);
    assert!(head.contains("cache-control: no-store"), "{head}");
    let health: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    assert_eq!(health["ok"], true);
}

/// SECURITY C18: the served page's policy header is C.3's (with `frame-ancestors 'none'`, which only
/// a header can carry) and equals the meta tag of the real `www/index.html` plus that directive.
#[test]
fn c18_the_app_is_served_with_its_csp_and_the_meta_tag_agrees() {
    let server = start("csp");
    let host = format!("127.0.0.1:{}", server.port);
    let (_, head, _) = get(server.port, "/", &host);
    let header = head
        .lines()
        .find_map(|l| l.strip_prefix("content-security-policy: "))
        .unwrap_or_else(|| panic!("no CSP header in {head}"))
        .trim()
        .to_string();
    for directive in [
        "default-src 'none'",
        "script-src 'self' 'wasm-unsafe-eval'",
        "img-src 'self' data: blob:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
    ] {
        assert!(
            header.split("; ").any(|d| d == directive),
            "{directive} missing from {header}"
        );
    }
    assert!(
        !header.contains("unsafe-inline") && !header.contains("'unsafe-eval'"),
        "{header}"
    );
    assert!(head.contains("referrer-policy: no-referrer"), "{head}");
    assert!(
        head.contains("cross-origin-opener-policy: same-origin"),
        "{head}"
    );
    assert!(head.contains("permissions-policy: camera=()"), "{head}");
    let index = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../www/index.html"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let meta = index
        .split("http-equiv=\"Content-Security-Policy\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("www/index.html has no CSP meta tag"));
    assert_eq!(format!("{meta}; frame-ancestors 'none'"), header);
    let (_, api_head, _) = get(server.port, "/api/health", &host);
    assert!(!api_head.contains("content-security-policy"), "{api_head}");
}

#[test]
fn refuses_foreign_hosts_before_anything_else() {
    let server = start("hosts");
    let port = server.port;
    for host in [
        format!("evil.example:{port}"),
        format!("0.0.0.0:{port}"),
        "127.0.0.1".into(),
        format!("127.0.0.1:{}", port + 1),
        String::new(),
    ] {
        let (status, _, body) = get(port, "/", &host);
        assert_eq!(status, 403, "Host `{host}` must be refused");
        assert!(
            !String::from_utf8_lossy(&body).contains("<title>"),
            "nothing served to Host `{host}`"
        );
    }
    let twice = format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    assert_eq!(raw(port, &twice).0, 403, "a duplicated Host is refused");
    let missing = "GET / HTTP/1.0\r\n\r\n";
    assert_eq!(raw(port, missing).0, 403, "a missing Host is refused");
}

#[test]
fn the_binary_prints_the_token_in_the_fragment_and_stops_on_sigterm() {
    let dir = temp_dir("binary");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_palaver"))
        .args(["serve", "--port", "0", "--www"])
        .arg(dir.0.join("www"))
        .arg("--pkg")
        .arg(dir.0.join("pkg"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let mut stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&line).to_string();
    let (url, token) = line
        .split_once("/#token=")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    assert!(
        url.starts_with("http://127.0.0.1:") && !url.contains('?'),
        "{line}"
    );
    assert!(
        token.len() >= 32 && token.chars().all(|c| c.is_ascii_hexdigit()),
        "token: {token}"
    );
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    assert_eq!(get(port, "/", &format!("127.0.0.1:{port}")).0, 200);
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
    assert!(
        status.success(),
        "palaver serve must exit cleanly on SIGTERM: {status}"
    );
}

#[test]
fn a4_a5_tokens_are_fresh_per_run_and_a_shared_token_file_is_refused() {
    let dir = temp_dir("tokens");
    let first_line = |extra: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_palaver"))
            .args(["serve", "--port", "0", "--www"])
            .arg(dir.0.join("www"))
            .arg("--pkg")
            .arg(dir.0.join("pkg"))
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                let mut stdout = child
                    .stdout
                    .take()
                    .ok_or_else(|| std::io::Error::other("no stdout"))?;
                let mut line = Vec::new();
                let mut byte = [0u8; 1];
                while stdout.read(&mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
                    line.push(byte[0]);
                }
                let _ = child.kill();
                let output = child.wait_with_output()?;
                Ok((
                    String::from_utf8_lossy(&line).to_string(),
                    String::from_utf8_lossy(&output.stderr).to_string(),
                ))
            })
            .unwrap_or_else(|e| panic!("{e}"));
        output
    };
    let (one, _) = first_line(&[]);
    let (two, _) = first_line(&[]);
    assert!(one.contains("#token=") && two.contains("#token="));
    assert_ne!(
        one.split("#token=").nth(1),
        two.split("#token=").nth(1),
        "A5: a fresh token each run"
    );
    let token_file = dir.0.join("token");
    std::fs::write(&token_file, "f".repeat(32)).unwrap_or_default();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644))
        .unwrap_or_default();
    let (line, stderr) = first_line(&["--token-file", token_file.to_str().unwrap_or("")]);
    assert!(
        line.is_empty() && stderr.contains("readable by others"),
        "A4: {line} / {stderr}"
    );
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600))
        .unwrap_or_default();
    let (line, _) = first_line(&["--token-file", token_file.to_str().unwrap_or("")]);
    assert!(
        line.ends_with(&format!("#token={}", "f".repeat(32))),
        "{line}"
    );
}

/// `GET path` taking the encodings given (an `Accept-Encoding` line, or nothing). HTTP/1.0: a
/// compressed answer comes whole, not in chunks.
fn get_encoded(port: u16, path: &str, encodings: &str) -> (u16, String, Vec<u8>) {
    raw(
        port,
        &format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{encodings}\r\n"),
    )
}

/// Issue 41: a built file's brotli written beside it (`.br`) is what a browser that takes brotli
/// gets, unchanged and with the file's own type; one that takes only gzip gets the file gzipped
/// on the fly, and one that names no encoding gets the file itself.
#[test]
fn a_built_files_brotli_is_sent_to_a_browser_that_takes_it() {
    let dir = temp_dir("brotli");
    let wasm = [b"\0asm\x01\0\0\0".as_slice(), &[7u8; 4096]].concat();
    let brotli = b"stands for the brotli of palaver_bg.wasm".to_vec();
    let pkg = dir.0.join("pkg");
    for (name, bytes) in [("palaver_bg.wasm", &wasm), ("palaver_bg.wasm.br", &brotli)] {
        std::fs::write(pkg.join(name), bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let server = start_with(config_for(&dir, false), dir);
    let ask = |encodings: &str| get_encoded(server.port, "/pkg/palaver_bg.wasm", encodings);
    let (status, head, body) = ask("Accept-Encoding: gzip, deflate, br, zstd\r\n");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-encoding: br"), "{head}");
    assert!(head.contains("content-type: application/wasm"), "{head}");
    assert_eq!(
        body, brotli,
        "the .br is sent as it is, not compressed again"
    );
    let (_, head, body) = ask("Accept-Encoding: gzip\r\n");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let mut unzipped = Vec::new();
    let _ = flate2::read::GzDecoder::new(body.as_slice()).read_to_end(&mut unzipped);
    assert!(unzipped == wasm, "the gzip of the file, not of its .br");
    let (_, head, body) = ask("");
    assert!(!head.contains("content-encoding"), "{head}");
    assert!(body == wasm, "the file itself");
}

/// Issue 41: `www/` has no `.br` (it is edited in place, one would go stale); a browser that
/// takes brotli gets the file's brotli made on the fly, smaller than its gzip, which decodes to
/// the file.
#[test]
fn the_page_files_go_as_brotli_made_on_the_fly() {
    let dir = temp_dir("brotli-www");
    let view = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../www/view.js"))
        .unwrap_or_else(|e| panic!("www/view.js: {e}"));
    std::fs::write(dir.0.join("www").join("view.js"), &view).unwrap_or_else(|e| panic!("{e}"));
    let server = start_with(config_for(&dir, false), dir);
    let ask = |encodings: &str| get_encoded(server.port, "/view.js", encodings);
    let (status, head, brotli) = ask("Accept-Encoding: gzip, deflate, br, zstd\r\n");
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-encoding: br"), "{head}");
    let mut decoded = Vec::new();
    let _ =
        brotli_decompressor::Decompressor::new(brotli.as_slice(), 4096).read_to_end(&mut decoded);
    assert!(decoded == view, "the brotli decodes to the file");
    let (_, head, gzip) = ask("Accept-Encoding: gzip\r\n");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(
        brotli.len() < gzip.len() * 97 / 100,
        "brotli {} B, at least 3 % under gzip's {} B (the layer's default quality is larger than gzip)",
        brotli.len(),
        gzip.len()
    );
}

/// What runs as a page or a worker carries the policies it runs under; a module, a style sheet, a
/// wasm module or a manifest obeys the page that loads it and carries only what guards it as a
/// resource (issue 41: ~600 bytes on each of ~95 answers, ~40 KB of a first answer).
#[test]
fn only_pages_and_workers_carry_the_page_policies() {
    let dir = temp_dir("policies");
    for (path, text) in [
        ("www/sw.js", "self.addEventListener('fetch', () => {});"),
        ("www/local/worker.js", "onmessage = () => {};"),
        ("www/style.css", "body { margin: 0 }"),
        (
            "www/icon.svg",
            "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
        ),
        ("www/manifest.webmanifest", "{}"),
    ] {
        let file = dir.0.join(path);
        std::fs::create_dir_all(file.parent().unwrap_or(&dir.0)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    let server = start_with(config_for(&dir, false), dir);
    let host = format!("127.0.0.1:{}", server.port);
    let page_only = [
        "content-security-policy:",
        "cross-origin-opener-policy: same-origin",
        "cross-origin-embedder-policy: credentialless",
        "permissions-policy:",
    ];
    for path in [
        "/",
        "/index.html",
        "/sw.js",
        "/local/worker.js",
        "/icon.svg",
    ] {
        let (status, head, _) = get(server.port, path, &host);
        assert_eq!(status, 200, "{path}: {head}");
        for header in page_only {
            assert!(
                head.contains(header),
                "{path} runs as a page or worker: {header} missing in {head}"
            );
        }
    }
    for path in [
        "/app.js",
        "/style.css",
        "/pkg/palaver_bg.wasm",
        "/manifest.webmanifest",
    ] {
        let (status, head, _) = get(server.port, path, &host);
        assert_eq!(status, 200, "{path}: {head}");
        for header in page_only {
            assert!(
                !head.contains(header),
                "{path} is loaded by a page: {header} in {head}"
            );
        }
        for header in [
            "x-content-type-options: nosniff",
            "cross-origin-resource-policy: same-origin",
            "referrer-policy: no-referrer",
        ] {
            assert!(head.contains(header), "{path}: {header} missing in {head}");
        }
    }
}
