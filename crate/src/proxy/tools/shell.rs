//! `run_command` (only with `--allow-shell`): runs an argv — no shell interpreter — in the
//! workspace, with a scrubbed environment (provider keys and the pairing token never reach the
//! child), under the process reaper (`proxy::reaper`: every descendant, `setsid` ones included,
//! is killed at the timeout, when the client leaves, and when the server dies), in its own
//! process group, and with an output cap. A timeout reports the output seen until then.
//! `run_streaming` sends the output as NDJSON lines while the program runs.

use super::{ToolCapabilities, ToolReply};
use crate::proxy::reaper;
use crate::proxy::workspace::Workspace;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

pub const OUTPUT_CAP: usize = 256 * 1024;
const DEFAULT_TIMEOUT_MS: u64 = 30_000;
const MAX_TIMEOUT_MS: u64 = 110_000;
/// How long the output of a killed group may take to drain.
const KILL_GRACE: Duration = Duration::from_secs(2);
/// The only variables a child inherits.
const KEPT_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "LC_ALL", "TERM"];

fn parse_argv(args: &Value) -> Result<Vec<String>, ToolReply> {
    let argv: Vec<String> = match args.get("argv").and_then(Value::as_array) {
        Some(items) if !items.is_empty() && items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => {
            return Err(ToolReply::refused(
                400,
                "invalid_arguments",
                "`argv` must be a non-empty array of strings".into(),
            ))
        }
    };
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(ToolReply::refused(
            400,
            "invalid_arguments",
            "an argument contains a NUL byte".into(),
        ));
    }
    Ok(argv)
}

/// Spawns argv in the workspace: no shell, scrubbed environment, its own process group, under
/// the reaper when its capabilities name one.
fn spawn(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    argv: &[String],
) -> Result<tokio::process::Child, ToolReply> {
    let mut command = match &capabilities.reaper {
        Some(reaper) => {
            // The reaper would only report a missing program through its exit code.
            if !program_exists(ws, &argv[0]) {
                return Err(ToolReply::failed(
                    "spawn_failed",
                    format!(
                        "cannot run `{}`: no such program (PATH or workspace)",
                        argv[0]
                    ),
                ));
            }
            let mut command = Command::new(reaper);
            command.args(reaper::reap_args(argv));
            command
        }
        None => {
            let mut command = Command::new(&argv[0]);
            command.args(&argv[1..]);
            command
        }
    };
    command
        .current_dir(ws.root())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for key in KEPT_ENV {
        if let Ok(value) = std::env::var(key) {
            command.env(key, value);
        }
    }
    // A program is found on PATH's absolute entries only (a `.` entry would run the workspace's).
    if let Some(path) = crate::proxy::process_env::absolute_path_var() {
        command.env("PATH", path);
    }
    command.process_group(0);
    reaper::orphans::spawn_registered(|| {
        let child = command.spawn()?;
        let pid = child.id();
        Ok((child, pid))
    })
    .map_err(|e| ToolReply::failed("spawn_failed", format!("cannot run `{}`: {e}", argv[0])))
}

/// Whether `program` names an executable file: by path (relative to the workspace) when it has a
/// `/`, else in the `PATH` the child gets.
fn program_exists(ws: &Workspace, program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &std::path::Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(&ws.root().join(program));
    }
    crate::proxy::process_env::absolute_path_var()
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program))))
}

fn timeout_of(args: &Value) -> Duration {
    Duration::from_millis(
        args.get("timeout_ms")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS),
    )
}

/// What one output stream gave so far, and whether the cap cut it.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    cut: bool,
}

type Capture = std::sync::Mutex<Captured>;

fn taken(capture: Capture) -> Captured {
    capture.into_inner().unwrap_or_else(|p| p.into_inner())
}

pub async fn run_command(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    args: &Value,
) -> ToolReply {
    let argv = match parse_argv(args) {
        Ok(argv) => argv,
        Err(reply) => return reply,
    };
    let timeout = timeout_of(args);
    let mut child = match spawn(ws, capabilities, &argv) {
        Ok(child) => child,
        Err(reply) => return reply,
    };
    let pgid = child.id().map(|id| id as i32);
    // Killed on every way out, including a dropped request (client gone, request deadline): the
    // child's own children must not outlive it (A27, A59).
    let _group = GroupKiller(pgid);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    // The output lives outside the reading future, so a timeout still reports what was seen.
    let (out, err) = (Capture::default(), Capture::default());
    let code = {
        let collect = async {
            tokio::join!(
                read_capped(stdout, &out, pgid),
                read_capped(stderr, &err, pgid)
            );
            child.wait().await.ok().map(|s| s.code())
        };
        tokio::pin!(collect);
        tokio::select! {
            code = &mut collect => Some(code.flatten()),
            () = tokio::time::sleep(timeout) => {
                kill_group(pgid);
                // The tree is dead, so its pipes close; what they held still drains.
                let _ = tokio::time::timeout(KILL_GRACE, &mut collect).await;
                None
            }
        }
    };
    let (out, err) = (taken(out), taken(err));
    match code {
        Some(code) => finished(&argv, out, err, code),
        None => timed_out(&argv, timeout, &out, &err),
    }
}

/// The reply of a program that ended by itself (or was stopped at the output cap).
fn finished(argv: &[String], out: Captured, err: Captured, code: Option<i32>) -> ToolReply {
    let truncated = out.cut || err.cut;
    let (out, err) = (out.bytes, err.bytes);
    let mut content = joined_output(&out, &err);
    if truncated {
        content.push_str(&format!(
            "\n[output truncated at {OUTPUT_CAP} bytes; the process group was stopped]"
        ));
    }
    ToolReply {
        status: 200,
        is_error: code != Some(0) && !truncated,
        content,
        data: Some(json!({"exit_code": code, "truncated": truncated, "argv": argv})),
        error: None,
        parts: Vec::new(),
    }
}

/// The reply of a program killed at its deadline, with what it printed until then.
fn timed_out(argv: &[String], timeout: Duration, out: &Captured, err: &Captured) -> ToolReply {
    let mut content = format!(
        "`{}` did not finish within {} ms; it and every process it started were killed",
        argv[0],
        timeout.as_millis()
    );
    let output = joined_output(&out.bytes, &err.bytes);
    if !output.is_empty() {
        content.push_str("\n[output before the timeout]\n");
        content.push_str(&output);
    }
    let mut reply = ToolReply::failed("timeout", content);
    reply.data = Some(json!({"exit_code": null, "timed_out": true, "argv": argv}));
    reply
}

fn joined_output(out: &[u8], err: &[u8]) -> String {
    let mut content = String::from_utf8_lossy(out).to_string();
    if !err.is_empty() {
        content.push_str("\n[stderr]\n");
        content.push_str(&String::from_utf8_lossy(err));
    }
    content
}

/// Reads up to the cap; at the cap the whole process group is killed, so a producer that
/// ignores `SIGPIPE` cannot keep the call open until its timeout.
async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>, into: &Capture, pgid: Option<i32>) {
    let Some(mut reader) = reader else {
        return;
    };
    let mut buffer = [0u8; 8192];
    loop {
        let n = match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut captured = into.lock().unwrap_or_else(|p| p.into_inner());
        let room = OUTPUT_CAP - captured.bytes.len();
        captured.bytes.extend_from_slice(&buffer[..n.min(room)]);
        if n >= room {
            captured.cut = true;
            drop(captured);
            kill_group(pgid);
            return;
        }
    }
}

/// Kills a process group when dropped.
struct GroupKiller(Option<i32>);

impl Drop for GroupKiller {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Kills the child (the reaper) with every descendant — `setsid` ones too, which the reaper
/// holds as their subreaper — then its whole process group, whatever state they are in.
fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid.filter(|p| *p > 1) {
        reaper::kill_tree(pgid);
        reaper::orphans::forget(pgid);
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Starts the program and streams `{"type":"line","stream","text"}` lines, then one
/// `{"type":"result", content, data, is_error}` line. Per-stream output is capped.
pub fn run_streaming(
    ws: &Workspace,
    capabilities: &ToolCapabilities,
    args: &Value,
) -> Result<tokio::sync::mpsc::Receiver<String>, ToolReply> {
    let argv = parse_argv(args)?;
    let timeout = timeout_of(args);
    let mut child = spawn(ws, capabilities, &argv)?;
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
    tokio::spawn(async move {
        let pgid = child.id().map(|id| id as i32);
        // Also when the task itself is dropped (the runtime shuts down).
        let _group = GroupKiller(pgid);
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let pump = async {
            let (out_cut, err_cut) = tokio::join!(
                forward_lines(stdout, "stdout", &tx, pgid),
                forward_lines(stderr, "stderr", &tx, pgid)
            );
            (
                out_cut || err_cut,
                child.wait().await.ok().and_then(|s| s.code()),
            )
        };
        // A heartbeat line each second makes a vanished client visible: the write fails, the
        // response body is dropped, the channel closes, and the process group is killed.
        let heartbeat = async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if tx
                    .send("{\"type\":\"heartbeat\"}\n".to_string())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        };
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(timeout, pump) => Some(outcome),
            () = tx.closed() => None,
            () = heartbeat => None,
        };
        kill_group(pgid);
        let Some(outcome) = outcome else { return };
        let result = match outcome {
            Ok((truncated, code)) => {
                json!({"type": "result", "is_error": code != Some(0) && !truncated, "content": format!("exit code {}", code.map_or("none".into(), |c| c.to_string())), "data": {"exit_code": code, "truncated": truncated, "argv": argv}})
            }
            Err(_) => {
                json!({"type": "result", "is_error": true, "content": format!("`{}` did not finish within {} ms; its whole process group was killed", argv[0], timeout.as_millis()), "error": {"kind": "timeout"}})
            }
        };
        let _ = tx.send(format!("{result}\n")).await;
    });
    Ok(rx)
}

/// Forwards one stream line by line; returns whether the cap cut it. A gone client kills the group.
async fn forward_lines<R: AsyncRead + Unpin>(
    reader: Option<R>,
    stream: &str,
    tx: &tokio::sync::mpsc::Sender<String>,
    pgid: Option<i32>,
) -> bool {
    use tokio::io::AsyncBufReadExt;
    let Some(reader) = reader else { return false };
    let mut reader = tokio::io::BufReader::new(reader.take(OUTPUT_CAP as u64));
    let mut total = 0usize;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
        let text = String::from_utf8_lossy(&line)
            .trim_end_matches(['\n', '\r'])
            .to_string();
        if tx
            .send(format!(
                "{}\n",
                json!({"type": "line", "stream": stream, "text": text})
            ))
            .await
            .is_err()
        {
            kill_group(pgid);
            return false;
        }
    }
    let truncated = total >= OUTPUT_CAP;
    if truncated {
        let marker = json!({"type": "line", "stream": stream, "text": format!("[output truncated at {OUTPUT_CAP} bytes]")});
        let _ = tx.send(format!("{marker}\n")).await;
        kill_group(pgid);
    }
    truncated
}
