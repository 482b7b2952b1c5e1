//! MCP in `palaver serve` (issue 17), with real servers: the reference servers from npm
//! (`@modelcontextprotocol/server-everything`, `-filesystem`, `-memory`, installed pinned in
//! `tests/mcp/` by the test script) and broken ones built with the official SDK
//! (`tests/mcp/faulty.mjs`), run by the real binary. Security cases are named M1–M8.

use crate::support::{eventually, raw, request, serve_binary, temp_dir, tool, Reply, TOKEN};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `tests/mcp/` with its npm packages: the tests need them (the test script installs them).
pub(crate) fn mcp_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp");
    let installed = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        installed.is_file(),
        "the MCP servers from npm are not installed: run `npm ci` in tests/mcp (scripts/test.sh does)"
    );
    dir
}

pub(crate) fn npm_server(package: &str) -> String {
    mcp_dir()
        .join(format!(
            "node_modules/@modelcontextprotocol/{package}/dist/index.js"
        ))
        .display()
        .to_string()
}

pub(crate) fn faulty() -> String {
    mcp_dir().join("faulty.mjs").display().to_string()
}

/// A real `palaver serve` with `servers` as its MCP config; the child is killed on drop.
pub(crate) struct Served {
    pub(crate) child: std::process::Child,
    pub(crate) port: u16,
    pub(crate) root: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub(crate) fn serve_with_mcp(name: &str, servers: Value, env: &[(&str, &str)]) -> Served {
    let dir = temp_dir(name);
    let root = dir.0.clone();
    std::mem::forget(dir); // removed by `Served`
    let config = root.join("mcp.json");
    std::fs::write(&config, json!({"mcpServers": servers}).to_string())
        .unwrap_or_else(|e| panic!("{e}"));
    let config = config.display().to_string();
    let (child, port) = serve_binary(&root, &["--mcp", &config], env);
    Served { child, port, root }
}

pub(crate) fn get_json(port: u16, path: &str) -> Value {
    request(
        port,
        "GET",
        path,
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        "",
    )
    .body
}

pub(crate) fn status_of(port: u16, server: &str) -> Value {
    get_json(port, "/api/mcp")["servers"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == server).cloned())
        .unwrap_or(Value::Null)
}

pub(crate) fn wait_state(port: u16, server: &str, states: &[&str], seconds: u64) -> Value {
    eventually(seconds, || {
        states
            .iter()
            .any(|s| status_of(port, server)["state"] == *s)
    });
    status_of(port, server)
}

pub(crate) fn post(port: u16, path: &str, body: Value) -> Reply {
    request(
        port,
        "POST",
        path,
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        &body.to_string(),
    )
}

/// NDJSON lines of a streamed MCP call.
pub(crate) fn streamed(port: u16, name: &str, args: Value) -> Vec<Value> {
    let body = args.to_string();
    let text = format!(
        "POST /api/tools/{name} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: application/x-ndjson\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (_, _, bytes) = raw(port, &text);
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line.trim()).ok())
        .filter(Value::is_object) // not the chunk-size lines of the chunked encoding
        .collect()
}

#[test]
fn reference_servers_from_npm_give_their_tools_resources_and_prompts() {
    let files = std::env::temp_dir().join(format!("palaver-mcp-files-{}", std::process::id()));
    std::fs::create_dir_all(&files).unwrap_or_default();
    std::fs::write(
        files.join("hello.txt"),
        "hello from the filesystem server\n",
    )
    .unwrap_or_default();
    let memory = files.join("memory.jsonl");
    let served = serve_with_mcp(
        "mcp-npm",
        json!({
            "everything": {"command": "node", "args": [npm_server("server-everything"), "stdio"]},
            "files": {"command": "node", "args": [npm_server("server-filesystem"), files.display().to_string()]},
            "memory": {"command": "node", "args": [npm_server("server-memory")], "env": {"MEMORY_FILE_PATH": memory.display().to_string(), "MEMORY_SECRET_CANARY": "canary-7f3e1"}},
        }),
        &[],
    );
    let port = served.port;
    for server in ["everything", "files", "memory"] {
        let status = wait_state(port, server, &["ready"], 60);
        assert_eq!(status["state"], "ready", "{status}");
        assert!(status["tools"].as_u64().is_some_and(|n| n > 3), "{status}");
        assert!(status["protocol_version"].is_string(), "{status}");
    }
    // Tools join the workspace tools, named mcp__{server}__{tool}, with schema and annotations.
    let tools = get_json(port, "/api/tools");
    let names: Vec<&str> = tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for expected in [
        "read_file",
        "mcp__everything__echo",
        "mcp__files__read_text_file",
        "mcp__memory__read_graph",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let echo = tools
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "mcp__everything__echo"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        echo["parameters"]["properties"]["message"]["type"], "string",
        "{echo}"
    );
    assert_eq!(echo["annotations"]["readOnlyHint"], true, "{echo}");
    assert_eq!(echo["mcp"]["server"], "everything");
    // Text, an image, progress, resource links, an embedded resource, structured content.
    let reply = tool(port, "mcp__everything__echo", json!({"message": "hi"}));
    assert_eq!(reply.body["content"], "Echo: hi", "{}", reply.body);
    let image = tool(port, "mcp__everything__get-tiny-image", json!({}));
    let url = image.body["parts"][0]["image_url"]["url"]
        .as_str()
        .unwrap_or("");
    assert!(
        url.starts_with("data:image/png;base64,iVBOR"),
        "{}",
        image.body
    );
    assert!(image.body["content"]
        .as_str()
        .unwrap_or("")
        .contains("[image: image/png]"));
    let lines = streamed(
        port,
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 1, "steps": 3}),
    );
    let progress: Vec<&Value> = lines.iter().filter(|l| l["type"] == "line").collect();
    assert_eq!(progress.len(), 3, "{lines:?}");
    assert_eq!(progress[0]["stream"], "progress");
    assert_eq!(progress[2]["text"], "progress 3/3");
    let last = lines.last().cloned().unwrap_or_default();
    assert_eq!(last["type"], "result");
    assert!(
        last["content"].as_str().unwrap_or("").contains("completed"),
        "{last}"
    );
    let links = tool(
        port,
        "mcp__everything__get-resource-links",
        json!({"count": 2}),
    );
    assert!(
        links.body["content"]
            .as_str()
            .unwrap_or("")
            .contains("[resource link: "),
        "{}",
        links.body
    );
    let reference = tool(
        port,
        "mcp__everything__get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 2}),
    );
    assert!(
        reference.body["content"]
            .as_str()
            .unwrap_or("")
            .contains("[resource demo://resource/dynamic/text/2]"),
        "{}",
        reference.body
    );
    let structured = tool(
        port,
        "mcp__everything__get-structured-content",
        json!({"location": "New York"}),
    );
    assert!(
        structured.body["data"]["structured_content"]["temperature"].is_number(),
        "{}",
        structured.body
    );
    // A server's refusal of bad arguments is a tool error the model sees.
    let refused = tool(
        port,
        "mcp__everything__get-structured-content",
        json!({"location": "Atlantis"}),
    );
    assert_eq!(refused.status, 200);
    assert_eq!(refused.body["is_error"], true, "{}", refused.body);
    // The filesystem server reads its own folder; the memory server keeps a graph.
    let read = tool(
        port,
        "mcp__files__read_text_file",
        json!({"path": files.join("hello.txt").display().to_string()}),
    );
    assert!(
        read.body["content"]
            .as_str()
            .unwrap_or("")
            .contains("hello from the filesystem server"),
        "{}",
        read.body
    );
    let created = tool(
        port,
        "mcp__memory__create_entities",
        json!({"entities": [{"name": "Palaver", "entityType": "project", "observations": ["runs in the page"]}]}),
    );
    assert_eq!(created.body["is_error"], false, "{}", created.body);
    let graph = tool(port, "mcp__memory__read_graph", json!({}));
    assert!(
        graph.body["content"]
            .as_str()
            .unwrap_or("")
            .contains("runs in the page"),
        "{}",
        graph.body
    );
    // Resources and prompts, for the page to attach or insert.
    let resources = get_json(port, "/api/mcp/resources");
    assert!(
        resources["resources"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["server"] == "everything"
                && r["uri"].as_str().is_some_and(|u| u.starts_with("demo://")))),
        "{resources}"
    );
    let text = post(
        port,
        "/api/mcp/resources/read",
        json!({"server": "everything", "uri": "demo://resource/dynamic/text/1"}),
    );
    assert!(
        text.body["text"]
            .as_str()
            .unwrap_or("")
            .contains("Resource 1"),
        "{}",
        text.body
    );
    let prompts = get_json(port, "/api/mcp/prompts");
    assert!(
        prompts["prompts"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["name"] == "args-prompt")),
        "{prompts}"
    );
    let prompt = post(
        port,
        "/api/mcp/prompts/get",
        json!({"server": "everything", "name": "args-prompt", "arguments": {"city": "Lyon"}}),
    );
    assert!(
        prompt.body["messages"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("Lyon"),
        "{}",
        prompt.body
    );
    // M3: an env value of the config never reaches the page (status, tools) — the server has it.
    let everything_env = tool(port, "mcp__everything__get-env", json!({}));
    let status = get_json(port, "/api/mcp").to_string();
    assert!(
        !status.contains("canary-7f3e1") && !tools.to_string().contains("canary-7f3e1"),
        "an env value reached the page"
    );
    assert!(
        !everything_env.body.to_string().contains("canary-7f3e1"),
        "one server's env leaked to another"
    );
    let _ = std::fs::remove_dir_all(&files);
}

/// M1: a repository that carries MCP configs (the files other clients auto-start from, and the
/// user-level default path pointed inside the workspace) starts nothing.
#[test]
fn m1_a_workspace_carrying_mcp_configs_starts_nothing() {
    let dir = temp_dir("mcp-repo");
    let root = dir.0.clone();
    let ws = root.join("ws");
    let marker = root.join("started");
    let server = json!({"mcpServers": {"evil": {"command": "touch", "args": [marker.display().to_string()]}}}).to_string();
    for path in [
        ".mcp.json",
        "mcp.json",
        ".vscode/mcp.json",
        ".cursor/mcp.json",
        ".config/palaver/mcp.json",
    ] {
        let file = ws.join(path);
        std::fs::create_dir_all(file.parent().unwrap_or(&ws)).unwrap_or_default();
        std::fs::write(&file, &server).unwrap_or_default();
    }
    let config_home = ws.join(".config").display().to_string();
    let (mut child, port) = serve_binary(&root, &[], &[("XDG_CONFIG_HOME", &config_home)]);
    std::thread::sleep(Duration::from_secs(2));
    let status = get_json(port, "/api/mcp");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !marker.exists(),
        "a config inside the workspace started a process"
    );
    assert_eq!(status["servers"], json!([]), "{status}");
    assert_eq!(status["config"], Value::Null, "{status}");
}

/// M2: names and descriptions are data — a tool name providers would not take is refused and
/// said so; a description with markup is passed on as text (the page renders it as text).
#[test]
fn m2_bad_tool_names_are_refused_and_descriptions_are_data() {
    let served = serve_with_mcp(
        "mcp-names",
        json!({"names": {"command": "node", "args": [faulty(), "names"]}, "bad name": {"command": "node"}, "a__b": {"command": "node"}}),
        &[],
    );
    let port = served.port;
    let status = wait_state(port, "names", &["ready"], 30);
    let refused = status["refused_tools"].to_string();
    assert!(
        refused.contains("has space") && refused.contains("long_nnn"),
        "{status}"
    );
    let tools = get_json(port, "/api/tools").to_string();
    assert!(
        tools.contains("mcp__names__ok_tool") && !tools.contains("has space"),
        "{tools}"
    );
    assert!(
        tools.contains("<img src=x onerror="),
        "the description is kept as given (text)"
    );
    let all = get_json(port, "/api/mcp");
    let names: Vec<String> = all["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["name"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        names.contains(&"bad name".to_string()) && names.contains(&"a__b".to_string()),
        "{all}"
    );
    for bad in ["bad name", "a__b"] {
        assert_eq!(status_of(port, bad)["state"], "failed", "{all}");
    }
    let reply = tool(port, "mcp__names__ok_tool", json!({"q": "x"}));
    assert_eq!(reply.body["content"], "ok x");
}

/// Faults: a server that crashes mid-call, hangs, writes garbage, floods its output, returns
/// 10 MB, exits at start, or is not installed — each a clear tool error or status, the others
/// unaffected, and no process left behind.
#[test]
fn faulty_servers_fail_clearly_and_leave_nothing_behind() {
    let markers = std::env::temp_dir().join(format!("palaver-mcp-markers-{}", std::process::id()));
    std::fs::create_dir_all(&markers).unwrap_or_default();
    let m = markers.display().to_string();
    let server =
        |mode: &str| json!({"command": "node", "args": [faulty(), mode, m], "timeout": 4000});
    let mut served = serve_with_mcp(
        "mcp-faults",
        json!({
            "crash": server("crash"), "hang": server("hang"), "garbage": server("garbage"),
            "flood": server("flood"), "huge": server("huge"), "exit": server("exit"),
            "spawner": server("spawner"), "missing": {"command": "palaver-no-such-mcp-server"},
            "healthy": {"command": "node", "args": [npm_server("server-everything"), "stdio"]},
        }),
        &[],
    );
    let port = served.port;
    for name in [
        "crash", "hang", "garbage", "flood", "huge", "spawner", "healthy",
    ] {
        let status = wait_state(port, name, &["ready"], 60);
        assert_eq!(status["state"], "ready", "{name}: {status}");
    }
    // Crash in the middle of a call: a tool error naming it; the server is restarted.
    let crash = tool(port, "mcp__crash__work", json!({}));
    assert_eq!(crash.body["is_error"], true, "{}", crash.body);
    assert_eq!(crash.body["error"]["kind"], "mcp_crashed", "{}", crash.body);
    assert!(
        eventually(30, || status_of(port, "crash")["restarts"].as_u64()
            >= Some(1)
            && status_of(port, "crash")["state"] == "ready"),
        "{}",
        status_of(port, "crash")
    );
    // Hang: the call times out with a clear error and the server is told to cancel.
    let started = std::time::Instant::now();
    let hang = tool(port, "mcp__hang__work", json!({}));
    assert_eq!(hang.body["error"]["kind"], "mcp_timeout", "{}", hang.body);
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        eventually(5, || markers.join("cancelled").exists()),
        "notifications/cancelled reached the server"
    );
    // Garbage on stdout does not break the connection.
    let garbage = tool(port, "mcp__garbage__work", json!({}));
    assert_eq!(
        garbage.body["content"], "ok despite the garbage",
        "{}",
        garbage.body
    );
    // A flood of stderr: the tail is capped, the call answers.
    let flood = tool(port, "mcp__flood__work", json!({}));
    assert_eq!(
        flood.body["content"], "ok after the flood",
        "{}",
        flood.body
    );
    assert!(status_of(port, "flood")["stderr_tail"]
        .as_str()
        .is_some_and(|t| t.len() < 70 * 1024));
    // 10 MB of text: cut, and said so.
    let huge = tool(port, "mcp__huge__work", json!({}));
    let content = huge.body["content"].as_str().unwrap_or("");
    assert!(
        content.len() < 300 * 1024 && content.contains("[truncated: kept"),
        "{} bytes",
        content.len()
    );
    assert_eq!(huge.body["data"]["truncated"], true);
    // Exits at start: restarted with backoff, then failed, with its own words.
    let exit = wait_state(port, "exit", &["failed"], 90);
    assert_eq!(exit["state"], "failed", "{exit}");
    assert!(
        exit["error"]
            .as_str()
            .unwrap_or("")
            .contains("failed 5 times"),
        "{exit}"
    );
    assert!(
        exit["stderr_tail"]
            .as_str()
            .unwrap_or("")
            .contains("FAULTY_KEY is not set"),
        "{exit}"
    );
    // Not installed: failed at once, saying so.
    let missing = status_of(port, "missing");
    assert_eq!(missing["state"], "failed");
    assert!(
        missing["error"]
            .as_str()
            .unwrap_or("")
            .contains("not installed"),
        "{missing}"
    );
    // The others were never affected.
    assert_eq!(
        tool(port, "mcp__healthy__echo", json!({"message": "still"})).body["content"],
        "Echo: still"
    );
    let spawned = tool(port, "mcp__spawner__work", json!({}));
    assert_eq!(spawned.body["is_error"], false, "{}", spawned.body);
    let grandchild = std::fs::read_to_string(markers.join("spawned")).unwrap_or_default();
    assert!(
        crate::support::alive(&grandchild),
        "the detached child runs while its server does"
    );
    // palaver serve stops: every server and everything they started is gone, no zombie left.
    let server_pid = served.child.id().to_string();
    // SAFETY: kill(2) sends a signal to the child we started.
    unsafe {
        libc::kill(served.child.id() as i32, libc::SIGTERM);
    }
    let _ = served.child.wait();
    assert!(
        eventually(10, || !crate::support::alive(&grandchild)),
        "the setsid grandchild of an MCP server outlived palaver serve"
    );
    assert!(
        eventually(10, || leftovers(&m).is_empty()),
        "processes left: {:?}",
        leftovers(&m)
    );
    assert!(!crate::support::alive(&server_pid));
    let _ = std::fs::remove_dir_all(&markers);
}

/// The pids of live processes whose command line or environment names `marker`.
pub(crate) fn leftovers(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = entry.file_name().to_string_lossy().to_string();
        if !pid.chars().all(|c| c.is_ascii_digit()) || !crate::support::alive(&pid) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let has = |bytes: &[u8]| bytes.windows(marker.len()).any(|w| w == marker.as_bytes());
        if has(&cmdline) || has(&environ) {
            found.push(pid);
        }
    }
    found
}

/// A SIGKILLed `palaver serve` leaves no MCP server running: each runs under the reaper, which
/// sees its parent gone.
#[test]
fn a_sigkilled_server_leaves_no_mcp_server_running() {
    let marker = format!("palaver-mcp-sigkill-{}", std::process::id());
    let markers = std::env::temp_dir().join(&marker);
    std::fs::create_dir_all(&markers).unwrap_or_default();
    let served = serve_with_mcp(
        "mcp-sigkill",
        json!({"spawner": {"command": "node", "args": [faulty(), "spawner", markers.display().to_string()]}}),
        &[],
    );
    let port = served.port;
    assert_eq!(
        wait_state(port, "spawner", &["ready"], 30)["state"],
        "ready"
    );
    let _ = tool(port, "mcp__spawner__work", json!({}));
    assert!(
        !leftovers(&marker).is_empty(),
        "the server and its child run"
    );
    let mut served = served;
    let _ = served.child.kill(); // SIGKILL: no cleanup code runs in palaver serve
    let _ = served.child.wait();
    assert!(
        eventually(10, || leftovers(&marker).is_empty()),
        "left: {:?}",
        leftovers(&marker)
    );
    let _ = std::fs::remove_dir_all(&markers);
}

/// list_changed: a server that adds a tool after the start is listed again; the events stream
/// says so, with a new tools version.
#[test]
fn a_tool_list_change_reaches_api_tools_and_the_events_stream() {
    let served = serve_with_mcp(
        "mcp-changes",
        json!({"changes": {"command": "node", "args": [faulty(), "changes"]}}),
        &[],
    );
    let port = served.port;
    assert_eq!(
        wait_state(port, "changes", &["ready"], 30)["state"],
        "ready"
    );
    let before = get_json(port, "/api/mcp")["tools_version"]
        .as_u64()
        .unwrap_or(0);
    assert!(eventually(10, || get_json(port, "/api/tools")
        .to_string()
        .contains("mcp__changes__late")));
    let after = get_json(port, "/api/mcp")["tools_version"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        after > before,
        "the tools version moved ({before} → {after})"
    );
    let reply = tool(port, "mcp__changes__late", json!({}));
    assert_eq!(reply.body["content"], "late tool");
    // The list says the version it was listed at, as the events stream's `hello` does: the page
    // need not fetch it again for that first event (issue 41).
    let listed = request(
        port,
        "GET",
        "/api/tools",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        "",
    );
    assert!(
        listed
            .head
            .to_ascii_lowercase()
            .contains(&format!("x-palaver-tools-version: {after}\r\n")),
        "GET /api/tools says tools version {after}: {}",
        listed.head
    );
}

/// M4–M8: `/mcp` (Palaver's tools for any MCP client) refuses what `/api` refuses; with the
/// token it speaks MCP, and its tools keep the workspace confinement.
#[test]
fn m4_to_m8_the_mcp_endpoint_is_guarded_like_the_api() {
    let dir = temp_dir("mcp-endpoint");
    let root = dir.0.clone();
    std::mem::forget(dir);
    let (mut child, port) = serve_binary(&root, &[], &[]);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string();
    let mcp = |headers: &str| {
        let text = format!(
            "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{initialize}",
            initialize.len()
        );
        raw(port, &text)
    };
    let host = format!("Host: 127.0.0.1:{port}\r\n");
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let cases = [
        ("M4 no token", format!("{host}"), 401),
        (
            "M5 wrong Host (DNS rebinding)",
            format!("Host: evil.example:{port}\r\n{auth}"),
            403,
        ),
        (
            "M6 another Origin",
            format!("{host}{auth}Origin: https://evil.example\r\n"),
            403,
        ),
        (
            "M7 a no-cors request",
            format!("{host}{auth}Sec-Fetch-Mode: no-cors\r\n"),
            403,
        ),
        (
            "M8 a navigation",
            format!("{host}{auth}Sec-Fetch-Mode: navigate\r\nSec-Fetch-Dest: document\r\n"),
            403,
        ),
    ];
    let mut problems = Vec::new();
    for (what, headers, expected) in &cases {
        let (status, _, _) = mcp(headers);
        if status != *expected {
            problems.push(format!("{what}: {status}, expected {expected}"));
        }
    }
    let (status, head, body) = mcp(&format!("{host}{auth}"));
    let body = String::from_utf8_lossy(&body).to_string();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&root);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(status, 200, "{head}\n{body}");
    assert!(
        body.contains("\"serverInfo\"") && body.contains("palaver"),
        "{body}"
    );
}

/// `palaver mcp`: the workspace tools over stdio for any MCP client, with the same
/// confinement (a path out of the workspace is a tool error, not a read).
#[test]
fn palaver_mcp_serves_the_workspace_tools_over_stdio() {
    use std::io::{BufRead, BufReader, Write};
    let dir = temp_dir("mcp-stdio");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_palaver"))
        .args(["mcp", "--workspace"])
        .arg(dir.0.join("ws"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("stdin"));
    let mut lines = BufReader::new(child.stdout.take().unwrap_or_else(|| panic!("stdout"))).lines();
    let mut exchange = |message: Value| -> Value {
        writeln!(stdin, "{message}").unwrap_or_default();
        stdin.flush().unwrap_or_default();
        if message.get("id").is_none() {
            return Value::Null;
        }
        lines
            .next()
            .and_then(|line| line.ok())
            .and_then(|line| serde_json::from_str(&line).ok())
            .unwrap_or(Value::Null)
    };
    let init = exchange(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    exchange(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = exchange(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let read = exchange(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "sub/file.txt"}}}),
    );
    let escape = exchange(
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "../www/index.html"}}}),
    );
    let unknown = exchange(
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "run_command", "arguments": {"argv": ["true"]}}}),
    );
    drop(stdin);
    let _ = child.wait();
    assert_eq!(init["result"]["serverInfo"]["name"], "palaver", "{init}");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"read_file")
            && names.contains(&"edit_file")
            && !names.contains(&"run_command"),
        "{names:?}"
    );
    assert_eq!(read["result"]["content"][0]["text"], "inside\n", "{read}");
    assert_eq!(escape["result"]["isError"], true, "{escape}");
    assert!(
        unknown.get("error").is_some(),
        "a tool it does not offer is a protocol error: {unknown}"
    );
}

/// Issue 39: an MCP server from npm that writes in the workspace (the reference filesystem
/// server, rooted there): its write is found by the scans around the call, listed under the
/// chat's call, and restored.
#[test]
fn an_mcp_servers_writes_are_recorded_and_restored() {
    let probe = temp_dir("mcp-writes-probe");
    let root = probe.0.clone();
    std::mem::forget(probe);
    let ws = root.join("ws");
    std::fs::write(ws.join("notes.txt"), "before\n").unwrap_or_default();
    let config = root.join("mcp.json");
    let servers = json!({"files": {"command": "node", "args": [npm_server("server-filesystem"), ws.display().to_string()]}});
    std::fs::write(&config, json!({"mcpServers": servers}).to_string()).unwrap_or_default();
    let data = root.join("data").display().to_string();
    let (child, port) = super::support::serve_binary(
        &root,
        &["--mcp", &config.display().to_string()],
        &[("XDG_DATA_HOME", &data)],
    );
    let served = Served { child, port, root };
    assert_eq!(wait_state(port, "files", &["ready"], 60)["state"], "ready");
    let body = json!({"path": ws.join("notes.txt").display().to_string(), "content": "written by the server\n"}).to_string();
    let text = format!(
        "POST /api/tools/mcp__files__write_file HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: application/x-ndjson\r\nx-palaver-chat: c1\r\nx-palaver-call: call_mcp\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = raw(port, &text);
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap_or_default(),
        "written by the server\n"
    );
    let listed = get_json(port, "/api/changes?chat=c1");
    let paths: Vec<&str> = listed["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["path"].as_str())
        .collect();
    assert_eq!(paths, ["notes.txt"], "{listed}");
    let restored = post(
        port,
        "/api/changes/restore",
        json!({"chat_id": "c1", "call_id": "call_mcp"}),
    );
    assert_eq!(
        restored.body["restored"],
        json!(["notes.txt"]),
        "{:?}",
        restored.body
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap_or_default(),
        "before\n"
    );
    drop(served);
}
