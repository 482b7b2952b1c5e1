//! `palaver serve` as a child subreaper (SECURITY F3, the fallback where the kernel grants no PID
//! namespace). A child that kills its reaper (`kill -9 $PPID`) orphans what it started; as a
//! subreaper, `palaver serve` gets those orphans instead of init, and `sweep` kills and reaps
//! every child of its own that it did not start itself. The reapers it starts are registered
//! under the same lock the sweep holds (`spawn_registered`), so a child is never mistaken for an
//! orphan between its start and its registration.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

/// How often the sweep looks for orphans.
pub const SWEEP_EVERY: Duration = Duration::from_millis(500);

static KNOWN: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn known() -> std::sync::MutexGuard<'static, BTreeSet<i32>> {
    KNOWN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Makes this process a child subreaper: orphaned descendants come back to it, not to init.
pub fn become_subreaper() {
    // SAFETY: prctl(2) sets a flag of this process; no memory is touched.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Runs `spawn` (which starts one child and returns its pid) with the child registered as one
/// of ours before any sweep can see it.
pub fn spawn_registered<T>(
    spawn: impl FnOnce() -> std::io::Result<(T, Option<u32>)>,
) -> std::io::Result<T> {
    let mut known = known();
    let (child, pid) = spawn()?;
    if let Some(pid) = pid {
        known.insert(pid as i32);
    }
    Ok(child)
}

/// Forgets a child of ours once it has ended (its pid may be used again).
pub fn forget(pid: i32) {
    known().remove(&pid);
}

/// Kills and reaps every child of this process that it did not start (orphans that came back
/// to it); returns how many it found.
pub fn sweep() -> usize {
    let me = std::process::id() as i32;
    let mut known = known();
    let children = children_of(me);
    known.retain(|pid| children.contains(pid));
    let strays: Vec<i32> = children
        .into_iter()
        .filter(|pid| !known.contains(pid))
        .collect();
    drop(known);
    for &pid in &strays {
        super::kill_tree(pid);
        let mut status = 0;
        // SAFETY: waitpid on a child that is not tokio's (never registered); writes `status`.
        unsafe {
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
    }
    strays.len()
}

/// The pids whose parent is `pid` (zombies included: they are reaped by the sweep).
fn children_of(pid: i32) -> BTreeSet<i32> {
    let mut found = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if super::parent_of(child) == Some(pid) {
            found.insert(child);
        }
    }
    found
}

/// Sweeps for ever (a task of `palaver serve`).
pub async fn run_sweeper() {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let _ = tokio::task::spawn_blocking(sweep).await;
    }
}
