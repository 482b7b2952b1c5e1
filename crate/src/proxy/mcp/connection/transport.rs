//! How a connection reaches its server: a stdio child started in its own process group under
//! `palaver reap`, its stderr kept in a capped tail; or a Streamable HTTP URL whose redirects stay
//! on its origin.

use super::*;

impl Connection {
    pub(super) async fn start_stdio(
        self: &Arc<Self>,
        handler: Handler,
        reaper: Option<&std::path::Path>,
    ) -> Result<RunningService<RoleClient, Handler>, RunError> {
        let Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } = &self.config.transport
        else {
            return Err(RunError::Fatal("not a stdio server".into()));
        };
        if !program_exists(command, cwd) {
            return Err(RunError::Fatal(format!(
                "its command `{command}` is not installed (not found{})",
                if command.contains('/') {
                    ""
                } else {
                    " on PATH"
                }
            )));
        }
        let mut process = match reaper {
            Some(reaper) => {
                let mut process = tokio::process::Command::new(reaper);
                process.args(crate::proxy::reaper::reap_args(std::slice::from_ref(
                    command,
                )));
                process
            }
            None => tokio::process::Command::new(command),
        };
        process.args(args).env_clear();
        for key in super::super::KEPT_ENV {
            if let Some(value) = std::env::var_os(key) {
                process.env(key, value);
            }
        }
        // A relative PATH entry (`.`, `node_modules/.bin`, an empty one) would find programs in
        // whatever folder the server runs in (SECURITY F1).
        if let Some(path) = crate::proxy::process_env::absolute_path_var() {
            process.env("PATH", path);
        }
        process.envs(env);
        // Never palaver serve's own directory, which is usually the workspace (F1).
        process.current_dir(cwd);
        process.process_group(0);
        let (transport, stderr) = crate::proxy::reaper::orphans::spawn_registered(|| {
            let spawned = rmcp::transport::TokioChildProcess::builder(process)
                .stderr(Stdio::piped())
                .spawn()?;
            let pid = spawned.0.id();
            Ok((spawned, pid))
        })
        .map_err(|e| RunError::Failed(format!("it could not be started: {e}")))?;
        *lock(&self.pid) = transport.id().map(|id| id as i32);
        if let Some(stderr) = stderr {
            tokio::spawn(super::super::read_stderr(stderr, self.stderr.clone()));
        }
        match tokio::time::timeout(START_TIMEOUT, handler.serve(transport)).await {
            Ok(Ok(running)) => Ok(running),
            Ok(Err(e)) => {
                self.kill_process();
                Err(RunError::Failed(
                    self.ended(format!("no MCP handshake: {e}")),
                ))
            }
            Err(_) => {
                self.kill_process();
                Err(RunError::Failed(format!(
                    "it did not answer the MCP handshake within {} s",
                    START_TIMEOUT.as_secs()
                )))
            }
        }
    }
}

pub(super) async fn start_http(
    handler: Handler,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<RunningService<RoleClient, Handler>, RunError> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::from_bytes(name.as_bytes()),
            reqwest::header::HeaderValue::from_str(value),
        ) else {
            return Err(RunError::Fatal(format!(
                "its header `{}` is not a valid HTTP header",
                name.escape_debug()
            )));
        };
        custom.insert(name, value);
    }
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(custom);
    crate::proxy::process_env::install_tls();
    // Its headers and the query of its URL are secrets (F6): no redirect to another origin
    // (reqwest would carry the custom headers along), and no Referer naming the URL.
    let client = reqwest::Client::builder()
        .no_proxy()
        .referer(false)
        .redirect(reqwest::redirect::Policy::custom(same_origin_redirects))
        .build()
        .map_err(|e| RunError::Failed(e.to_string()))?;
    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
    match tokio::time::timeout(START_TIMEOUT, handler.serve(transport)).await {
        Ok(Ok(running)) => Ok(running),
        Ok(Err(e)) => Err(RunError::Failed(format!(
            "{} did not complete the MCP handshake: {}",
            super::super::config::redact_url(url),
            super::super::config::redact_text(&e.to_string(), url)
        ))),
        Err(_) => Err(RunError::Failed(format!(
            "{} did not answer the MCP handshake within {} s",
            super::super::config::redact_url(url),
            START_TIMEOUT.as_secs()
        ))),
    }
}

/// Follows a redirect only within the origin of the first request, at most five times.
pub(super) fn same_origin_redirects(
    attempt: reqwest::redirect::Attempt,
) -> reqwest::redirect::Action {
    let first = attempt.previous().first().map(reqwest::Url::origin);
    if attempt.previous().len() > 5 {
        attempt.error("too many redirects")
    } else if first.is_some_and(|origin| origin == attempt.url().origin()) {
        attempt.follow()
    } else {
        let to = super::super::config::redact_url(attempt.url().as_str());
        attempt.error(format!(
            "it redirects to another origin ({to}), which would receive its headers; not followed"
        ))
    }
}

/// Whether `program` can be run from `cwd`: a path to an executable (relative to `cwd`), or a
/// name found on the absolute entries of `PATH`.
pub(super) fn program_exists(program: &str, cwd: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &std::path::Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(&cwd.join(program));
    }
    crate::proxy::process_env::absolute_path_var()
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program))))
}
