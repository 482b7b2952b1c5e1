//! `run_command` (only with `--allow-shell`): runs an argv — no shell interpreter — in the
//! workspace, with a scrubbed environment (provider keys and the proxy token never reach the
//! child), in its own process group that is killed whole at the timeout, and with an output cap.

use super::ToolReply;
use crate::proxy::workspace::Workspace;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

pub const OUTPUT_CAP: usize = 256 * 1024;
const DEFAULT_TIMEOUT_MS: u64 = 30_000;
const MAX_TIMEOUT_MS: u64 = 110_000;
/// The only variables a child inherits.
const KEPT_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "LC_ALL", "TERM"];

pub async fn run_command(ws: &Workspace, args: &Value) -> ToolReply {
    let argv: Vec<String> = match args.get("argv").and_then(Value::as_array) {
        Some(items) if !items.is_empty() && items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => {
            return ToolReply::refused(
                400,
                "invalid_arguments",
                "`argv` must be a non-empty array of strings".into(),
            )
        }
    };
    if argv.iter().any(|a| a.contains('\0')) {
        return ToolReply::refused(
            400,
            "invalid_arguments",
            "an argument contains a NUL byte".into(),
        );
    }
    let timeout = Duration::from_millis(
        args.get("timeout_ms")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TIMEOUT_MS)
            .clamp(1, MAX_TIMEOUT_MS),
    );
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
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
    command.process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return ToolReply::failed("spawn_failed", format!("cannot run `{}`: {e}", argv[0]))
        }
    };
    let pgid = child.id().map(|id| id as i32);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let collect = async {
        let (out, err) = tokio::join!(read_capped(stdout), read_capped(stderr));
        let status = child.wait().await;
        (out, err, status)
    };
    let outcome = tokio::time::timeout(timeout, collect).await;
    kill_group(pgid);
    match outcome {
        Ok(((out, out_cut), (err, err_cut), status)) => {
            let code = status.ok().and_then(|s| s.code());
            let truncated = out_cut || err_cut;
            let mut content = String::from_utf8_lossy(&out).to_string();
            if !err.is_empty() {
                content.push_str("\n[stderr]\n");
                content.push_str(&String::from_utf8_lossy(&err));
            }
            if truncated {
                content.push_str(&format!(
                    "\n[output truncated at {OUTPUT_CAP} bytes; the process group was stopped]"
                ));
            }
            let reply = json!({"exit_code": code, "truncated": truncated, "argv": argv});
            ToolReply {
                status: 200,
                is_error: code != Some(0) && !truncated,
                content,
                data: Some(reply),
                error: None,
            }
        }
        Err(_) => ToolReply::failed(
            "timeout",
            format!(
                "`{}` did not finish within {} ms; its whole process group was killed",
                argv[0],
                timeout.as_millis()
            ),
        ),
    }
}

/// Reads up to the cap; past it, stops reading (the group is then killed).
async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>) -> (Vec<u8>, bool) {
    let Some(mut reader) = reader else {
        return (Vec::new(), false);
    };
    let mut out = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match reader.read(&mut buffer).await {
            Ok(0) | Err(_) => return (out, false),
            Ok(n) => {
                let room = OUTPUT_CAP - out.len();
                out.extend_from_slice(&buffer[..n.min(room)]);
                if n >= room {
                    return (out, true);
                }
            }
        }
    }
}

/// Kills the child's whole process group (its children too), whatever state it is in.
fn kill_group(pgid: Option<i32>) {
    if let Some(pgid) = pgid.filter(|p| *p > 1) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}
