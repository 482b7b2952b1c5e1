//! Safe edits (issue 39) in git states people leave repositories in: a rebase stopped on a
//! conflict, and a superproject with a submodule. A shell command's changes are recorded and
//! restored there like anywhere else, and git's own state (HEAD, the index with its conflict
//! stages, the rebase in progress, the submodule's HEAD) is exactly as it was.

use super::checkpoints::{changes_of, git, restore};
use super::support::{config_for, request, start_with, temp_dir, TempDir, TOKEN};
use serde_json::json;
use std::path::Path;

/// `run_command` of `sh -c script`, named as chat `chat`'s call `call` (so it is recorded).
pub(crate) fn run(port: u16, chat: &str, call: &str, script: &str) {
    let headers = format!(
        "Authorization: Bearer {TOKEN}\r\nx-palaver-chat: {chat}\r\nx-palaver-call: {call}\r\n"
    );
    let body = json!({"argv": ["sh", "-c", script]}).to_string();
    let ran = request(port, "POST", "/api/tools/run_command", &headers, &body);
    assert_eq!(ran.body["is_error"], false, "{:?}", ran.body);
}

/// What git says about `repo` that no restore may change.
fn git_state(repo: &Path) -> Vec<String> {
    vec![
        git(repo, &["rev-parse", "HEAD"]),
        git(repo, &["ls-files", "--stage"]),
        git(repo, &["branch", "--list"]),
        git(repo, &["stash", "list"]),
        git(repo, &["status", "--porcelain"]),
    ]
}

/// `palaver serve` with a change store and the shell allowed.
fn recording(dir: &TempDir) -> palaver::proxy::ServeConfig {
    palaver::proxy::ServeConfig {
        checkpoints: Some(dir.0.join("store")),
        ..config_for(dir, true)
    }
}

/// The paths of the changes chat `c1` recorded, sorted.
fn changed_paths(port: u16) -> Vec<String> {
    let mut paths: Vec<String> = changes_of(port, "c1")
        .iter()
        .map(|c| c["path"].as_str().unwrap_or("").to_string())
        .collect();
    paths.sort();
    paths
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_restore_in_a_repository_stopped_mid_rebase_keeps_the_rebase_and_its_conflict() {
    let dir = temp_dir("mid-rebase");
    let ws = dir.0.join("ws");
    std::fs::write(ws.join("a.txt"), "base\n").unwrap_or_default();
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "base"]);
    git(&ws, &["checkout", "-qb", "topic"]);
    std::fs::write(ws.join("a.txt"), "topic\n").unwrap_or_default();
    git(&ws, &["commit", "-qam", "topic"]);
    git(&ws, &["checkout", "-q", "main"]);
    std::fs::write(ws.join("a.txt"), "main\n").unwrap_or_default();
    git(&ws, &["commit", "-qam", "main"]);
    git(&ws, &["checkout", "-q", "topic"]);
    git(&ws, &["rebase", "main"]);
    let conflicted = read(&ws.join("a.txt"));
    assert!(
        conflicted.contains("<<<<<<<") && ws.join(".git/rebase-merge").is_dir(),
        "the rebase stopped on a conflict: {conflicted}"
    );
    let before = git_state(&ws);
    let server = start_with(recording(&dir), dir);
    run(
        server.port,
        "c1",
        "call_fix",
        "printf 'resolved\\n' > a.txt && echo notes > notes.txt",
    );
    assert_eq!(changed_paths(server.port), ["a.txt", "notes.txt"]);

    let done = restore(server.port, "c1", "call_fix", false);
    assert_eq!(done.body["skipped"], json!([]), "{:?}", done.body);
    assert_eq!(read(&ws.join("a.txt")), conflicted, "the conflict is back");
    assert!(!ws.join("notes.txt").exists(), "the created file is gone");
    assert_eq!(git_state(&ws), before, "git's state is as it was");
    assert!(ws.join(".git/rebase-merge").is_dir(), "the rebase goes on");
}

#[test]
fn a_change_inside_a_submodule_is_restored_and_both_repositories_keep_their_state() {
    let dir = temp_dir("submodule");
    let origin = dir.0.join("lib-origin");
    std::fs::create_dir_all(&origin).unwrap_or_default();
    std::fs::write(origin.join("lib.txt"), "library\n").unwrap_or_default();
    git(&origin, &["init", "-q", "-b", "main"]);
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-qm", "lib"]);
    let ws = dir.0.join("ws");
    std::fs::write(ws.join("app.txt"), "app\n").unwrap_or_default();
    git(&ws, &["init", "-q", "-b", "main"]);
    let origin_path = origin.to_string_lossy().to_string();
    let added = [
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        &origin_path,
        "lib",
    ];
    git(&ws, &added);
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "app with lib"]);
    assert_eq!(read(&ws.join("lib/lib.txt")), "library\n", "the submodule");
    let lib = ws.join("lib");
    let (app_state, lib_state) = (git_state(&ws), git_state(&lib));
    let gitlink = read(&lib.join(".git"));
    let server = start_with(recording(&dir), dir);
    run(
        server.port,
        "c1",
        "call_lib",
        "echo patched > lib/lib.txt && echo new > lib/new.txt && echo app2 > app.txt",
    );
    assert_eq!(
        changed_paths(server.port),
        ["app.txt", "lib/lib.txt", "lib/new.txt"]
    );

    let done = restore(server.port, "c1", "call_lib", false);
    assert_eq!(done.body["skipped"], json!([]), "{:?}", done.body);
    assert_eq!(read(&lib.join("lib.txt")), "library\n");
    assert!(!lib.join("new.txt").exists());
    assert_eq!(read(&ws.join("app.txt")), "app\n");
    assert_eq!(read(&lib.join(".git")), gitlink, "the submodule's link");
    assert_eq!((git_state(&ws), git_state(&lib)), (app_state, lib_state));
}
