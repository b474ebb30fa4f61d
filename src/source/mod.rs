//! Where releases come from, and how they reach disk intact.
//!
//! A [`ReleaseSource`] lists the cluster-stack releases of a repository or
//! directory and downloads single assets. The cache (`cache`) turns one listed
//! release into a verified, extracted directory, atomically.
//!
//! From a user's string to a ready release: parse a [`SourceSpec`]
//! (`github:OWNER/REPO`, `dir:PATH`), [`open`] it into an [`AnySource`], list,
//! then [`cache::ReleaseCache::fetch`].

pub mod archive;
pub mod cache;
pub mod dir;
pub mod github;
pub mod oci;
pub mod spec;
pub mod verify;

pub use cache::{CacheError, FetchPolicy, FetchedRelease, ReleaseCache, Verification};
pub use dir::DirSource;
pub use spec::{SourceSpec, SpecError};

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
    /// A blob of an OCI registry, by digest (`sha256:<hex>`).
    Oci { digest: String },
}

/// One release of a source that parses as a cluster-stack release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRelease {
    pub id: ReleaseId,
    /// The tag, in the tag (dash) form (`id.tag()`): a source that spells it in the class (dot)
    /// form, as the stack repository's build script tags non-stable releases, is listed under it.
    pub tag: String,
    /// Marked as a pre-release on GitHub.
    pub prerelease: bool,
    pub assets: Vec<AssetInfo>,
}

impl ListedRelease {
    /// The asset named `name`.
    pub fn asset(&self, name: &str) -> Option<&AssetInfo> {
        self.assets.iter().find(|a| a.name == name)
    }

    /// What the listing alone tells about integrity (the cache decides for
    /// real, after download).
    pub fn digest_coverage(&self) -> DigestCoverage {
        let content = || self.assets.iter().filter(|a| a.name != SHA256SUMS);
        if content().next().is_some() && content().all(|a| a.sha256.is_some()) {
            DigestCoverage::Complete
        } else if self.asset(SHA256SUMS).is_some() {
            DigestCoverage::Sha256Sums
        } else {
            DigestCoverage::Missing
        }
    }
}

/// How much of a listed release has a known digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestCoverage {
    /// Every asset has a digest.
    Complete,
    /// Not every asset has one, but a `SHA256SUMS` asset may provide them.
    Sha256Sums,
    /// Some asset has no digest at all: the release can only be unverified.
    Missing,
}

/// The asset holding `<sha256hex>  <filename>` lines.
pub const SHA256SUMS: &str = "SHA256SUMS";

/// Parses a `SHA256SUMS` file as `sha256sum` writes it (`<hex>  <name>`, or
/// `<hex> *<name>` in binary mode) into file name -> lowercase hex. Blank
/// lines and `#` comments are ignored; anything else malformed is an error
/// naming the line.
pub fn parse_sha256sums(text: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut sums = std::collections::BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("line {}: expected '<sha256 hex>  <file name>', got {line:?}", i + 1);
        let (hex, rest) = line.split_once(' ').ok_or_else(bad)?;
        let name = rest.strip_prefix(' ').or_else(|| rest.strip_prefix('*')).unwrap_or(rest);
        let name = name.strip_prefix("./").unwrap_or(name);
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) || name.is_empty() {
            return Err(bad());
        }
        sums.insert(name.to_string(), hex.to_ascii_lowercase());
    }
    Ok(sums)
}

/// Everything a source lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    pub releases: Vec<ListedRelease>,
    /// Tags that are not cluster-stack releases (skipped, never fatal).
    pub skipped: Vec<String>,
}

impl Listing {
    /// The release a user names, in the tag (dash) or the class (dot) form.
    pub fn find(&self, name: &str) -> Option<&ListedRelease> {
        let id = ReleaseId::parse_any(name).ok();
        self.releases.iter().find(|r| r.tag == name || id.as_ref() == Some(&r.id))
    }
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

    /// The directory of this source's releases in the cache, relative, `/`
    /// separated: `github/<owner>/<repo>`, `dir/<hash>`. The default derives it
    /// from [`name`](Self::name) (`github:o/r` -> `github/o/r`).
    fn cache_key(&self) -> String {
        self.name().replacen(':', "/", 1)
    }

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

    /// The cosign signatures of `release`'s OCI manifest (see [`verify::cosign`]); `None` for a
    /// source that has no manifests to sign (GitHub releases, directories).
    fn cosign_signatures(
        &self,
        _release: &ListedRelease,
    ) -> impl Future<Output = Result<Option<oci::CosignSignatures>, SourceError>> + Send {
        async { Ok(None) }
    }

    /// The attestation bundles the source's attestation store holds for the artifact whose
    /// sha256 is `sha256_hex` (GitHub's attestations API); `None` for a source without such a
    /// store (directories, OCI registries), `Some(empty)` when it holds none.
    fn attestations(
        &self,
        _sha256_hex: &str,
    ) -> impl Future<Output = Result<Option<Vec<Vec<u8>>>, SourceError>> + Send {
        async { Ok(None) }
    }
}

/// Either kind of source, as opened from a [`SourceSpec`].
#[derive(Debug, Clone)]
pub enum AnySource {
    GitHub(github::GitHubSource),
    Dir(DirSource),
    Oci(oci::OciSource),
    /// A source read with one namespace's credentials (a `tokenSecretRef`, a
    /// `credentialsSecretRef`): its listing and its cache entries are that namespace's alone, so
    /// a private repository one team reads with its token is not served to another team that
    /// names the same repository without one (`docs/security.md`). See [`AnySource::scoped`].
    GitHubScoped {
        source: github::GitHubSource,
        namespace: String,
    },
    /// See [`AnySource::GitHubScoped`].
    OciScoped {
        source: oci::OciSource,
        namespace: String,
    },
}

impl AnySource {
    /// This source scoped to `namespace` (see [`AnySource::GitHubScoped`]); a directory source
    /// has no credentials and stays as it is.
    pub fn scoped(self, namespace: &str) -> Self {
        let namespace = namespace.to_string();
        match self {
            AnySource::GitHub(source) => AnySource::GitHubScoped { source, namespace },
            AnySource::Oci(source) => AnySource::OciScoped { source, namespace },
            other => other,
        }
    }
}

/// Opens the source a spec names. GitHub sources share `github` (its
/// rate-limit and conditional-request state); a directory must exist; an
/// OCI source takes its credentials from the Go operator's `OCI_*` variables
/// (see [`open_with`] for explicit options).
pub fn open(spec: &SourceSpec, github: &github::GitHubClient) -> Result<AnySource, SourceError> {
    let options = match spec {
        SourceSpec::Oci { host, .. } => oci::OciOptions::from_env(host, |k| std::env::var(k).ok()),
        _ => oci::OciOptions::default(),
    };
    open_with(spec, github, &options)
}

/// As [`open`], with explicit OCI options.
pub fn open_with(
    spec: &SourceSpec,
    github: &github::GitHubClient,
    oci_options: &oci::OciOptions,
) -> Result<AnySource, SourceError> {
    match spec {
        SourceSpec::GitHub { owner, repository, .. } => Ok(AnySource::GitHub(github.repository(owner, repository))),
        SourceSpec::Dir { path } => Ok(AnySource::Dir(DirSource::new(path)?)),
        SourceSpec::Oci { host, repository, .. } => {
            crate::install_crypto_provider();
            let client =
                crate::registry::RegistryClient::new(oci_options.registry.clone()).map_err(SourceError::Other)?;
            let base = oci::registry_base_url(host, &oci_options.insecure);
            Ok(AnySource::Oci(oci::OciSource::new(std::sync::Arc::new(client), host, repository, &base)))
        }
    }
}

impl ReleaseSource for AnySource {
    fn name(&self) -> String {
        match self {
            AnySource::GitHub(s) => s.name(),
            AnySource::Dir(s) => s.name(),
            AnySource::Oci(s) => s.name(),
            AnySource::GitHubScoped { source, namespace } => format!("{} (credentials of {namespace})", source.name()),
            AnySource::OciScoped { source, namespace } => format!("{} (credentials of {namespace})", source.name()),
        }
    }

    fn cache_key(&self) -> String {
        match self {
            AnySource::GitHub(s) => s.cache_key(),
            AnySource::Dir(s) => s.cache_key(),
            AnySource::Oci(s) => s.cache_key(),
            // A namespace name is a DNS label: safe as part of a path.
            AnySource::GitHubScoped { source, namespace } => format!("{}@{namespace}", source.cache_key()),
            AnySource::OciScoped { source, namespace } => format!("{}@{namespace}", source.cache_key()),
        }
    }

    async fn list(&self) -> Result<Listing, SourceError> {
        match self {
            AnySource::GitHub(s) => s.list().await,
            AnySource::Dir(s) => s.list().await,
            AnySource::Oci(s) => s.list().await,
            AnySource::GitHubScoped { source, .. } => source.list().await,
            AnySource::OciScoped { source, .. } => source.list().await,
        }
    }

    async fn download(
        &self,
        release: &ListedRelease,
        asset: &AssetInfo,
        dest: &Path,
        progress: &dyn Progress,
    ) -> Result<DownloadedAsset, SourceError> {
        match self {
            AnySource::GitHub(s) => s.download(release, asset, dest, progress).await,
            AnySource::Dir(s) => s.download(release, asset, dest, progress).await,
            AnySource::Oci(s) => s.download(release, asset, dest, progress).await,
            AnySource::GitHubScoped { source, .. } => source.download(release, asset, dest, progress).await,
            AnySource::OciScoped { source, .. } => source.download(release, asset, dest, progress).await,
        }
    }

    async fn cosign_signatures(&self, release: &ListedRelease) -> Result<Option<oci::CosignSignatures>, SourceError> {
        match self {
            AnySource::Oci(s) | AnySource::OciScoped { source: s, .. } => s.cosign_signatures(release).await.map(Some),
            _ => Ok(None),
        }
    }

    async fn attestations(&self, sha256_hex: &str) -> Result<Option<Vec<Vec<u8>>>, SourceError> {
        match self {
            AnySource::GitHub(s) | AnySource::GitHubScoped { source: s, .. } => s.attestations(sha256_hex).await,
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256sums_lines_parse_in_both_modes() {
        let a = "a".repeat(64);
        let b = "B".repeat(64);
        let text = format!("# built by ci\n{a}  metadata.yaml\n\n{b} *x.tgz\r\n");
        let sums = parse_sha256sums(&text).unwrap();
        assert_eq!(sums.get("metadata.yaml"), Some(&a));
        assert_eq!(sums.get("x.tgz"), Some(&"b".repeat(64)));
        assert_eq!(sums.len(), 2);
    }

    #[test]
    fn malformed_sha256sums_names_the_line() {
        let err = parse_sha256sums("abc  metadata.yaml\n").unwrap_err();
        assert!(err.contains("line 1"), "{err}");
        assert!(parse_sha256sums(&format!("{}\n", "a".repeat(64))).is_err());
    }

    #[test]
    fn default_cache_key_turns_the_name_into_a_path() {
        let client = github::GitHubClient::new(github::GitHubConfig::default()).unwrap();
        assert_eq!(client.repository("o", "r").cache_key(), "github/o/r");
    }
}
