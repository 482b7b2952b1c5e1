//! The process reaper of `run_command` and of every stdio MCP server (SECURITY E7, F3). A process
//! group alone does not hold a command: a child that calls `setsid` leaves it, and a SIGKILLed
//! server leaves everything running. So every command runs under `palaver reap -- ARGV…`.
//!
//! **A PID namespace first** (`namespace`): the reaper makes a new PID namespace (with a user
//! namespace mapping the caller's own ids when it is not root) whose init is a second reaper
//! process. Nothing inside can leave it, and nothing inside can kill that init — the kernel drops
//! a SIGKILL its namespace's own processes send it — so a child's `kill -9 $PPID` after starting
//! `setsid` children kills nothing; when the init ends, the kernel kills everything left in the
//! namespace. The outer reaper kills the init when it is told to stop or when `palaver serve` is
//! gone (even SIGKILLed).
//!
//! **Where namespaces are refused** (a kernel or policy without unprivileged user namespaces), the
//! reaper is the supervisor itself, as before, and `palaver serve` is a child subreaper whose
//! sweep (`orphans`) kills and reaps whatever comes back to it: a child that killed its reaper
//! cannot leave its tree for init while `palaver serve` lives.
//!
//! The supervisor
//! - makes itself a *child subreaper*: every orphaned descendant, `setsid` or not, is re-parented
//!   to it, so the whole tree stays below it;
//! - kills that whole tree when the program ends, when it is told to stop (SIGTERM/SIGINT/SIGHUP),
//!   or when its parent (`palaver serve`) is gone — noticed by polling `getppid`, not by
//!   `PR_SET_PDEATHSIG`, which fires when the *thread* that spawned it exits;
//! - exits as the program did (its code, or re-raising its signal).
//!
//! The server itself uses `kill_tree` on the reaper's pid at a timeout or a vanished client: it
//! walks `/proc` for every descendant while the subreaper still holds them, kills them, then the
//! reaper. Linux only, like the rest of `palaver serve`'s process handling.

mod namespace;
pub mod orphans;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

/// Set in `palaver serve`'s environment to `group` to run every reaper without a namespace (the
/// fallback, for its tests); passed on to the reaper as `--isolation`.
pub const ISOLATION_ENV: &str = "PALAVER_REAP_ISOLATION";

/// How a reaper holds its program's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// A PID namespace when the kernel grants one, else `Group`.
    Namespace,
    /// A subreaper supervisor in the caller's namespace (the fallback).
    Group,
}

impl Isolation {
    /// What `palaver serve`'s environment asks for (`PALAVER_REAP_ISOLATION=group`).
    pub fn from_env() -> Isolation {
        match std::env::var(ISOLATION_ENV).as_deref() {
            Ok("group") => Isolation::Group,
            _ => Isolation::Namespace,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isolation::Namespace => "namespace",
            Isolation::Group => "group",
        }
    }

    pub fn parse(text: &str) -> Isolation {
        if text == "group" {
            Isolation::Group
        } else {
            Isolation::Namespace
        }
    }
}

/// The arguments that run `argv` under the reaper: `reap --isolation I -- ARGV…`.
pub fn reap_args(argv: &[String]) -> Vec<String> {
    let mut args = vec![
        "reap".to_string(),
        "--isolation".to_string(),
        Isolation::from_env().name().to_string(),
        "--".to_string(),
    ];
    args.extend(argv.iter().cloned());
    args
}

/// How often the reaper checks that its parent is alive.
const PARENT_POLL: Duration = Duration::from_millis(100);
/// Rounds of "find descendants, kill them" (a forking process may add some between rounds).
const KILL_ROUNDS: usize = 50;

/// Every descendant of `root`, by the parent links in `/proc`.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = parent_of(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or(&[]) {
            found.push(child);
            queue.push(child);
        }
    }
    found
}

/// The fields of `/proc/PID/stat` after the `)` that ends the command name: state, ppid, …
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn parent_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// A process that is gone, or a zombie (dead, waiting to be reaped).
fn is_zombie(pid: i32) -> bool {
    stat_fields(pid).is_none_or(|fields| fields.first().is_none_or(|state| state == "Z"))
}

fn sigkill(pid: i32) {
    if pid > 1 {
        // SAFETY: kill(2) only sends a signal; no memory is touched.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Kills every live descendant of `root`, round after round until none is left (a forking
/// process may add some between rounds); `between` runs after each round.
fn kill_descendants(root: i32, mut between: impl FnMut()) {
    for _ in 0..KILL_ROUNDS {
        let alive: Vec<i32> = descendants(root)
            .into_iter()
            .filter(|p| !is_zombie(*p))
            .collect();
        if alive.is_empty() {
            return;
        }
        for pid in alive {
            sigkill(pid);
        }
        std::thread::sleep(Duration::from_millis(2));
        between();
    }
}

/// Kills every descendant of `root`, then `root` itself (the server's side, at a timeout or a
/// vanished client, while the reaper still holds the tree).
pub fn kill_tree(root: i32) {
    if root <= 1 {
        return;
    }
    kill_descendants(root, || {});
    sigkill(root);
}

/// Reaps every exited child; returns the status of `main` if it was among them.
fn reap_children(main: i32) -> Option<i32> {
    let mut main_status = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only into `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return main_status;
        }
        if pid == main {
            main_status = Some(status);
        }
    }
}

fn signal_set(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// How the supervisor learns that the one it answers to is gone.
#[derive(Debug, Clone, Copy)]
enum ParentWatch {
    /// `palaver serve`'s pid: gone when `getppid` changes.
    Pid(i32),
    /// The read end of a pipe whose write end only the outer reaper holds: gone at its hang-up
    /// (a namespace's init sees no parent pid: `getppid` is 0 there).
    Pipe(i32),
}

impl ParentWatch {
    fn gone(self) -> bool {
        match self {
            ParentWatch::Pid(parent) => std::os::unix::process::parent_id() as i32 != parent,
            ParentWatch::Pipe(fd) => namespace::hung_up(fd),
        }
    }
}

/// Runs `argv` under supervision and returns its exit code (see the module comment).
pub fn run(argv: &[String], isolation: Isolation) -> std::process::ExitCode {
    if argv.is_empty() {
        eprintln!("palaver reap: no program given");
        return std::process::ExitCode::from(2);
    }
    let parent = std::os::unix::process::parent_id() as i32;
    if isolation == Isolation::Namespace {
        if let Some(code) = namespace::run_isolated(argv, parent) {
            return code;
        }
    }
    let status = supervise_program(argv, ParentWatch::Pid(parent));
    kill_tree_below_self();
    exit_like(status)
}

/// Starts `argv` and supervises it (see `supervise`); `None`: stopped, or its parent went away.
fn supervise_program(argv: &[String], parent: ParentWatch) -> Option<i32> {
    let (program, args) = argv.split_first()?;
    let watched = signal_set(&[libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP]);
    // SAFETY: process-wide settings of this single-threaded supervisor; no memory is shared.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::sigprocmask(libc::SIG_BLOCK, &watched, std::ptr::null_mut());
    }
    let mut command = Command::new(program);
    command.args(args);
    // SAFETY: the closure runs in the forked child before exec and only calls async-signal-safe
    // functions: it unblocks the signals the supervisor blocked (a program must get SIGTERM).
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            let empty = signal_set(&[]);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
    let child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("cannot run `{program}`: {e}");
            // As a shell says it: exit code 127.
            return Some(127 << 8);
        }
    };
    supervise(child.id() as i32, parent, &watched)
}

/// Waits for the program to end, or for a stop signal, or for the parent to go away.
fn supervise(main: i32, parent: ParentWatch, watched: &libc::sigset_t) -> Option<i32> {
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: PARENT_POLL.as_nanos() as libc::c_long,
    };
    loop {
        if let Some(status) = reap_children(main) {
            return Some(status);
        }
        if parent.gone() {
            return None;
        }
        // SAFETY: sigtimedwait reads the set and the timeout; no info is requested.
        let signal = unsafe { libc::sigtimedwait(watched, std::ptr::null_mut(), &timeout) };
        if matches!(signal, libc::SIGTERM | libc::SIGINT | libc::SIGHUP) {
            return None;
        }
    }
}

/// Kills every descendant of this supervisor (the subreaper holds them all) and reaps them.
fn kill_tree_below_self() {
    kill_descendants(std::process::id() as i32, || {
        reap_children(-1);
    });
    reap_children(-1);
}

/// Ends the supervisor the way the program ended: its exit code, or its signal re-raised.
fn exit_like(status: Option<i32>) -> std::process::ExitCode {
    let Some(status) = status else {
        return std::process::ExitCode::from(137);
    };
    if libc::WIFEXITED(status) {
        return std::process::ExitCode::from(libc::WEXITSTATUS(status) as u8);
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: restores the default action of one signal, unblocks it and raises it, so the
        // supervisor dies of the program's signal; nothing else is touched.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            let set = signal_set(&[signal]);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(signal);
        }
    }
    std::process::ExitCode::from(1)
}
