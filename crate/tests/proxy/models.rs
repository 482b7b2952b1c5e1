//! `/models/` (issue 16, SECURITY F9): the GGUF files of the model in the page, served beside the
//! app with ranges (a cut download resumes), behind the token, readable by the allowed origins
//! only, only regular `*.gguf` files directly in the folder (no symlink, no dotfile), never from a
//! folder the model can write; and the app cross-origin isolated (COOP + COEP) so the model runs
//! on threads.

use crate::support::{config_for, raw, start_with, temp_dir, TempDir, TOKEN};
use palaver::proxy::{Limits, ServeConfig, APP_CSP, MODEL_WORKER_CSP, MODEL_WORKER_PATH};

fn models_server(name: &str, origins: &[&str]) -> (crate::support::Server, Vec<u8>) {
    let dir: TempDir = temp_dir(name);
    let models = dir.0.join("models");
    std::fs::create_dir_all(&models).unwrap_or_default();
    let bytes: Vec<u8> = b"GGUF"
        .iter()
        .copied()
        .chain((0..4096u32).map(|i| i as u8))
        .collect();
    std::fs::write(models.join("tiny.gguf"), &bytes).unwrap_or_default();
    // F9: what is not a plain model file directly in the folder is never served.
    std::fs::write(models.join(".hidden.gguf"), b"GGUF hidden").unwrap_or_default();
    std::fs::write(models.join("notes.txt"), b"not a model").unwrap_or_default();
    std::os::unix::fs::symlink("/etc/passwd", models.join("passwd.gguf")).unwrap_or_default();
    std::os::unix::fs::symlink("/etc", models.join("etc")).unwrap_or_default();
    std::fs::create_dir_all(models.join("sub")).unwrap_or_default();
    std::fs::write(models.join("sub/inner.gguf"), b"GGUF inner").unwrap_or_default();
    let config = ServeConfig {
        models: Some(models),
        allowed_origins: origins.iter().map(|o| o.to_string()).collect(),
        ..config_for(&dir, false)
    };
    (start_with(config, dir), bytes)
}

#[test]
fn models_are_served_with_ranges_and_the_app_is_cross_origin_isolated() {
    let (server, bytes) = models_server("models-serve", &["chrome-extension://abc"]);
    let port = server.port;
    let anonymous = |path: &str, extra: &str| {
        raw(
            port,
            &format!(
                "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{extra}Connection: close\r\n\r\n"
            ),
        )
    };
    let get = |path: &str, extra: &str| {
        anonymous(path, &format!("Authorization: Bearer {TOKEN}\r\n{extra}"))
    };
    // F9: the token, as for the API.
    let (status, head, _) = anonymous("/models/tiny.gguf", "");
    assert_eq!(status, 401, "{head}");
    for path in [
        "/models/passwd.gguf",
        "/models/etc/passwd",
        "/models/.hidden.gguf",
        "/models/notes.txt",
        "/models/sub/inner.gguf",
        "/models/sub%2finner.gguf",
        "/models/%2e%2e%2fws%2fsub%2ffile.txt",
        "/models/",
    ] {
        let (status, head, body) = get(path, "");
        assert_eq!(status, 404, "{path}: {head}");
        assert!(
            !String::from_utf8_lossy(&body).contains("root:"),
            "{path} served /etc/passwd"
        );
    }
    let (status, head, body) = get("/models/tiny.gguf", "");
    assert_eq!(status, 200, "{head}");
    assert_eq!(body, bytes, "the whole file");
    assert!(head.contains("accept-ranges: bytes"), "{head}");
    assert!(
        !head.contains("access-control-allow-origin"),
        "no CORS without an allowed origin: {head}"
    );
    let (status, head, body) = get("/models/tiny.gguf", "Range: bytes=4-9\r\n");
    assert_eq!(status, 206, "{head}");
    assert_eq!(
        body,
        bytes[4..10].to_vec(),
        "a range resumes a cut download"
    );
    let (_, head, _) = get("/models/tiny.gguf", "Origin: chrome-extension://abc\r\n");
    assert!(
        head.contains("access-control-allow-origin: chrome-extension://abc"),
        "{head}"
    );
    assert!(
        head.contains("access-control-expose-headers") && head.contains("content-range"),
        "{head}"
    );
    let (status, head, _) = get("/models/tiny.gguf", "Origin: https://evil.example\r\n");
    assert_eq!(status, 403, "another origin may not read: {head}");
    assert!(!head.contains("access-control-allow-origin"), "{head}");
    let (status, _, _) = get("/models/../ws/sub/file.txt", "");
    assert_ne!(status, 200, "no way out of the models folder");
    let (status, _, _) = get("/models/tiny.gguf", "Host: evil.example\r\n");
    assert_ne!(status, 200, "the Host guard covers /models too");
    let (_, head, _) = get("/", "");
    assert!(
        head.contains("cross-origin-opener-policy: same-origin"),
        "{head}"
    );
    assert!(
        head.contains("cross-origin-embedder-policy: credentialless"),
        "{head}"
    );
    assert!(
        head.contains(&format!("content-security-policy: {APP_CSP}")),
        "the app keeps its policy: {head}"
    );
    // The model worker's own capabilities: llama.cpp's workers start from blob: URLs under it; no
    // eval, and nothing but the app's connections.
    let (_, head, _) = get(MODEL_WORKER_PATH, "");
    assert!(
        head.contains(&format!("content-security-policy: {MODEL_WORKER_CSP}")),
        "{head}"
    );
    assert!(
        !MODEL_WORKER_CSP.contains("'unsafe-eval'") && APP_CSP.contains("worker-src 'self';"),
        "blob: workers only in the model worker"
    );
}

#[test]
fn a_models_folder_inside_the_workspace_is_refused() {
    let dir = temp_dir("models-inside");
    let config = ServeConfig {
        models: Some(dir.0.join("ws").join("sub")),
        ..config_for(&dir, false)
    };
    let refused = palaver::proxy::router(&config, 1, Limits::default()).err();
    assert!(
        refused
            .as_ref()
            .is_some_and(|e| e.to_string().contains("models")),
        "a model the agent could swap is refused: {refused:?}"
    );
}
