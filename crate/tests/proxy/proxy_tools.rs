//! The proxy's tools against the real server: path attacks on read, write and list (SECURITY
//! A28–A45), `run_command` (A59–A62), `fetch_url` refusals, concurrent edits (A68), search.

use crate::support::{symlink_fixture as fixture, tool};
use serde_json::{json, Value};

fn kind(reply: &crate::support::Reply) -> String {
    reply.body["error"]["kind"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn no_secret(reply: &crate::support::Reply) {
    let text = reply.body.to_string();
    assert!(
        !text.contains("SECRET-OUTSIDE")
            && !text.contains("SECRET-SIBLING")
            && !text.contains("root:x:0"),
        "leaked: {text}"
    );
    assert!(
        !text.contains("/tmp/") && !text.contains(&std::env::temp_dir().display().to_string()),
        "A82: an absolute host path leaked: {text}"
    );
}

#[test]
fn a28_to_a38_traversal_absolute_and_odd_paths_are_refused_on_read_write_and_list() {
    let (server, t) = fixture("paths", false, &[]);
    let port = server.port;
    let cases: [(&str, &str); 21] = [
        ("../outside.txt", "path_outside_workspace"),
        ("sub/../../outside.txt", "path_outside_workspace"),
        ("./../outside.txt", "path_outside_workspace"),
        ("a/../../x", "path_outside_workspace"),
        ("../ws-secret/secret.txt", "path_outside_workspace"),
        ("/etc/passwd", "absolute_path"),
        ("C:\\x", "invalid_path"),
        ("C:/Windows/win.ini", "invalid_path"),
        ("c:win.ini", "invalid_path"),
        ("\\\\server\\share\\x", "invalid_path"),
        ("//server/share", "absolute_path"),
        ("sub\\..\\..\\outside.txt", "invalid_path"),
        ("a\u{0}b", "invalid_path"),
        ("README.md\u{0}.png", "invalid_path"),
        ("NUL", "reserved_name"),
        ("con.txt", "reserved_name"),
        ("f.txt::$DATA", "invalid_path"),
        ("name.", "reserved_name"),
        ("name ", "reserved_name"),
        ("", "invalid_path"),
        ("/", "absolute_path"),
    ];
    for (path, expected) in cases {
        for (name, args) in [
            ("read_file", json!({"path": path})),
            ("write_file", json!({"path": path, "content": "pwned"})),
            ("list_dir", json!({"path": path})),
        ] {
            let reply = tool(port, name, args);
            if name == "list_dir" && path.is_empty() {
                continue;
            }
            assert_eq!(kind(&reply), expected, "{name} {path:?}: {}", reply.body);
            assert_eq!(reply.status, 400, "{name} {path:?}");
            no_secret(&reply);
        }
    }
    let long = format!("{}f", "a/".repeat(5000));
    assert_eq!(
        kind(&tool(port, "read_file", json!({"path": long}))),
        "path_too_long",
        "A37"
    );
    assert_eq!(
        std::fs::read_to_string(t.join("outside.txt")).unwrap_or_default(),
        "SECRET-OUTSIDE\n",
        "no write escaped"
    );
    assert!(!t.join("ws-secret/pwned").exists() && !t.join("x").exists());
}

#[test]
fn a34_encoded_dots_are_literal_names() {
    let (server, _) = fixture("encoded", false, &[]);
    for path in ["%2e%2e/outside.txt", "..%2foutside.txt", "%252e%252e/x"] {
        let reply = tool(server.port, "read_file", json!({"path": path}));
        assert_eq!(reply.status, 404, "{path}: {}", reply.body);
        assert_eq!(kind(&reply), "not_found");
    }
    let written = tool(
        server.port,
        "write_file",
        json!({"path": "%2e%2e/x.txt", "content": "literal"}),
    );
    assert_eq!(
        written.status, 200,
        "a literal directory named %2e%2e inside the workspace: {}",
        written.body
    );
}

#[test]
fn a39_legal_odd_names_work() {
    let (server, _) = fixture("legal", false, &[]);
    assert_eq!(
        tool(server.port, "read_file", json!({"path": "..test"})).body["content"],
        "dots\n"
    );
    assert_eq!(
        tool(server.port, "read_file", json!({"path": "report_50%.pdf"})).body["content"],
        "pct\n"
    );
    assert_eq!(
        tool(server.port, "read_file", json!({"path": "sub//file.txt"})).body["content"],
        "inside\n",
        "A36: // normalized inside"
    );
    assert_eq!(
        tool(
            server.port,
            "read_file",
            json!({"path": "./sub/./file.txt"})
        )
        .body["content"],
        "inside\n"
    );
    let listed = tool(server.port, "list_dir", json!({"path": "."}));
    assert_eq!(listed.status, 200, "A36: `.` lists the workspace");
}

#[test]
fn a42_a43_a44_symlinks_out_are_refused_and_links_inside_work() {
    let (server, _) = fixture("links", false, &[]);
    let port = server.port;
    for path in [
        "etc_link/passwd",
        "abs_out/outside.txt",
        "file_out",
        "chain1/outside.txt",
        "chain2/outside.txt",
        "abs_out/ws-secret/secret.txt",
    ] {
        let reply = tool(port, "read_file", json!({"path": path}));
        assert_eq!(reply.status, 403, "read {path}: {}", reply.body);
        assert_eq!(kind(&reply), "symlink_escape");
        no_secret(&reply);
    }
    for path in ["etc_link", "abs_out", "chain1"] {
        let reply = tool(port, "list_dir", json!({"path": path}));
        assert_eq!(reply.status, 403, "list {path}: {}", reply.body);
        no_secret(&reply);
    }
    for path in [
        "file_out",
        "dangling",
        "abs_out/planted.txt",
        "etc_link/pwned",
    ] {
        let reply = tool(
            port,
            "write_file",
            json!({"path": path, "content": "pwned"}),
        );
        assert_eq!(reply.status, 403, "write {path}: {}", reply.body);
    }
    let read_in = tool(port, "read_file", json!({"path": "in"}));
    assert_eq!(
        read_in.body["content"], "inside\n",
        "A44: a link that stays inside is followed for reads"
    );
    let listed = tool(port, "list_dir", json!({"path": "."}));
    let entries = listed.body["data"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let loop_entry = entries
        .iter()
        .find(|e| e["name"] == "loop")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(
        loop_entry["kind"], "symlink",
        "A45: links are listed as links"
    );
    let tree = tool(port, "file_tree", json!({"path": ".", "max_depth": 5}));
    assert_eq!(tree.status, 200);
    no_secret(&tree);
    assert!(
        !tree.body["content"]
            .as_str()
            .unwrap_or("")
            .contains("passwd"),
        "the tree does not descend into links"
    );
    let found = tool(port, "search", json!({"pattern": "SECRET", "path": "."}));
    assert_eq!(
        found.body["content"], "No matches.",
        "A45: search does not follow links out: {}",
        found.body
    );
}

#[test]
fn a43_the_outside_file_and_the_link_are_unchanged_after_refused_writes() {
    let (server, t) = fixture("unchanged", false, &[]);
    for path in ["file_out", "dangling"] {
        assert_eq!(
            tool(
                server.port,
                "write_file",
                json!({"path": path, "content": "pwned"})
            )
            .status,
            403
        );
    }
    assert_eq!(
        std::fs::read_to_string(t.join("outside.txt")).unwrap_or_default(),
        "SECRET-OUTSIDE\n",
        "A43: the outside file is unchanged"
    );
    assert!(
        !t.join("new/x").exists(),
        "A43: the dangling link's target was not created"
    );
    assert_eq!(
        std::fs::read_link(t.join("ws/file_out")).ok(),
        Some(t.join("outside.txt")),
        "the link itself is unchanged"
    );
    let listed = tool(server.port, "list_dir", json!({"path": "."}));
    let entries = listed.body["data"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        entries
            .iter()
            .any(|e| e["name"] == "file_out" && e["kind"] == "symlink"),
        "the link itself is unchanged"
    );
}

#[test]
fn read_file_ranges_binary_and_missing_files() {
    let (server, _) = fixture("read", false, &[]);
    let range = tool(
        server.port,
        "read_file",
        json!({"path": "README.md", "line_start": 2, "line_end": 3}),
    );
    assert_eq!(range.body["content"], "line two\nline three");
    assert_eq!(range.body["data"]["total_lines"], 3);
    let binary = tool(server.port, "read_file", json!({"path": "bin.dat"}));
    assert_eq!(binary.body["is_error"], true);
    assert_eq!(kind(&binary), "binary_file");
    let missing = tool(server.port, "read_file", json!({"path": "nope.txt"}));
    assert_eq!(missing.status, 404);
    let directory = tool(server.port, "read_file", json!({"path": "sub"}));
    assert_eq!(kind(&directory), "is_a_directory");
}

#[test]
fn write_and_edit_files_atomically_with_clear_errors() {
    let (server, _) = fixture("edit", false, &[]);
    let port = server.port;
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": "new/dir/a.txt", "content": "one two two"})
        )
        .status,
        200
    );
    let missing = tool(
        port,
        "edit_file",
        json!({"path": "new/dir/a.txt", "old_text": "three", "new_text": "3"}),
    );
    assert_eq!(kind(&missing), "old_text_not_found");
    let ambiguous = tool(
        port,
        "edit_file",
        json!({"path": "new/dir/a.txt", "old_text": "two", "new_text": "2"}),
    );
    assert_eq!(kind(&ambiguous), "old_text_ambiguous");
    assert!(ambiguous.body["content"]
        .as_str()
        .unwrap_or("")
        .contains("2 times"));
    assert_eq!(
        tool(
            port,
            "edit_file",
            json!({"path": "new/dir/a.txt", "old_text": "one", "new_text": "1"})
        )
        .status,
        200
    );
    assert_eq!(
        tool(port, "read_file", json!({"path": "new/dir/a.txt"})).body["content"],
        "1 two two"
    );
    let listed = tool(port, "list_dir", json!({"path": "new/dir"}));
    let names: Vec<String> = listed.body["data"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(names, vec!["a.txt".to_string()], "no temp files left");
}

/// Issue 40: an edit block's LF text applies to a CRLF file (kept CRLF); a SEARCH that is not
/// there names the nearest lines; a create-only write never overwrites.
#[test]
fn edit_blocks_meet_crlf_files_near_misses_and_existing_files() {
    let (server, _) = fixture("edit-blocks", false, &[]);
    let port = server.port;
    let crlf = "def greet():\r\n    return 'Hello'\r\n\r\nx = 1\r\n";
    let wrote = tool(port, "write_file", json!({"path": "g.py", "content": crlf}));
    assert_eq!(wrote.status, 200);
    let edited = tool(
        port,
        "edit_file",
        json!({"path": "g.py", "old_text": "x = 1\n", "new_text": "x = 2\n"}),
    );
    assert_eq!(edited.body["is_error"], false, "{:?}", edited.body);
    assert_eq!(
        tool(port, "read_file", json!({"path": "g.py"})).body["content"],
        "def greet():\r\n    return 'Hello'\r\n\r\nx = 2\r\n"
    );
    let near = tool(
        port,
        "edit_file",
        json!({"path": "g.py", "old_text": "def greet():\n    return \"Hello\"\n", "new_text": "no"}),
    );
    assert_eq!(kind(&near), "old_text_not_found");
    let said = near.body["content"].as_str().unwrap_or("").to_string();
    assert!(
        said.contains("nearest match is at lines 1–2") && said.contains("return 'Hello'"),
        "{said}"
    );
    let again = tool(
        port,
        "write_file",
        json!({"path": "g.py", "content": "new", "if_match": ""}),
    );
    assert_eq!(
        again.body["is_error"], true,
        "an empty SEARCH never overwrites: {:?}",
        again.body
    );
}

#[test]
fn a68_concurrent_edits_of_one_file_all_apply() {
    let (server, _) = fixture("concurrent", false, &[]);
    let port = server.port;
    let lines: Vec<String> = (0..16).map(|i| format!("line-{i}")).collect();
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": "shared.txt", "content": lines.join("\n")})
        )
        .status,
        200
    );
    let threads: Vec<_> = (0..16)
        .map(|i| std::thread::spawn(move || tool(port, "edit_file", json!({"path": "shared.txt", "old_text": format!("line-{i}\n"), "new_text": format!("LINE-{i}\n")})).status))
        .collect();
    let statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap_or(0)).collect();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let text = tool(port, "read_file", json!({"path": "shared.txt"})).body["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    for i in 0..15 {
        assert!(
            text.contains(&format!("LINE-{i}\n")),
            "edit {i} lost: {text}"
        );
    }
}

#[test]
fn search_finds_text_respects_gitignore_and_treats_flags_as_patterns() {
    let (server, _) = fixture("search", false, &[]);
    let port = server.port;
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": ".gitignore", "content": "ignored/\n"})
        )
        .status,
        200
    );
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": "ignored/x.txt", "content": "needle\n"})
        )
        .status,
        200
    );
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": "src/a.rs", "content": "fn needle() {}\n--pre=touch\n"})
        )
        .status,
        200
    );
    let found = tool(port, "search", json!({"pattern": "needle"}));
    let matches = found.body["data"]["matches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(matches.len(), 1, "{}", found.body);
    assert_eq!(matches[0]["path"], "src/a.rs");
    assert_eq!(matches[0]["line"], 1);
    let flag = tool(
        port,
        "search",
        json!({"pattern": "--pre=touch", "literal": true}),
    );
    assert_eq!(
        flag.body["data"]["matches"][0]["line"], 2,
        "A63: a flag-like pattern is only a pattern"
    );
    let globbed = tool(port, "search", json!({"pattern": "needle", "glob": "*.md"}));
    assert_eq!(globbed.body["content"], "No matches.");
    let bad = tool(port, "search", json!({"pattern": "(unclosed"}));
    assert_eq!(kind(&bad), "bad_pattern");
}

#[test]
fn a60_run_command_is_refused_without_allow_shell() {
    let (server, _) = fixture("noshell", false, &[]);
    let reply = tool(server.port, "run_command", json!({"argv": ["ls"]}));
    assert_eq!(reply.status, 403);
    assert_eq!(kind(&reply), "exec_disabled");
}

#[test]
fn a59_a61_a62_run_command_argv_env_timeout_and_cap() {
    std::env::set_var("OPENAI_API_KEY", "sk-test-must-not-leak");
    let (server, _) = fixture("shell", true, &[]);
    let port = server.port;
    let echo = tool(
        port,
        "run_command",
        json!({"argv": ["echo", "hi; touch pwned", "$(touch pwned2)"]}),
    );
    assert_eq!(
        echo.body["content"], "hi; touch pwned $(touch pwned2)\n",
        "A61: argv, no shell"
    );
    assert_eq!(
        tool(port, "read_file", json!({"path": "pwned"})).status,
        404
    );
    let env = tool(port, "run_command", json!({"argv": ["env"]}));
    let text = env.body["content"].as_str().unwrap_or("");
    assert!(text.contains("PATH="), "{text}");
    assert!(
        !text.contains("sk-test-must-not-leak") && !text.contains(crate::support::TOKEN),
        "A62: secrets leaked: {text}"
    );
    let pid_file = std::env::temp_dir().join(format!("palaver-sleep-{}", std::process::id()));
    // A file left by an earlier run under the same pid must not name some other process.
    let _ = std::fs::remove_file(&pid_file);
    let script = format!(
        "{} sleep 30",
        crate::support::background_with_pid("sleep 30", &pid_file.display().to_string())
    );
    let started = std::time::Instant::now();
    let slow = tool(
        port,
        "run_command",
        json!({"argv": ["sh", "-c", script], "timeout_ms": 500}),
    );
    assert_eq!(kind(&slow), "timeout", "{}", slow.body);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let grandchild = crate::support::read_pid(&pid_file);
    assert!(!grandchild.is_empty(), "the grandchild wrote its pid");
    // The group is killed before the reply; a loaded machine may take a moment to end it.
    let gone = crate::support::eventually(5, || !crate::support::alive(&grandchild));
    assert!(
        gone,
        "A59: the background sleep {grandchild} survived the timeout"
    );
    let _ = std::fs::remove_file(&pid_file);
    let flood = tool(
        port,
        "run_command",
        json!({"argv": ["yes"], "timeout_ms": 20000}),
    );
    let content = flood.body["content"].as_str().unwrap_or("");
    assert!(
        content.contains("[output truncated at"),
        "A59: infinite output is cut with a marker"
    );
    assert!(content.len() < 300 * 1024);
    assert_eq!(flood.body["data"]["truncated"], true);
}

#[test]
fn fetch_url_refuses_local_private_and_non_http_targets() {
    let (server, _) = fixture("fetch", false, &[]);
    for url in [
        "http://127.0.0.1:9/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://100.64.0.1/",
        "http://0.0.0.0/",
        "http://[::ffff:127.0.0.1]/",
        "http://localhost:9/",
    ] {
        let reply = tool(server.port, "fetch_url", json!({"url": url}));
        assert_eq!(reply.status, 403, "{url}: {}", reply.body);
        assert_eq!(kind(&reply), "address_not_allowed", "{url}");
    }
    for url in [
        "file:///etc/passwd",
        "ftp://example.com/",
        "data:text/plain,hi",
    ] {
        let reply = tool(server.port, "fetch_url", json!({"url": url}));
        assert_eq!(kind(&reply), "scheme_not_allowed", "{url}");
        no_secret(&reply);
    }
}

#[test]
fn the_address_policy_table() {
    use palaver::proxy::tools::is_forbidden_ip;
    let forbidden = [
        "127.0.0.1",
        "127.8.8.8",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.1",
        "::1",
        "::",
        "fc00::1",
        "fd12::1",
        "fe80::1",
        "::ffff:10.0.0.1",
        "::ffff:127.0.0.1",
        "64:ff9b::7f00:1",
        "::127.0.0.1",
    ];
    for ip in forbidden {
        assert!(
            is_forbidden_ip(ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}"))),
            "{ip} must be refused"
        );
    }
    for ip in [
        "8.8.8.8",
        "1.1.1.1",
        "172.32.0.1",
        "100.128.0.1",
        "2606:4700::1111",
        "64:ff9b::808:808",
    ] {
        assert!(
            !is_forbidden_ip(ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}"))),
            "{ip} is public"
        );
    }
}

#[test]
fn a47_a_directory_swapped_for_a_symlink_during_reads_and_writes_never_leaks() {
    let (server, t) = fixture("race", false, &[]);
    let port = server.port;
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": "race/f.txt", "content": "inside"})
        )
        .status,
        200
    );
    let listed = tool(port, "list_dir", json!({"path": "."}));
    assert_eq!(listed.status, 200);
    let ws = t.join("ws");
    assert!(
        ws.join("race/f.txt").exists(),
        "the race runs in the fixture's workspace"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let ws = ws.clone();
        std::thread::spawn(move || {
            let (real, parked, link) = (
                ws.join("race"),
                ws.join("race-parked"),
                ws.join("race-link"),
            );
            let _ = std::os::unix::fs::symlink(ws.parent().unwrap_or(&ws), &link);
            let mut flips = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && flips < 20_000 {
                let _ = std::fs::rename(&real, &parked);
                let _ = std::fs::rename(&link, &real);
                let _ = std::fs::rename(&real, &link);
                let _ = std::fs::rename(&parked, &real);
                flips += 1;
            }
        })
    };
    for i in 0..300 {
        let read = tool(port, "read_file", json!({"path": "race/outside.txt"}));
        assert!(
            !read.body.to_string().contains("SECRET-OUTSIDE"),
            "read {i} leaked outside content"
        );
        let _ = tool(
            port,
            "write_file",
            json!({"path": "race/f.txt", "content": format!("v{i}")}),
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = flipper.join();
    let outside =
        std::fs::read_to_string(ws.parent().unwrap_or(&ws).join("outside.txt")).unwrap_or_default();
    assert_eq!(outside, "SECRET-OUTSIDE\n", "the outside file is unchanged");
    assert!(
        !ws.parent().unwrap_or(&ws).join("f.txt").exists(),
        "no write landed outside the workspace"
    );
}

#[test]
fn a41_writes_into_git_and_palaver_settings_are_refused() {
    let (server, _) = fixture("protected", false, &[]);
    for path in [
        ".git/hooks/pre-commit",
        ".palaver/config.toml",
        ".GIT/config",
    ] {
        let reply = tool(
            server.port,
            "write_file",
            json!({"path": path, "content": "#!/bin/sh\ntouch pwned"}),
        );
        assert_eq!(reply.status, 403, "{path}");
        assert_eq!(kind(&reply), "protected_path");
    }
    assert_eq!(
        tool(
            server.port,
            "read_file",
            json!({"path": ".git/hooks/pre-commit"})
        )
        .status,
        404,
        "nothing was created"
    );
}

#[test]
fn run_command_streams_lines_as_ndjson() {
    let (server, _) = fixture("lines", true, &[]);
    let port = server.port;
    let body = json!({"argv": ["sh", "-c", "echo one; echo two >&2; echo three"]}).to_string();
    let text = format!(
        "POST /api/tools/run_command HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\nAccept: application/x-ndjson\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        crate::support::TOKEN,
        body.len()
    );
    let (status, head, raw_body) = crate::support::raw(port, &text);
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: application/x-ndjson"),
        "{head}"
    );
    let decoded = dechunk(&raw_body);
    let lines: Vec<Value> = decoded
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
        .collect();
    let stdout: Vec<&str> = lines
        .iter()
        .filter(|l| l["stream"] == "stdout")
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert_eq!(stdout, ["one", "three"]);
    assert!(lines
        .iter()
        .any(|l| l["stream"] == "stderr" && l["text"] == "two"));
    let last = lines.last().cloned().unwrap_or(Value::Null);
    assert_eq!(last["type"], "result");
    assert_eq!(last["data"]["exit_code"], 0);
}

#[test]
fn a27_a_client_that_goes_away_kills_the_streamed_command() {
    use std::io::{Read, Write};
    let (server, _) = fixture("gone", true, &[]);
    let port = server.port;
    let pid_file = std::env::temp_dir().join(format!("palaver-gone-{}", std::process::id()));
    // A file left by an earlier run under the same pid must not name some other process.
    let _ = std::fs::remove_file(&pid_file);
    let script = format!(
        "{} sleep 0.2; echo started; wait",
        crate::support::background_with_pid("sleep 30", &pid_file.display().to_string())
    );
    let body = json!({"argv": ["sh", "-c", script], "timeout_ms": 60000}).to_string();
    let text = format!(
        "POST /api/tools/run_command HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\nAccept: application/x-ndjson\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        crate::support::TOKEN,
        body.len()
    );
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    stream.write_all(text.as_bytes()).unwrap_or_default();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 512];
    while !String::from_utf8_lossy(&seen).contains("started") {
        let n = stream.read(&mut buffer).unwrap_or(0);
        assert!(n > 0, "the stream ended before the first line");
        seen.extend_from_slice(&buffer[..n]);
    }
    // Under load the background job may not have written its pid yet: the client stays until
    // it has, so the check below watches the right process.
    let pid = crate::support::read_pid(&pid_file);
    assert!(
        !pid.is_empty(),
        "the command wrote the pid of its `sleep 30`"
    );
    let gone_at = std::time::Instant::now();
    drop(stream);
    // The server notices at once (the connection's end) or at the next heartbeat (1 s); the
    // deadline leaves room for a loaded machine, and `sleep 30` would outlast it.
    let killed = crate::support::eventually(15, || !crate::support::alive(&pid));
    let _ = std::fs::remove_file(&pid_file);
    assert!(
        killed,
        "A27: the command's group outlived its client by {:?}: {}",
        gone_at.elapsed(),
        std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default()
    );
}

/// Decodes an HTTP/1.1 chunked body.
fn dechunk(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body).to_string();
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

#[test]
fn a69_a73_if_match_refuses_a_write_over_a_newer_version() {
    let (server, _) = fixture("ifmatch", false, &[]);
    let port = server.port;
    let read = tool(port, "read_file", json!({"path": "README.md"}));
    let hash = read.body["data"]["hash"].as_str().unwrap_or("").to_string();
    assert_eq!(hash.len(), 16);
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": "README.md", "content": "external edit", "if_match": hash.clone()})
        )
        .status,
        200,
        "the first writer wins"
    );
    let second = tool(
        port,
        "write_file",
        json!({"path": "README.md", "content": "stale", "if_match": hash.clone()}),
    );
    assert_eq!(second.status, 409, "A69: the second writer gets a conflict");
    assert_eq!(kind(&second), "conflict");
    assert!(second.body.to_string().contains("current_hash"));
    let edit = tool(
        port,
        "edit_file",
        json!({"path": "README.md", "old_text": "external", "new_text": "x", "if_match": hash}),
    );
    assert_eq!(edit.status, 409, "A73");
    assert_eq!(
        tool(port, "read_file", json!({"path": "README.md"})).body["content"],
        "external edit",
        "the external edit is preserved"
    );
}

#[test]
fn a70_concurrent_reads_see_only_whole_versions() {
    let (server, _) = fixture("torn", false, &[]);
    let port = server.port;
    let versions: Vec<String> = (0..8).map(|i| format!("{i}").repeat(200_000)).collect();
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": "f.txt", "content": versions[0]})
        )
        .status,
        200
    );
    let writer = {
        let versions = versions.clone();
        std::thread::spawn(move || {
            for v in versions.iter().cycle().take(24) {
                assert_eq!(
                    tool(port, "write_file", json!({"path": "f.txt", "content": v})).status,
                    200
                );
            }
        })
    };
    for _ in 0..40 {
        let content = tool(port, "read_file", json!({"path": "f.txt"})).body["content"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(
            versions.contains(&content),
            "a torn read of {} bytes",
            content.len()
        );
    }
    let _ = writer.join();
}

#[test]
fn a46_a_workspace_given_through_a_symlink_works_and_a48_hard_links_are_not_written_through() {
    let dir = crate::support::temp_dir("rootlink");
    let real = dir.0.join("real-ws");
    std::fs::create_dir_all(&real).unwrap_or_default();
    std::fs::write(dir.0.join("outside.txt"), "SECRET-OUTSIDE\n").unwrap_or_default();
    std::fs::write(real.join("a.txt"), "A\n").unwrap_or_default();
    std::fs::hard_link(dir.0.join("outside.txt"), real.join("hl")).unwrap_or_default();
    std::os::unix::fs::symlink(&real, dir.0.join("ws-link")).unwrap_or_default();
    let config = palaver::proxy::ServeConfig {
        www: dir.0.join("www"),
        pkg: dir.0.join("pkg"),
        models: None,
        mcp: Default::default(),
        workspace: dir.0.join("ws-link"),
        allowed_origins: Vec::new(),
        allow_shell: false,
        allow_hard_links: false,
        workspace_copy: true,
        reaper: Some(env!("CARGO_BIN_EXE_palaver").into()),
        token: crate::support::TOKEN.into(),
        vault: None,
        checkpoints: None,
    };
    let outside = dir.0.join("outside.txt");
    let server = crate::support::start_with(config, dir);
    assert_eq!(
        tool(server.port, "read_file", json!({"path": "a.txt"})).body["content"],
        "A\n",
        "A46"
    );
    assert_eq!(
        tool(
            server.port,
            "write_file",
            json!({"path": "hl", "content": "pwned"})
        )
        .status,
        200
    );
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap_or_default(),
        "SECRET-OUTSIDE\n",
        "A48: temp+rename leaves the other link's file unchanged"
    );
}

#[test]
fn a58_a_catastrophic_regex_runs_in_linear_time() {
    let (server, _) = fixture("redos", false, &[]);
    let port = server.port;
    assert_eq!(
        tool(
            port,
            "write_file",
            json!({"path": "a.txt", "content": "a".repeat(2_000_000)})
        )
        .status,
        200
    );
    let started = std::time::Instant::now();
    let reply = tool(port, "search", json!({"pattern": "(a+)+$", "path": "."}));
    assert_eq!(reply.status, 200);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn a18_a51_a54_rebinding_posts_chunked_floods_and_huge_headers_are_refused() {
    let (server, _) = fixture("misc", false, &[]);
    let port = server.port;
    let rebinding = format!("POST /api/tools/write_file HTTP/1.1\r\nHost: evil.example:{port}\r\nOrigin: http://evil.example:{port}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}");
    assert_eq!(
        crate::support::raw(port, &rebinding).0,
        403,
        "A18: Origin == Host is not trust"
    );
    use std::io::{Read, Write};
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
    let head = format!("POST /api/tools/write_file HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n", crate::support::TOKEN);
    stream.write_all(head.as_bytes()).unwrap_or_default();
    let chunk = vec![b'a'; 1024 * 1024];
    for _ in 0..12 {
        if stream
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .and_then(|()| stream.write_all(&chunk))
            .and_then(|()| stream.write_all(b"\r\n"))
            .is_err()
        {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    let mut response = Vec::new();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap_or_default();
    let _ = stream.read_to_end(&mut response);
    let status = String::from_utf8_lossy(&response);
    assert!(
        status.starts_with("HTTP/1.1 413"),
        "A51: a chunked body over 8 MiB is refused: {}",
        &status[..status.len().min(80)]
    );
    let huge = format!("GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Big: {}\r\nConnection: close\r\n\r\n", "b".repeat(1024 * 1024));
    let (status, _, _) = crate::support::raw(port, &huge);
    assert!(
        status == 431 || status == 0 || status == 400,
        "A54: a 1 MiB header line: {status}"
    );
    assert_eq!(request_ok(port), 200, "the server is still serving");
}

fn request_ok(port: u16) -> u16 {
    crate::support::request(
        port,
        "GET",
        "/api/health",
        &format!("Authorization: Bearer {}\r\n", crate::support::TOKEN),
        "",
    )
    .status
}
