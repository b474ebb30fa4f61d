//! The ClusterStackRollout controller: moves the Clusters using a ClusterStack's classes onto a
//! new release, wave by wave, with health gates, a halt and an automatic roll back.
//!
//! - [`decide`]: the pure decision (status, moves, events) with [`rules`], [`variables`],
//!   [`window`] and [`selector`]; its last step (phase, conditions, when to look again) in
//!   `conclude`;
//! - [`view`]: the Cluster and release views it decides on;
//! - [`reconcile`]: gathers the inputs and carries out the decision; [`context`]: its state.
//!
//! The loop is drawn in `docs/DESIGN.md` ("Rollout loop").

pub mod class;
mod conclude;
pub mod decide;
pub mod rules;
pub mod selector;
pub mod variables;
pub mod view;
pub mod window;

/// The field manager of a move: only `spec.topology.class` (or `classRef.name`) and
/// `spec.topology.version` are applied under it.
pub const FIELD_MANAGER: &str = "clusterstack-rollout";
/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusterstackrollout";
pub mod context;
pub mod reconcile;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::channel::mpsc::UnboundedReceiver;
use futures::{StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::runtime::{reflector, reflector::store::Writer};
use tokio_util::sync::CancellationToken;

use crate::api::ClusterStackRollout;
use crate::controller::runtime::context::Context;
use crate::controller::runtime::watch::shard_selector;

use crate::controller::runtime::cluster_watch::ClusterTriggers;
use crate::controller::runtime::clusters::CapiCluster;
use view::AddonRecord;

/// Starts the rollout controller in the background until `shutdown`: waits for Cluster API to be
/// served, then watches rollouts and ClusterAddons, reads the Clusters from the operator's one
/// Cluster watch (`clusters`: every change, subscribed before the watch started) and hears of
/// releases from the release controller's watch (`release_namespaces`: the namespace of each
/// release created, changed or deleted); any change of these triggers the rollouts it may
/// concern.
pub fn start(
    shared: Arc<Context>,
    shutdown: CancellationToken,
    clusters: ClusterTriggers,
    release_namespaces: UnboundedReceiver<String>,
) {
    tokio::spawn(async move {
        tokio::select! {
            () = run(shared, clusters, release_namespaces) => {}
            () = shutdown.cancelled() => {}
        }
    });
}

/// The rollout's subscription to the Cluster watch: every change may move a Cluster in or out
/// of a wave or change its health.
pub fn wants(_old: Option<&CapiCluster>, _new: &CapiCluster) -> bool {
    true
}

async fn run(shared: Arc<Context>, clusters: ClusterTriggers, release_namespaces: UnboundedReceiver<String>) {
    let Some((capi, cluster_store)) = shared.watches.cluster_feed.served().await else {
        tracing::info!("no Cluster API served: the ClusterStackRollout controller is idle");
        return;
    };
    let client = shared.client.clone();
    let settings = &shared.settings;
    let rollouts: Api<ClusterStackRollout> = match &settings.watch_namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let selector = shard_selector(settings.shard.as_deref());
    let by_shard = watcher::Config::default().labels(&selector);

    let addon_writer = Writer::<AddonRecord>::default();
    let addon_store = addon_writer.as_reader();
    // The ClusterAddon controller reads from this store whether a Cluster's ClusterAddon exists
    // (a read saved per new Cluster), once it has listed them all.
    let addons_listed = Arc::new(AtomicBool::new(false));
    let (listed, lookup_store) = (addons_listed.clone(), addon_store.clone());
    shared.watches.set_cluster_addon_lookup(move |ns, name| {
        listed.load(Ordering::Acquire).then(|| lookup_store.get(&ObjectRef::new(name).within(ns)).is_some())
    });
    let addons = reflector(
        addon_writer,
        watcher(Api::<AddonRecord>::all(client.clone()), watcher::Config::default()).modify(AddonRecord::trim),
    )
    .inspect_ok(move |event| {
        if matches!(event, watcher::Event::InitDone) {
            addons_listed.store(true, Ordering::Release);
        }
    })
    .applied_objects();

    let ctx = Arc::new(context::RolloutContext::new(shared.clone(), capi, cluster_store, addon_store));
    let controller = Controller::new(rollouts, by_shard)
        .with_config(kube::runtime::controller::Config::default().concurrency(settings.concurrency));
    let store = controller.store();
    // The stack controller reads the holds of unfinished rollouts from it.
    shared.watches.set_rollouts(store.clone());
    let all = move |store: &Store<ClusterStackRollout>| {
        store.state().iter().map(|r| ObjectRef::from_obj(&**r)).collect::<Vec<_>>()
    };
    let (s1, s2) = (store.clone(), store.clone());
    let in_namespace = move |ns: Option<String>| {
        store
            .state()
            .iter()
            .filter(|r| r.metadata.namespace == ns)
            .map(|r| ObjectRef::from_obj(&**r))
            .collect::<Vec<_>>()
    };
    controller
        .reconcile_on(clusters.flat_map(move |_c| futures::stream::iter(all(&s1))))
        .watches_stream(addons, move |_a: AddonRecord| all(&s2))
        .reconcile_on(release_namespaces.flat_map(move |ns| futures::stream::iter(in_namespace(Some(ns)))))
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "ClusterStackRollout controller");
            }
        })
        .await;
}
