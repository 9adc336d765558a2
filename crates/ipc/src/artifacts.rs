//! Files this lab leaves while it runs — the shm segment, the temp dir with
//! the Unix socket or FIFOs — named and cleaned up through core's
//! `artifact` module (`commbench-ipc-<pid>-<start>-<seq>`), so
//! `commbench clean` removes a SIGKILLed run's leftovers and never a live
//! run's. Everything is removed on drop and registered for removal on
//! SIGINT/SIGTERM while it exists.

use std::path::{Path, PathBuf};

use commbench_core::artifact;

use crate::error::{IpcError, Result};

/// A fresh segment name.
pub fn segment_name() -> String {
    artifact::name("ipc")
}

/// /dev/shm/<name>.
pub fn shm_path(name: &str) -> PathBuf {
    artifact::shm_path(name)
}

/// Register a path for removal on SIGINT/SIGTERM; dropping the guard
/// unregisters it.
pub fn register(path: &Path) -> artifact::CleanupGuard {
    artifact::install_signal_cleanup();
    artifact::register_cleanup(path)
}

/// A private temp dir (mode 0700) for sockets and FIFOs, removed on drop.
/// Files created in it should be registered with [`TempDir::register`] so
/// a signal removes them (and then the empty dir).
pub struct TempDir {
    dir: artifact::TempDir,
    guards: Vec<artifact::CleanupGuard>,
}

impl TempDir {
    /// Create it.
    pub fn new() -> Result<TempDir> {
        let dir = artifact::TempDir::new("ipc").map_err(|e| IpcError::io("create temp dir", e))?;
        let g = register(dir.path());
        Ok(TempDir {
            dir,
            guards: vec![g],
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Register a file inside the dir for signal cleanup.
    pub fn register(&mut self, file: &Path) {
        self.guards.push(register(file));
    }
}
