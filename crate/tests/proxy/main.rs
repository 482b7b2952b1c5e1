//! Every attack and hardening test of `palaver serve` (issue 15: one place), against the real
//! server on 127.0.0.1:0 with raw TCP requests (no client-side normalisation): `proxy` (the
//! SECURITY A.4 checklist: token, Origin/CORS, Host, limits), `proxy_tools` (the tools: paths,
//! symlinks, commands, fetch), `serve` (the binary and its start-up), `second_round` (E1–E11), and
//! here: safe headers on
//! Host refusals (A15–A17), run_command cancellation and caps (A27, A59), search contents read
//! through the workspace capability under a racing symlink swap (A47), writes into `.git` at any
//! depth or through in-workspace symlinks (A41), environment proxies ignored by fetch_url, the
//! address policy, and static MIME types. Native only.
#![cfg(not(target_arch = "wasm32"))]

mod chat_files;
mod checkpoints;
mod checkpoints_git;
mod checkpoints_limits;
mod mcp;
mod models;
mod proxy;
mod proxy_tools;
mod repo_map;
mod second_round;
mod serve;
mod support;
mod third_round;

use serde_json::json;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};
use support::{alive, fixture, raw, tool, TOKEN};

// ---- Host refusals carry the safe headers (A15, A16, A17) ----

#[test]
fn a15_a16_a17_host_refusals_carry_nosniff_corp_and_no_store() {
    let fx = fixture("hosthdr", false);
    let port = fx.server.port;
    for (path, api) in [("/api/health", true), ("/", false)] {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        );
        let (status, head, body) = raw(port, &request);
        assert_eq!(status, 403, "{path}: {head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(head.contains("x-content-type-options: nosniff"), "{head}");
        assert!(
            head.contains("cross-origin-resource-policy: same-origin"),
            "{head}"
        );
        assert_eq!(head.contains("cache-control: no-store"), api, "{head}");
        assert!(!String::from_utf8_lossy(&body).contains("version"));
    }
}

#[test]
fn static_files_have_the_right_mime_types() {
    let fx = fixture("mime", false);
    let port = fx.server.port;
    let www = fx.root.join("www");
    std::fs::write(www.join("sw.mjs"), "export {}").unwrap_or_default();
    std::fs::write(www.join("app.webmanifest"), "{}").unwrap_or_default();
    std::fs::write(fx.root.join("pkg/x.wasm"), b"\0asm\x01\0\0\0").unwrap_or_default();
    for (path, mime) in [
        ("/pkg/x.wasm", "application/wasm"),
        ("/app.js", "text/javascript"),
        ("/sw.mjs", "text/javascript"),
        ("/app.webmanifest", "application/manifest+json"),
        ("/", "text/html"),
    ] {
        let (status, head, _) = raw(
            port,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n"),
        );
        assert_eq!(status, 200, "{path}: {head}");
        assert!(
            head.contains(&format!("content-type: {mime}")),
            "{path}: {head}"
        );
        assert!(head.contains("x-content-type-options: nosniff"), "{head}");
    }
}

// ---- run_command: cancellation, caps, partial output (A27, A59) ----

#[test]
fn a27_a59_a_dropped_buffered_run_command_kills_the_whole_group() {
    let fx = fixture("dropped", true);
    let port = fx.server.port;
    let script = format!(
        "{} sleep 300",
        support::background_with_pid("sleep 300", "bg.pid")
    );
    let body = json!({"argv": ["sh", "-c", script], "timeout_ms": 100000}).to_string();
    let request = format!(
        "POST /api/tools/run_command HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let stream = support::send(port, &request);
    let pid = support::read_pid(&fx.ws().join("bg.pid"));
    assert!(!pid.is_empty(), "the grandchild wrote its pid");
    assert!(alive(&pid), "the grandchild runs while the request is open");
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(&pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !alive(&pid),
        "A27: the grandchild {pid} outlived the client"
    );
}

#[test]
fn a27_stopping_the_server_kills_running_commands_and_their_children() {
    for accept in ["application/json", "application/x-ndjson"] {
        let fx = fixture("shutdown", true);
        let port = fx.server.port;
        let script = format!(
            "{} echo go; sleep 300",
            support::background_with_pid("sleep 300", "bg.pid")
        );
        let body = json!({"argv": ["sh", "-c", script], "timeout_ms": 100000}).to_string();
        let request = format!(
            "POST /api/tools/run_command HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: {accept}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let _client = support::send(port, &request);
        let pid = support::read_pid(&fx.ws().join("bg.pid"));
        assert!(
            !pid.is_empty() && alive(&pid),
            "{accept}: the grandchild runs"
        );
        drop(fx);
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(&pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            !alive(&pid),
            "{accept}: grandchild {pid} outlived the server"
        );
    }
}

#[test]
fn a59_the_output_cap_stops_a_group_that_keeps_running_after_sigpipe() {
    let fx = fixture("capstop", true);
    let port = fx.server.port;
    let started = Instant::now();
    let reply = tool(
        port,
        "run_command",
        json!({"argv": ["sh", "-c", "yes; sleep 60"], "timeout_ms": 60000}),
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the cap must end the call, not the timeout ({:?})",
        started.elapsed()
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    let content = reply.body["content"].as_str().unwrap_or("");
    assert!(
        content.contains("[output truncated at"),
        "{}",
        &content[content.len().saturating_sub(200)..]
    );
    assert_eq!(reply.body["data"]["truncated"], true);
    assert!(content.len() < 300 * 1024);
}

#[test]
fn a59_a_timed_out_command_reports_the_output_it_printed() {
    let fx = fixture("partial", true);
    let port = fx.server.port;
    let reply = tool(
        port,
        "run_command",
        json!({"argv": ["sh", "-c", "echo started-work; sleep 30"], "timeout_ms": 400}),
    );
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["is_error"], true);
    assert_eq!(reply.body["error"]["kind"], "timeout");
    let content = reply.body["content"].as_str().unwrap_or("");
    assert!(
        content.contains("did not finish within 400 ms"),
        "{content}"
    );
    assert!(content.contains("started-work"), "{content}");
}

// ---- search reads through the capability (A47) ----

#[test]
fn a47_search_and_file_tree_never_show_outside_content_or_names_during_a_symlink_swap() {
    let fx = fixture("searchrace", false);
    let port = fx.server.port;
    let ws = fx.ws();
    std::fs::create_dir_all(ws.join("race")).unwrap_or_default();
    std::fs::write(ws.join("race/inside.txt"), "MARKER-INSIDE\n").unwrap_or_default();
    let outside = fx.root.join("outdir");
    std::fs::create_dir_all(&outside).unwrap_or_default();
    std::fs::write(outside.join("outside.txt"), "MARKER-OUTSIDE\n").unwrap_or_default();
    let (stop, flipper) = support::swap_with_symlink(&ws, "race", &outside);
    let mut inside_hits = 0;
    for i in 0..300 {
        let reply = tool(port, "search", json!({"pattern": "MARKER-"}));
        let text = reply.body.to_string();
        assert!(
            !text.contains("MARKER-OUTSIDE"),
            "search {i} leaked: {text}"
        );
        let tree = tool(port, "file_tree", json!({"max_depth": 4}))
            .body
            .to_string();
        assert!(
            !tree.contains("outside.txt"),
            "file_tree {i} leaked a name: {tree}"
        );
        inside_hits += usize::from(text.contains("MARKER-INSIDE"));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = flipper.join();
    assert!(inside_hits > 0, "the inside file was found at least once");
}

#[test]
fn a57_parallel_search_is_sorted_and_flags_truncation_exactly() {
    let fx = fixture("searchsort", false);
    let port = fx.server.port;
    let ws = fx.ws();
    for i in 0..60 {
        let dir = ws.join(format!("d{}", i % 7));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        std::fs::write(
            dir.join(format!("f{i:02}.txt")),
            "x\nneedle one\nneedle two\n",
        )
        .unwrap_or_default();
    }
    std::fs::write(ws.join(".gitignore"), "d6/\n").unwrap_or_default();
    let all = tool(
        port,
        "search",
        json!({"pattern": "needle", "max_results": 2000}),
    );
    let matches = all.body["data"]["matches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let keys: Vec<(String, u64)> = matches
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap_or("").to_string(),
                m["line"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "sorted by path and line");
    let expected = (0..60).filter(|i| i % 7 != 6).count() * 2;
    assert_eq!(matches.len(), expected, ".gitignore'd d6/ is skipped");
    assert_eq!(all.body["data"]["truncated"], false);
    let exact = tool(
        port,
        "search",
        json!({"pattern": "needle", "max_results": expected}),
    );
    assert_eq!(
        exact.body["data"]["truncated"], false,
        "exactly the limit is not a cut"
    );
    let cut = tool(
        port,
        "search",
        json!({"pattern": "needle", "max_results": 10}),
    );
    assert_eq!(
        cut.body["data"]["matches"].as_array().map_or(0, Vec::len),
        10
    );
    assert_eq!(cut.body["data"]["truncated"], true);
}

// ---- protected paths (A41) ----

#[test]
fn a41_writes_into_git_are_refused_at_any_depth_and_through_symlinks() {
    let fx = fixture("protect", false);
    let port = fx.server.port;
    let ws = fx.ws();
    for dir in [".git/hooks", "vendor/lib/.git/hooks", "sub"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap_or_default();
    }
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/a\n").unwrap_or_default();
    symlink(".git/hooks", ws.join("h")).unwrap_or_default();
    symlink(".git", ws.join("g")).unwrap_or_default();
    symlink("sub", ws.join("subl")).unwrap_or_default();
    for path in [
        ".git/hooks/pre-commit",
        ".GIT/config",
        "vendor/lib/.git/hooks/pre-commit",
        "vendor/lib/.git/config",
        "h/pre-commit",
        "g/hooks/post-checkout",
        "g/config",
        "g/newdir/x",
        ".palaver/config.toml",
    ] {
        let reply = tool(
            port,
            "write_file",
            json!({"path": path, "content": "#!/bin/sh\ntouch pwned\n"}),
        );
        assert_eq!(reply.status, 403, "{path}: {}", reply.body);
        assert_eq!(reply.body["error"]["kind"], "protected_path", "{path}");
    }
    let hooks = std::fs::read_dir(ws.join(".git/hooks")).map_or(0, Iterator::count);
    assert_eq!(hooks, 0, "nothing was planted in .git/hooks");
    assert!(!ws.join(".git/config").exists() && !ws.join(".git/newdir").exists());
    let edit = tool(
        port,
        "edit_file",
        json!({"path": "g/HEAD", "old_text": "a", "new_text": "b"}),
    );
    assert_eq!(
        edit.body["error"]["kind"], "protected_path",
        "{}",
        edit.body
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/HEAD")).unwrap_or_default(),
        "ref: refs/heads/a\n"
    );
    let fine = tool(
        port,
        "write_file",
        json!({"path": "subl/new.txt", "content": "ok\n"}),
    );
    assert_eq!(
        fine.status, 200,
        "a symlinked in-tree dir stays writable: {}",
        fine.body
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/new.txt")).unwrap_or_default(),
        "ok\n"
    );
    let gitignore = tool(
        port,
        "write_file",
        json!({"path": ".gitignore", "content": "target/\n"}),
    );
    assert_eq!(
        gitignore.status, 200,
        ".gitignore is not .git: {}",
        gitignore.body
    );
}

// ---- odd files and the token ----

#[test]
fn a57_read_file_of_a_fifo_is_refused_at_once_instead_of_hanging() {
    let fx = fixture("fifo", false);
    let port = fx.server.port;
    let fifo = fx.ws().join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap_or_else(|e| panic!("mkfifo: {e}"));
    assert!(status.success());
    let started = Instant::now();
    let reply = tool(port, "read_file", json!({"path": "pipe"}));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(reply.body["is_error"], true, "{}", reply.body);
    assert_eq!(
        reply.body["error"]["kind"], "not_a_regular_file",
        "{}",
        reply.body
    );
    let edit = tool(
        port,
        "edit_file",
        json!({"path": "pipe", "old_text": "a", "new_text": "b"}),
    );
    assert_eq!(
        edit.body["error"]["kind"], "not_a_regular_file",
        "{}",
        edit.body
    );
    let guarded = tool(
        port,
        "write_file",
        json!({"path": "pipe", "content": "x", "if_match": "0000000000000000"}),
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        guarded.body["error"]["kind"], "conflict",
        "{}",
        guarded.body
    );
}

#[test]
fn a69_if_match_hashes_stream_and_agree_with_read_file() {
    let fx = fixture("ifmatch", false);
    let port = fx.server.port;
    let text: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(fx.ws().join("big.txt"), &text).unwrap_or_default();
    let read = tool(
        port,
        "read_file",
        json!({"path": "big.txt", "line_start": 1, "line_end": 1}),
    );
    let hash = read.body["data"]["hash"].as_str().unwrap_or("").to_string();
    assert_eq!(hash.len(), 16, "{}", read.body);
    let stale = tool(
        port,
        "edit_file",
        json!({"path": "big.txt", "old_text": "line 39999\n", "new_text": "end\n", "if_match": "0123456789abcdef"}),
    );
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert_eq!(stale.body["data"]["current_hash"], hash.as_str());
    let fresh = tool(
        port,
        "edit_file",
        json!({"path": "big.txt", "old_text": "line 39999\n", "new_text": "end\n", "if_match": hash}),
    );
    assert_eq!(fresh.status, 200, "{}", fresh.body);
    assert!(std::fs::read_to_string(fx.ws().join("big.txt"))
        .unwrap_or_default()
        .ends_with("end\n"));
}

#[test]
fn a2_a4_the_printed_token_is_256_bits_of_hex_in_the_fragment() {
    let line = support::first_line_of_serve();
    let (base, token) = line
        .split_once("/#token=")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        base.starts_with("http://127.0.0.1:") && !base.contains('?'),
        "{line}"
    );
    assert_eq!(token.len(), 64, "{line}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
}

// ---- fetch_url ----

#[test]
fn fetch_url_ignores_proxies_from_the_environment() {
    support::fetch_through_env_proxy_is_not_used();
}

#[test]
fn fetch_url_address_policy_covers_site_local_mapped_and_cgnat() {
    use palaver::proxy::tools::is_forbidden_ip;
    let forbidden = [
        "127.0.0.1",
        "127.255.255.254",
        "0.0.0.0",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "100.127.255.255",
        "255.255.255.255",
        "224.0.0.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::7f00:1",
        "::127.0.0.1",
    ];
    for ip in forbidden {
        let parsed: std::net::IpAddr = ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}"));
        assert!(is_forbidden_ip(parsed), "{ip} must be refused");
    }
    for ip in [
        "1.1.1.1",
        "8.8.8.8",
        "100.128.0.1",
        "172.32.0.1",
        "2606:4700::1111",
        "::ffff:1.1.1.1",
    ] {
        let parsed: std::net::IpAddr = ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}"));
        assert!(!is_forbidden_ip(parsed), "{ip} is public");
    }
}

#[test]
fn fetch_url_refuses_local_names_and_non_http_schemes_without_connecting() {
    let fx = fixture("fetchno", false);
    let port = fx.server.port;
    for url in [
        "http://127.0.0.1/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://localhost/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://[::ffff:127.0.0.1]/",
    ] {
        let reply = tool(port, "fetch_url", json!({"url": url}));
        assert_eq!(reply.body["is_error"], true, "{url}");
        assert_eq!(
            reply.body["error"]["kind"], "address_not_allowed",
            "{url}: {}",
            reply.body
        );
    }
    for url in ["file:///etc/passwd", "ftp://example.com/", "gopher://x/"] {
        let reply = tool(port, "fetch_url", json!({"url": url}));
        assert_eq!(reply.body["error"]["kind"], "scheme_not_allowed", "{url}");
    }
}
