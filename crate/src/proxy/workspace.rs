//! The workspace: its canonical root, a `cap_std` directory capability on it through which every
//! file operation goes, and a lock per file so concurrent writes to one file are serialized.

use super::confine::RelPath;
use cap_std::fs::Dir;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Past this many per-file locks, the unused ones are pruned.
const LOCKS_PRUNE_AT: usize = 1024;

pub struct Workspace {
    root: PathBuf,
    dir: Dir,
    locks: Mutex<HashMap<RelPath, Arc<Mutex<()>>>>,
}

impl Workspace {
    /// Opens the workspace; a root given through a symlink is resolved first (A46).
    pub fn open(root: &Path) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority())?;
        Ok(Workspace {
            root,
            dir,
            locks: Mutex::new(HashMap::new()),
        })
    }

    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lock of one file; hold it for the whole read-modify-write.
    pub fn lock_for(&self, path: &RelPath) -> Arc<Mutex<()>> {
        let mut locks = self
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if locks.len() >= LOCKS_PRUNE_AT {
            // Locks nobody holds or waits for are dropped, so the map stays bounded.
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        }
        locks.entry(path.clone()).or_default().clone()
    }
}
