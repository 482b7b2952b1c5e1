//! The third outside attack (issue 33), SECURITY-style ids F1–F11, against the real binary:
//! F1 stdio MCP servers never run where the repository is; F3 a child that kills its reaper
//! leaves nothing (a PID namespace, and the subreaper fallback), with `run_command` and MCP, and
//! with `palaver serve` SIGKILLed; F4/F11 the workspace copy is per workspace, unreadable to the
//! tools, written only while git ignores it, 0600, never read through a hard link; F5 a server's
//! endless listing is capped; F6 an HTTP server's secrets stay with it; F7 the vault secret; F8 a
//! server's annotations are its own word; F10 progress cannot outlive the hard deadline, a huge
//! structuredContent is not kept, thousands of list_changed make few listings, `/mcp` sessions
//! are capped. (F2 is the engine's: `tests/it/outside.rs`; F9 is `models`.)

use crate::mcp::{faulty, get_json, leftovers, serve_with_mcp, status_of, wait_state};
use crate::support::*;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_default();
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn executable(path: &Path) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap_or_default();
}

fn stop(mut child: std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A workspace holding what a cloned repository could plant for each way a stdio server finds
/// its code: a Python module, a relative script, a program on a `.` PATH entry, an npm package.
fn plant(root: &Path) -> Vec<std::path::PathBuf> {
    let ws = root.join("ws");
    let hit = |name: &str| root.join(format!("ran-{name}"));
    write(
        &ws.join("planted_mod.py"),
        &format!(
            "open({:?}, 'w').write('x')\n",
            hit("python").display().to_string()
        ),
    );
    write(
        &ws.join("x.js"),
        &format!(
            "require('fs').writeFileSync({:?}, 'x')\n",
            hit("node").display().to_string()
        ),
    );
    write(
        &ws.join("planted-bin"),
        &format!("#!/bin/sh\ntouch '{}'\n", hit("path").display()),
    );
    executable(&ws.join("planted-bin"));
    let package = ws.join("node_modules/planted-npx");
    write(
        &package.join("package.json"),
        r#"{"name": "planted-npx", "version": "1.0.0", "bin": {"planted-npx": "cli.js"}}"#,
    );
    write(
        &package.join("cli.js"),
        &format!(
            "#!/usr/bin/env node\nrequire('fs').writeFileSync({:?}, 'x')\n",
            hit("npx").display().to_string()
        ),
    );
    executable(&package.join("cli.js"));
    std::fs::create_dir_all(ws.join("node_modules/.bin")).unwrap_or_default();
    let _ = std::os::unix::fs::symlink(
        "../planted-npx/cli.js",
        ws.join("node_modules/.bin/planted-npx"),
    );
    ["python", "node", "path", "npx"]
        .iter()
        .map(|name| hit(name))
        .collect()
}

fn planted_servers(root: &Path, cwd: Option<&Path>) -> Value {
    let with_cwd = |mut server: Value| {
        if let Some(cwd) = cwd {
            server["cwd"] = json!(cwd.display().to_string());
        }
        server
    };
    json!({
        "py": with_cwd(json!({"command": "python3", "args": ["-m", "planted_mod"]})),
        "node": with_cwd(json!({"command": "node", "args": ["./x.js"]})),
        "path": with_cwd(json!({"command": "planted-bin"})),
        "npx": with_cwd(json!({"command": "npx", "args": ["-y", "planted-npx"], "env": {"npm_config_offline": "true", "npm_config_cache": root.join("npm-cache").display().to_string(), "npm_config_update_notifier": "false"}})),
    })
}

/// F1: started in the workspace (as `palaver serve` usually is), with a `.` on PATH, none of the
/// four planted files runs; the same module runs once the user names the workspace as the cwd in
/// a config they named with `--mcp` (so the check could fail).
#[test]
fn f1_stdio_servers_never_run_where_the_repository_is() {
    let dir = temp_dir("f1-cwd");
    let root = dir.0.clone();
    let hits = plant(&root);
    let conf = root.join("conf/mcp.json");
    write(
        &conf,
        &json!({"mcpServers": planted_servers(&root, None)}).to_string(),
    );
    let path = format!(
        ".:node_modules/.bin:{}",
        std::env::var("PATH").unwrap_or_default()
    );
    let conf_arg = conf.display().to_string();
    let (child, port) = serve_binary_in(
        &root,
        &root.join("ws"),
        &["--mcp", &conf_arg],
        &[("PATH", &path)],
    );
    for name in ["py", "node", "path", "npx"] {
        let status = wait_state(port, name, &["failed", "restarting"], 30);
        assert_ne!(status["state"], "ready", "{name}: {status}");
    }
    std::thread::sleep(Duration::from_millis(500));
    stop(child);
    for hit in &hits {
        assert!(!hit.exists(), "a planted file ran: {}", hit.display());
    }
    // The control: the user names the workspace as the cwd, in a config they named.
    write(
        &conf,
        &json!({"mcpServers": {"py": planted_servers(&root, Some(&root.join("ws")))["py"]}})
            .to_string(),
    );
    let (child, _) = serve_binary_in(&root, &root.join("ws"), &["--mcp", &conf_arg], &[]);
    let ran = eventually(20, || hits[0].exists());
    stop(child);
    assert!(ran, "the named cwd is used (the check above could fail)");
}

/// F1: the user's default config (not named with `--mcp`) may not put a server's cwd inside the
/// workspace: that entry is refused, and says why.
#[test]
fn f1_a_default_config_may_not_run_a_server_inside_the_workspace() {
    let dir = temp_dir("f1-default");
    let root = dir.0.clone();
    let hits = plant(&root);
    let config_home = root.join("config");
    write(
        &config_home.join("palaver/mcp.json"),
        &json!({"mcpServers": {"py": planted_servers(&root, Some(&root.join("ws")))["py"]}})
            .to_string(),
    );
    let (child, port) = serve_binary_in(
        &root,
        &root.join("ws"),
        &[],
        &[("XDG_CONFIG_HOME", &config_home.display().to_string())],
    );
    std::thread::sleep(Duration::from_secs(2));
    let status = status_of(port, "py");
    stop(child);
    assert_eq!(status["state"], "failed", "{status}");
    assert!(
        status["error"]
            .as_str()
            .is_some_and(|e| e.contains("inside the workspace") && e.contains("--mcp")),
        "{status}"
    );
    assert!(!hits[0].exists());
}

/// A unique `sleep` duration: its command line marks the processes of one test.
fn sleep_marker(tag: u32) -> String {
    format!("1000.{}{tag}", std::process::id())
}

fn run_escaping_command(isolation: &str) {
    let dir = temp_dir(&format!("f3-run-{isolation}"));
    let root = dir.0.clone();
    let marker = sleep_marker(if isolation == "group" { 1 } else { 2 });
    let (child, port) = serve_binary(
        &root,
        &["--allow-shell"],
        &[("PALAVER_REAP_ISOLATION", isolation)],
    );
    let script = format!("setsid sleep {marker} & sleep 0.3; kill -9 $PPID; sleep 0.3; echo done");
    let reply = tool(port, "run_command", json!({"argv": ["sh", "-c", script]}));
    let gone = eventually(5, || leftovers(&marker).is_empty());
    let left = leftovers(&marker);
    stop(child);
    assert!(gone, "{isolation}: left running: {left:?} ({})", reply.body);
    if isolation == "namespace" {
        // The init of the namespace took no notice of the SIGKILL: the command ran to its end.
        assert!(
            reply.body["content"]
                .as_str()
                .is_some_and(|c| c.contains("done")),
            "{}",
            reply.body
        );
    }
}

/// F3 (E7 reopened): `run_command`'s child starts a `setsid` child, then SIGKILLs its reaper.
/// In a PID namespace the kill is ignored and the command ends normally; without one (the
/// fallback), the orphans come back to `palaver serve`, whose sweep kills them. Nothing survives.
#[test]
fn f3_a_command_that_kills_its_reaper_leaves_nothing() {
    run_escaping_command("namespace");
    run_escaping_command("group");
}

/// F3: the same escape, then `palaver serve` SIGKILLed while the command still runs: the
/// namespace's outer reaper sees its parent gone, and the kernel kills the namespace.
#[test]
fn f3_a_sigkilled_server_leaves_no_escaped_command() {
    let dir = temp_dir("f3-sigkill");
    let root = dir.0.clone();
    let marker = sleep_marker(3);
    let (mut child, port) = serve_binary(&root, &["--allow-shell"], &[]);
    let script = format!("setsid sleep {marker} & sleep 0.2; kill -9 $PPID; sleep 30");
    std::thread::spawn(move || {
        let _ = tool(port, "run_command", json!({"argv": ["sh", "-c", script]}));
    });
    assert!(
        eventually(10, || !leftovers(&marker).is_empty()),
        "the command started"
    );
    std::thread::sleep(Duration::from_millis(500));
    let _ = child.kill(); // SIGKILL: no cleanup code runs in palaver serve
    let _ = child.wait();
    assert!(
        eventually(10, || leftovers(&marker).is_empty()),
        "left: {:?}",
        leftovers(&marker)
    );
}

fn escaping_server(isolation: &str) {
    let marker = format!("palaver-f3-mcp-{isolation}-{}", std::process::id());
    let markers = std::env::temp_dir().join(&marker);
    std::fs::create_dir_all(&markers).unwrap_or_default();
    let mut served = serve_with_mcp(
        &format!("f3-mcp-{isolation}"),
        json!({"esc": {"command": "node", "args": [faulty(), "escaper", markers.display().to_string()]}}),
        &[("PALAVER_REAP_ISOLATION", isolation)],
    );
    let port = served.port;
    assert_eq!(wait_state(port, "esc", &["ready"], 30)["state"], "ready");
    let _ = tool(port, "mcp__esc__work", json!({}));
    assert!(
        markers.join("spawned").exists(),
        "the server started its child"
    );
    if isolation == "group" {
        // The reaper is dead: the sweep kills the server and its escaped child; the server is
        // started again.
        assert!(
            eventually(10, || leftovers(&marker).is_empty()),
            "left: {:?}",
            leftovers(&marker)
        );
        assert_eq!(wait_state(port, "esc", &["ready"], 30)["state"], "ready");
    } else {
        // The namespace's init ignored the kill: the server is still ready.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(status_of(port, "esc")["state"], "ready");
    }
    let _ = served.child.kill(); // SIGKILL
    let _ = served.child.wait();
    assert!(
        eventually(10, || leftovers(&marker).is_empty()),
        "left after SIGKILL: {:?}",
        leftovers(&marker)
    );
    let _ = std::fs::remove_dir_all(&markers);
}

/// F3 for MCP servers: a server that starts a `setsid` child and SIGKILLs its reaper.
#[test]
fn f3_an_mcp_server_that_kills_its_reaper_leaves_nothing() {
    escaping_server("namespace");
    escaping_server("group");
}

fn chats(port: u16, method: &str, path: &str, body: &str) -> Reply {
    request(
        port,
        method,
        &format!("/api/chats{path}"),
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        body,
    )
}

fn chat_text(id: &str, secret: &str) -> String {
    json!({"id": id, "title": "t", "messages": [{"role": "user", "content": secret}]}).to_string()
}

/// F4: each workspace has its own id; the tools neither read nor list nor search `.palaver`, by
/// any spelling or through a symlink; F11: copies are 0600 in a 0700 folder and a copy with
/// several hard links is not read.
#[test]
fn f4_f11_the_workspace_copy_is_the_users_alone() {
    let fx = fixture("f4-private", false);
    let port = fx.server.port;
    let health = get_json(port, "/api/health");
    let id = health["workspace_id"].as_str().unwrap_or("").to_string();
    assert!(id.starts_with("ws-") && id.len() > 10, "{health}");
    assert_eq!(
        get_json(port, "/api/health")["workspace_id"],
        json!(id),
        "stable"
    );
    let secret = "PRIVATE-CHAT-7f3a";
    assert_eq!(
        chats(port, "PUT", "/c1", &chat_text("c1", secret)).status,
        200
    );
    let ws = fx.ws();
    let _ = std::os::unix::fs::symlink(".palaver", ws.join("pal"));
    for path in [
        ".palaver/chats/c1.json",
        ".PALAVER/chats/c1.json",
        "pal/chats/c1.json",
        ".palaver/workspace-id",
    ] {
        let reply = tool(port, "read_file", json!({"path": path}));
        assert_eq!(reply.body["is_error"], true, "{path}: {}", reply.body);
        assert!(!reply.body.to_string().contains(secret), "{path}");
    }
    for path in [".palaver", ".palaver/chats", "pal"] {
        let reply = tool(port, "list_dir", json!({"path": path}));
        assert_eq!(reply.body["is_error"], true, "{path}: {}", reply.body);
    }
    let root = tool(port, "list_dir", json!({"path": "."}));
    assert!(!root.body["content"]
        .as_str()
        .unwrap_or("")
        .contains(".palaver"));
    let found = tool(port, "search", json!({"pattern": secret}));
    assert!(
        !found.body.to_string().contains("c1.json"),
        "{}",
        found.body
    );
    let tree = tool(port, "file_tree", json!({}));
    assert!(!tree.body.to_string().contains("c1.json"), "{}", tree.body);
    // F11: private modes; a hard-linked copy is not read.
    let mode = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.permissions().mode() & 0o777);
    assert_eq!(mode(&ws.join(".palaver/chats/c1.json")), 0o600);
    assert_eq!(mode(&ws.join(".palaver")), 0o700);
    let outside = fx.root.join("outside.json");
    write(&outside, &chat_text("c2", "OUTSIDE"));
    std::fs::hard_link(&outside, ws.join(".palaver/chats/c2.json")).unwrap_or_default();
    let reply = chats(port, "GET", "/c2", "");
    assert_eq!(reply.status, 403, "{}", reply.body);
    assert_eq!(reply.body["error"]["kind"], "hard_link", "{}", reply.body);
}

fn git(ws: &Path, args: &[&str]) -> Option<std::process::ExitStatus> {
    std::process::Command::new("git")
        .args(args)
        .current_dir(ws)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()
}

/// F4: the copy is written only while git ignores `.palaver/chats/` — judged as `git
/// check-ignore` judges it (compared here): a repository's own `.palaver/.gitignore` that
/// un-ignores the chats stops the workspace copy with a sentence; a root `.gitignore` naming `.palaver/`
/// wins over any file below it; a plain folder has nothing to commit.
#[test]
fn f4_the_copy_is_written_only_while_git_ignores_it() {
    let cases: [(&str, Option<&str>, Option<&str>, bool); 5] = [
        ("plain", None, None, true),
        ("ours", None, Some("*\n"), true),
        ("unignored", None, Some("*\n!chats/\n!chats/*\n"), false),
        ("root-wins", Some(".palaver/\n"), Some("!*\n"), true),
        (
            "root-negated",
            Some("!.palaver/\n"),
            Some("!chats\n!chats/**\n"),
            false,
        ),
    ];
    for (name, root_ignore, palaver_ignore, written) in cases {
        let fx = fixture(&format!("f4-git-{name}"), false);
        let ws = fx.ws();
        if name != "plain" {
            if git(&ws, &["init", "-q"]).is_none() {
                // No git here: the `.git` folder is what marks a repository for the workspace copy.
                std::fs::create_dir_all(ws.join(".git")).unwrap_or_default();
            }
        }
        if let Some(text) = root_ignore {
            write(&ws.join(".gitignore"), text);
        }
        if let Some(text) = palaver_ignore {
            write(&ws.join(".palaver/.gitignore"), text);
        }
        let reply = chats(fx.server.port, "PUT", "/c1", &chat_text("c1", "hello"));
        assert_eq!(reply.status == 200, written, "{name}: {}", reply.body);
        let file = ws.join(".palaver/chats/c1.json");
        assert_eq!(file.exists(), written, "{name}");
        if !written {
            assert_eq!(reply.body["error"]["kind"], "not_ignored_by_git", "{name}");
            assert!(reply.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(".gitignore")));
            // git agrees: it would commit a file there.
            write(&file, "probe");
            let ignored = git(&ws, &["check-ignore", "-q", ".palaver/chats/c1.json"]);
            if let Some(status) = ignored {
                assert!(!status.success(), "{name}: git ignores it, we did not");
            }
        } else if name != "plain" {
            if let Some(status) = git(&ws, &["check-ignore", "-q", ".palaver/chats/c1.json"]) {
                assert!(status.success(), "{name}: git would commit what we wrote");
            }
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// F5: a server whose `tools/list` and `resources/list` page for ever is listed within the caps
/// (2 000 items): `palaver serve` stays small, and the status says why the list was cut.
#[test]
fn f5_an_endless_listing_is_capped() {
    let served = serve_with_mcp(
        "f5-pages",
        json!({"pages": {"command": "node", "args": [faulty(), "pages"]}}),
        &[],
    );
    let port = served.port;
    let status = wait_state(port, "pages", &["ready"], 60);
    assert_eq!(status["state"], "ready", "{status}");
    assert_eq!(status["tools"], 2000, "{status}");
    assert!(
        status["tools_cut"]
            .as_str()
            .is_some_and(|c| c.contains("2000")),
        "{status}"
    );
    let resources = get_json(port, "/api/mcp/resources");
    let count = resources["resources"]
        .as_array()
        .or_else(|| resources.as_array())
        .map_or(0, Vec::len);
    assert!(count <= 2000, "{count} resources kept");
    let rss = rss_kib(served.child.id());
    assert!(rss < 300 * 1024, "palaver serve grew to {rss} KiB");
}

/// A listener that answers every request with `answer` and records the heads it got.
fn recording_server(answer: String) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = listener.local_addr().map_or(0, |a| a.port());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buffer = vec![0u8; 65536];
            let n = stream.read(&mut buffer).unwrap_or(0);
            let head = String::from_utf8_lossy(&buffer[..n]).to_ascii_lowercase();
            if let Ok(mut log) = log.lock() {
                log.push(head);
            }
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, seen)
}

/// F6: an HTTP MCP server's headers and URL query are secrets: a redirect to another origin is
/// not followed (the other origin sees nothing), a same-origin one carries no Referer, and the
/// status shows the URL as scheme://host:port/path only.
#[test]
fn f6_an_http_servers_secrets_stay_with_it() {
    let (evil, evil_seen) = recording_server(
        "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .into(),
    );
    let (cross, _) = recording_server(format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{evil}/mcp\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"));
    let (same, same_seen) = recording_server(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: /next\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .into(),
    );
    let served = serve_with_mcp(
        "f6-redirects",
        json!({
            "cross": {"url": format!("http://user:pw@127.0.0.1:{cross}/mcp?api_key=SECRET-Q"), "headers": {"X-Api-Key": "SECRET-H"}},
            "same": {"url": format!("http://127.0.0.1:{same}/mcp?api_key=SECRET-Q")},
        }),
        &[],
    );
    let port = served.port;
    let cross_status = wait_state(port, "cross", &["restarting", "failed"], 30);
    let _ = wait_state(port, "same", &["restarting", "failed"], 30);
    let all = get_json(port, "/api/mcp").to_string();
    drop(served);
    let evil_heads = evil_seen.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(
        evil_heads.is_empty(),
        "another origin was reached: {evil_heads:?}"
    );
    assert!(
        !all.contains("SECRET") && !all.contains("user:pw"),
        "the status shows a secret: {all}"
    );
    assert_eq!(
        cross_status["command"],
        format!("http://127.0.0.1:{cross}/mcp")
    );
    let same_heads = same_seen.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(
        same_heads.iter().any(|h| h.starts_with("post /next")),
        "the same-origin redirect is followed: {same_heads:?}"
    );
    assert!(
        same_heads.iter().all(|h| !h.contains("\r\nreferer:")),
        "a Referer was sent: {same_heads:?}"
    );
}

/// F7: the vault secret is handed out behind the token only, kept 0600 in the user's config
/// folder, the same across restarts.
#[test]
fn f7_the_vault_secret_is_behind_the_token() {
    let dir = temp_dir("f7-vault");
    let root = dir.0.clone();
    let (child, port) = serve_binary(&root, &[], &[]);
    let anonymous = raw(
        port,
        &format!("GET /api/vault HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"),
    );
    let first = get_json(port, "/api/vault");
    stop(child);
    assert_eq!(anonymous.0, 401);
    let secret = first["secret"].as_str().unwrap_or("");
    assert_eq!(secret.len(), 44, "{first}");
    let file = root.join("config/palaver/vault-secret");
    let mode = std::fs::metadata(&file).map_or(0, |m| m.permissions().mode() & 0o777);
    assert_eq!(mode, 0o600);
    let (child, port) = serve_binary(&root, &[], &[]);
    let again = get_json(port, "/api/vault");
    stop(child);
    assert_eq!(again["secret"], json!(secret), "the same after a restart");
}

/// F8: a tool its server marks read-only is offered with the hint, but trusted only when the
/// user's config says so (then the engine's default rule is auto; `tests/it` checks that side).
#[test]
fn f8_a_servers_annotations_are_trusted_only_when_the_user_says() {
    let served = serve_with_mcp(
        "f8-hints",
        json!({
            "plain": {"command": "node", "args": [faulty(), "readonly"]},
            "trusted": {"command": "node", "args": [faulty(), "readonly"], "trust_annotations": true},
        }),
        &[],
    );
    let port = served.port;
    for name in ["plain", "trusted"] {
        assert_eq!(wait_state(port, name, &["ready"], 30)["state"], "ready");
    }
    let tools = get_json(port, "/api/tools");
    let spec = |name: &str| {
        tools
            .as_array()
            .or_else(|| tools["tools"].as_array())
            .and_then(|all| all.iter().find(|t| t["name"] == name).cloned())
            .unwrap_or(Value::Null)
    };
    let plain = spec("mcp__plain__peek");
    let trusted = spec("mcp__trusted__peek");
    assert_eq!(plain["annotations"]["readOnlyHint"], true, "{plain}");
    assert!(plain.get("trust_annotations").is_none(), "{plain}");
    assert_eq!(trusted["trust_annotations"], true, "{trusted}");
}

/// F10: a call whose server reports progress for ever ends at the hard deadline (the server is
/// told it was cancelled); a 12 MB structuredContent is not kept with the chat.
#[test]
fn f10_progress_cannot_outlive_the_hard_deadline_and_huge_structure_is_not_kept() {
    let marker = format!("palaver-f10-{}", std::process::id());
    let markers = std::env::temp_dir().join(&marker);
    std::fs::create_dir_all(&markers).unwrap_or_default();
    let m = markers.display().to_string();
    let served = serve_with_mcp(
        "f10-deadline",
        json!({
            "slow": {"command": "node", "args": [faulty(), "progress", m], "timeout": 1000, "max_call_ms": 2500},
            "big": {"command": "node", "args": [faulty(), "structured"]},
        }),
        &[],
    );
    let port = served.port;
    for name in ["slow", "big"] {
        assert_eq!(wait_state(port, name, &["ready"], 30)["state"], "ready");
    }
    let started = Instant::now();
    let reply = tool(port, "mcp__slow__work", json!({}));
    let took = started.elapsed();
    assert_eq!(reply.body["is_error"], true, "{}", reply.body);
    assert!(
        took >= Duration::from_millis(2400) && took < Duration::from_secs(10),
        "ended after {took:?}"
    );
    assert!(
        eventually(5, || markers.join("cancelled").exists()),
        "the server was told"
    );
    let big = tool(port, "mcp__big__work", json!({}));
    assert!(
        big.body["data"].get("structured_content").is_none(),
        "kept: {} bytes",
        big.body.to_string().len()
    );
    assert!(big.body["data"]["structured_content_left_out"].is_string());
    assert!(big.body.to_string().len() < 1024 * 1024);
    let _ = std::fs::remove_dir_all(&markers);
}

/// F10: 20 000 `tools/list_changed` notifications make a few listings, not 20 000.
#[test]
fn f10_a_flood_of_list_changes_makes_few_listings() {
    let marker = format!("palaver-f10-notify-{}", std::process::id());
    let markers = std::env::temp_dir().join(&marker);
    std::fs::create_dir_all(&markers).unwrap_or_default();
    let served = serve_with_mcp(
        "f10-notify",
        json!({"noisy": {"command": "node", "args": [faulty(), "notify", markers.display().to_string()]}}),
        &[],
    );
    let port = served.port;
    assert_eq!(wait_state(port, "noisy", &["ready"], 30)["state"], "ready");
    std::thread::sleep(Duration::from_secs(5));
    let listings: u64 = std::fs::read_to_string(markers.join("listings"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let rss = rss_kib(served.child.id());
    drop(served);
    let _ = std::fs::remove_dir_all(&markers);
    assert!(
        (1..=20).contains(&listings),
        "{listings} listings for 20 000 notifications"
    );
    assert!(rss < 300 * 1024, "{rss} KiB");
}

/// F10: `/mcp` keeps at most 64 sessions: the 65th closes the oldest, the newest works.
#[test]
fn f10_mcp_sessions_are_capped() {
    let fx = fixture("f10-sessions", false);
    let port = fx.server.port;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string();
    let mut ids = Vec::new();
    for _ in 0..80 {
        let reply = request(
            port,
            "POST",
            "/mcp",
            &format!(
                "Authorization: Bearer {TOKEN}\r\nAccept: application/json, text/event-stream\r\n"
            ),
            &initialize,
        );
        let id = reply
            .head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .map(str::trim)
            .map(String::from);
        ids.push(id.unwrap_or_else(|| panic!("no session id: {}", reply.head)));
    }
    let ping = |id: &str| {
        request(
            port,
            "POST",
            "/mcp",
            &format!("Authorization: Bearer {TOKEN}\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {id}\r\nMcp-Protocol-Version: 2025-06-18\r\n"),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string(),
        )
        .status
    };
    assert_eq!(ping(&ids[0]), 404, "the oldest was closed");
    assert_eq!(ping(&ids[79]), 200, "the newest works");
}
