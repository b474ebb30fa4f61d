//! Node-image provider plug-ins: the provider-specific gate a release passes between reading its
//! `metadata.yaml` and rendering its cluster class.
//!
//! - [`NodeImageProvider`]: the trait a plug-in implements: *ensure* the release's node images and
//!   answer with [`Progress`], *clean up* when the release is deleted. A plug-in never blocks a
//!   reconcile: long work runs as a tracked task ([`TaskTracker`]) or in another system.
//! - [`ProviderRegistry`]: provider names to plug-ins, plus the [`ExternalOperator`] plug-in that
//!   serves any ClusterStack with a `providerRef` (the Go operator's contract).
//! - [`Gate`]: what the release controller calls; it picks the plug-in, bounds the call, applies
//!   the deadline and produces the `NodeImagesReady` condition and the per-image list for
//!   `ClusterStackRelease.status` ([`GateOutcome::record`]). Progress lives in that status only, so
//!   a restarted operator resumes by asking the plug-in again.
//! - [`docker`]: the built-in plug-in of the `docker` provider, checking that the container images
//!   of `node-images.yaml` exist in their registries.
//!
//! `docs/providers.md` explains how to write a plug-in.

pub mod docker;
mod external;
mod gate;
mod node_images;
mod tasks;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use kube::Resource;

use crate::api::{ClusterStackRelease, NodeImageStatus, ObjectRef};
use crate::release::{NameError, ReleaseId, ReleaseMetadata};

pub use docker::DockerProvider;
pub use external::{ExternalOperator, provider_object_kind};
pub use gate::{DEFAULT_DEADLINE, Gate, GateConfig, GateOutcome, GateState, Selection, decide};
pub use node_images::{NODE_IMAGES_FILE, NodeImagesError, NodeImagesFile};
pub use tasks::TaskTracker;

/// Condition type (ClusterStackRelease): the provider's node images are ready.
pub const NODE_IMAGES_READY: &str = "NodeImagesReady";

/// Reasons of the `NodeImagesReady` condition, CamelCase as Kubernetes expects.
pub mod reason {
    /// Every node image is ready.
    pub const READY: &str = "NodeImagesReady";
    /// The plug-in is still working; the message says on what.
    pub const PROGRESSING: &str = "Progressing";
    /// The plug-in failed; it will be asked again (the message says why).
    pub const FAILED: &str = "NodeImagesFailed";
    /// The plug-in failed in a way that retrying cannot fix (e.g. an invalid `node-images.yaml`).
    pub const FAILED_PERMANENTLY: &str = "NodeImagesFailedPermanently";
    /// The gate's deadline passed before the images were ready; the plug-in is still asked.
    pub const TIMED_OUT: &str = "TimedOut";
}

/// Everything a plug-in is told about the release it works for.
#[derive(Clone)]
pub struct ReleaseContext {
    /// The release's identity (its `provider` selects the plug-in).
    pub release: ReleaseId,
    /// The namespace of the ClusterStackRelease.
    pub namespace: String,
    /// The release's `metadata.yaml`. Always set when the gate asks [`NodeImageProvider::ensure`];
    /// may be `None` for [`NodeImageProvider::cleanup`] of a release that is no longer in the
    /// cache (deletion does not download it again).
    pub metadata: Option<ReleaseMetadata>,
    /// The release's `node-images.yaml`, when it has one.
    pub node_images: Option<NodeImagesFile>,
    /// `ClusterStack.spec.providerRef`: the provider template, when the stack names one.
    pub provider_ref: Option<ObjectRef>,
    /// An owner reference to the ClusterStackRelease, for objects a plug-in creates (so they are
    /// garbage-collected with the release).
    pub owner: Option<OwnerReference>,
    /// The per-image list of the last status (`status.nodeImages`): the plug-in's memory across
    /// passes and restarts.
    pub previous: Vec<NodeImageStatus>,
    /// A client of the management cluster.
    pub client: kube::Client,
}

impl ReleaseContext {
    /// A context with no `node-images.yaml`, provider template, owner or previous status;
    /// `metadata` is a `ReleaseMetadata` or an `Option` of one.
    pub fn new(
        release: ReleaseId,
        namespace: impl Into<String>,
        metadata: impl Into<Option<ReleaseMetadata>>,
        client: kube::Client,
    ) -> Self {
        Self {
            release,
            namespace: namespace.into(),
            metadata: metadata.into(),
            node_images: None,
            provider_ref: None,
            owner: None,
            previous: Vec::new(),
            client,
        }
    }

    /// The context for a ClusterStackRelease as read from the API server: identity from its name,
    /// its namespace, an owner reference to it, and `status.nodeImages` as the previous list.
    /// Add the stack's `providerRef` with [`ReleaseContext::with_provider_ref`] and the
    /// `node-images.yaml` with [`ReleaseContext::with_node_images`].
    pub fn for_release(
        release: &ClusterStackRelease,
        metadata: impl Into<Option<ReleaseMetadata>>,
        client: kube::Client,
    ) -> Result<Self, NameError> {
        let tag = release.metadata.name.clone().unwrap_or_default();
        let id = ReleaseId::from_tag(&tag)?;
        let namespace = release.metadata.namespace.clone().unwrap_or_default();
        let previous = release.status.as_ref().map(|s| s.node_images.clone()).unwrap_or_default();
        Ok(Self::new(id, namespace, metadata, client)
            .with_owner(release.controller_owner_ref(&()))
            .with_previous(previous))
    }

    /// Sets the parsed `node-images.yaml`.
    pub fn with_node_images(mut self, file: Option<NodeImagesFile>) -> Self {
        self.node_images = file;
        self
    }

    /// Sets the provider template (`ClusterStack.spec.providerRef`).
    pub fn with_provider_ref(mut self, provider_ref: Option<ObjectRef>) -> Self {
        self.provider_ref = provider_ref;
        self
    }

    /// Sets the owner reference of the ClusterStackRelease.
    pub fn with_owner(mut self, owner: Option<OwnerReference>) -> Self {
        self.owner = owner;
        self
    }

    /// Sets the per-image list of the current status.
    pub fn with_previous(mut self, previous: Vec<NodeImageStatus>) -> Self {
        self.previous = previous;
        self
    }

    /// `namespace/tag`, for messages and task keys.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.release.tag())
    }
}

impl std::fmt::Debug for ReleaseContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseContext")
            .field("release", &self.release.tag())
            .field("namespace", &self.namespace)
            .field("node_images", &self.node_images.is_some())
            .field("provider_ref", &self.provider_ref)
            .finish_non_exhaustive()
    }
}

/// Where a plug-in's work for a release stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Every node image is ready.
    Ready,
    /// Work is under way; ask again after `recheck_after`.
    InProgress {
        /// What is being done, for the condition's message.
        message: String,
        /// When to ask again.
        recheck_after: Duration,
    },
    /// The work failed.
    Failed {
        /// Why, for the condition's message; name the image, file or object.
        reason: String,
        /// Whether asking again later may succeed (a registry down, an image not pushed yet);
        /// `false` when only a new release or a spec change can fix it.
        retryable: bool,
    },
}

/// A plug-in's answer to [`NodeImageProvider::ensure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Where the work stands.
    pub progress: Progress,
    /// One entry per node image, in `node-images.yaml` order (empty when the plug-in does not
    /// track images one by one, e.g. an external operator).
    pub images: Vec<NodeImageStatus>,
}

impl Report {
    /// A report without per-image entries.
    pub fn new(progress: Progress) -> Self {
        Self { progress, images: Vec::new() }
    }

    /// Sets the per-image entries.
    pub fn with_images(mut self, images: Vec<NodeImageStatus>) -> Self {
        self.images = images;
        self
    }
}

/// A plug-in's answer to [`NodeImageProvider::cleanup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// Nothing of the release is left; the finalizer may go.
    Done,
    /// Deletion is under way; ask again after `recheck_after`.
    InProgress {
        /// What is left.
        message: String,
        /// When to ask again.
        recheck_after: Duration,
    },
}

/// An error a plug-in could not turn into a [`Progress`]; the gate treats it as a retryable failure.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// A Kubernetes API request failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done, naming the object.
        action: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// Anything else, already phrased for a user.
    #[error("{0}")]
    Other(String),
}

/// A node-image provider plug-in.
///
/// Both methods must return quickly (the [`Gate`] bounds them with [`GateConfig::call_timeout`]):
/// start long work as a tracked task or in another system and answer
/// [`Progress::InProgress`]. Both are called again and again for the same release, also after a
/// restart with nothing in memory, so they must be idempotent and deduce where they are from the
/// cluster, from [`ReleaseContext::previous`] and from their own tasks.
pub trait NodeImageProvider: Send + Sync {
    /// The provider name this plug-in serves, as in release names (`docker`, `openstack`).
    fn name(&self) -> &str;

    /// Whether a change of what the plug-in reports reaches the release through a watch (its
    /// objects carry our release labels, see `controller::watch`): then a passed gate is not
    /// asked again on a timer ([`GateConfig::ready_recheck`]), and an idle operator sends nothing.
    fn watched(&self) -> bool {
        false
    }

    /// Makes sure the release's node images exist (or are being made), and says how far it is.
    fn ensure<'a>(&'a self, ctx: &'a ReleaseContext) -> BoxFuture<'a, Result<Report, ProviderError>>;

    /// Removes what the plug-in made for the release; called while the release is being deleted.
    fn cleanup<'a>(&'a self, ctx: &'a ReleaseContext) -> BoxFuture<'a, Result<Cleanup, ProviderError>>;
}

/// Provider names to plug-ins, and the plug-in for stacks with a `providerRef`.
#[derive(Clone, Default)]
pub struct ProviderRegistry {
    plugins: BTreeMap<String, Arc<dyn NodeImageProvider>>,
    external: Option<Arc<dyn NodeImageProvider>>,
}

impl ProviderRegistry {
    /// A registry with no plug-in at all: every release passes the gate.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The built-in plug-ins: [`DockerProvider`] reaching registries as `registries` says
    /// (`RegistryConfig::default()`: the real registries) and the [`ExternalOperator`].
    pub fn with_builtins(registries: crate::registry::RegistryConfig) -> Self {
        let mut registry = Self::empty();
        registry.register(Arc::new(DockerProvider::new(registries)));
        registry.set_external(Arc::new(ExternalOperator::new()));
        registry
    }

    /// Registers a plug-in under its [`NodeImageProvider::name`], replacing one of the same name.
    pub fn register(&mut self, plugin: Arc<dyn NodeImageProvider>) -> &mut Self {
        self.plugins.insert(plugin.name().to_string(), plugin);
        self
    }

    /// Sets the plug-in that serves every ClusterStack with a `providerRef`.
    pub fn set_external(&mut self, plugin: Arc<dyn NodeImageProvider>) -> &mut Self {
        self.external = Some(plugin);
        self
    }

    /// The plug-in registered for a provider name.
    pub fn get(&self, provider: &str) -> Option<&Arc<dyn NodeImageProvider>> {
        self.plugins.get(provider)
    }

    /// The names of the registered plug-ins, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.plugins.keys().map(String::as_str).collect()
    }

    /// Which plug-in gates a release (pure):
    /// - `noProvider: true`: no gate;
    /// - a `providerRef`: the external-operator plug-in (an explicit reference wins over a
    ///   built-in plug-in of the same provider name);
    /// - otherwise the plug-in registered for the provider name, or no gate when there is none.
    pub fn select(&self, provider: &str, no_provider: bool, has_provider_ref: bool) -> Selection {
        if no_provider {
            return Selection::NoGate { why: "noProvider is set".into() };
        }
        if has_provider_ref {
            return match &self.external {
                Some(p) => Selection::Plugin(p.clone()),
                None => Selection::NoGate { why: "no external-operator plug-in is registered".into() },
            };
        }
        match self.plugins.get(provider) {
            Some(p) => Selection::Plugin(p.clone()),
            None => Selection::NoGate { why: format!("no plug-in for provider {provider:?} and no providerRef") },
        }
    }
}

impl std::fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRegistry")
            .field("plugins", &self.names())
            .field("external", &self.external.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ClusterStackReleaseStatus;

    #[tokio::test]
    async fn builtins_serve_docker_and_provider_refs_only() {
        let registry = ProviderRegistry::with_builtins(crate::registry::RegistryConfig::default());
        assert_eq!(registry.names(), ["docker"]);
        let name = |s: Selection| match s {
            Selection::Plugin(p) => p.name().to_string(),
            Selection::NoGate { why } => format!("no gate: {why}"),
        };
        assert_eq!(name(registry.select("docker", false, false)), "docker");
        assert_eq!(name(registry.select("docker", false, true)), "external");
        assert_eq!(name(registry.select("openstack", false, true)), "external");
        assert_eq!(
            name(registry.select("openstack", false, false)),
            "no gate: no plug-in for provider \"openstack\" and no providerRef"
        );
        assert_eq!(name(registry.select("docker", true, true)), "no gate: noProvider is set");
        assert_eq!(
            name(ProviderRegistry::empty().select("docker", false, true)),
            "no gate: no external-operator plug-in is registered"
        );
    }

    #[tokio::test]
    async fn context_for_a_release_object() {
        crate::install_crypto_provider();
        let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
        let metadata = ReleaseMetadata::parse(
            "metadata.yaml",
            "apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions:\n  clusterStack: v2\n  kubernetes: v1.27.3\n  components:\n    clusterAddon: v1\n",
        )
        .unwrap();
        let mut release = ClusterStackRelease::new("docker-ferrol-1-27-v2", Default::default());
        release.metadata.namespace = Some("ns".into());
        release.metadata.uid = Some("uid-1".into());
        let image = NodeImageStatus { name: "a".into(), ready: true, message: String::new() };
        release.status = Some(ClusterStackReleaseStatus { node_images: vec![image.clone()], ..Default::default() });
        let ctx = ReleaseContext::for_release(&release, metadata.clone(), client.clone()).unwrap();
        assert_eq!(ctx.metadata.as_ref(), Some(&metadata));
        assert_eq!(ctx.key(), "ns/docker-ferrol-1-27-v2");
        assert_eq!(ctx.release.provider, "docker");
        assert_eq!(ctx.previous, [image]);
        let owner = ctx.owner.unwrap();
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("ClusterStackRelease", "uid-1", Some(true))
        );

        let bad = ClusterStackRelease::new("not-a-tag", Default::default());
        assert!(ReleaseContext::for_release(&bad, metadata, client.clone()).is_err());
        // Cleanup of a release that is not in the cache: no metadata.
        assert_eq!(ReleaseContext::for_release(&release, None, client).unwrap().metadata, None);
    }
}
