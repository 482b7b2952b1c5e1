//! Safe edits (issue 39) through the real server: a write or edit the page names (chat and call)
//! keeps the file's earlier content outside the workspace; a restore puts the chat's changes from
//! a call on back — a file the user changed since is listed and skipped unless confirmed, a file
//! the agent created is removed, and the restore is itself a change that can be turned back.

use super::support::{config_for, request, start_with, temp_dir, Reply, TOKEN};
use serde_json::{json, Value};

fn named_tool(port: u16, chat: &str, call: &str, name: &str, args: Value) -> Reply {
    let headers = format!(
        "Authorization: Bearer {TOKEN}\r\nx-palaver-chat: {chat}\r\nx-palaver-call: {call}\r\n"
    );
    request(
        port,
        "POST",
        &format!("/api/tools/{name}"),
        &headers,
        &args.to_string(),
    )
}

fn restore(port: u16, chat: &str, call: &str, force: bool) -> Reply {
    let body = json!({"chat_id": chat, "call_id": call, "force": force}).to_string();
    request(
        port,
        "POST",
        "/api/changes/restore",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        &body,
    )
}

#[test]
fn a_chats_changes_are_restored_from_a_call_on_and_a_users_edit_is_never_overwritten_unasked() {
    let dir = temp_dir("checkpoints");
    let store = dir.0.join("store");
    let ws = dir.0.join("ws");
    std::fs::write(ws.join("notes.txt"), "one\n").unwrap_or_default();
    std::fs::write(ws.join("keep.txt"), "mine\n").unwrap_or_default();
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(store.clone()),
        ..config_for(&dir, false)
    };
    let server = start_with(config, dir);
    let port = server.port;
    let read = |path: &str| std::fs::read_to_string(ws.join(path)).ok();

    let wrote = named_tool(
        port,
        "c1",
        "call_1",
        "write_file",
        json!({"path": "notes.txt", "content": "two\n"}),
    );
    assert_eq!(wrote.body["is_error"], false, "{:?}", wrote.body);
    named_tool(
        port,
        "c1",
        "call_2",
        "edit_file",
        json!({"path": "notes.txt", "old_text": "two", "new_text": "three"}),
    );
    named_tool(
        port,
        "c1",
        "call_3",
        "write_file",
        json!({"path": "new/made.txt", "content": "made\n"}),
    );
    named_tool(
        port,
        "c1",
        "call_4",
        "write_file",
        json!({"path": "keep.txt", "content": "agent\n"}),
    );
    // Another chat's write is not this chat's to restore.
    named_tool(
        port,
        "c2",
        "call_9",
        "write_file",
        json!({"path": "other.txt", "content": "other\n"}),
    );
    assert!(
        store.join("changes.jsonl").exists() && !ws.join(".palaver/checkpoints").exists(),
        "kept outside the workspace"
    );

    let listed = request(
        port,
        "GET",
        "/api/changes?chat=c1",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        "",
    );
    let calls: Vec<&str> = listed.body["changes"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["call_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(calls, ["call_1", "call_2", "call_3", "call_4"]);
    let stats: Vec<(u64, u64)> = listed.body["changes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    (
                        c["added"].as_u64().unwrap_or(99),
                        c["removed"].as_u64().unwrap_or(99),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        stats,
        [(1, 1), (1, 1), (1, 0), (1, 1)],
        "lines added and removed per change"
    );

    // The user edits keep.txt after the agent did.
    std::fs::write(ws.join("keep.txt"), "user's own\n").unwrap_or_default();
    let done = restore(port, "c1", "call_2", false);
    assert_eq!(done.status, 200, "{:?}", done.body);
    assert_eq!(done.body["restored"], json!(["new/made.txt", "notes.txt"]));
    assert_eq!(done.body["skipped"][0]["path"], "keep.txt");
    assert!(done.body["skipped"][0]["reason"]
        .as_str()
        .unwrap_or("")
        .contains("changed since the agent wrote it"));
    assert_eq!(
        read("notes.txt").as_deref(),
        Some("two\n"),
        "back to before call_2"
    );
    assert_eq!(
        read("new/made.txt"),
        None,
        "a file the agent created is removed"
    );
    assert_eq!(
        read("keep.txt").as_deref(),
        Some("user's own\n"),
        "the user's edit stays"
    );
    assert_eq!(
        read("other.txt").as_deref(),
        Some("other\n"),
        "another chat's change stays"
    );

    // Confirmed: the user's edit is overwritten too; then the whole chat goes back to the start.
    let forced = restore(port, "c1", "call_1", true);
    assert_eq!(forced.body["restored"], json!(["keep.txt", "notes.txt"]));
    assert_eq!(read("notes.txt").as_deref(), Some("one\n"));
    assert_eq!(read("keep.txt").as_deref(), Some("mine\n"));

    // A restore is a change too: turned back, the files are as before it.
    let undo = restore(port, "c1", "restore:call_1", false);
    assert_eq!(
        undo.body["restored"],
        json!(["keep.txt", "notes.txt"]),
        "{:?}",
        undo.body
    );
    assert_eq!(read("notes.txt").as_deref(), Some("two\n"));
    assert_eq!(read("keep.txt").as_deref(), Some("user's own\n"));

    // Bad input: a call with no recorded change, and a body that is not a restore.
    let unknown = restore(port, "c1", "nope", false);
    assert_eq!(unknown.status, 404);
    assert!(unknown.body["content"]
        .as_str()
        .unwrap_or("")
        .contains("No change of this chat is recorded"));
    let bad = request(
        port,
        "POST",
        "/api/changes/restore",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        "[1]",
    );
    assert_eq!(bad.status, 400);
}

#[test]
fn a_file_replaced_by_a_fifo_before_the_restore_is_skipped_with_a_reason() {
    let dir = temp_dir("checkpoints-fifo");
    let store = dir.0.join("store");
    let ws = dir.0.join("ws");
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(store),
        ..config_for(&dir, false)
    };
    let server = start_with(config, dir);
    named_tool(
        server.port,
        "c1",
        "call_1",
        "write_file",
        json!({"path": "pipe", "content": "x\n"}),
    );
    let _ = std::fs::remove_file(ws.join("pipe"));
    let made = std::process::Command::new("mkfifo")
        .arg(ws.join("pipe"))
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(made, "mkfifo");
    let done = restore(server.port, "c1", "call_1", true);
    assert_eq!(done.body["restored"], json!([]), "{:?}", done.body);
    assert!(
        done.body["skipped"][0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("not a regular file"),
        "{:?}",
        done.body
    );
}
