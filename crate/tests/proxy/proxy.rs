//! The proxy against the real server on port 0 (SPEC §9, SECURITY A1–A83 where they apply; A74–A81
//! are for provider forwarding, which is not built). Raw TCP requests, so headers arrive exactly
//! as written. Each case is named by its SECURITY id.

use crate::support::{raw, request, symlink_fixture as fixture, tool, TOKEN};
use palaver::proxy::ServeConfig;
use serde_json::json;

// ---- A.4.1 token ----

#[test]
fn a1_a2_a3_a6_missing_wrong_or_misplaced_tokens_get_401() {
    let (server, _) = fixture("auth", false, &[]);
    let port = server.port;
    let args = json!({"path": "README.md"}).to_string();
    let mut wrong_last = TOKEN.to_string();
    wrong_last.replace_range(31..32, "0");
    let cases = [
        String::new(),
        format!("Authorization: Bearer {wrong_last}\r\n"),
        format!("Authorization: Bearer 1{}\r\n", &TOKEN[1..]),
        format!("Authorization: Bearer {TOKEN}x\r\n"),
        format!("Authorization: Bearer {}\r\n", &TOKEN[..31]),
        "Authorization: Bearer \r\n".into(),
        "Authorization: Basic dXNlcjpwYXNz\r\n".into(),
        format!("Cookie: token={TOKEN}\r\n"),
        format!("Authorization: bearer {TOKEN}\r\n"),
    ];
    let mut bodies = Vec::new();
    for headers in &cases {
        let reply = request(port, "POST", "/api/tools/read_file", headers, &args);
        assert_eq!(reply.status, 401, "headers {headers:?}");
        assert!(
            reply.head.contains("www-authenticate: bearer"),
            "{}",
            reply.head
        );
        assert!(
            !reply.body.to_string().contains("readme"),
            "file content leaked"
        );
        bodies.push(reply.body.to_string());
    }
    let query = request(
        port,
        "POST",
        &format!("/api/tools/read_file?token={TOKEN}"),
        "",
        &args,
    );
    assert_eq!(
        query.status, 401,
        "A3: a token in the query is not accepted"
    );
    for path in ["/api/health", "/api/nonexistent", "/api/tools"] {
        let reply = request(port, "GET", path, "", "");
        assert_eq!(reply.status, 401, "A6: {path}");
        bodies.push(reply.body.to_string());
    }
    bodies.dedup();
    assert_eq!(
        bodies.len(),
        1,
        "A6: one identical 401 body for every path: {bodies:?}"
    );
}

#[test]
fn a13_a16_a_cli_client_without_origin_is_served_with_safe_headers() {
    let (server, _) = fixture("cli", false, &[]);
    let reply = tool(server.port, "read_file", json!({"path": "README.md"}));
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body["is_error"], false);
    assert!(reply.body["content"]
        .as_str()
        .unwrap_or("")
        .starts_with("# readme"));
    for header in [
        "content-type: application/json",
        "x-content-type-options: nosniff",
        "cross-origin-resource-policy: same-origin",
        "cache-control: no-store",
    ] {
        assert!(
            reply.head.contains(header),
            "A16 missing {header}: {}",
            reply.head
        );
    }
    assert!(
        !reply.head.contains("access-control-allow-origin"),
        "no CORS header without an Origin"
    );
}

// ---- A.4.2 cross-origin ----

#[test]
fn a8_a10_a12_bad_origins_and_their_preflights_get_403_without_cors_headers() {
    let (server, _) = fixture("origins", false, &["https://app.example"]);
    let port = server.port;
    let bad = [
        "https://evil.example",
        "null",
        "Null",
        "https://app.example.evil.com",
        "https://app.example:444",
        "http://app.example",
        "https://app.example.",
        "https://app.example/x",
        "chrome-extension://abcdefghijklmnop",
    ];
    for origin in bad {
        let auth = format!("Authorization: Bearer {TOKEN}\r\nOrigin: {origin}\r\n");
        let reply = request(
            port,
            "POST",
            "/api/tools/write_file",
            &auth,
            &json!({"path": "pwn.txt", "content": "x"}).to_string(),
        );
        assert_eq!(reply.status, 403, "A12 origin {origin}");
        assert!(
            !reply.head.contains("access-control-allow-origin"),
            "A12 {origin}: {}",
            reply.head
        );
        let pre = request(port, "OPTIONS", "/api/tools/write_file", &format!("Origin: {origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,content-type\r\n"), "");
        assert_eq!(pre.status, 403, "A10 preflight from {origin}");
        assert!(!pre.head.contains("access-control-allow-origin"));
    }
    let twice = format!("Authorization: Bearer {TOKEN}\r\nOrigin: https://app.example\r\nOrigin: https://app.example\r\n");
    assert_eq!(
        request(port, "GET", "/api/health", &twice, "").status,
        403,
        "A12 two Origin headers"
    );
    assert!(
        !server_file_exists(port, "pwn.txt"),
        "A8: nothing was written"
    );
}

fn server_file_exists(port: u16, path: &str) -> bool {
    tool(port, "read_file", json!({"path": path})).status == 200
}

#[test]
fn a11_an_allowed_origin_gets_an_exact_cors_echo() {
    let (server, _) = fixture("cors", false, &["https://app.example"]);
    let port = server.port;
    let pre = request(port, "OPTIONS", "/api/tools/read_file", "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,content-type\r\n", "");
    assert_eq!(pre.status, 204);
    assert!(
        pre.head
            .contains("access-control-allow-origin: https://app.example\r\n")
            || pre
                .head
                .ends_with("access-control-allow-origin: https://app.example"),
        "{}",
        pre.head
    );
    assert!(pre.head.contains("vary: origin"));
    assert!(pre
        .head
        .contains("access-control-allow-headers: authorization, content-type"));
    assert!(!pre.head.contains("access-control-allow-credentials"));
    assert!(!pre.head.contains("access-control-allow-origin: *"));
    let own = format!("Authorization: Bearer {TOKEN}\r\nOrigin: http://127.0.0.1:{port}\r\n");
    let reply = request(
        port,
        "POST",
        "/api/tools/read_file",
        &own,
        &json!({"path": "README.md"}).to_string(),
    );
    assert_eq!(reply.status, 200, "the proxy's own origin is allowed");
    assert!(reply.head.contains(&format!(
        "access-control-allow-origin: http://127.0.0.1:{port}"
    )));
}

#[test]
fn a9_a14_a15_no_cors_loads_and_navigations_are_refused() {
    let (server, _) = fixture("nocors", false, &[]);
    let port = server.port;
    for headers in [
        "Sec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: script\r\n",
        "Sec-Fetch-Mode: navigate\r\nSec-Fetch-Dest: document\r\n",
        "Sec-Fetch-Mode: no-cors\r\nSec-Fetch-Dest: image\r\n",
        "Sec-Fetch-Dest: iframe\r\n",
    ] {
        let auth = format!("Authorization: Bearer {TOKEN}\r\n{headers}");
        let reply = request(
            port,
            "POST",
            "/api/tools/write_file",
            &auth,
            &json!({"path": "pwn.txt", "content": "x"}).to_string(),
        );
        assert_eq!(reply.status, 403, "{headers:?}");
        assert!(
            reply.head.contains("content-type: application/json"),
            "A15: a JSON error, never HTML"
        );
    }
    assert!(!server_file_exists(port, "pwn.txt"));
}

// ---- A.4.3 Host ----

#[test]
fn a17_a19_a21_a22_foreign_hosts_are_refused_before_auth() {
    let (server, _) = fixture("hosts", false, &[]);
    let port = server.port;
    let hosts = [
        format!("evil.example:{port}"),
        format!(":{port}"),
        format!("0.0.0.0:{port}"),
        format!("localhost.:{port}"),
        format!("foo.localhost:{port}"),
        "127.0.0.1:1".to_string(),
        format!("[::ffff:127.0.0.1]:{port}"),
        format!("127.0.0.1:{port}, evil.example"),
        String::new(),
    ];
    for host in hosts {
        let text = format!("GET /api/health HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\nX-Forwarded-Host: localhost:{port}\r\nConnection: close\r\n\r\n");
        let (status, _, body) = raw(port, &text);
        assert_eq!(status, 403, "Host {host:?}");
        assert!(String::from_utf8_lossy(&body).contains("host_not_allowed"));
    }
    let upper = format!("GET /api/health HTTP/1.1\r\nHost: LOCALHOST:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n");
    assert_eq!(
        raw(port, &upper).0,
        200,
        "the host name is compared case-insensitively"
    );
}

#[test]
fn a20_a23_duplicated_host_absolute_form_and_connect_are_refused() {
    let (server, _) = fixture("forms", false, &[]);
    let port = server.port;
    let twice = format!("GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    assert_eq!(raw(port, &twice).0, 403);
    let absolute = format!("GET http://evil.example/api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n");
    assert!(
        matches!(raw(port, &absolute).0, 400 | 403),
        "absolute-form target"
    );
    let connect = format!(
        "CONNECT evil.example:443 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    assert!(matches!(raw(port, &connect).0, 400 | 403), "CONNECT");
}

// ---- A.4.7 sizes and timeouts ----

#[test]
fn a50_an_oversized_body_is_refused_before_buffering() {
    let (server, _) = fixture("big", false, &[]);
    let port = server.port;
    let text = format!("POST /api/tools/write_file HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\nConnection: close\r\n\r\n");
    let started = std::time::Instant::now();
    let (status, _, _) = raw(port, &text);
    assert_eq!(status, 413);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "answered without waiting for the body"
    );
}

#[test]
fn a55_deeply_nested_json_is_a_typed_400() {
    let (server, _) = fixture("deep", false, &[]);
    let body = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let reply = request(
        server.port,
        "POST",
        "/api/tools/read_file",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        &body,
    );
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["error"]["kind"], "invalid_json");
}

#[test]
fn a52_a_slow_header_sender_is_cut_off_while_others_are_served() {
    let (server, _) = fixture("slow", false, &[]);
    let port = server.port;
    let mut slow =
        std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    use std::io::{Read, Write};
    let _ = slow.write_all(
        format!("POST /api/tools/read_file HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n").as_bytes(),
    );
    let started = std::time::Instant::now();
    assert_eq!(
        request(
            port,
            "GET",
            "/api/health",
            &format!("Authorization: Bearer {TOKEN}\r\n"),
            ""
        )
        .status,
        200,
        "a fresh request is served meanwhile"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    slow.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap_or_default();
    let mut buffer = Vec::new();
    let _ = slow.read_to_end(&mut buffer);
    let waited = started.elapsed();
    assert!(
        waited >= palaver::proxy::HEADER_TIMEOUT - std::time::Duration::from_secs(1)
            && waited < std::time::Duration::from_secs(19),
        "closed by the header timeout after {waited:?}"
    );
}

#[test]
fn api_lists_the_tools_and_hides_run_command_without_allow_shell() {
    let (server, _) = fixture("list", false, &[]);
    let reply = request(
        server.port,
        "GET",
        "/api/tools",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        "",
    );
    assert_eq!(reply.status, 200);
    let names: Vec<&str> = reply
        .body
        .as_array()
        .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        names.contains(&"read_file") && names.contains(&"search") && names.contains(&"fetch_url")
    );
    assert!(!names.contains(&"run_command"));
    assert!(reply.body[0]["parameters"]["type"] == "object");
    let unknown = tool(server.port, "teleport", json!({}));
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.body["error"]["kind"], "unknown_tool");
}

#[test]
fn a7_a_flood_of_wrong_tokens_locks_nobody_out() {
    let (server, _) = fixture("flood", false, &[]);
    let port = server.port;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                (0..250).all(|i| {
                    request(
                        port,
                        "GET",
                        "/api/health",
                        &format!("Authorization: Bearer {:032x}\r\n", t * 1000 + i),
                        "",
                    )
                    .status
                        == 401
                })
            })
        })
        .collect();
    assert_eq!(
        request(
            port,
            "GET",
            "/api/health",
            &format!("Authorization: Bearer {TOKEN}\r\n"),
            ""
        )
        .status,
        200,
        "served during the flood"
    );
    assert!(
        threads.into_iter().all(|t| t.join().unwrap_or(false)),
        "every wrong token got 401"
    );
    assert_eq!(
        request(
            port,
            "GET",
            "/api/health",
            &format!("Authorization: Bearer {TOKEN}\r\n"),
            ""
        )
        .status,
        200,
        "no lockout afterwards"
    );
}

#[test]
fn a53_a_slow_body_is_cut_at_the_request_deadline() {
    use std::io::{Read, Write};
    let dir = crate::support::temp_dir("slowbody");
    let config = ServeConfig {
        www: dir.0.join("www"),
        pkg: dir.0.join("pkg"),
        models: None,
        mcp: Default::default(),
        workspace: dir.0.join("ws"),
        allowed_origins: Vec::new(),
        allow_shell: false,
        allow_hard_links: false,
        workspace_copy: true,
        reaper: Some(env!("CARGO_BIN_EXE_palaver").into()),
        token: TOKEN.into(),
        vault: None,
        checkpoints: None,
    };
    let limits = palaver::proxy::Limits {
        request_timeout: std::time::Duration::from_secs(2),
        ..palaver::proxy::Limits::default()
    };
    let server = crate::support::start_with_limits(config, dir, limits);
    let port = server.port;
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    let head = format!("POST /api/tools/write_file HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n{{\"path\": \"slow.txt\", ");
    stream.write_all(head.as_bytes()).unwrap_or_default();
    let started = std::time::Instant::now();
    stream
        .set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .unwrap_or_default();
    let mut response = Vec::new();
    let mut buffer = [0u8; 256];
    while started.elapsed() < std::time::Duration::from_secs(10) {
        let _ = stream.write_all(b" ");
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&buffer[..n]),
            Err(_) => {}
        }
        if !response.is_empty() {
            break;
        }
    }
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 408"), "A53: {text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(6));
    assert_eq!(
        request(
            port,
            "POST",
            "/api/tools/read_file",
            &format!("Authorization: Bearer {TOKEN}\r\n"),
            &json!({"path": "slow.txt"}).to_string()
        )
        .status,
        404,
        "the handler never saw a partial body"
    );
}
