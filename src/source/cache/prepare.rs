//! The cache's hook for work on a release before it is cached.

use std::path::Path;

use crate::release::ReleaseId;

/// Work on a release after its tarballs are extracted, before it is verified into the cache: the
/// dependencies of charts published without their `charts/` (the stack repository's build script
/// ships addon charts so) are resolved here (`package::release_deps`). It runs on a blocking
/// thread in the staging directory; what it writes there is covered by the manifest like the rest;
/// an error fails the fetch, and nothing is cached.
pub trait Prepare: Send + Sync + std::fmt::Debug {
    /// Prepares the release `id`, extracted at `staging`: its class chart is the directory
    /// `class_chart`, its addon bundle `addons` (when it has one).
    fn prepare(&self, id: &ReleaseId, staging: &Path, class_chart: &Path, addons: Option<&Path>) -> Result<(), String>;
}
