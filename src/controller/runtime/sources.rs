//! The release sources as the controllers see them: opening a source (with the token or the
//! registry credentials of a Secret it names), the verified release cache, and the pollers, which
//! keep the one latest listing of each source (listing on demand goes through them too). Shared by the ClusterStack controller (it subscribes to the
//! pollers), the ClusterStackRelease controller (it downloads) and the ClusterAddon controller
//! (it reads releases from the cache). Memory only: every piece is an optimisation or rebuilt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;

use crate::source::github::{GitHubClient, GitHubConfig, Token};
use crate::source::{AnySource, ReleaseCache, ReleaseSource, SourceError, SourceSpec};
use crate::util::lock;

use super::metrics::Metrics;
use super::poller::{Listing, Notifier, Pollers};

/// A `tokenSecretRef`: (namespace, Secret, key).
type TokenKey = (String, String, String);

/// Sources, their credentials, the cache and the pollers of one process.
pub struct Sources {
    client: Client,
    github_config: GitHubConfig,
    github: GitHubClient,
    metrics: Arc<Metrics>,
    /// The verified release cache.
    pub cache: ReleaseCache,
    /// One poller per repository, and the latest listing of every source.
    pub pollers: Pollers<AnySource>,
    /// GitHub clients of `tokenSecretRef` tokens, by token.
    token_clients: Mutex<HashMap<String, GitHubClient>>,
    /// `tokenSecretRef` tokens read, by (namespace, Secret, key); dropped when GitHub refuses one
    /// or a poll is forced.
    tokens: Mutex<HashMap<TokenKey, String>>,
}

impl std::fmt::Debug for Sources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sources").field("cache", &self.cache).field("pollers", &self.pollers).finish_non_exhaustive()
    }
}

impl Sources {
    /// Sets up the GitHub client and the cache directory (resolving chart dependencies with
    /// `chart_dependencies`); `notify` is told which stacks to trigger after a poll.
    pub fn new(
        client: Client,
        github: GitHubConfig,
        cache_dir: &std::path::Path,
        chart_dependencies: crate::package::deps::DependencyOptions,
        metrics: Arc<Metrics>,
        notify: Notifier,
    ) -> Result<Self, SourceError> {
        // Charts published without their `charts/` get their dependencies as the release enters
        // the cache (`package::release_deps`).
        let prepare = Arc::new(crate::package::release_deps::ChartDependencies::new(chart_dependencies));
        Ok(Self {
            github: GitHubClient::new(github.clone())?,
            github_config: github,
            cache: ReleaseCache::new(cache_dir).map_err(|e| SourceError::Other(e.to_string()))?.with_prepare(prepare),
            pollers: Pollers::new(notify),
            client,
            metrics,
            token_clients: Mutex::default(),
            tokens: Mutex::default(),
        })
    }

    /// Opens a source (cheap: GitHub sources share the client and its caches).
    pub fn open(&self, spec: &SourceSpec) -> Result<AnySource, SourceError> {
        crate::source::open(spec, &self.github)
    }

    /// Opens the source of an object in `namespace`: a GitHub source with a `tokenSecretRef` uses
    /// a client with that token (one client per distinct token, so its ETags and rate-limit state
    /// are shared by every stack using it); others use the operator's client.
    ///
    /// A source opened with a Secret's credentials is scoped to `namespace`
    /// ([`AnySource::Scoped`]): its listing, poller and cache entries are not shared with other
    /// namespaces, which may not hold the credentials.
    pub async fn open_in(&self, spec: &SourceSpec, namespace: &str) -> Result<AnySource, SourceError> {
        let scoped = |source: AnySource| source.scoped(namespace);
        if let SourceSpec::Oci { host, credentials_secret_ref: Some(secret_ref), .. } = spec {
            return self.open_oci_with_secret(spec, host, &secret_ref.name, namespace).await.map(scoped);
        }
        let SourceSpec::GitHub { token_secret_ref: Some(secret_ref), .. } = spec else {
            return self.open(spec);
        };
        let key = secret_ref.key.as_deref().unwrap_or("token");
        let token_key = (namespace.to_string(), secret_ref.name.clone(), key.to_string());
        let cached = lock(&self.tokens).get(&token_key).cloned();
        let token = match cached {
            Some(t) => t,
            None => {
                let token = self.read_token(namespace, &secret_ref.name, key).await?;
                // Kept until GitHub refuses it or a poll is forced: no request per pass, and
                // no list/watch permission on Secrets (RBAC cannot narrow those to one name).
                lock(&self.tokens).insert(token_key, token.clone());
                token
            }
        };
        let client = {
            let mut clients = lock(&self.token_clients);
            match clients.get(&token) {
                Some(c) => c.clone(),
                None => {
                    let config = GitHubConfig { token: Some(Token::new(token.clone())), ..self.github_config.clone() };
                    let c = GitHubClient::new(config)?;
                    clients.insert(token, c.clone());
                    c
                }
            }
        };
        crate::source::open(spec, &client).map(scoped)
    }

    /// Forgets the cached `tokenSecretRef` tokens of `namespace` (read again at the next use).
    pub fn forget_tokens(&self, namespace: &str) {
        lock(&self.tokens).retain(|(ns, _, _), _| ns != namespace);
    }

    async fn read_token(&self, namespace: &str, name: &str, key: &str) -> Result<String, SourceError> {
        let what = format!("Secret {namespace}/{name} key {key:?} (spec.source.github.tokenSecretRef)");
        let secret = self.read_secret(namespace, name, &what).await?;
        secret_text(&secret, key).ok_or_else(|| SourceError::Other(format!("{what} is missing or empty")))
    }

    /// Reads a Secret a source names; `what` says which, in errors.
    async fn read_secret(&self, namespace: &str, name: &str, what: &str) -> Result<Secret, SourceError> {
        let secrets: kube::Api<Secret> = kube::Api::namespaced(self.client.clone(), namespace);
        secrets
            .get_opt(name)
            .await
            .map_err(|e| SourceError::Other(format!("cannot read {what}: {e}")))?
            .ok_or_else(|| SourceError::Other(format!("{what} does not exist")))
    }

    /// Opens an OCI source with the credentials of a Secret: `username` and `password`, or
    /// `token` (a bearer access token).
    async fn open_oci_with_secret(
        &self,
        spec: &SourceSpec,
        host: &str,
        name: &str,
        namespace: &str,
    ) -> Result<AnySource, SourceError> {
        let what = format!("Secret {namespace}/{name} (spec.source.oci.credentialsSecretRef)");
        let secret = self.read_secret(namespace, name, &what).await?;
        let value = |key: &str| secret_text(&secret, key);
        let mut options = crate::source::oci::OciOptions::from_env(host, |k| std::env::var(k).ok());
        options.registry.credentials.remove(host);
        options.registry.access_tokens.remove(host);
        match (value("username"), value("password"), value("token")) {
            (Some(username), Some(password), _) => {
                options
                    .registry
                    .credentials
                    .insert(host.to_string(), crate::registry::Credentials { username, password });
            }
            (_, _, Some(token)) => {
                options.registry.access_tokens.insert(host.to_string(), token);
            }
            _ => return Err(SourceError::Other(format!("{what} has neither username and password nor token"))),
        }
        crate::source::open_with(spec, &self.github, &options)
    }

    /// Lists `source` on demand through the pollers' listings ([`Pollers::list`]): a listing of
    /// the same source younger than `fresh`, by a poller or on demand, is reused.
    pub async fn list(&self, source: &AnySource, fresh: Duration) -> Listing {
        let listing = self.pollers.list(&source.cache_key(), source, fresh).await;
        self.record_github_stats();
        listing
    }

    /// Copies the GitHub client's counters into the metrics.
    pub fn record_github_stats(&self) {
        let stats = self.github.stats();
        self.metrics.set_github_stats(&stats);
    }
}

/// A Secret's value under `key` as trimmed text; `None` when missing, not UTF-8 or empty.
fn secret_text(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    let text = std::str::from_utf8(&bytes.0).ok()?.trim();
    (!text.is_empty()).then(|| text.to_string())
}
