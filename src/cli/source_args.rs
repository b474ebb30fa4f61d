//! Flags shared by the commands that read releases (`releases`, `pull`).

use std::path::PathBuf;

use crate::source::github::{GitHubClient, GitHubConfig, Token};
use crate::source::spec::{self, SourceSpec, SpecError};
use crate::source::{self, AnySource, CacheError, SourceError};

/// Where releases come from.
#[derive(Debug, Clone, clap::Args)]
pub struct SourceArgs {
    /// The release source: `github:OWNER/REPO`, `dir:PATH` or `oci://HOST[:PORT]/REPOSITORY`.
    /// Default: the Go operator's GIT_ORG_NAME/GIT_REPOSITORY_NAME when set, else its
    /// OCI_REGISTRY/OCI_REPOSITORY, else `dir:releases`. OCI credentials come from env
    /// OCI_USERNAME + OCI_PASSWORD or OCI_ACCESS_TOKEN.
    #[arg(long, env = "CLUSTERSTACK_SOURCE")]
    pub source: Option<String>,

    /// GitHub API URL (GitHub Enterprise: `https://HOST/api/v3`).
    #[arg(long, env = "GITHUB_API_URL", default_value = source::github::DEFAULT_API_URL)]
    pub github_api_url: String,

    /// A file holding the GitHub token. Otherwise the token comes from env
    /// GIT_ACCESS_TOKEN or GITHUB_TOKEN (never from a flag, which `ps` would show).
    #[arg(long, env = "GITHUB_TOKEN_FILE")]
    pub github_token_file: Option<PathBuf>,

    /// Also list GitHub releases marked as pre-release.
    #[arg(long)]
    pub include_prereleases: bool,

    /// Reach this OCI registry host (`HOST[:PORT]`) over plain http:// (loopback hosts always
    /// are). Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registries: Vec<String>,

    /// When a release's charts come without their `charts/`, fetch their dependencies' Helm
    /// repository (or OCI path) ORIGINAL from MIRROR instead, as `ORIGINAL=MIRROR` (repeatable,
    /// the first matching rule wins). A release's plain `http://` repositories are refused
    /// unless a rule rewrites them.
    #[arg(long = "helm-repo-mirror", value_name = "ORIGINAL=MIRROR", value_parser = crate::package::deps::parse_mirror)]
    pub helm_repo_mirror: Vec<(String, String)>,
}

/// Why a release command failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceCliError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error("cannot read the GitHub token file {path}")]
    TokenFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("release {tag} is not in {source_name} ({hint})")]
    NotFound { tag: String, source_name: String, hint: String },
    #[error("{0}")]
    Usage(String),
    #[error("cannot write the output: {0}")]
    Output(String),
    /// A signature did not verify (`verify-bundle`, a pull with a policy).
    #[error("{0}")]
    Verification(String),
}

impl SourceArgs {
    /// The release cache in `dir`, resolving the dependencies of charts a release ships without
    /// their `charts/` as the operator does (the download cache `<dir>/helm-charts`, the mirrors).
    pub fn release_cache(&self, dir: PathBuf) -> Result<source::ReleaseCache, CacheError> {
        let deps = crate::package::deps::DependencyOptions {
            cache_dir: Some(dir.join(crate::package::deps::DOWNLOAD_CACHE_DIR)),
            mirrors: self.helm_repo_mirror.clone(),
            insecure_registries: self.insecure_registries.clone(),
            ..Default::default()
        };
        let prepare = std::sync::Arc::new(crate::package::release_deps::ChartDependencies::new(deps));
        Ok(source::ReleaseCache::new(dir)?.with_prepare(prepare))
    }

    /// The source spec: `--source`, else the environment's default.
    pub fn spec(&self) -> Result<SourceSpec, SpecError> {
        match &self.source {
            Some(s) => s.parse(),
            None => SourceSpec::default_from_env(|k| std::env::var(k).ok()),
        }
    }

    /// The GitHub client settings from the flags and the environment.
    pub fn github_config(&self) -> Result<GitHubConfig, SourceCliError> {
        let token = match &self.github_token_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| SourceCliError::TokenFile { path: path.clone(), source })?;
                Some(Token::new(text)).filter(|t| !t.expose().is_empty())
            }
            None => spec::token_from_env(|k| std::env::var(k).ok()),
        };
        Ok(GitHubConfig { api_url: self.github_api_url.clone(), token, include_prereleases: self.include_prereleases })
    }

    /// Opens the source.
    pub fn open(&self) -> Result<AnySource, SourceCliError> {
        let spec = self.spec()?;
        let client = GitHubClient::new(self.github_config()?)?;
        Ok(source::open_with(&spec, &client, &self.oci_options(&spec))?)
    }

    /// How an OCI source is reached: credentials from the environment (`OCI_*`), insecure hosts
    /// from `--insecure-registry` and the environment.
    pub fn oci_options(&self, spec: &SourceSpec) -> source::oci::OciOptions {
        let host = match spec {
            SourceSpec::Oci { host, .. } => host.as_str(),
            _ => "",
        };
        let mut options = source::oci::OciOptions::from_env(host, |k| std::env::var(k).ok());
        options.insecure.extend(self.insecure_registries.iter().cloned());
        options
    }
}
