//! The reaper's PID namespace (SECURITY F3): the boundary a child cannot kill or leave.
//!
//! `run_isolated` unshares a PID namespace (with a user namespace that maps the caller's own uid
//! and gid when it is not root: no privilege is gained, `exec` drops the namespace's
//! capabilities) and forks its init, which supervises the program like the plain reaper. The
//! outer process stays in the caller's namespace, where `palaver serve` sees and signals it:
//! - a stop signal, or `palaver serve` gone → SIGKILL to the init, and the kernel kills every
//!   process of the namespace with it;
//! - the init tells the outer its program's wait status through a pipe, and the outer ends the
//!   same way.
//!
//! The init watches the outer through another pipe (it sees no parent pid: `getppid` is 0 for a
//! namespace's init), so a killed outer takes the namespace along too.

use super::{exit_like, signal_set, supervise_program, ParentWatch, PARENT_POLL};
use std::process::ExitCode;

/// Runs `argv` in a new PID namespace; `None` when the kernel refuses one (nothing was started).
pub(super) fn run_isolated(argv: &[String], parent: i32) -> Option<ExitCode> {
    let watch = Pipe::new()?;
    let status = Pipe::new()?;
    if !enter() {
        return None;
    }
    let stops = signal_set(&[libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP]);
    // SAFETY: blocks signals of this single-threaded process (the fork below inherits the mask;
    // the supervisor unblocks them for the program).
    unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, &stops, std::ptr::null_mut());
    }
    // SAFETY: the reaper is single-threaded, so the child may go on running Rust code.
    let init = unsafe { libc::fork() };
    match init {
        -1 => {
            eprintln!(
                "palaver reap: cannot start the namespace's init: {}",
                std::io::Error::last_os_error()
            );
            Some(ExitCode::from(126))
        }
        0 => {
            watch.close_write();
            status.close_read();
            let result = supervise_program(argv, ParentWatch::Pipe(watch.read));
            status.send(result.unwrap_or(libc::SIGKILL));
            // Its exit kills whatever else the program left in the namespace.
            std::process::exit(0)
        }
        init => {
            watch.close_read();
            status.close_write();
            wait_for_init(init, parent, &stops);
            Some(exit_like(status.receive()))
        }
    }
}

/// Enters a new PID namespace for the next child: directly as root, else with a user namespace
/// mapping this process's own ids. False: refused (no namespace was entered).
fn enter() -> bool {
    // SAFETY: unshare(2) changes only this process's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } == 0 {
        return true;
    }
    // SAFETY: getuid/getgid read this process's ids.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: as above; the reaper is single-threaded, as a new user namespace requires.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) } != 0 {
        return false;
    }
    // The same ids inside as outside: files are owned and checked as before.
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    let _ = std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"));
    let _ = std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"));
    true
}

/// Waits for the init to end; kills it (and so its namespace) when told to stop or when the
/// parent is gone.
fn wait_for_init(init: i32, parent: i32, stops: &libc::sigset_t) {
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: PARENT_POLL.as_nanos() as libc::c_long,
    };
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only into `status`.
        if unsafe { libc::waitpid(init, &mut status, libc::WNOHANG) } == init {
            return;
        }
        let orphaned = std::os::unix::process::parent_id() as i32 != parent;
        // SAFETY: sigtimedwait reads the set and the timeout; no info is requested.
        let signal = unsafe { libc::sigtimedwait(stops, std::ptr::null_mut(), &timeout) };
        if orphaned || matches!(signal, libc::SIGTERM | libc::SIGINT | libc::SIGHUP) {
            // SAFETY: kill(2) and waitpid(2) on our own child; nothing else is touched.
            unsafe {
                libc::kill(init, libc::SIGKILL);
                libc::waitpid(init, &mut status, 0);
            }
            return;
        }
    }
}

/// Whether the other end of the pipe `fd` is closed (its process is gone).
pub(super) fn hung_up(fd: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one descriptor, without waiting; it writes `revents` only.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0 && poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLIN) != 0
}

/// A pipe whose ends are closed on `exec` (the program never holds them).
struct Pipe {
    read: i32,
    write: i32,
}

impl Pipe {
    fn new() -> Option<Pipe> {
        let mut fds = [0i32; 2];
        // SAFETY: pipe2(2) writes two descriptors into `fds`.
        (unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0).then_some(Pipe {
            read: fds[0],
            write: fds[1],
        })
    }

    fn close_read(&self) {
        // SAFETY: closes a descriptor this process owns.
        unsafe { libc::close(self.read) };
    }

    fn close_write(&self) {
        // SAFETY: closes a descriptor this process owns.
        unsafe { libc::close(self.write) };
    }

    /// Sends a wait status (four bytes) to the other end.
    fn send(&self, status: i32) {
        let bytes = status.to_ne_bytes();
        // SAFETY: writes four bytes from a local array.
        unsafe { libc::write(self.write, bytes.as_ptr().cast(), bytes.len()) };
    }

    /// The wait status the other end sent; `None` if it ended without sending one (killed).
    fn receive(&self) -> Option<i32> {
        let mut bytes = [0u8; 4];
        // SAFETY: reads at most four bytes into a local array.
        let read = unsafe { libc::read(self.read, bytes.as_mut_ptr().cast(), bytes.len()) };
        (read == 4).then(|| i32::from_ne_bytes(bytes))
    }
}
