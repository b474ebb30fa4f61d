//! The state shared by both controllers: clients, the cache, the last listing of each source,
//! backoff counters, download tasks and metrics. Everything here is memory only and is either an
//! optimisation or rebuilt after a restart (see `docs/DESIGN.md` §7).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use kube::Client;
use tokio::sync::Semaphore;

use crate::apply::Applier;
use crate::provider::{Gate, GateConfig, ProviderRegistry};
use crate::source::github::{GitHubClient, GitHubConfig, Token};
use crate::source::{AnySource, ListedRelease, ReleaseCache, ReleaseSource, SourceError, SourceSpec};

use super::backoff::{Backoff, BackoffConfig, RandomSource, thread_random};
use super::metrics::Metrics;
use super::poller::Pollers;
use super::watch::Watches;
use crate::controller::stack::objects::LastPoll;
use crate::controller::stack::status::SyncOutcome;

/// The name the operator reports Events under.
pub const REPORTER: &str = "clusterstack-operator";

/// What the controllers need to know, independent of how the process was started.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Watch only this namespace (ClusterStacks, ClusterStackReleases); all when `None`.
    pub watch_namespace: Option<String>,
    /// The source of ClusterStacks without `spec.source`.
    pub default_source: SourceSpec,
    /// The GitHub client configuration (API URL, token).
    pub github: GitHubConfig,
    /// The release cache directory.
    pub cache_dir: PathBuf,
    /// Poll interval of stacks without `spec.pollInterval`.
    pub poll_interval: Duration,
    /// Re-apply interval of ready releases (drift correction).
    pub resync_interval: Duration,
    /// Objects reconciled at once per controller, and downloads at once.
    pub concurrency: u16,
    /// Error backoff per object.
    pub backoff: BackoffConfig,
    /// The node-image provider plug-ins of the gate (empty: every release passes it).
    pub providers: ProviderRegistry,
    /// The gate's deadline and timeouts.
    pub gate: GateConfig,
    /// This instance's shard (`clusterstack.x-k8s.io/shard`); `None`: objects without the label.
    pub shard: Option<String>,
    /// How long a release no ClusterStackRelease references stays in the cache.
    pub cache_grace: Duration,
    /// Deadline of each addon stage's wait condition.
    pub addon_wait_deadline: Duration,
}

impl Settings {
    /// Settings with the operator's defaults for everything but the source and the cache.
    pub fn new(default_source: SourceSpec, cache_dir: impl Into<PathBuf>) -> Self {
        Self {
            watch_namespace: None,
            default_source,
            github: GitHubConfig::default(),
            cache_dir: cache_dir.into(),
            poll_interval: Duration::from_secs(300),
            resync_interval: Duration::from_secs(600),
            concurrency: 4,
            backoff: BackoffConfig::default(),
            providers: ProviderRegistry::empty(),
            gate: GateConfig::default(),
            shard: None,
            cache_grace: Duration::from_secs(3600),
            addon_wait_deadline: crate::controller::addon::DEFAULT_WAIT_DEADLINE,
        }
    }
}

/// The last listing of one source, shared by every stack that follows it.
#[derive(Debug, Clone)]
pub struct SourceListing {
    /// When it was listed.
    pub at: Timestamp,
    /// The releases, or the failure.
    pub result: Result<Arc<Vec<ListedRelease>>, SyncOutcome>,
}

/// What a stack's last poll gave: its time and trigger, and the outcome.
#[derive(Debug, Clone)]
pub struct StackPoll {
    pub last: LastPoll,
    pub listing: Result<Arc<Vec<ListedRelease>>, SyncOutcome>,
}

/// The state of a background download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownloadState {
    /// Running; the text says how far.
    Running(String),
    /// Failed with this message; the next reconcile reports it and may try again.
    Failed(String),
    /// In the cache.
    Done,
}

/// What the release controller remembers of its last successful pass over a release, to ignore
/// triggers that change nothing (our own status writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseMemo {
    pub generation: Option<i64>,
    pub applied_at: Timestamp,
    /// How long the pass stays good: the resync interval, or sooner when the node-image gate
    /// wants to be asked again.
    pub valid_for: Duration,
}

/// Taken when a pass begins: its memo is stored only if nothing invalidated the release since
/// (a change seen by a watch while the pass runs must not be hidden by the memo it ends with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoTicket(u64);

/// Per release: the memo of its last good pass and how often it was invalidated.
#[derive(Debug, Default)]
struct MemoSlot {
    memo: Option<ReleaseMemo>,
    invalidations: u64,
}

/// The release controller's memos, by release key.
#[derive(Debug, Default)]
pub struct Memos(Mutex<HashMap<String, MemoSlot>>);

impl Memos {
    /// The memo of the release's last good pass, and the ticket a new pass stores its own with.
    pub fn get(&self, key: &str) -> (Option<ReleaseMemo>, MemoTicket) {
        lock(&self.0).get(key).map_or((None, MemoTicket(0)), |slot| (slot.memo.clone(), MemoTicket(slot.invalidations)))
    }

    /// Stores the memo of a good pass, unless the release was invalidated since `ticket`.
    pub fn remember(&self, key: &str, ticket: MemoTicket, memo: ReleaseMemo) {
        let mut memos = lock(&self.0);
        let slot = memos.entry(key.to_string()).or_default();
        if slot.invalidations == ticket.0 {
            slot.memo = Some(memo);
        }
    }

    /// The next pass over the release does the whole work (and a pass in flight stores no memo).
    pub fn forget(&self, key: &str) {
        let mut memos = lock(&self.0);
        let slot = memos.entry(key.to_string()).or_default();
        slot.memo = None;
        slot.invalidations += 1;
    }

    /// The release is gone: nothing to remember.
    pub fn remove(&self, key: &str) {
        lock(&self.0).remove(key);
    }
}

/// Shared by both controllers.
pub struct Context {
    pub client: Client,
    /// One applier for the whole process: it caches discovery.
    pub applier: Applier,
    pub github: GitHubClient,
    pub cache: ReleaseCache,
    pub settings: Settings,
    pub metrics: Arc<Metrics>,
    pub stack_backoff: Backoff,
    pub release_backoff: Backoff,
    pub random: RandomSource,
    /// The node-image gate between reading `metadata.yaml` and rendering.
    pub gate: Gate,
    recorder: super::events::EventRecorder,
    listings: Mutex<HashMap<String, SourceListing>>,
    polls: Mutex<HashMap<String, StackPoll>>,
    downloads: Mutex<HashMap<String, DownloadState>>,
    /// What the last good pass over each release was, to skip triggers that change nothing.
    pub memos: Memos,
    /// GitHub clients of `tokenSecretRef` tokens, by token.
    token_clients: Mutex<HashMap<String, GitHubClient>>,
    /// Bounds the downloads running at once.
    pub download_slots: Arc<Semaphore>,
    /// The watches and the triggers they send.
    pub watches: Watches,
    /// One poller per repository.
    pub pollers: Pollers<AnySource>,
    /// `tokenSecretRef` tokens read, by (namespace, Secret, key); dropped when GitHub refuses one
    /// or a poll is forced.
    tokens: Arc<Mutex<HashMap<TokenKey, String>>>,
}

/// A `tokenSecretRef`: (namespace, Secret, key).
type TokenKey = (String, String, String);

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("settings", &self.settings).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves only caches behind; keep going.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Context {
    /// Builds the context. Fails when the cache directory or the GitHub client cannot be set up.
    pub fn new(client: Client, settings: Settings, metrics: Arc<Metrics>) -> Result<Self, SourceError> {
        let github = GitHubClient::new(settings.github.clone())?;
        let cache = ReleaseCache::new(&settings.cache_dir).map_err(|e| SourceError::Other(e.to_string()))?;
        let random = thread_random();
        // In a pod the hostname is the pod's name: the reporting instance.
        let recorder = super::events::EventRecorder::new(client.clone(), REPORTER, std::env::var("HOSTNAME").ok());
        let watches = Watches::new();
        let pollers = Pollers::new(watches.stack_notifier());
        Ok(Self {
            watches,
            pollers,
            tokens: Arc::default(),
            applier: Applier::new(client.clone()),
            client,
            github,
            cache,
            stack_backoff: Backoff::new(settings.backoff, random.clone()),
            release_backoff: Backoff::new(settings.backoff, random.clone()),
            random,
            gate: Gate::new(settings.providers.clone(), settings.gate.clone()),
            recorder,
            listings: Mutex::default(),
            polls: Mutex::default(),
            downloads: Mutex::default(),
            memos: Memos::default(),
            token_clients: Mutex::default(),
            download_slots: Arc::new(Semaphore::new(usize::from(settings.concurrency.max(1)))),
            settings,
            metrics,
        })
    }

    /// Opens a source (cheap: GitHub sources share the client and its caches).
    pub fn open(&self, spec: &SourceSpec) -> Result<AnySource, SourceError> {
        crate::source::open(spec, &self.github)
    }

    /// Opens the source of an object in `namespace`: a GitHub source with a `tokenSecretRef` uses
    /// a client with that token (one client per distinct token, so its ETags and rate-limit state
    /// are shared by every stack using it); others use the operator's client.
    pub async fn open_in(&self, spec: &SourceSpec, namespace: &str) -> Result<AnySource, SourceError> {
        if let SourceSpec::Oci { host, credentials_secret_ref: Some(secret_ref), .. } = spec {
            return self.open_oci_with_secret(spec, host, &secret_ref.name, namespace).await;
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
                    let config =
                        GitHubConfig { token: Some(Token::new(token.clone())), ..self.settings.github.clone() };
                    let c = GitHubClient::new(config)?;
                    clients.insert(token, c.clone());
                    c
                }
            }
        };
        crate::source::open(spec, &client)
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
    async fn read_secret(
        &self,
        namespace: &str,
        name: &str,
        what: &str,
    ) -> Result<k8s_openapi::api::core::v1::Secret, SourceError> {
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(self.client.clone(), namespace);
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

    /// Lists `source`, reusing a listing of the same source younger than `fresh` so that many
    /// stacks following one repository send one request per poll, not one each.
    pub async fn list(&self, source: &AnySource, fresh: Duration) -> SourceListing {
        let name = source.name();
        let now = Timestamp::now();
        if let Some(l) = lock(&self.listings).get(&name)
            && l.result.is_ok()
            && now.duration_since(l.at).unsigned_abs() < fresh
        {
            return l.clone();
        }
        let result = match source.list().await {
            Ok(listing) => Ok(Arc::new(listing.releases)),
            Err(SourceError::RateLimited { until, .. }) => Err(SyncOutcome::RateLimited { until }),
            Err(e) => Err(SyncOutcome::Unavailable { message: e.to_string(), retry_at: None }),
        };
        self.record_github_stats();
        let listing = SourceListing { at: Timestamp::now(), result };
        lock(&self.listings).insert(name, listing.clone());
        listing
    }

    /// The last successful listing of a source, if any (used by the release controller).
    pub fn last_listing(&self, source_name: &str) -> Option<Arc<Vec<ListedRelease>>> {
        lock(&self.listings).get(source_name).and_then(|l| l.result.as_ref().ok().cloned())
    }

    /// Copies the GitHub client's counters into the metrics.
    pub fn record_github_stats(&self) {
        let stats = self.github.stats();
        self.metrics.set_github_stats(&stats);
    }

    pub fn poll(&self, key: &str) -> Option<StackPoll> {
        lock(&self.polls).get(key).cloned()
    }

    pub fn set_poll(&self, key: &str, poll: StackPoll) {
        lock(&self.polls).insert(key.to_string(), poll);
    }

    pub fn forget_stack(&self, key: &str) {
        lock(&self.polls).remove(key);
    }

    pub fn download(&self, key: &str) -> Option<DownloadState> {
        lock(&self.downloads).get(key).cloned()
    }

    pub fn set_download(&self, key: &str, state: DownloadState) {
        lock(&self.downloads).insert(key.to_string(), state);
    }

    pub fn clear_download(&self, key: &str) {
        lock(&self.downloads).remove(key);
    }

    /// Publishes a Kubernetes Event; a failure is logged, never fatal (events are best effort).
    pub async fn event(
        &self,
        reference: &k8s_openapi::api::core::v1::ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        if let Err(e) = self.recorder.publish(reference, warning, reason, action, note).await {
            tracing::warn!(error = %e, reason, "could not publish an Event");
        }
    }
}

/// A Secret's value under `key` as trimmed text; `None` when missing, not UTF-8 or empty.
fn secret_text(secret: &k8s_openapi::api::core::v1::Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    let text = std::str::from_utf8(&bytes.0).ok()?.trim();
    (!text.is_empty()).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo() -> ReleaseMemo {
        ReleaseMemo { generation: Some(1), applied_at: Timestamp::UNIX_EPOCH, valid_for: Duration::from_secs(600) }
    }

    #[test]
    fn a_pass_remembers_what_it_did() {
        let memos = Memos::default();
        let (none, ticket) = memos.get("ns/r");
        assert_eq!(none, None);
        memos.remember("ns/r", ticket, memo());
        assert_eq!(memos.get("ns/r").0, Some(memo()));
        memos.forget("ns/r");
        assert_eq!(memos.get("ns/r").0, None);
    }

    #[test]
    fn a_change_seen_during_a_pass_is_not_hidden_by_its_memo() {
        let memos = Memos::default();
        let (_, ticket) = memos.get("ns/r");
        // A watch sees a hand edit while the pass is still applying.
        memos.forget("ns/r");
        memos.remember("ns/r", ticket, memo());
        assert_eq!(memos.get("ns/r").0, None, "the triggered pass must do the whole work");
        // The pass after it starts with a fresh ticket and may remember again.
        let (_, ticket) = memos.get("ns/r");
        memos.remember("ns/r", ticket, memo());
        assert_eq!(memos.get("ns/r").0, Some(memo()));
    }

    #[test]
    fn memos_are_per_release() {
        let memos = Memos::default();
        let (_, ticket) = memos.get("ns/a");
        memos.forget("ns/b");
        memos.remember("ns/a", ticket, memo());
        assert_eq!(memos.get("ns/a").0, Some(memo()));
        memos.remove("ns/a");
        assert_eq!(memos.get("ns/a").0, None);
    }
}
