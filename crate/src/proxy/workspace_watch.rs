//! Whether anything moved in the workspace since its last scan (issue 39). The scan before a shell
//! command or an MCP call keeps what the user changed since the last call; when the kernel says
//! nothing changed in any folder that scan saw (inotify, Linux), that scan is the one before, and
//! only the scan after the call is made. Any event at all, a lost event (queue overflow), a folder
//! that could not be watched, or a folder new to the last scan (its files may have changed before
//! its watch was set) means "moved": the workspace is scanned as before. Elsewhere than Linux,
//! everything always moved.

use std::collections::HashMap;
use std::path::Path;

/// The watch of one workspace's folders.
pub struct Watch {
    #[cfg(target_os = "linux")]
    inotify: Option<std::os::fd::OwnedFd>,
    /// Watched folders (workspace-relative, `""` the root) by watch descriptor, and back.
    by_descriptor: HashMap<i32, String>,
    by_folder: HashMap<String, i32>,
    /// Every folder of the last scan is watched, and nothing moved since it.
    quiet: bool,
}

impl Default for Watch {
    fn default() -> Self {
        Self::new()
    }
}

impl Watch {
    pub fn new() -> Watch {
        Watch {
            #[cfg(target_os = "linux")]
            inotify: open(),
            by_descriptor: HashMap::new(),
            by_folder: HashMap::new(),
            quiet: false,
        }
    }

    /// Reads what the kernel queued: `true` when nothing moved since the last scan (which then
    /// still describes the workspace). Either way, what was queued is forgotten: the scan that
    /// follows a `false` sees it.
    pub fn nothing_moved(&mut self) -> bool {
        let moved = self.drain();
        let quiet = self.quiet && !moved;
        self.quiet = false;
        quiet
    }

    /// After a scan that saw `folders` (the root is always one): each is watched. The watch is
    /// quiet only when every folder was already watched before this scan and all still are.
    pub fn watch(&mut self, root: &Path, folders: &[String]) {
        let mut complete = true;
        let mut fresh = false;
        for folder in std::iter::once(&String::new()).chain(folders) {
            if self.by_folder.contains_key(folder) {
                continue;
            }
            fresh = true;
            match self.add(root, folder) {
                Some(descriptor) => {
                    self.by_descriptor.insert(descriptor, folder.clone());
                    self.by_folder.insert(folder.clone(), descriptor);
                }
                None => complete = false,
            }
        }
        // Events queued while the scan ran (or after a folder was seen, before it was watched)
        // make the next scan happen anyway.
        let moved = self.drain();
        self.quiet = complete && !fresh && !moved;
    }

    /// Forgets the queued events; `true` when there were any (or some were lost).
    fn drain(&mut self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.drain_linux()
        }
        #[cfg(not(target_os = "linux"))]
        {
            true
        }
    }

    #[cfg(target_os = "linux")]
    fn drain_linux(&mut self) -> bool {
        use std::os::fd::AsRawFd;
        let Some(fd) = self.inotify.as_ref().map(|f| f.as_raw_fd()) else {
            return true;
        };
        let mut moved = false;
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: `fd` is our open inotify descriptor and `buffer` is writable for its length.
            let read = unsafe { libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len()) };
            if read <= 0 {
                // EAGAIN: the queue is empty (the descriptor is non-blocking).
                return moved;
            }
            moved = true;
            if self.forget_removed(&buffer[..read as usize]) {
                self.reset();
                return true;
            }
        }
    }

    /// Drops the folders whose watch the kernel removed (deleted, unmounted); `true` when events
    /// were lost (the map of watches can no longer be trusted).
    #[cfg(target_os = "linux")]
    fn forget_removed(&mut self, mut events: &[u8]) -> bool {
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        while events.len() >= HEADER {
            let word = |at: usize| {
                let bytes: [u8; 4] = events[at..at + 4].try_into().unwrap_or_default();
                bytes
            };
            let descriptor = i32::from_ne_bytes(word(0));
            let mask = u32::from_ne_bytes(word(4));
            let name_len = u32::from_ne_bytes(word(12)) as usize;
            if mask & libc::IN_Q_OVERFLOW != 0 {
                return true;
            }
            if mask & libc::IN_IGNORED != 0 {
                if let Some(folder) = self.by_descriptor.remove(&descriptor) {
                    self.by_folder.remove(&folder);
                }
            }
            events = events.get(HEADER + name_len..).unwrap_or_default();
        }
        false
    }

    /// Starts over with a new inotify instance (after lost events): every folder is watched again
    /// at the next scan.
    fn reset(&mut self) {
        #[cfg(target_os = "linux")]
        {
            self.inotify = open();
        }
        self.by_descriptor.clear();
        self.by_folder.clear();
        self.quiet = false;
    }

    fn add(&self, root: &Path, folder: &str) -> Option<i32> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            use std::os::unix::ffi::OsStrExt;
            let fd = self.inotify.as_ref()?.as_raw_fd();
            let path = if folder.is_empty() {
                root.to_path_buf()
            } else {
                root.join(folder)
            };
            let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
            let mask = libc::IN_MODIFY
                | libc::IN_ATTRIB
                | libc::IN_CLOSE_WRITE
                | libc::IN_CREATE
                | libc::IN_DELETE
                | libc::IN_DELETE_SELF
                | libc::IN_MOVED_FROM
                | libc::IN_MOVED_TO
                | libc::IN_MOVE_SELF
                | libc::IN_ONLYDIR
                | libc::IN_DONT_FOLLOW;
            // SAFETY: `fd` is our inotify descriptor; `path` is a NUL-terminated string.
            let descriptor = unsafe { libc::inotify_add_watch(fd, path.as_ptr(), mask) };
            (descriptor >= 0).then_some(descriptor)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (root, folder);
            None
        }
    }
}

#[cfg(target_os = "linux")]
fn open() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a plain syscall; a descriptor it returns is ours alone.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    // SAFETY: `fd` is a fresh descriptor no one else owns.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}
