//! Where releases come from, and how they reach disk intact.
//!
//! A [`ReleaseSource`] lists the cluster-stack releases of a repository or
//! directory and downloads single assets. The cache (`cache`) turns one listed
//! release into a verified, extracted directory, atomically.

pub mod github;

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};

use crate::release::ReleaseId;

/// One asset of a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetInfo {
    /// File name, e.g. `metadata.yaml`.
    pub name: String,
    /// Size in bytes as announced by the source.
    pub size: u64,
    /// The sha256 of the content, lowercase hex, when the source announces one
    /// (GitHub's `digest: "sha256:<hex>"`).
    pub sha256: Option<String>,
    /// Where the source finds the bytes.
    pub locator: AssetLocator,
}

/// How a source addresses an asset's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssetLocator {
    /// A GitHub release asset, downloaded by its id.
    GitHub { id: u64 },
    /// A file on the local filesystem.
    File(PathBuf),
}

/// One release of a source that parses as a cluster-stack release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRelease {
    pub id: ReleaseId,
    /// The tag exactly as the source spells it.
    pub tag: String,
    /// Marked as a pre-release on GitHub.
    pub prerelease: bool,
    pub assets: Vec<AssetInfo>,
}

impl ListedRelease {
    pub fn asset(&self, name: &str) -> Option<&AssetInfo> {
        self.assets.iter().find(|a| a.name == name)
    }
}

/// Everything a source lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub releases: Vec<ListedRelease>,
    /// Tags that are not cluster-stack releases (skipped, never fatal).
    pub skipped: Vec<String>,
}

/// A downloaded asset: where it is, its size and sha256 (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadedAsset {
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
}

/// Receives download progress, for progress bars.
pub trait Progress: Send + Sync {
    /// An asset of `total` bytes (when known) starts.
    fn start(&self, _asset: &str, _total: Option<u64>) {}
    /// `bytes` more bytes arrived.
    fn advance(&self, _bytes: u64) {}
    /// The asset is complete.
    fn finish(&self, _asset: &str) {}
}

/// Progress that goes nowhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;
impl Progress for NoProgress {}

/// Why a source could not list or download.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The source's rate limit is exhausted; nothing is sent before `until`.
    #[error("{source_name} is rate limited until {until}")]
    RateLimited { source_name: String, until: jiff::Timestamp },
    /// The source could not be reached or answered with a server error,
    /// after retries.
    #[error("{source_name} is unavailable: {message}")]
    Unavailable { source_name: String, message: String },
    /// The source answered, but not as expected (e.g. 404, 401, bad JSON).
    #[error("{source_name}: {message}")]
    Protocol { source_name: String, message: String },
    /// An asset's bytes do not match what was announced.
    #[error("asset {asset} of {release}: {what} mismatch: expected {expected}, got {actual}")]
    Integrity { release: String, asset: String, what: &'static str, expected: String, actual: String },
    /// A local file operation failed.
    #[error("{context}: {path}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Anything else, with a message a user can act on.
    #[error("{0}")]
    Other(String),
}

impl SourceError {
    pub fn io(context: &'static str, path: &Path, source: std::io::Error) -> Self {
        SourceError::Io { context, path: path.to_path_buf(), source }
    }
}

/// A place releases are listed and downloaded from.
///
/// Implementations: GitHub releases of a repository ([`github::GitHubSource`])
/// and a local directory.
pub trait ReleaseSource: Send + Sync + fmt::Debug {
    /// A short human-readable name, e.g. `github:owner/repo`. Never contains a token.
    fn name(&self) -> String;

    /// Lists every cluster-stack release; foreign tags land in `skipped`.
    fn list(&self) -> impl Future<Output = Result<Listing, SourceError>> + Send;

    /// Downloads one asset of `release` into the file `dest` (created or
    /// truncated), streaming and hashing as it goes. Does not verify against
    /// the announced digest: the cache does that.
    fn download(
        &self,
        release: &ListedRelease,
        asset: &AssetInfo,
        dest: &Path,
        progress: &dyn Progress,
    ) -> impl Future<Output = Result<DownloadedAsset, SourceError>> + Send;
}
