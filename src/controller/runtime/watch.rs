//! Watches instead of polls, for everything the cluster can tell us.
//!
//! - **CAPI Clusters** (through the one Cluster watch, [`super::cluster_watch`]): one shared
//!   index of which Cluster uses which release's ClusterClass. A Cluster created, moved to another
//!   class or deleted triggers the ClusterStacks of the class's namespace and the release itself;
//!   "in use" is answered from the index, never by listing Clusters.
//! - **Applied objects**: one metadata-only watch per kind found in the inventories, selected by
//!   our release label. An event whose `resourceVersion` is neither the one our last apply got
//!   nor the last one seen is someone else's change (or a deletion): the release is re-applied
//!   (self-heal) within seconds.
//! - **Provider objects** of the `providerRef` contract (their kind discovered at run time from
//!   the template's): they carry our release labels too, so the same metadata watch tells when
//!   their status moved, and the gate asks again.
//!
//! Every reaction goes through the controllers' `reconcile_on` trigger streams, so it is
//! deduplicated and bounded by the controllers' concurrency like any other trigger. The periodic
//! resync stays as a safety net.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use futures::TryStreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use crate::api::{ClusterStack, ClusterStackRelease, ClusterStackRollout};
use crate::apply::{RELEASE_LABEL, RELEASE_NAMESPACE_LABEL};

use super::cluster_watch::ClusterFeed;
use super::clusters::ClassUsage;
use super::context::Context;
use crate::controller::STACK_LABEL;
use crate::util::lock;

/// The label that assigns a ClusterStack (and its releases) to an operator shard.
pub const SHARD_LABEL: &str = "clusterstack.x-k8s.io/shard";

/// The label selector of an operator instance: its shard's objects, or (no shard) the objects
/// without a shard label.
pub fn shard_selector(shard: Option<&str>) -> String {
    match shard {
        Some(s) => format!("{SHARD_LABEL}={s}"),
        None => format!("!{SHARD_LABEL}"),
    }
}

/// Drops from an object kept in a store what no reconciler reads: `managedFields` and kubectl's
/// last-applied annotation, often most of a small object's size. With thousands of Clusters,
/// ClusterStacks and releases in the stores this is most of their memory. (Writes never send an
/// object read from a store back whole, so nothing is lost on the server.)
pub fn slim<K: kube::Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// The trigger streams the controllers consume with `reconcile_on`.
pub struct TriggerStreams {
    pub stacks: UnboundedReceiver<ObjectRef<ClusterStack>>,
    pub releases: UnboundedReceiver<ObjectRef<ClusterStackRelease>>,
}

/// The Cluster index is not synced yet: no answer about which release is in use.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the CAPI Cluster watch has not synced yet")]
pub struct ClustersNotSynced;

/// Told `namespace/tag` of a release whose applied object someone else changed.
type ReleaseChanged = Box<dyn Fn(&str) + Send + Sync>;

/// Whether a store of ClusterAddons shows one (namespace, name); `None` until it has synced.
type AddonLookup = Box<dyn Fn(&str, &str) -> Option<bool> + Send + Sync>;

/// The watch state shared by the controllers (in the [`Context`]).
pub struct Watches {
    stacks_tx: UnboundedSender<ObjectRef<ClusterStack>>,
    releases_tx: UnboundedSender<ObjectRef<ClusterStackRelease>>,
    streams: Mutex<Option<TriggerStreams>>,
    /// The one watch of CAPI Clusters: its store and subscribers.
    pub cluster_feed: ClusterFeed,
    clusters_synced: tokio::sync::watch::Sender<bool>,
    kinds: Mutex<HashSet<GroupVersionKind>>,
    stack_store: OnceLock<Store<ClusterStack>>,
    release_store: OnceLock<Store<ClusterStackRelease>>,
    rollout_store: OnceLock<Store<ClusterStackRollout>>,
    release_changed: OnceLock<ReleaseChanged>,
    addon_lookup: OnceLock<AddonLookup>,
    /// Stops the watch tasks.
    pub stop: CancellationToken,
}

impl std::fmt::Debug for Watches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watches").field("kinds", &lock(&self.kinds).len()).finish_non_exhaustive()
    }
}

impl Default for Watches {
    fn default() -> Self {
        Self::new()
    }
}

impl Watches {
    pub fn new() -> Self {
        let (stacks_tx, stacks) = unbounded();
        let (releases_tx, releases) = unbounded();
        Self {
            stacks_tx,
            releases_tx,
            streams: Mutex::new(Some(TriggerStreams { stacks, releases })),
            cluster_feed: ClusterFeed::default(),
            clusters_synced: tokio::sync::watch::Sender::new(false),
            kinds: Mutex::default(),
            stack_store: OnceLock::new(),
            release_store: OnceLock::new(),
            rollout_store: OnceLock::new(),
            release_changed: OnceLock::new(),
            addon_lookup: OnceLock::new(),
            stop: CancellationToken::new(),
        }
    }

    /// The trigger streams (once; the run function hands them to the controllers).
    pub fn take_streams(&self) -> Option<TriggerStreams> {
        lock(&self.streams).take()
    }

    /// Sets the controllers' stores (ClusterStacks, ClusterStackReleases).
    pub fn set_stores(&self, stacks: Store<ClusterStack>, releases: Store<ClusterStackRelease>) {
        let _ = self.stack_store.set(stacks);
        let _ = self.release_store.set(releases);
    }

    /// A notifier for the pollers: triggers the stacks (keys `namespace/name`) it is given.
    pub fn stack_notifier(&self) -> super::poller::Notifier {
        let tx = self.stacks_tx.clone();
        Arc::new(move |keys: Vec<String>| {
            for key in keys {
                if let Some((ns, name)) = key.split_once('/') {
                    let _ = tx.unbounded_send(ObjectRef::new(name).within(ns));
                }
            }
        })
    }

    /// Sets what to tell when someone else changed an applied object of a release (once: the
    /// release controller forgets its memo of the release).
    pub fn on_release_changed(&self, f: impl Fn(&str) + Send + Sync + 'static) {
        let _ = self.release_changed.set(Box::new(f));
    }

    /// Triggers a reconcile of a ClusterStack.
    pub fn trigger_stack(&self, namespace: &str, name: &str) {
        let _ = self.stacks_tx.unbounded_send(ObjectRef::new(name).within(namespace));
    }

    /// Triggers a reconcile of a ClusterStackRelease.
    pub fn trigger_release(&self, namespace: &str, name: &str) {
        let _ = self.releases_tx.unbounded_send(ObjectRef::new(name).within(namespace));
    }

    /// Sets how to look a ClusterAddon up in a store of them (the rollout controller's, which
    /// watches them all), once.
    pub fn set_cluster_addon_lookup(&self, lookup: impl Fn(&str, &str) -> Option<bool> + Send + Sync + 'static) {
        let _ = self.addon_lookup.set(Box::new(lookup));
    }

    /// Whether the ClusterAddon `namespace/name` exists as a synced store shows it; `None` when
    /// there is no such store (yet).
    pub fn cluster_addon_known(&self, namespace: &str, name: &str) -> Option<bool> {
        self.addon_lookup.get().and_then(|lookup| lookup(namespace, name))
    }

    /// Sets the rollout controller's store (it runs only where Cluster API is served).
    pub fn set_rollouts(&self, rollouts: Store<ClusterStackRollout>) {
        let _ = self.rollout_store.set(rollouts);
    }

    /// The ClusterStackRollouts as the rollout controller's store shows them, if it runs.
    pub fn rollouts(&self) -> Option<&Store<ClusterStackRollout>> {
        self.rollout_store.get()
    }

    /// The ClusterStacks store, once the controller runs.
    pub fn stacks(&self) -> Option<&Store<ClusterStack>> {
        self.stack_store.get()
    }

    /// The ClusterStackReleases store, once the controller runs.
    pub fn releases(&self) -> Option<&Store<ClusterStackRelease>> {
        self.release_store.get()
    }

    /// The releases of stack `name` in `namespace`, from the store.
    pub fn releases_of(&self, namespace: &str, name: &str) -> Option<Vec<Arc<ClusterStackRelease>>> {
        let store = self.release_store.get()?;
        Some(
            store
                .state()
                .into_iter()
                .filter(|r| {
                    r.metadata.namespace.as_deref() == Some(namespace)
                        && r.labels().get(STACK_LABEL).map(String::as_str) == Some(name)
                })
                .collect(),
        )
    }

    /// Triggers the ClusterStacks of these namespaces, in one look at the store (a first list of
    /// 5,000 Clusters would otherwise copy the store once per Cluster).
    fn trigger_stacks_in(&self, namespaces: &HashSet<&str>) {
        match self.stack_store.get() {
            Some(store) => {
                for s in store.state() {
                    if let Some(ns) = s.metadata.namespace.as_deref().filter(|ns| namespaces.contains(ns)) {
                        self.trigger_stack(ns, &s.name_any());
                    }
                }
            }
            None => tracing::debug!(namespaces = namespaces.len(), "no ClusterStack store yet"),
        }
    }

    /// The class usages of the Clusters whose class lives in `class_namespace` (only those: a
    /// copy of every Cluster's per reconcile costs megabytes with thousands of Clusters), read
    /// from the Cluster watch's store once it is synced (waits up to 30 s for it); an error when
    /// it is not: without the usages a plan could delete a release in use.
    pub async fn cluster_usages_in(&self, class_namespace: &str) -> Result<Vec<ClassUsage>, ClustersNotSynced> {
        let mut synced = self.clusters_synced.subscribe();
        let waited = tokio::time::timeout(std::time::Duration::from_secs(30), synced.wait_for(|s| *s)).await;
        if !matches!(waited, Ok(Ok(_))) {
            return Err(ClustersNotSynced);
        }
        Ok(self.cluster_feed.usages_in(class_namespace))
    }

    /// Whether the Cluster watch has listed every Cluster (or found Cluster API not served).
    pub fn clusters_synced(&self) -> bool {
        *self.clusters_synced.borrow()
    }

    /// Clusters' class usages appeared or went: their releases and the stacks of the classes'
    /// namespaces decide again (whether a release is in use).
    pub(super) fn usages_changed(&self, usages: &[ClassUsage]) {
        if usages.is_empty() {
            return;
        }
        let mut releases = HashSet::new();
        for usage in usages {
            let tag = usage.class.tag();
            tracing::debug!(cluster = %usage.cluster, release = %tag, "Cluster class usage changed");
            if releases.insert((usage.class_namespace.as_str(), tag.clone())) {
                self.trigger_release(&usage.class_namespace, &tag);
            }
        }
        self.trigger_stacks_in(&usages.iter().map(|u| u.class_namespace.as_str()).collect());
    }

    pub(super) fn mark_clusters_synced(&self) {
        self.clusters_synced.send_replace(true);
    }
}

/// Watches objects of `gvk` carrying our release label (metadata only), once per kind: applied
/// objects and provider objects alike.
pub async fn watch_kind(ctx: &Arc<Context>, gvk: &GroupVersionKind) {
    if !lock(&ctx.watches.kinds).insert(gvk.clone()) {
        return;
    }
    let resource: ApiResource = match ctx.applier.discovery().resolve(gvk).await {
        Ok(Some(r)) => r.resource,
        Ok(None) | Err(_) => {
            // Not served (yet): try again at the next apply.
            lock(&ctx.watches.kinds).remove(gvk);
            return;
        }
    };
    tracing::debug!(kind = %gvk.kind, group = %gvk.group, "watching applied objects");
    let ctx = ctx.clone();
    let gvk = gvk.clone();
    tokio::spawn(async move {
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(ctx.client.clone(), &resource);
        let config = watcher::Config::default().labels(RELEASE_LABEL);
        let stream = watcher(api, config).default_backoff();
        futures::pin_mut!(stream);
        // The resourceVersion last seen of each object (namespace, name), and the owner.
        let mut seen: Seen = HashMap::new();
        let mut fresh: Option<Seen> = None;
        let mut first_sync = true;
        loop {
            let event = tokio::select! {
                e = stream.try_next() => e,
                () = ctx.watches.stop.cancelled() => return,
            };
            match event {
                Ok(Some(watcher::Event::Init)) => fresh = Some(HashMap::new()),
                Ok(Some(watcher::Event::InitApply(meta))) => {
                    if let (Some(f), Some(entry)) = (fresh.as_mut(), owned_entry(&meta)) {
                        f.insert((meta.namespace().unwrap_or_default(), meta.name_any()), entry);
                    }
                }
                Ok(Some(watcher::Event::InitDone)) => {
                    let now = fresh.take().unwrap_or_default();
                    if !first_sync {
                        // After a lost watch (410 Gone): what changed or went meanwhile.
                        for (key, entry) in &now {
                            if seen.get(key).is_none_or(|old| old.0 != entry.0) {
                                object_changed(&ctx, &gvk, key, entry, false);
                            }
                        }
                        for (key, entry) in seen.iter().filter(|(k, _)| !now.contains_key(*k)) {
                            object_changed(&ctx, &gvk, key, entry, true);
                        }
                    }
                    seen = now;
                    first_sync = false;
                }
                Ok(Some(watcher::Event::Apply(meta))) => {
                    let key = (meta.namespace().unwrap_or_default(), meta.name_any());
                    if let Some(entry) = owned_entry(&meta) {
                        if seen.get(&key).is_none_or(|old| old.0 != entry.0) {
                            object_changed(&ctx, &gvk, &key, &entry, false);
                        }
                        seen.insert(key, entry);
                    }
                }
                Ok(Some(watcher::Event::Delete(meta))) => {
                    let key = (meta.namespace().unwrap_or_default(), meta.name_any());
                    if let Some(entry) = seen.remove(&key).or_else(|| owned_entry(&meta)) {
                        object_changed(&ctx, &gvk, &key, &entry, true);
                    }
                }
                Ok(None) => return,
                Err(e) => tracing::warn!(kind = %gvk.kind, error = %e, "a watch of applied objects failed; retrying"),
            }
        }
    });
}

/// (resourceVersion, release tag, release namespace) of an object carrying our labels that our
/// field manager applied. Labels can be copied by anyone: Cluster API's topology controller
/// copies a ClusterClass template's labels to the clone it makes for each Cluster, and such a
/// clone is not an object of the release (re-applying the release for its changes would be a
/// pass per change of every Cluster).
fn owned_entry(meta: &PartialObjectMeta<DynamicObject>) -> Option<(String, String, String)> {
    let ours = meta.managed_fields().iter().any(|m| m.manager.as_deref() == Some(crate::apply::FIELD_MANAGER));
    if !ours {
        return None;
    }
    let labels = meta.labels();
    Some((
        meta.resource_version().unwrap_or_default(),
        labels.get(RELEASE_LABEL)?.clone(),
        labels.get(RELEASE_NAMESPACE_LABEL)?.clone(),
    ))
}

/// An applied (or provider) object changed or went: unless it is our own write, re-reconcile
/// its release now.
fn object_changed(
    ctx: &Context,
    gvk: &GroupVersionKind,
    (namespace, name): &(String, String),
    (rv, tag, release_ns): &(String, String, String),
    deleted: bool,
) {
    if !deleted && ctx.applier.applied_version(&gvk.group, &gvk.kind, namespace, name).as_deref() == Some(rv.as_str()) {
        return;
    }
    if let Some(store) = ctx.watches.releases() {
        match store.get(&ObjectRef::new(tag).within(release_ns)) {
            // Another shard's, or not (yet) ours.
            None => return,
            Some(r) if r.metadata.deletion_timestamp.is_some() => return,
            // (The compact status keeps no resourceVersions: after a restart, an event of our own
            // first apply may cost one more pass, which changes nothing.)
            Some(_) => {}
        }
    }
    tracing::info!(
        kind = %gvk.kind, object = %format!("{namespace}/{name}"), release = %format!("{release_ns}/{tag}"), deleted,
        "an object of a release changed outside the operator: re-applying"
    );
    if let Some(changed) = ctx.watches.release_changed.get() {
        changed(&format!("{release_ns}/{tag}"));
    }
    ctx.watches.trigger_release(release_ns, tag);
}

/// Per object (namespace, name): its resourceVersion last seen and its owner.
type Seen = HashMap<(String, String), (String, String, String)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_selectors() {
        assert_eq!(shard_selector(Some("a")), "clusterstack.x-k8s.io/shard=a");
        assert_eq!(shard_selector(None), "!clusterstack.x-k8s.io/shard");
    }
}
