//! `/models/{name}` (issue 16, SECURITY F9): the GGUF files of the model in the page, served with
//! ranges (a cut download resumes), behind the API's guard (token and Origin). Only a regular
//! `*.gguf` file directly in the models folder is served: no dotfile, no subfolder, no symlink —
//! a link in the folder to `/etc/passwd` is not a model.

use super::guard::json_error;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::path::PathBuf;
use std::sync::Arc;
use tower::ServiceExt;
use tower_http::services::ServeFile;

/// Whether `name` may name a model file: `*.gguf`, not hidden, no path separator or NUL.
pub fn valid_model_name(name: &str) -> bool {
    name.len() <= 255
        && name.ends_with(".gguf")
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0'])
}

pub async fn model_file(
    State(folder): State<Arc<PathBuf>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let not_found = || json_error(StatusCode::NOT_FOUND, "not_found", "no such model file");
    if !valid_model_name(&name) {
        return not_found();
    }
    let path = folder.join(&name);
    // The folder is the user's own (never the workspace, checked at start): a check before the
    // open is enough to keep links and other kinds of files out.
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_file() => {}
        _ => return not_found(),
    }
    match ServeFile::new(path).oneshot(request).await {
        Ok(response) => response.into_response(),
        Err(_) => not_found(),
    }
}
