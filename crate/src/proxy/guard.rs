//! The request guards of SPEC §9, in the order they run. On every request: the `Host` check
//! (DNS rebinding) and no proxy-style targets. On `/api/*`: `Sec-Fetch-Mode`/`Sec-Fetch-Dest`
//! (no `no-cors` script/image loads, no navigations), then `Origin` (absent, or exactly `palaver serve`'s
//! own or an `--allow-origin`; `null` refused), the CORS preflight, then the bearer token,
//! compared in constant time and accepted from the `Authorization` header only.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use subtle::ConstantTimeEq;

pub struct GuardConfig {
    pub port: u16,
    pub token: String,
    pub allowed_origins: Vec<String>,
}

impl GuardConfig {
    fn own_origins(&self) -> [String; 3] {
        [
            format!("http://127.0.0.1:{}", self.port),
            format!("http://localhost:{}", self.port),
            format!("http://[::1]:{}", self.port),
        ]
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        self.own_origins().iter().any(|o| o == origin)
            || self.allowed_origins.iter().any(|o| o == origin)
    }
}

/// A JSON error: `{"error": {"kind", "message"}}`, never HTML.
pub fn json_error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({"error": {"kind": kind, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

pub async fn check_host(
    State(config): State<Arc<GuardConfig>>,
    request: Request,
    next: Next,
) -> Response {
    let hosts: Vec<&HeaderValue> = request.headers().get_all(header::HOST).iter().collect();
    let allowed = [
        format!("127.0.0.1:{}", config.port),
        format!("localhost:{}", config.port),
        format!("[::1]:{}", config.port),
    ];
    let ok = matches!(hosts.as_slice(), [host] if host.to_str().is_ok_and(|h| allowed.iter().any(|a| a.eq_ignore_ascii_case(h))));
    if !ok {
        return json_error(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            "the Host header must be 127.0.0.1, localhost or [::1] with this port",
        );
    }
    if request.method() == Method::CONNECT
        || request.uri().scheme().is_some()
        || request.uri().authority().is_some()
    {
        return json_error(
            StatusCode::BAD_REQUEST,
            "not_a_forward_proxy",
            "absolute-form and CONNECT requests are not served",
        );
    }
    next.run(request).await
}

pub async fn check_api(
    State(config): State<Arc<GuardConfig>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(refusal) = fetch_metadata_refusal(request.headers()) {
        return refusal;
    }
    let origin = match single_origin(request.headers()) {
        Ok(origin) => origin,
        Err(refusal) => return refusal,
    };
    if let Some(origin) = &origin {
        if !config.origin_allowed(origin) {
            return json_error(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                "this web origin may not call palaver serve",
            );
        }
    }
    if request.method() == Method::OPTIONS {
        return preflight(origin.as_deref());
    }
    if !token_ok(request.headers(), &config.token) {
        let mut response = json_error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid Authorization: Bearer token is required",
        );
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return with_cors(response, origin.as_deref());
    }
    let response = next.run(request).await;
    with_cors(response, origin.as_deref())
}

fn fetch_metadata_refusal(headers: &HeaderMap) -> Option<Response> {
    let mode = headers.get("sec-fetch-mode").and_then(|v| v.to_str().ok());
    if matches!(mode, Some("no-cors" | "navigate" | "nested-navigate")) {
        return Some(json_error(
            StatusCode::FORBIDDEN,
            "fetch_mode_not_allowed",
            "the API answers fetch() calls only",
        ));
    }
    let dest = headers.get("sec-fetch-dest").and_then(|v| v.to_str().ok());
    if dest.is_some_and(|d| d != "empty") {
        return Some(json_error(
            StatusCode::FORBIDDEN,
            "fetch_mode_not_allowed",
            "the API answers fetch() calls only",
        ));
    }
    None
}

/// At most one `Origin`; `null` and non-UTF-8 values are refused.
fn single_origin(headers: &HeaderMap) -> Result<Option<String>, Response> {
    let origins: Vec<&HeaderValue> = headers.get_all(header::ORIGIN).iter().collect();
    let refused = || {
        json_error(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "this web origin may not call palaver serve",
        )
    };
    match origins.as_slice() {
        [] => Ok(None),
        [one] => match one.to_str() {
            Ok(origin) if !origin.eq_ignore_ascii_case("null") => Ok(Some(origin.to_string())),
            _ => Err(refused()),
        },
        _ => Err(refused()),
    }
}

fn preflight(origin: Option<&str>) -> Response {
    let Some(origin) = origin else {
        return json_error(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "a preflight needs an allowed Origin",
        );
    };
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    // The MCP endpoint's session headers too (an allowed origin may be a browser MCP client).
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "authorization, content-type, accept, range, mcp-session-id, mcp-protocol-version, last-event-id, x-palaver-chat, x-palaver-call",
        ),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    with_cors(response, Some(origin))
}

/// Echoes an allowed origin exactly, with `Vary: Origin`; never `*`, never credentials.
fn with_cors(mut response: Response, origin: Option<&str>) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(value) = origin.and_then(|o| HeaderValue::from_str(o).ok()) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(
                "mcp-session-id, mcp-protocol-version, content-length, content-range, x-palaver-tools-version",
            ),
        );
    }
    response
}

fn token_ok(headers: &HeaderMap, token: &str) -> bool {
    let values: Vec<&HeaderValue> = headers.get_all(header::AUTHORIZATION).iter().collect();
    let [value] = values.as_slice() else {
        return false;
    };
    let Some(given) = value.as_bytes().strip_prefix(b"Bearer ") else {
        return false;
    };
    given.len() == token.len() && bool::from(given.ct_eq(token.as_bytes()))
}

/// The app's Content-Security-Policy (SECURITY C.3), sent with every page: `www/index.html` carries
/// the same policy as a meta tag minus `frame-ancestors`, which a meta tag cannot set.
pub const APP_CSP: &str = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data: blob:; font-src 'self'; media-src 'none'; connect-src 'self' https: http://127.0.0.1:* http://localhost:*; worker-src 'self'; manifest-src 'self'; frame-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; require-trusted-types-for 'script'; trusted-types palaver; frame-ancestors 'none'";

/// The model worker's policy (`/local/worker.js`, issue 16). llama.cpp in wasm (wllama) starts its
/// own workers and their threads from `blob:` URLs it makes from its code, and those workers
/// inherit this policy: they may start workers from `blob:` and fetch the model and the wasm, and
/// nothing else. A worker has no DOM, so Trusted Types (which guard the DOM's sinks) are not
/// required here; `eval` stays refused.
pub const MODEL_WORKER_CSP: &str = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval' blob:; worker-src 'self' blob:; connect-src 'self' https: http://127.0.0.1:* http://localhost:*; object-src 'none'; base-uri 'none'; form-action 'none'";

/// The path of the model worker's script as `palaver serve` serves `www/`.
pub const MODEL_WORKER_PATH: &str = "/local/worker.js";

/// The service worker's script: it runs as a worker, so it carries the app's policy.
pub const SERVICE_WORKER_PATH: &str = "/sw.js";

pub async fn security_headers(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    // The tools API and the MCP endpoint answer JSON or event streams, never a page.
    let is_api = ["/api", "/mcp"]
        .iter()
        .any(|root| path == *root || path.starts_with(&format!("{root}/")));
    let mut response = next.run(request).await;
    let runs = !is_api && runs_as_page_or_worker(&path, &response);
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Same-origin for every answer (an allowed origin reads through CORS, with the token).
    headers
        .entry("cross-origin-resource-policy")
        .or_insert(HeaderValue::from_static("same-origin"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if is_api {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if runs {
        page_policies(headers, path == MODEL_WORKER_PATH);
    }
    response
}

/// Whether a browser may run this answer as a page or a worker: a document (HTML, SVG or other
/// XML, or an answer that does not say its type) or one of the two worker scripts. Only those
/// obey CSP, COOP, COEP and Permissions-Policy; a module, a style sheet, a wasm module or an
/// image obeys the page that loads it. Those ~600 bytes on each of the ~95 other answers were
/// ~40 KB of what a first answer cost (issue 41).
fn runs_as_page_or_worker(path: &str, response: &Response) -> bool {
    if path == SERVICE_WORKER_PATH || path == MODEL_WORKER_PATH {
        return true;
    }
    let Some(kind) = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
    else {
        return true;
    };
    let kind = kind.to_ascii_lowercase();
    kind.starts_with("text/html") || kind.contains("xml")
}

/// The policies a page or a worker runs under.
fn page_policies(headers: &mut HeaderMap, model_worker: bool) {
    let policy = if model_worker {
        MODEL_WORKER_CSP
    } else {
        APP_CSP
    };
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(policy),
    );
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    // With COOP, cross-origin isolation: SharedArrayBuffer, so the model in the page runs
    // on several threads. `credentialless` (not `require-corp`) keeps a remote image the user
    // clicks to load working: it is fetched without cookies instead of refused.
    headers.insert(
        "cross-origin-embedder-policy",
        HeaderValue::from_static("credentialless"),
    );
    headers.insert(
        "permissions-policy",
        HeaderValue::from_static("camera=(), microphone=(), geolocation=(), payment=(), usb=()"),
    );
}
