//! The HTTP server: the Host check first on every request, security headers on every response,
//! the web app's static files, and `GET /api/health`.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use tower_http::services::ServeDir;

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub www: PathBuf,
    pub pkg: PathBuf,
    pub workspace: PathBuf,
    pub allowed_origins: Vec<String>,
    pub allow_shell: bool,
    pub token: String,
}

struct Shared {
    port: u16,
}

/// Serves until `shutdown` resolves. The listener must be bound to a loopback address.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let shared = Arc::new(Shared { port });
    let app = Router::new()
        .route("/api/health", get(health))
        .nest_service("/pkg", ServeDir::new(&config.pkg))
        .fallback_service(ServeDir::new(&config.www))
        .layer(middleware::from_fn(security_headers))
        .layer(middleware::from_fn_with_state(shared, check_host));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"ok": true, "version": crate::VERSION}))
}

/// `Host` must be exactly `127.0.0.1:N`, `localhost:N` or `[::1]:N`: anything else (a rebinding
/// name, `0.0.0.0`, an empty or repeated header) is refused before any other work.
async fn check_host(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let hosts: Vec<&HeaderValue> = request.headers().get_all(header::HOST).iter().collect();
    let allowed = [
        format!("127.0.0.1:{}", shared.port),
        format!("localhost:{}", shared.port),
        format!("[::1]:{}", shared.port),
    ];
    let ok = matches!(hosts.as_slice(), [host] if host.to_str().is_ok_and(|h| allowed.iter().any(|a| a == h)));
    if !ok {
        return refuse(StatusCode::FORBIDDEN, "Host not allowed");
    }
    next.run(request).await
}

async fn security_headers(request: Request, next: Next) -> Response {
    let is_api = request.uri().path().starts_with("/api/");
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if is_api {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

fn refuse(status: StatusCode, message: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from(message),
    )
        .into_response()
}
