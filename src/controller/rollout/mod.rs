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

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::runtime::{reflector, reflector::store::Writer};
use tokio_util::sync::CancellationToken;

use crate::api::{ClusterStackRelease, ClusterStackRollout};
use crate::controller::runtime::context::Context;
use crate::controller::runtime::watch::shard_selector;

use crate::controller::runtime::cluster_watch::ClusterTriggers;
use crate::controller::runtime::clusters::CapiCluster;
use view::AddonRecord;

/// Starts the rollout controller in the background until `shutdown`: waits for Cluster API to be
/// served, then watches rollouts, ClusterAddons and releases, and reads the Clusters from the
/// operator's one Cluster watch (`clusters`: every change, subscribed before the watch started);
/// any change of these triggers the rollouts it may concern.
pub fn start(shared: Arc<Context>, shutdown: CancellationToken, clusters: ClusterTriggers) {
    tokio::spawn(async move {
        tokio::select! {
            () = run(shared, clusters) => {}
            () = shutdown.cancelled() => {}
        }
    });
}

/// The rollout's subscription to the Cluster watch: every change may move a Cluster in or out
/// of a wave or change its health.
pub fn wants(_old: Option<&CapiCluster>, _new: &CapiCluster) -> bool {
    true
}

async fn run(shared: Arc<Context>, clusters: ClusterTriggers) {
    let Some((capi, cluster_store)) = shared.watches.cluster_feed.served().await else {
        tracing::info!("no Cluster API served: the ClusterStackRollout controller is idle");
        return;
    };
    let client = shared.client.clone();
    let settings = &shared.settings;
    let (rollouts, releases): (Api<ClusterStackRollout>, Api<ClusterStackRelease>) = match &settings.watch_namespace {
        Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), ns)),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let selector = shard_selector(settings.shard.as_deref());
    let by_shard = watcher::Config::default().labels(&selector);

    let addon_writer = Writer::<AddonRecord>::default();
    let addon_store = addon_writer.as_reader();
    let addons = reflector(
        addon_writer,
        watcher(Api::<AddonRecord>::all(client.clone()), watcher::Config::default()).modify(AddonRecord::trim),
    )
    .applied_objects();

    let ctx = Arc::new(context::RolloutContext::new(shared.clone(), capi, cluster_store, addon_store));
    let controller = Controller::new(rollouts, by_shard.clone())
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
        .watches(releases, by_shard, move |r: ClusterStackRelease| in_namespace(r.metadata.namespace.clone()))
        .run(reconcile::reconcile, reconcile::error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "ClusterStackRollout controller");
            }
        })
        .await;
}
