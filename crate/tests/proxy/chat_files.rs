//! Issue 21, the workspace copy through the real server: `PUT/GET/DELETE /api/chats/{id}` and
//! `GET /api/chats` write and read `.palaver/chats/{id}.json` atomically, create `.palaver/` with
//! a `.gitignore`, refuse bad ids and non-trajectories, refuse a symlinked `.palaver`, a copy
//! replaced by a symlink or a FIFO, and a huge file, touch nothing outside the workspace, keep the
//! model's write tools out, and are off with `--no-workspace-copy`.

use crate::support::*;
use palaver::proxy::ServeConfig;
use serde_json::{json, Value};

fn chats(port: u16, method: &str, path: &str, body: &str) -> Reply {
    chats_with(port, method, path, "", body)
}

fn chats_with(port: u16, method: &str, path: &str, headers: &str, body: &str) -> Reply {
    request(
        port,
        method,
        &format!("/api/chats{path}"),
        &format!("Authorization: Bearer {TOKEN}\r\n{headers}"),
        body,
    )
}

fn trajectory(id: &str, n: usize) -> String {
    let messages: Vec<Value> = (0..n)
        .map(|i| json!({"message_id": format!("m{i}"), "role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("message {i} ✓")}))
        .collect();
    json!({"id": id, "title": "A chat", "messages": messages}).to_string()
}

#[test]
fn chats_are_written_whole_read_back_listed_and_removed() {
    let fx = fixture("copy-rw", false);
    let port = fx.server.port;
    let text = trajectory("chat-1", 3);
    assert_eq!(chats(port, "PUT", "/chat-1", &text).status, 200);
    let file = fx.ws().join(".palaver/chats/chat-1.json");
    assert_eq!(std::fs::read_to_string(&file).expect("written"), text);
    let ignore = std::fs::read_to_string(fx.ws().join(".palaver/.gitignore")).expect("gitignore");
    assert!(ignore.lines().any(|l| l == "*"), "{ignore}");
    let again = trajectory("chat-1", 5);
    assert_eq!(chats(port, "PUT", "/chat-1", &again).status, 200);
    let read = chats(port, "GET", "/chat-1", "");
    assert_eq!(read.status, 200);
    assert_eq!(read.body["messages"].as_array().map(Vec::len), Some(5));
    let listing = chats(port, "GET", "", "").body;
    assert_eq!(listing["enabled"], true);
    assert_eq!(listing["chats"][0]["id"], "chat-1");
    assert_eq!(listing["chats"][0]["bytes"], again.len());
    let leftovers: Vec<String> = std::fs::read_dir(fx.ws().join(".palaver/chats"))
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    assert_eq!(
        leftovers,
        vec!["chat-1.json".to_string()],
        "no temporary file left"
    );
    assert_eq!(chats(port, "DELETE", "/chat-1", "").status, 204);
    assert!(!file.exists());
    assert_eq!(chats(port, "GET", "/chat-1", "").status, 404);
}

/// A browser writes with `If-Match` (the copy it wrote last) or `If-None-Match: *` (a first
/// copy): a copy changed elsewhere is never overwritten (412), and the user's choice (no
/// precondition) replaces it.
#[test]
fn a_copy_changed_elsewhere_is_not_overwritten() {
    let fx = fixture("copy-cas", false);
    let port = fx.server.port;
    let first = chats_with(
        port,
        "PUT",
        "/c1",
        "If-None-Match: *\r\n",
        &trajectory("c1", 1),
    );
    assert_eq!(first.status, 200);
    let hash = first.body["hash"].as_str().expect("hash").to_string();
    let read = chats(port, "GET", "/c1", "");
    assert!(
        read.head.contains(&format!("x-palaver-hash: {hash}")),
        "{}",
        read.head
    );
    assert_eq!(
        chats_with(
            port,
            "PUT",
            "/c1",
            "If-None-Match: *\r\n",
            &trajectory("c1", 2)
        )
        .status,
        412,
        "a second first copy"
    );
    let second = chats_with(
        port,
        "PUT",
        "/c1",
        &format!("If-Match: {hash}\r\n"),
        &trajectory("c1", 2),
    );
    assert_eq!(second.status, 200, "{:?}", second.body);
    // Another browser (or a person) changes the file.
    std::fs::write(fx.ws().join(".palaver/chats/c1.json"), trajectory("c1", 7)).expect("edit");
    let stale = chats_with(
        port,
        "PUT",
        "/c1",
        &format!(
            "If-Match: {}\r\n",
            second.body["hash"].as_str().unwrap_or("")
        ),
        &trajectory("c1", 3),
    );
    assert_eq!(stale.status, 412);
    assert_eq!(stale.body["error"]["kind"], "conflict");
    assert_eq!(
        chats(port, "GET", "/c1", "").body["messages"]
            .as_array()
            .map(Vec::len),
        Some(7),
        "kept"
    );
    assert_eq!(
        chats(port, "PUT", "/c1", &trajectory("c1", 3)).status,
        200,
        "the user's choice replaces it"
    );
}

#[test]
fn bad_ids_and_non_trajectories_are_refused_with_a_reason() {
    let fx = fixture("copy-bad", false);
    let port = fx.server.port;
    // A subagent's chat (`{parent}~{call}`) is a chat like any other.
    let child = "chat-1~call_7";
    assert_eq!(
        chats(port, "PUT", &format!("/{child}"), &trajectory(child, 2)).status,
        200
    );
    assert!(fx
        .ws()
        .join(format!(".palaver/chats/{child}.json"))
        .exists());
    for id in ["..", ".hidden", "a%2Fb", "a b", "~home", "a~%2F"] {
        let reply = chats(port, "PUT", &format!("/{id}"), &trajectory(id, 1));
        assert!(
            reply.status == 400 || reply.status == 404,
            "{id}: {}",
            reply.status
        );
    }
    let reply = chats(port, "PUT", "/ok", "{\"messages\": 3}");
    assert_eq!(reply.status, 400);
    assert_eq!(reply.body["error"]["kind"], "bad_trajectory");
    let reply = chats(port, "PUT", "/ok", &trajectory("other", 1));
    assert_eq!(reply.status, 400, "a trajectory under another chat's id");
    assert_eq!(chats(port, "PUT", "/ok", "not json").status, 400);
    assert!(!fx.ws().join(".palaver/chats/ok.json").exists());
}

#[test]
fn a_symlinked_palaver_dir_or_copy_is_refused_and_nothing_outside_is_touched() {
    let fx = fixture("copy-link", false);
    let port = fx.server.port;
    let outside = fx.root.join("outside");
    std::fs::create_dir_all(outside.join("chats")).expect("outside");
    std::os::unix::fs::symlink(&outside, fx.ws().join(".palaver")).expect("symlink");
    let reply = chats(port, "PUT", "/c1", &trajectory("c1", 1));
    assert_eq!(reply.status, 403, "{:?}", reply.body);
    assert_eq!(reply.body["error"]["kind"], "symlink_escape");
    assert!(
        std::fs::read_dir(outside.join("chats"))
            .expect("dir")
            .next()
            .is_none(),
        "nothing written outside"
    );
    assert_eq!(
        chats(port, "GET", "", "").status,
        403,
        "the listing refuses it too"
    );

    std::fs::remove_file(fx.ws().join(".palaver")).expect("unlink");
    assert_eq!(chats(port, "PUT", "/c1", &trajectory("c1", 1)).status, 200);
    let secret = outside.join("secret.json");
    std::fs::write(&secret, trajectory("c2", 1)).expect("secret");
    std::os::unix::fs::symlink(&secret, fx.ws().join(".palaver/chats/c2.json")).expect("link");
    assert_eq!(
        chats(port, "GET", "/c2", "").status,
        403,
        "a copy that is a symlink is not read"
    );
    assert_eq!(
        chats(port, "PUT", "/c2", &trajectory("c2", 2)).status,
        403,
        "nor written through"
    );
    assert_eq!(
        std::fs::read_to_string(&secret).expect("kept"),
        trajectory("c2", 1)
    );
    let listing = chats(port, "GET", "", "").body;
    assert_eq!(listing["chats"].as_array().map(Vec::len), Some(1));
    assert!(
        listing["skipped"][0]
            .as_str()
            .is_some_and(|s| s.contains("c2.json")),
        "{listing}"
    );
}

#[test]
fn a_fifo_or_a_huge_copy_is_refused_without_hanging() {
    let fx = fixture("copy-fifo", false);
    let port = fx.server.port;
    assert_eq!(chats(port, "PUT", "/c1", &trajectory("c1", 1)).status, 200);
    let fifo = fx.ws().join(".palaver/chats/f1.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let reply = chats(port, "GET", "/f1", "");
    assert_eq!(reply.status, 409, "{:?}", reply.body);
    assert_eq!(reply.body["error"]["kind"], "not_a_regular_file");
    let huge = std::fs::File::create(fx.ws().join(".palaver/chats/h1.json")).expect("huge");
    huge.set_len(palaver::proxy::chat_files::MAX_FILE + 1)
        .expect("sparse");
    let reply = chats(port, "GET", "/h1", "");
    assert_eq!(reply.status, 413);
    assert_eq!(reply.body["error"]["kind"], "too_large");
}

#[test]
fn the_models_write_tools_cannot_touch_the_workspace_copy() {
    let fx = fixture("copy-tools", false);
    let port = fx.server.port;
    assert_eq!(chats(port, "PUT", "/c1", &trajectory("c1", 1)).status, 200);
    let reply = tool(
        port,
        "write_file",
        json!({"path": ".palaver/chats/c1.json", "content": "{}"}),
    );
    assert_ne!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(
        std::fs::read_to_string(fx.ws().join(".palaver/chats/c1.json")).expect("kept"),
        trajectory("c1", 1)
    );
}

#[test]
fn no_workspace_copy_turns_it_off() {
    let dir = temp_dir("copy-off");
    let ws = dir.0.join("ws");
    let config = ServeConfig {
        workspace_copy: false,
        ..config_for(&dir, false)
    };
    let server = start_with(config, dir);
    let reply = chats(server.port, "PUT", "/c1", &trajectory("c1", 1));
    assert_eq!(reply.status, 404);
    assert_eq!(reply.body["error"]["kind"], "workspace_copy_off");
    assert_eq!(chats(server.port, "GET", "", "").body["enabled"], false);
    assert!(!ws.join(".palaver").exists());
}

#[test]
fn the_workspace_copy_needs_the_token() {
    let fx = fixture("copy-token", false);
    let reply = request(
        fx.server.port,
        "PUT",
        "/api/chats/c1",
        "",
        &trajectory("c1", 1),
    );
    assert_eq!(reply.status, 401);
    assert!(!fx.ws().join(".palaver").exists());
}
