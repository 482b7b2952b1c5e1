//! One of the user's MCP servers, kept running by `palaver serve` through rmcp's client: a stdio
//! server is a child process in its own process group under `palaver reap` (so nothing it starts
//! outlives `palaver serve`, even a SIGKILLed one), its stderr kept in a capped tail; a Streamable
//! HTTP server is a URL. A server that exits or cannot start is restarted with backoff; after
//! `MAX_FAILURES` quick failures it stays `failed`, with its last error and stderr tail.
//!
//! Calls go through `call`: a cancellable request whose progress notifications are forwarded as
//! lines, a timeout (the config's), and `notifications/cancelled` when the caller goes away.

use super::config::{ServerConfig, Transport};
use super::{HubEvent, StderrTail};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientRequest, ErrorData, Implementation,
    InitializeRequestParams, ProgressNotificationParam, Request, ServerResult,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceError, ServiceExt};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, watch};
mod transport;

use transport::start_http;

/// Quick failures in a row before a server is left `failed` (a server that ran for
/// `STABLE_AFTER` starts counting again).
pub const MAX_FAILURES: u32 = 5;
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// The MCP handshake must finish within this.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// What the status shows of a server.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Starting,
    Ready,
    /// Exited or could not start; another start comes at `retry_in` (attempt `attempt`).
    Restarting {
        attempt: u32,
        retry_in: Duration,
        error: String,
    },
    /// Gave up after `MAX_FAILURES` failures, or cannot run at all (not installed, refused).
    Failed {
        error: String,
    },
    Stopped,
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Ready => "ready",
            State::Restarting { .. } => "restarting",
            State::Failed { .. } => "failed",
            State::Stopped => "stopped",
        }
    }
}

pub struct Connection {
    pub config: ServerConfig,
    state: RwLock<State>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// The server's tools as it lists them (MCP JSON: name, description, inputSchema, …).
    tools: RwLock<Vec<Value>>,
    /// Why its last tool listing stopped early (F5), shown in its status.
    tools_cut: RwLock<Option<String>>,
    /// A tool listing is under way / another was asked for meanwhile (list_changed coalesced).
    refreshing: std::sync::atomic::AtomicBool,
    refresh_again: std::sync::atomic::AtomicBool,
    protocol: RwLock<Option<String>>,
    pub stderr: Arc<Mutex<StderrTail>>,
    /// Progress token → where the call's progress lines go.
    progress: Mutex<HashMap<String, mpsc::Sender<String>>>,
    /// The reaper pid of the running stdio server (for `kill_tree` at shutdown).
    pid: Mutex<Option<i32>>,
    restarts: Mutex<u32>,
    events: broadcast::Sender<HubEvent>,
    /// The hub's tools version: raised before a `Tools`/`Status` event is sent, so whoever hears
    /// the event reads the new version (a counter raised by a listener raced the page).
    tools_version: Arc<std::sync::atomic::AtomicU64>,
    stop: watch::Sender<bool>,
}

impl Connection {
    pub fn new(
        config: ServerConfig,
        events: broadcast::Sender<HubEvent>,
        tools_version: Arc<std::sync::atomic::AtomicU64>,
    ) -> Arc<Self> {
        Arc::new(Connection {
            config,
            state: RwLock::new(State::Starting),
            peer: RwLock::new(None),
            tools: RwLock::new(Vec::new()),
            tools_cut: RwLock::new(None),
            refreshing: std::sync::atomic::AtomicBool::new(false),
            refresh_again: std::sync::atomic::AtomicBool::new(false),
            protocol: RwLock::new(None),
            stderr: Arc::new(Mutex::new(StderrTail::default())),
            progress: Mutex::new(HashMap::new()),
            pid: Mutex::new(None),
            restarts: Mutex::new(0),
            events,
            tools_version,
            stop: watch::channel(false).0,
        })
    }

    pub fn state(&self) -> State {
        read(&self.state).clone()
    }

    pub fn tools(&self) -> Vec<Value> {
        read(&self.tools).clone()
    }

    pub fn protocol(&self) -> Option<String> {
        read(&self.protocol).clone()
    }

    pub fn restarts(&self) -> u32 {
        *lock(&self.restarts)
    }

    pub fn peer(&self) -> Option<Peer<RoleClient>> {
        read(&self.peer).clone()
    }

    fn set_state(&self, state: State) {
        *write(&self.state) = state;
        self.tools_version
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ = self.events.send(HubEvent::Status);
    }

    /// Keeps the server running until `stop`: start, wait for it to end, restart with backoff.
    pub async fn supervise(self: Arc<Self>, reaper: Option<PathBuf>) {
        let mut failures = 0u32;
        let mut stop = self.stop.subscribe();
        loop {
            if *stop.borrow() {
                break;
            }
            self.set_state(State::Starting);
            let started = Instant::now();
            let error = match self.run_once(reaper.as_deref(), &mut stop).await {
                Ok(()) => break, // stopped on purpose
                Err(RunError::Fatal(error)) => {
                    self.set_state(State::Failed { error });
                    break;
                }
                Err(RunError::Failed(error)) => error,
            };
            if started.elapsed() > STABLE_AFTER {
                failures = 0;
            }
            failures += 1;
            *lock(&self.restarts) += 1;
            if failures >= MAX_FAILURES {
                self.set_state(State::Failed {
                    error: format!("it failed {failures} times in a row; the last time: {error}"),
                });
                break;
            }
            let retry_in = Duration::from_millis(500 * 2u64.pow(failures.min(6)));
            self.set_state(State::Restarting {
                attempt: failures,
                retry_in,
                error,
            });
            tokio::select! {
                () = tokio::time::sleep(retry_in) => {}
                _ = stop.changed() => break,
            }
        }
        if *stop.borrow() {
            self.set_state(State::Stopped);
        }
    }

    /// One run: connect, list the tools, wait until the server ends (an error) or `stop`.
    async fn run_once(
        self: &Arc<Self>,
        reaper: Option<&std::path::Path>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), RunError> {
        let handler = Handler {
            connection: Arc::downgrade(self),
        };
        let running = match &self.config.transport {
            Transport::Stdio { .. } => self.start_stdio(handler, reaper).await?,
            Transport::Http { url, headers } => start_http(handler, url, headers).await?,
        };
        *write(&self.peer) = Some(running.peer().clone());
        *write(&self.protocol) = running
            .peer()
            .peer_info()
            .map(|info| info.protocol_version.to_string());
        self.refresh_tools().await;
        self.set_state(State::Ready);
        let token = running.cancellation_token();
        let waiting = running.waiting();
        tokio::pin!(waiting);
        let outcome = tokio::select! {
            reason = &mut waiting => Err(RunError::Failed(self.ended(quit_reason(reason)))),
            _ = stop.changed() => {
                token.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(2), &mut waiting).await;
                Ok(())
            }
        };
        *write(&self.peer) = None;
        self.kill_process();
        outcome
    }

    fn ended(&self, reason: String) -> String {
        let tail = lock(&self.stderr).last_lines(3);
        if tail.is_empty() {
            format!("it stopped ({reason})")
        } else {
            format!("it stopped ({reason}); its last output: {tail}")
        }
    }

    /// Kills the stdio server's whole tree (the reaper holds even `setsid` children).
    pub fn kill_process(&self) {
        if let Some(pid) = lock(&self.pid).take() {
            crate::proxy::reaper::kill_tree(pid);
            crate::proxy::reaper::orphans::forget(pid);
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is touched.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }

    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// A message about this server as it may be shown: an HTTP server's URL redacted (F6).
    fn scrub(&self, text: &str) -> String {
        match &self.config.transport {
            Transport::Http { url, .. } => super::config::redact_text(text, url),
            Transport::Stdio { .. } => text.to_string(),
        }
    }

    pub fn tools_cut(&self) -> Option<String> {
        read(&self.tools_cut).clone()
    }

    /// Asks the server for its tools again (at start, and on `tools/list_changed`), within the
    /// listing caps (F5).
    pub async fn refresh_tools(&self) {
        let Some(peer) = self.peer() else { return };
        let listed = super::listing::list("tools", super::listing::CAPS, |cursor| {
            let peer = peer.clone();
            async move {
                let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
                let page = peer
                    .list_tools(Some(params))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok((super::listing::values(&page.tools), page.next_cursor))
            }
        })
        .await;
        if let Some(cut) = &listed.cut {
            lock(&self.stderr).push(&format!("[palaver] {cut}"));
        }
        *write(&self.tools) = listed.items;
        *write(&self.tools_cut) = listed.cut;
        self.tools_version
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ = self.events.send(HubEvent::Tools);
    }

    /// `tools/list_changed`: one listing at a time, and one more after it when changes came
    /// meanwhile — a server sending thousands of notifications gets two listings, not thousands.
    pub async fn refresh_tools_coalesced(self: Arc<Self>) {
        use std::sync::atomic::Ordering::SeqCst;
        self.refresh_again.store(true, SeqCst);
        if self.refreshing.swap(true, SeqCst) {
            return;
        }
        while self.refresh_again.swap(false, SeqCst) {
            self.refresh_tools().await;
        }
        self.refreshing.store(false, SeqCst);
        // A notification between the last swap and the store above would otherwise wait.
        if self.refresh_again.load(SeqCst) {
            Box::pin(self.refresh_tools_coalesced()).await;
        }
    }

    /// Calls `tool`; progress notifications become lines on `progress`. Dropping the future
    /// (the page went away, the call was aborted) sends `notifications/cancelled`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        progress: Option<mpsc::Sender<String>>,
    ) -> Result<Value, CallError> {
        let peer = self
            .peer()
            .ok_or_else(|| CallError::Unavailable(self.state()))?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(Request::new(params));
        let options =
            PeerRequestOptions::with_timeout(self.config.timeout).reset_timeout_on_progress();
        let handle = peer
            .send_cancellable_request(request, options)
            .await
            .map_err(|e| CallError::Failed(self.scrub(&e.to_string())))?;
        let token = handle.progress_token.0.to_string();
        let _route = progress.map(|sender| ProgressRoute::new(self, token, sender));
        let cancel = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
        };
        // Progress resets the timeout, but never past the hard deadline (F10): a server sending
        // progress for ever would keep a call — and the turn waiting on it — alive for ever.
        let hard = self.config.hard_timeout;
        let result = match tokio::time::timeout(hard, handle.await_response()).await {
            Ok(result) => result,
            Err(_) => return Err(CallError::Timeout(hard)), // `cancel` sends notifications/cancelled
        };
        cancel.disarm();
        if _route.is_some() {
            // rmcp hands notifications to the handler on their own tasks: a progress sent just
            // before the answer may still be on its way. A short grace keeps the route open so
            // it is written before the result line (found as a flaky "2 of 3 progress lines").
            tokio::time::sleep(PROGRESS_GRACE).await;
        }
        match result {
            Ok(ServerResult::CallToolResult(result)) => {
                serde_json::to_value(result).map_err(|e| CallError::Failed(e.to_string()))
            }
            Ok(_) => Err(CallError::Failed(
                "the server answered with something other than a tool result (an input request or a task, which Palaver does not support)".into(),
            )),
            Err(ServiceError::Timeout { timeout }) => Err(CallError::Timeout(timeout)),
            Err(ServiceError::McpError(error)) => Err(CallError::Refused(describe_error(&error))),
            Err(ServiceError::TransportClosed) => Err(CallError::Crashed(self.ended("during the call".into()))),
            Err(e) => Err(CallError::Failed(self.scrub(&e.to_string()))),
        }
    }
}

#[derive(Debug)]
pub enum RunError {
    /// Worth another start.
    Failed(String),
    /// Another start cannot help (not installed).
    Fatal(String),
}

#[derive(Debug)]
pub enum CallError {
    Unavailable(State),
    Timeout(Duration),
    Crashed(String),
    Refused(String),
    Failed(String),
}

fn quit_reason(reason: Result<rmcp::service::QuitReason, tokio::task::JoinError>) -> String {
    match reason {
        Ok(rmcp::service::QuitReason::Closed) => "its connection closed".into(),
        Ok(other) => format!("{other:?}"),
        Err(e) => format!("its task failed: {e}"),
    }
}

fn describe_error(error: &ErrorData) -> String {
    format!("{} (code {})", error.message, error.code.0)
}

/// How long a call's progress route stays open after its answer (see `Connection::call`).
const PROGRESS_GRACE: Duration = Duration::from_millis(50);

/// Routes a call's progress notifications to its sender while the call runs.
struct ProgressRoute<'a> {
    connection: &'a Connection,
    token: String,
}

impl<'a> ProgressRoute<'a> {
    fn new(connection: &'a Connection, token: String, sender: mpsc::Sender<String>) -> Self {
        lock(&connection.progress).insert(token.clone(), sender);
        ProgressRoute { connection, token }
    }
}

impl Drop for ProgressRoute<'_> {
    fn drop(&mut self) {
        lock(&self.connection.progress).remove(&self.token);
    }
}

/// Sends `notifications/cancelled` for a request whose caller went away before its answer.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl CancelOnDrop {
    fn disarm(mut self) {
        self.id = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let params = rmcp::model::CancelledNotificationParam::new(
                Some(id),
                Some("the caller went away (the user stopped the turn)".into()),
            );
            let _ = peer
                .send_notification(rmcp::model::CancelledNotification::new(params).into())
                .await;
        });
    }
}

/// rmcp's client side of one connection: progress, list changes and log messages.
pub struct Handler {
    connection: Weak<Connection>,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Some(connection) = self.connection.upgrade() else {
            return;
        };
        let sender = lock(&connection.progress)
            .get(&params.progress_token.0.to_string())
            .cloned();
        if let Some(sender) = sender {
            let mut line = match params.total {
                Some(total) => format!("progress {}/{}", params.progress, total),
                None => format!("progress {}", params.progress),
            };
            if let Some(message) = &params.message {
                line = format!("{line}: {message}");
            }
            let _ = sender.try_send(line);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(connection) = self.connection.upgrade() {
            tokio::spawn(connection.refresh_tools_coalesced());
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(connection) = self.connection.upgrade() {
            let _ = connection.events.send(HubEvent::Resources);
        }
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(connection) = self.connection.upgrade() {
            let _ = connection.events.send(HubEvent::Prompts);
        }
    }

    /// The handshake names the newest protocol version that has one (2025-11-25): rmcp's newest
    /// (2026-07-28) replaced `initialize` altogether, so naming it in an `initialize` asks for a
    /// revision the handshake itself does not belong to (the official conformance suite's
    /// client scenarios refuse it).
    fn get_info(&self) -> InitializeRequestParams {
        let mut info = InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("palaver", crate::VERSION),
        );
        info.protocol_version = rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE;
        info
    }
}

pub fn status(connection: &Connection) -> Value {
    let state = connection.state();
    let mut out = json!({
        "name": connection.config.name,
        "transport": connection.config.transport_name(),
        "command": connection.config.describe(),
        "state": state.name(),
        "tools": connection.tools().len(),
        "protocol_version": connection.protocol(),
        "restarts": connection.restarts(),
        "stderr_tail": lock(&connection.stderr).last_lines(20),
    });
    if let Some(cut) = connection.tools_cut() {
        out["tools_cut"] = json!(cut);
    }
    match state {
        State::Restarting {
            attempt,
            retry_in,
            error,
        } => {
            out["error"] = json!(error);
            out["attempt"] = json!(attempt);
            out["retry_in_ms"] = json!(retry_in.as_millis() as u64);
        }
        State::Failed { error } => out["error"] = json!(error),
        _ => {}
    }
    out
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
