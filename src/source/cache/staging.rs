//! The work area of one fetch: a staging directory that a failed fetch leaves empty, and where
//! the cluster-class chart is in an extracted tarball.

use std::path::{Path, PathBuf};

use super::CacheError;

/// A staging directory removed on drop unless disarmed, so a failed fetch
/// leaves nothing behind (a crash leaves it in `.tmp/`, cleaned at start).
pub(super) struct Staging {
    pub(super) path: PathBuf,
    armed: bool,
}

impl Staging {
    pub(super) fn create(path: PathBuf) -> Result<Self, CacheError> {
        std::fs::create_dir_all(&path).map_err(|e| CacheError::io("cannot create", &path, e))?;
        Ok(Self { path, armed: true })
    }

    pub(super) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The name of the one subdirectory of `dir` that holds a `Chart.yaml`, if exactly one does.
pub(super) fn only_chart_dir(dir: &Path) -> Option<String> {
    let mut found = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        if entry.path().join("Chart.yaml").is_file() {
            if found.is_some() {
                return None;
            }
            found = Some(entry.file_name().to_string_lossy().into_owned());
        }
    }
    found
}
