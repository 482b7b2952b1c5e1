//! Safe edits (issue 39) at their limits: a write over a file too large to keep, and a store that
//! cannot be written, are refused with a sentence — and the file is left as it was, so nothing is
//! changed that could not be turned back.

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
