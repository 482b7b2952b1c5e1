//! Safe edits (issue 39) at their limits: a write over a file too large to keep, and a store that
//! cannot be written, are refused with a sentence — and the file is left as it was, so nothing is
//! changed that could not be turned back; and the scan skipped before a call when nothing moved
//! never misses what the user changed.

use super::support::{config_for, request, start_with, temp_dir, TOKEN};
use serde_json::{json, Value};

fn write(port: u16, path: &str, content: &str) -> Value {
    let headers = format!(
        "Authorization: Bearer {TOKEN}\r\nx-palaver-chat: c1\r\nx-palaver-call: call_1\r\n"
    );
    let body = json!({"path": path, "content": content}).to_string();
    request(port, "POST", "/api/tools/write_file", &headers, &body).body
}

#[test]
fn a_file_too_large_to_keep_is_not_overwritten() {
    let dir = temp_dir("too-large");
    let ws = dir.0.join("ws");
    let big = "x".repeat(5 * 1024 * 1024);
    std::fs::write(ws.join("big.log"), &big).unwrap_or_default();
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(dir.0.join("store")),
        ..config_for(&dir, false)
    };
    let server = start_with(config, dir);
    let reply = write(server.port, "big.log", "small\n");
    assert_eq!(reply["is_error"], true, "{reply}");
    let said = reply["content"].as_str().unwrap_or("");
    assert!(said.contains("earlier contents are kept up to"), "{said}");
    let now = std::fs::read_to_string(ws.join("big.log")).unwrap_or_default();
    assert_eq!(now.len(), big.len(), "the file is as it was");
}

#[test]
fn a_store_that_cannot_be_written_refuses_the_write_and_leaves_the_file() {
    let dir = temp_dir("store-unwritable");
    let ws = dir.0.join("ws");
    std::fs::write(ws.join("notes.txt"), "mine\n").unwrap_or_default();
    // The store's folder is a file: nothing can be kept in it.
    let store = dir.0.join("store");
    std::fs::write(&store, "not a folder").unwrap_or_default();
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(store),
        ..config_for(&dir, false)
    };
    let server = start_with(config, dir);
    let reply = write(server.port, "notes.txt", "overwritten\n");
    assert_eq!(reply["is_error"], true, "{reply}");
    let said = reply["content"].as_str().unwrap_or("");
    assert!(
        said.contains("cannot be written") && said.contains("The change was not made"),
        "{said}"
    );
    let now = std::fs::read_to_string(ws.join("notes.txt")).unwrap_or_default();
    assert_eq!(now, "mine\n");
}

fn run(port: u16, call: &str, script: &str) {
    super::checkpoints_git::run(port, "c1", call, script);
}

/// Between two commands the scan before the second may be skipped when the kernel saw nothing
/// move (`workspace_watch`): a user's edit between them — in a known folder, in a folder made
/// since, by a rename over the file as editors save — must still be the content the second
/// command's change is turned back to.
#[test]
fn what_the_user_changed_between_two_commands_is_what_a_restore_gives_back() {
    let dir = temp_dir("watched");
    let ws = dir.0.join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap_or_default();
    std::fs::write(ws.join("src/a.txt"), "original\n").unwrap_or_default();
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(dir.0.join("store")),
        ..config_for(&dir, true)
    };
    let server = start_with(config, dir);
    let port = server.port;
    let read = |path: &str| std::fs::read_to_string(ws.join(path)).unwrap_or_default();
    // Quiet runs: the watch covers every folder, so the next scan before may be skipped.
    for call in ["call_0", "call_1", "call_2"] {
        run(port, call, "true");
    }
    std::fs::write(ws.join("src/a.txt"), "the user's\n").unwrap_or_default();
    run(port, "call_3", "echo agent > src/a.txt");
    super::checkpoints::restore(port, "c1", "call_3", false);
    assert_eq!(
        read("src/a.txt"),
        "the user's\n",
        "an edit in a known folder"
    );

    run(port, "call_4", "true");
    run(port, "call_5", "true");
    std::fs::create_dir_all(ws.join("new")).unwrap_or_default();
    std::fs::write(ws.join("new/b.txt"), "made by the user\n").unwrap_or_default();
    run(port, "call_6", "echo agent > new/b.txt");
    super::checkpoints::restore(port, "c1", "call_6", false);
    assert_eq!(
        read("new/b.txt"),
        "made by the user\n",
        "a folder made since"
    );

    run(port, "call_7", "true");
    run(port, "call_8", "true");
    std::fs::write(ws.join("src/.a.txt.swp"), "saved\n").unwrap_or_default();
    std::fs::rename(ws.join("src/.a.txt.swp"), ws.join("src/a.txt")).unwrap_or_default();
    run(port, "call_9", "echo agent > src/a.txt");
    super::checkpoints::restore(port, "c1", "call_9", false);
    assert_eq!(read("src/a.txt"), "saved\n", "a save by rename");
}
