//! What every controller shares: the client, the settings, metrics, the Event recorder, the
//! applier (its discovery cache), the sources and the watches. Each controller keeps its own
//! state in a context of its own (`StackContext`, `ReleaseContext`, `AddonContext`) that holds
//! this one. Everything here is memory only and is either an optimisation or rebuilt after a
//! restart (see `docs/DESIGN.md` §7).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::{Client, Resource, ResourceExt};

use crate::api::{ClusterStack, ClusterStackRelease};
use crate::apply::Applier;
use crate::provider::{GateConfig, ProviderRegistry};
use crate::source::github::GitHubConfig;
use crate::source::{AnySource, SourceError, SourceSpec};

use super::backoff::{BackoffConfig, RandomSource, thread_random};
use super::events::EventRecorder;
use super::metrics::Metrics;
use super::sources::Sources;
use super::tenancy::{DirectoryRefused, DirectoryRoots};
use super::watch::Watches;

/// The name the operator reports Events under.
pub const REPORTER: &str = "clusterstack-operator";
/// The default deadline of an addon stage's wait condition.
pub const DEFAULT_ADDON_WAIT_DEADLINE: Duration = Duration::from_secs(600);

/// How many objects one release may apply by default (`--max-objects-per-release`): ten
/// times the largest real stack seen, and small enough that its compact status (names only)
/// stays far below the API server's object size limit (1.5 MiB in etcd).
pub const DEFAULT_MAX_OBJECTS_PER_RELEASE: usize = 5000;

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
    /// A release (or a Cluster's addons) rendering more objects is refused before anything is
    /// applied.
    pub max_objects_per_release: usize,
    /// Where ClusterStacks' directory sources may point (`--allowed-directory-roots`); none by
    /// default. The default source is the operator's own setting and is not confined.
    pub directory_roots: DirectoryRoots,
    /// How the dependencies of charts published without their `charts/` are resolved when a
    /// release enters the cache (`--helm-repo-mirror`, the download cache
    /// `<cache>/helm-charts`).
    pub chart_dependencies: crate::package::deps::DependencyOptions,
    /// The signature policy of ClusterStacks without `spec.verify` (`--verify-policy`); none by
    /// default: releases are checked by digest only.
    pub verify_policy: Option<crate::api::VerifySpec>,
}

impl Settings {
    /// Settings with the operator's defaults for everything but the source and the cache.
    pub fn new(default_source: SourceSpec, cache_dir: impl Into<PathBuf>) -> Self {
        let cache_dir = cache_dir.into();
        Self {
            watch_namespace: None,
            default_source,
            github: GitHubConfig::default(),
            chart_dependencies: crate::package::deps::DependencyOptions {
                cache_dir: Some(cache_dir.join(crate::package::deps::DOWNLOAD_CACHE_DIR)),
                ..Default::default()
            },
            cache_dir,
            poll_interval: Duration::from_secs(300),
            resync_interval: Duration::from_secs(600),
            concurrency: 4,
            backoff: BackoffConfig::default(),
            providers: ProviderRegistry::empty(),
            gate: GateConfig::default(),
            shard: None,
            cache_grace: Duration::from_secs(3600),
            addon_wait_deadline: DEFAULT_ADDON_WAIT_DEADLINE,
            max_objects_per_release: DEFAULT_MAX_OBJECTS_PER_RELEASE,
            directory_roots: DirectoryRoots::default(),
            verify_policy: None,
        }
    }
}

/// Why a render of `count` objects is refused when it passes `cap` (`--max-objects-per-release`):
/// the status listing them would not fit in one object, and the applies would hold the API server.
/// `what` names the render: "the release", "the addons of docker-ferrol-1-27-v2".
pub fn too_many_objects_message(what: &str, count: usize, cap: usize) -> String {
    format!(
        "{what} renders {count} objects, more than the {cap} allowed per release \
         (--max-objects-per-release): nothing was applied"
    )
}

/// The runtime every controller shares.
pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub metrics: Arc<Metrics>,
    /// The randomness of jitter and backoff.
    pub random: RandomSource,
    /// One applier for the whole process: it caches discovery.
    pub applier: Applier,
    /// Sources, their credentials, the release cache and the pollers.
    pub sources: Sources,
    /// The watches and the triggers they send.
    pub watches: Watches,
    recorder: EventRecorder,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("settings", &self.settings).finish_non_exhaustive()
    }
}

/// Why the source of an object cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum SourceLookupError {
    /// Reading the owning ClusterStack failed.
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// `spec.source` is malformed, or the source cannot be opened (e.g. a Secret it names).
    #[error("{0}")]
    Config(String),
    /// `spec.source.directory` names a directory this operator does not let stacks read.
    #[error(transparent)]
    Refused(#[from] DirectoryRefused),
}

impl Context {
    /// Builds the context. Fails when the cache directory or the GitHub client cannot be set up.
    pub fn new(client: Client, settings: Settings, metrics: Arc<Metrics>) -> Result<Self, SourceError> {
        let watches = Watches::new();
        let sources = Sources::new(
            client.clone(),
            settings.github.clone(),
            &settings.cache_dir,
            settings.chart_dependencies.clone(),
            metrics.clone(),
            watches.stack_notifier(),
        )?;
        // In a pod the hostname is the pod's name: the reporting instance.
        let recorder = EventRecorder::new(client.clone(), REPORTER, std::env::var("HOSTNAME").ok());
        Ok(Self {
            applier: Applier::new(client.clone()),
            random: thread_random(),
            client,
            settings,
            metrics,
            sources,
            watches,
            recorder,
        })
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

    /// The source a stack follows: `spec.source`, else the operator's default. A directory is
    /// confined to the allowed roots and given resolved (see [`super::tenancy`]); the default
    /// source is the operator's own setting and is not.
    pub fn stack_source(&self, stack: &ClusterStack) -> Result<SourceSpec, SourceLookupError> {
        match &stack.spec.source {
            Some(s) => match SourceSpec::from_crd(s).map_err(|e| SourceLookupError::Config(e.to_string()))? {
                SourceSpec::Dir { path } => {
                    let given = path.to_string_lossy();
                    Ok(SourceSpec::Dir { path: self.settings.directory_roots.confine(&given)? })
                }
                other => Ok(other),
            },
            None => Ok(self.settings.default_source.clone()),
        }
    }

    /// The release's ClusterStack (its controller owner), if it still exists.
    pub async fn owning_stack(&self, release: &ClusterStackRelease) -> Result<Option<ClusterStack>, kube::Error> {
        let owner = release.owner_references().iter().find(|o| o.kind == "ClusterStack" && o.controller == Some(true));
        let ns = release.namespace().unwrap_or_default();
        if let (Some(o), Some(store)) = (owner, self.watches.stacks()) {
            // From the controller's store: no request per pass.
            let found = store.get(&kube::runtime::reflector::ObjectRef::new(&o.name).within(&ns));
            return Ok(found.filter(|s| s.metadata.uid.as_deref() == Some(o.uid.as_str())).map(|s| s.as_ref().clone()));
        }
        match owner {
            Some(o) => {
                let stacks: kube::Api<ClusterStack> = kube::Api::namespaced(self.client.clone(), &ns);
                stacks.get_opt(&o.name).await
            }
            None => Ok(None),
        }
    }

    /// The source of the release's ClusterStack, else the operator's default; and the stack.
    pub async fn release_source(
        &self,
        release: &ClusterStackRelease,
    ) -> Result<(AnySource, Option<ClusterStack>), SourceLookupError> {
        let stack = self.owning_stack(release).await?;
        let spec = match &stack {
            Some(stack) => self.stack_source(stack)?,
            None => self.settings.default_source.clone(),
        };
        let ns = release.namespace().unwrap_or_default();
        let source = self.sources.open_in(&spec, &ns).await.map_err(|e| SourceLookupError::Config(e.to_string()))?;
        Ok((source, stack))
    }
}

/// The key of an object in the controllers' maps: `namespace/name`.
pub fn key_of<K: Resource>(obj: &K) -> String {
    format!(
        "{}/{}",
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}
