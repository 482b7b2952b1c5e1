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

pub(crate) fn restore(port: u16, chat: &str, call: &str, force: bool) -> Reply {
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

pub(crate) fn git(ws: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap_or_else(|e| panic!("git: {e}"));
    String::from_utf8_lossy(&out.stdout).to_string()
}

pub(crate) fn changes_of(port: u16, chat: &str) -> Vec<Value> {
    let listed = request(
        port,
        "GET",
        &format!("/api/changes?chat={chat}"),
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        "",
    );
    listed.body["changes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Issue 39: a shell command's changes — an edit by `sed -i`, a directory removed by `rm -rf`, a
/// file created, a dirty file put back by `git checkout` — are found by the scans around it (the
/// command streamed as the page runs it), listed under its call and restored, in a real git
/// repository whose HEAD, index and branches stay as they were.
#[test]
fn a_shell_commands_changes_in_a_git_repository_are_recorded_and_restored() {
    let dir = temp_dir("scan-git");
    let store = dir.0.join("store");
    let ws = dir.0.join("ws");
    std::fs::create_dir_all(ws.join("dir")).unwrap_or_default();
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap_or_default();
    std::fs::write(ws.join("b.txt"), "committed\n").unwrap_or_default();
    std::fs::write(ws.join("dir/x.txt"), "x\n").unwrap_or_default();
    std::fs::write(ws.join(".gitignore"), "build/\n").unwrap_or_default();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "start"]);
    std::fs::write(ws.join("b.txt"), "dirty, not committed\n").unwrap_or_default();
    let head = git(&ws, &["rev-parse", "HEAD"]);
    // What the index holds (git's own commands refresh its stat cache, so not its bytes).
    let index = git(&ws, &["ls-files", "--stage"]);
    let branches = git(&ws, &["branch", "--list"]);
    let status = git(&ws, &["status", "--porcelain"]);
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(store),
        ..config_for(&dir, true)
    };
    let server = start_with(config, dir);
    let port = server.port;
    let script = "sed -i s/one/uno/ a.txt && rm -rf dir && echo made > made.txt && mkdir -p build && echo ignored > build/out.o && git checkout -q -- b.txt";
    let headers = format!("Authorization: Bearer {TOKEN}\r\nAccept: application/x-ndjson\r\nx-palaver-chat: c1\r\nx-palaver-call: call_sh\r\n");
    let ran = request(
        port,
        "POST",
        "/api/tools/run_command",
        &headers,
        &json!({"argv": ["sh", "-c", script]}).to_string(),
    );
    assert_eq!(ran.status, 200, "{}", ran.head);
    let read = |path: &str| std::fs::read_to_string(ws.join(path)).ok();
    assert_eq!(
        read("a.txt").as_deref(),
        Some("uno\ntwo\n"),
        "the command ran"
    );

    let changes = changes_of(port, "c1");
    let mut seen: Vec<(String, bool, bool)> = changes
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap_or("").to_string(),
                c["before"].is_string(),
                c["after"].is_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("a.txt".into(), true, true),
            ("b.txt".into(), true, true),
            ("dir/x.txt".into(), true, false),
            ("made.txt".into(), false, true),
        ],
        "created, changed and deleted files are recorded; ignored ones are not: {changes:?}"
    );
    assert!(changes.iter().all(|c| c["call_id"] == "call_sh"));
    let a = changes
        .iter()
        .find(|c| c["path"] == "a.txt")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (a["added"].as_u64(), a["removed"].as_u64()),
        (Some(1), Some(1)),
        "{a}"
    );

    let restored = restore(port, "c1", "call_sh", false);
    let mut back: Vec<String> = restored.body["restored"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    back.sort();
    assert_eq!(
        back,
        ["a.txt", "b.txt", "dir/x.txt", "made.txt"],
        "{:?}",
        restored.body
    );
    assert_eq!(read("a.txt").as_deref(), Some("one\ntwo\n"));
    assert_eq!(
        read("b.txt").as_deref(),
        Some("dirty, not committed\n"),
        "the person's uncommitted work is back"
    );
    assert_eq!(read("dir/x.txt").as_deref(), Some("x\n"));
    assert_eq!(read("made.txt"), None, "a file the command made is removed");
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), head, "HEAD untouched");
    assert_eq!(
        git(&ws, &["ls-files", "--stage"]),
        index,
        "the index holds what it held"
    );
    assert_eq!(
        git(&ws, &["branch", "--list"]),
        branches,
        "branches untouched"
    );
    assert_eq!(
        git(&ws, &["status", "--porcelain"]).replace("?? build/\n", ""),
        status,
        "git sees the tree as before the command"
    );
}

/// A command that changes nothing records nothing, and a second scan reads only what moved.
#[test]
fn a_command_that_changes_nothing_records_nothing() {
    let dir = temp_dir("scan-still");
    let store = dir.0.join("store");
    std::fs::write(dir.0.join("ws/a.txt"), "one\n").unwrap_or_default();
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(store),
        ..config_for(&dir, true)
    };
    let server = start_with(config, dir);
    let ran = named_tool(
        server.port,
        "c1",
        "call_ls",
        "run_command",
        json!({"argv": ["ls"]}),
    );
    assert_eq!(ran.body["is_error"], false, "{:?}", ran.body);
    assert!(changes_of(server.port, "c1").is_empty());
    let touched = named_tool(
        server.port,
        "c1",
        "call_touch",
        "run_command",
        json!({"argv": ["touch", "a.txt"]}),
    );
    assert_eq!(touched.body["is_error"], false, "{:?}", touched.body);
    assert!(
        changes_of(server.port, "c1").is_empty(),
        "a new time with the same content is no change"
    );
}

fn changes_cli(data: &std::path::Path, ws: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_palaver"))
        .env("XDG_DATA_HOME", data)
        .arg("changes")
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `palaver changes list` and `prune` (issue 39): what was recorded survives the server (it is
/// on disk), is listed with when and what, and old changes are forgotten with the contents only
/// they named — a content a kept change still names stays.
#[test]
fn recorded_changes_are_listed_and_old_ones_pruned_from_the_command_line() {
    let dir = temp_dir("changes-cli");
    let ws = dir.0.join("ws");
    let data = dir.0.join("data");
    let folder = palaver::proxy::checkpoints::Checkpoints::folder_in(&data, &ws)
        .unwrap_or_else(|| panic!("a folder"));
    std::fs::create_dir_all(folder.join("objects")).unwrap_or_default();
    for (name, text) in [
        ("aaaa", "old before\n"),
        ("bbbb", "shared\n"),
        ("cccc", "new after\n"),
    ] {
        std::fs::write(folder.join("objects").join(name), text).unwrap_or_default();
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let log = [
        json!({"id": 1, "chat_id": "c1", "call_id": "call_old", "path": "old.txt", "before": "aaaa", "after": "bbbb", "added": 1, "removed": 1, "at_ms": now - 40 * 86_400_000}),
        json!({"id": 2, "chat_id": "c2", "call_id": "call_new", "path": "new.txt", "before": "bbbb", "after": "cccc", "added": 1, "removed": 1, "at_ms": now}),
    ]
    .iter()
    .map(|c| format!("{c}\n"))
    .collect::<String>();
    std::fs::write(folder.join("changes.jsonl"), log).unwrap_or_default();

    let (ok, listed) = changes_cli(&data, &ws, &["list"]);
    assert!(ok, "{listed}");
    assert!(
        listed.contains("#1")
            && listed.contains("old.txt  +1 −1")
            && listed.contains("chat c2  call call_new  new.txt"),
        "{listed}"
    );
    assert!(
        listed.contains("2 change(s) recorded") && listed.contains(" UTC"),
        "{listed}"
    );
    let (ok, refused) = changes_cli(&data, &ws, &["prune"]);
    assert!(!ok && refused.contains("say what to forget"), "{refused}");
    let (ok, pruned) = changes_cli(&data, &ws, &["prune", "--older-than-days", "30"]);
    assert!(
        ok && pruned.contains("forgot 1 change(s) and 1 kept content(s)"),
        "{pruned}"
    );
    assert!(
        !folder.join("objects/aaaa").exists(),
        "only the old change named it"
    );
    assert!(
        folder.join("objects/bbbb").exists() && folder.join("objects/cccc").exists(),
        "the kept change still names them"
    );
    let (ok, json_lines) = changes_cli(&data, &ws, &["list", "--json"]);
    assert!(
        ok && json_lines.lines().count() == 1 && json_lines.contains("\"call_new\""),
        "{json_lines}"
    );
}

/// "Revert this change" of one file (issue 39): only that file goes back; the call's other files
/// stay as the agent left them; a file the call did not change is refused with a sentence.
#[test]
fn one_file_of_a_turn_is_reverted_alone() {
    let dir = temp_dir("revert-one");
    let store = dir.0.join("store");
    let ws = dir.0.join("ws");
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(store),
        ..config_for(&dir, true)
    };
    std::fs::write(ws.join("a.txt"), "a\n").unwrap_or_default();
    std::fs::write(ws.join("b.txt"), "b\n").unwrap_or_default();
    let server = start_with(config, dir);
    let port = server.port;
    let ran = named_tool(
        port,
        "c1",
        "call_both",
        "run_command",
        json!({"argv": ["sh", "-c", "echo A > a.txt && echo B > b.txt"]}),
    );
    assert_eq!(ran.body["is_error"], false, "{:?}", ran.body);
    let body = json!({"chat_id": "c1", "call_id": "call_both", "path": "a.txt"}).to_string();
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let reverted = request(port, "POST", "/api/changes/restore", &auth, &body);
    assert_eq!(
        reverted.body["restored"],
        json!(["a.txt"]),
        "{:?}",
        reverted.body
    );
    let read = |path: &str| std::fs::read_to_string(ws.join(path)).unwrap_or_default();
    assert_eq!(
        (read("a.txt").as_str(), read("b.txt").as_str()),
        ("a\n", "B\n")
    );
    let body = json!({"chat_id": "c1", "call_id": "call_both", "path": "other.txt"}).to_string();
    let refused = request(port, "POST", "/api/changes/restore", &auth, &body);
    assert!(
        refused.body["content"]
            .as_str()
            .unwrap_or("")
            .contains("changed no file `other.txt`"),
        "{:?}",
        refused.body
    );
}

/// The diff view of a change (issue 39): both sides of a write are kept and served for the chat
/// that made it; another chat, or a hash no change names, gets a 404 with a sentence.
#[test]
fn both_sides_of_a_change_are_served_to_its_chat_only() {
    let dir = temp_dir("change-content");
    let store = dir.0.join("store");
    let ws = dir.0.join("ws");
    let config = palaver::proxy::ServeConfig {
        checkpoints: Some(store),
        ..config_for(&dir, false)
    };
    std::fs::write(ws.join("a.txt"), "old line\n").unwrap_or_default();
    let server = start_with(config, dir);
    let port = server.port;
    let args = json!({"path": "a.txt", "content": "new line\n"});
    named_tool(port, "c1", "call_1", "write_file", args);
    let auth = format!("Authorization: Bearer {TOKEN}\r\n");
    let listed = request(port, "GET", "/api/changes?chat=c1", &auth, "");
    let change = &listed.body["changes"][0];
    let side = |chat: &str, hash: &Value| {
        let path = format!(
            "/api/changes/content?chat={chat}&hash={}",
            hash.as_str().unwrap_or("")
        );
        request(port, "GET", &path, &auth, "")
    };
    assert_eq!(side("c1", &change["before"]).body["text"], "old line\n");
    assert_eq!(side("c1", &change["after"]).body["text"], "new line\n");
    let other = side("c2", &change["after"]);
    assert_eq!(other.status, 404, "{:?}", other.body);
    let unknown = side("c1", &json!("../changes.jsonl"));
    assert_eq!(unknown.status, 404, "{:?}", unknown.body);
}
