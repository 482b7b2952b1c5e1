//! The `palaver` binary's engine tools, run as a user would: `decode` on real transcripts and on
//! hostile input, `linearize` on a trajectory (a clear error on stderr, exit code 1, never a
//! panic).

use std::io::Write;
use std::process::{Command, Stdio};

fn decode(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    run("decode", args, stdin)
}

fn run(command: &str, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_palaver"))
        .arg(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run palaver: {e}"));
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin);
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("palaver did not finish: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn decode_prints_the_assembled_message() {
    let sse = crate::support::wire("openai-chat/parallel_tool_calls_gpt4o.sse").unwrap_or_default();
    let (code, out, err) = decode(&["--provider", "openai-chat"], sse.as_bytes());
    assert_eq!(code, 0, "stderr: {err}");
    let message: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"));
    assert_eq!(
        message["tool_calls"][1]["function"]["name"],
        "get_stock_price"
    );
    assert_eq!(message["finish_reason"], "tool_calls");
}

#[test]
fn decode_ops_prints_json_lines() {
    let sse = crate::support::wire("openai-chat/text_gpt4o.sse").unwrap_or_default();
    let (code, out, _) = decode(&["--provider", "openai-chat", "--ops"], sse.as_bytes());
    assert_eq!(code, 0);
    let ops: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect();
    assert!(ops.iter().any(|op| op["op"] == "append_content"));
    assert!(ops.iter().any(|op| op["op"] == "set_usage"));
}

#[test]
fn decode_rejects_malformed_json_with_its_offset() {
    let (code, _, err) = decode(
        &["--provider", "openai-chat"],
        b"data: {\"choices\":[]}\n\ndata: {not json\n\n",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("malformed openai-chat stream at byte 22"),
        "stderr: {err}"
    );
}

#[test]
fn decode_rejects_invalid_utf8_and_huge_lines() {
    let (code, _, err) = decode(
        &["--provider", "openai-chat"],
        b"data: {\"x\": \"\xff\xfe\"}\n\n",
    );
    assert_eq!(code, 1);
    assert!(err.contains("invalid UTF-8"), "stderr: {err}");
    let mut huge = b"data: \"".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 10 * 1024 * 1024));
    let (code, _, err) = decode(&["--provider", "openai-chat"], &huge);
    assert_eq!(code, 1);
    assert!(err.contains("8 MiB"), "stderr: {err}");
}

#[test]
fn decode_refuses_an_unknown_provider() {
    let (code, _, err) = decode(&["--provider", "nope"], b"");
    assert_eq!(code, 1);
    assert!(err.contains("unknown provider"), "stderr: {err}");
}

#[test]
fn linearize_prints_the_request_body_and_the_strength() {
    let trajectory = serde_json::json!({"id": "t", "title": "t", "model": "gpt-test", "messages": [
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}]},
        {"role": "diff", "tool_call_id": "c1", "content": "[]"},
        {"role": "plan", "content": "the plan", "plan": {"mode": "agent", "version": 1}},
        {"role": "user", "content": "x".repeat(40_000)},
    ]});
    let text = trajectory.to_string();
    let (code, out, err) = run("linearize", &["--provider", "anthropic"], text.as_bytes());
    assert_eq!(code, 0, "stderr: {err}");
    assert!(err.contains("compression strength: absent"), "{err}");
    let body: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(
        body["messages"][2]["content"][0]["type"], "tool_result",
        "a Refact diff is a tool result"
    );
    assert!(body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"] == "set_plan")));
    let (code, _, err) = run(
        "linearize",
        &["--provider", "openai-chat", "--n-ctx", "4000"],
        text.as_bytes(),
    );
    assert_eq!(code, 1);
    assert!(err.contains("the history needs about"), "{err}");
    let (code, _, err) = run(
        "linearize",
        &["--provider", "openai-chat"],
        b"{\"messages\": 7}",
    );
    assert_eq!(code, 1);
    assert!(err.contains("messages"), "{err}");
}
