//! Releases of a GitHub repository.
//!
//! Skeleton: the types and signatures other modules build against. The
//! implementation fills in the bodies.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::{AssetInfo, DownloadedAsset, ListedRelease, Listing, Progress, ReleaseSource, SourceError};

/// The public GitHub API.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// An access token. Never printed: `Debug` and `Display` redact it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(secret: impl Into<String>) -> Self {
        Token(secret.into().trim().to_string())
    }

    /// The secret itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

/// Settings of the GitHub client.
#[derive(Debug, Clone)]
pub struct GitHubConfig {
    /// API base URL, e.g. `https://api.github.com` or a GitHub Enterprise URL.
    pub api_url: String,
    pub token: Option<Token>,
    /// List releases marked as pre-release too.
    pub include_prereleases: bool,
}

impl Default for GitHubConfig {
    fn default() -> Self {
        Self { api_url: DEFAULT_API_URL.to_string(), token: None, include_prereleases: false }
    }
}

/// A GitHub API client shared by every source of one process, so that
/// conditional-request state, rate limits and in-flight listings are shared.
#[derive(Debug, Clone)]
pub struct GitHubClient {
    inner: Arc<ClientInner>,
}

#[derive(Debug)]
struct ClientInner {
    config: GitHubConfig,
}

impl GitHubClient {
    pub fn new(config: GitHubConfig) -> Result<Self, SourceError> {
        Ok(Self { inner: Arc::new(ClientInner { config }) })
    }

    /// A source for one repository, sharing this client.
    pub fn repository(&self, owner: &str, repository: &str) -> GitHubSource {
        GitHubSource { client: self.clone(), owner: owner.to_string(), repository: repository.to_string() }
    }

    pub fn config(&self) -> &GitHubConfig {
        &self.inner.config
    }
}

/// The releases of one GitHub repository.
#[derive(Debug, Clone)]
pub struct GitHubSource {
    client: GitHubClient,
    owner: String,
    repository: String,
}

impl ReleaseSource for GitHubSource {
    fn name(&self) -> String {
        format!("github:{}/{}", self.owner, self.repository)
    }

    async fn list(&self) -> Result<Listing, SourceError> {
        Err(SourceError::Other(format!("{}: listing is not implemented yet", self.name())))
    }

    async fn download(
        &self,
        _release: &ListedRelease,
        asset: &AssetInfo,
        _dest: &Path,
        _progress: &dyn Progress,
    ) -> Result<DownloadedAsset, SourceError> {
        Err(SourceError::Other(format!("{}: downloading {} is not implemented yet", self.name(), asset.name)))
    }
}
