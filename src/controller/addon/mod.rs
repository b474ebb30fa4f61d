//! The ClusterAddon controller: one `ClusterAddon` per CAPI Cluster whose class is a cluster-stack
//! class, and the release's addons applied into that Cluster's workload cluster, stage by stage
//! (`clusteraddon.yaml`), with all progress in `ClusterAddon.status` so a restart resumes where
//! it stopped. The loop is drawn in `docs/DESIGN.md` ("ClusterAddon loop").
//!
//! A pass gathers its inputs (the ClusterAddon, the release from the cache), decides with the
//! pure [`decide`] (which `clusterstack plan --clusters` shares), and carries the decision out:
//!
//! - [`decide`]: what a pass does, from status and the release's addon version;
//! - [`actions`]: record a release, start a run, finish it (the rest, prune), correct drift;
//! - [`stage_runner`]: one stage as far as it goes (pre-condition, apply or delete, post-condition);
//! - [`stages`]: `clusteraddon.yaml` and its CEL wait conditions;
//! - [`render`]: the release located, the Cluster's objects and platform values read, addons rendered;
//! - [`inventory`]: what was applied, by object identity;
//! - [`workload`]: the cached workload clients; [`hooks`]: the Runtime SDK extension server;
//! - [`error`]: the failure kinds, each a metric label.
//!
//! The lifecycle is followed by watching the Cluster (the fallback without the Runtime SDK): a
//! Cluster whose control plane is initialised gets the `AfterControlPlaneInitialized` stages; a
//! Cluster moving to a release with another **addon version** gets the new release's
//! `BeforeClusterUpgrade` and `AfterClusterUpgrade` stages, then every other addon of the new
//! version, and what the new version no longer renders is pruned from the inventory. Watching
//! cannot hold an upgrade: CAPI may roll the control plane while the stages run.

pub mod actions;
pub mod cel_budget;
pub mod decide;
pub mod error;
pub mod hooks;
pub mod render;
pub mod stage_runner;
pub mod stages;
pub mod workload;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;

use crate::api::{ClusterAddon, ClusterAddonSpec, ObjectRef};
use crate::apply::ReleaseOwner;

use crate::controller::runtime::backoff::Backoff;
use crate::controller::runtime::cluster_watch::ClusterTriggers;
use crate::controller::runtime::clusters::{CapiCluster, ClassUsage, ClusterKey, class_usage};
use crate::controller::runtime::context::{Context, too_many_objects_message};
use crate::util::lock;

pub use decide::Decision;
pub use error::Error;
pub use render::read_cluster_objects;
use render::{cluster_objects, locate_release, platform_values, render_release};
use stage_runner::{Pass, run_stages, unreachable_workload};
use workload::WorkloadClients;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusteraddon";
/// The default deadline of a stage's wait condition.
pub const DEFAULT_WAIT_DEADLINE: Duration = crate::controller::runtime::context::DEFAULT_ADDON_WAIT_DEADLINE;
/// How often a waiting stage looks again.
const WAIT_POLL: Duration = Duration::from_secs(5);
/// The addon renders kept for reuse, by the size of the documents they were read from (their
/// objects take a few times that): a typical release's addons for a few sets of values, or one
/// render of kube-prometheus-stack (5.3 MB).
pub const RENDER_CACHE_BYTES: usize = 8 << 20;

/// Stage phases in status.
pub mod phase {
    pub const PENDING: &str = "Pending";
    pub const WAITING_PRE: &str = "WaitingForPreCondition";
    pub const WAITING_POST: &str = "WaitingForPostCondition";
    pub const DONE: &str = "Done";
    pub const FAILED: &str = "Failed";
}

/// Condition reasons of a ClusterAddon.
pub mod reason {
    pub const WAITING_FOR_CONTROL_PLANE: &str = "WaitingForControlPlane";
    pub const RELEASE_NOT_READY: &str = "ReleaseNotReady";
    pub const WORKLOAD_UNREACHABLE: &str = "WorkloadClusterUnreachable";
    pub const RENDER_FAILED: &str = "RenderFailed";
    pub const TOO_MANY_OBJECTS: &str = "TooManyObjects";
    pub const STAGE_RUNNING: &str = "StageRunning";
    pub const STAGE_FAILED: &str = "StageFailed";
    pub const APPLY_FAILED: &str = "ApplyFailed";
    pub const ADDONS_APPLIED: &str = "AddonsApplied";
    pub const ADDON_VERSION_UNCHANGED: &str = "AddonVersionUnchanged";
}

/// `Ready` reasons of a ClusterAddon that mean kstatus `Stalled`.
pub const ADDON_STALLED_REASONS: &[&str] = &[reason::STAGE_FAILED, reason::RENDER_FAILED, reason::TOO_MANY_OBJECTS];

/// Settings of the ClusterAddon controller.
#[derive(Debug, Clone)]
pub struct AddonSettings {
    /// Deadline of each `waitForPreCondition` / `waitForPostCondition`.
    pub wait_deadline: Duration,
    /// Re-apply interval of clusters whose addons are in place (drift correction).
    pub resync_interval: Duration,
    /// Objects applied at once into one workload cluster. Each request in flight can hold a
    /// pooled connection with its buffers per workload client: 4 keeps 200 cached clients under
    /// 64 MiB (`bench_addons`: 8 → 65.3 MiB, 4 → 61.0 MiB) at no cost in wall time there.
    pub apply_concurrency: usize,
}

impl Default for AddonSettings {
    fn default() -> Self {
        Self { wait_deadline: DEFAULT_WAIT_DEADLINE, resync_interval: Duration::from_secs(600), apply_concurrency: 4 }
    }
}

/// The state of the ClusterAddon controller; memory only (caches), every decision comes from
/// status.
pub struct AddonContext {
    pub ctx: Arc<Context>,
    pub settings: AddonSettings,
    pub workloads: WorkloadClients,
    pub backoff: Backoff,
    /// Addon renders shared between Clusters (and passes) whose addons have the same values.
    pub renders: crate::render::cache::RenderCache,
    /// When each Cluster's addons were last applied in full (drift correction is due after the
    /// resync interval). Lost on restart: then the first pass re-applies once.
    synced: Mutex<BTreeMap<ClusterKey, Timestamp>>,
}

impl AddonContext {
    pub fn new(ctx: Arc<Context>, settings: AddonSettings) -> Self {
        Self {
            workloads: WorkloadClients::new(settings.apply_concurrency),
            backoff: Backoff::new(ctx.settings.backoff, ctx.random.clone()),
            renders: crate::render::cache::RenderCache::new(RENDER_CACHE_BYTES),
            ctx,
            settings,
            synced: Mutex::default(),
        }
    }

    pub(super) fn synced_at(&self, key: &ClusterKey) -> Option<Timestamp> {
        lock(&self.synced).get(key).copied()
    }

    pub(super) fn set_synced(&self, key: &ClusterKey, at: Option<Timestamp>) {
        let mut m = lock(&self.synced);
        match at {
            Some(t) => m.insert(key.clone(), t),
            None => m.remove(key),
        };
    }
}

/// The name of a Cluster's ClusterAddon.
pub fn cluster_addon_name(cluster: &str) -> String {
    format!("cluster-addon-{cluster}")
}

/// The owner of everything applied into one workload cluster (stable across releases, so a new
/// addon version prunes what the old one applied).
pub fn addon_owner(cluster: &ClusterKey) -> ReleaseOwner {
    ReleaseOwner::new(cluster_addon_name(&cluster.name), cluster.namespace.clone())
}

/// One reconcile pass over a Cluster.
pub async fn reconcile(cluster: Arc<CapiCluster>, actx: Arc<AddonContext>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    if cluster.metadata.deletion_timestamp.is_some() || class_usage(&cluster).is_none() {
        // No stage of a deleted (or unmanaged) Cluster can be stuck: keep no alerting series.
        let ns = cluster.metadata.namespace.as_deref().unwrap_or_default();
        actx.ctx.metrics.addon_stage(ns, &cluster.name_any(), None);
    }
    let Some(usage) = class_usage(&cluster) else { return Ok(Action::await_change()) };
    let key = usage.cluster.to_string();
    let result = reconcile_cluster(&cluster, &usage, &actx).await;
    actx.ctx.metrics.reconciled(CONTROLLER, started.elapsed());
    if result.is_ok() {
        actx.backoff.success(&key);
    }
    result
}

/// The error policy: back off per Cluster.
pub fn error_policy(cluster: Arc<CapiCluster>, error: &Error, actx: Arc<AddonContext>) -> Action {
    let key = cluster.key().to_string();
    actx.ctx.metrics.failed(CONTROLLER, error.metric_label());
    let delay = actx.backoff.failure(&key);
    tracing::warn!(cluster = %key, error = %error, retry_in = ?delay, "ClusterAddon reconcile failed");
    Action::requeue(delay)
}

/// Creates the ClusterAddon of a Cluster when it is missing, owned by the Cluster. `known`: whether
/// a synced store of ClusterAddons shows it (`None`: no such store). Only a store that shows none
/// saves the read: a store that lags a create costs a refused create and the read, as before.
pub async fn ensure_cluster_addon(
    client: &kube::Client,
    cluster: &CapiCluster,
    known: Option<bool>,
) -> Result<ClusterAddon, kube::Error> {
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster_addon_name(&cluster.name_any());
    let api: Api<ClusterAddon> = Api::namespaced(client.clone(), &ns);
    if known != Some(false)
        && let Some(existing) = api.get_opt(&name).await?
    {
        return Ok(existing);
    }
    let api_version = cluster.api_version();
    let mut addon = ClusterAddon::new(
        &name,
        ClusterAddonSpec {
            cluster_ref: ObjectRef {
                api_version: Some(api_version.clone()),
                kind: Some("Cluster".into()),
                name: Some(cluster.name_any()),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    addon.metadata.namespace = Some(ns);
    addon.metadata.owner_references = Some(vec![OwnerReference {
        api_version,
        kind: "Cluster".into(),
        name: cluster.name_any(),
        uid: cluster.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    match api.create(&PostParams::default(), &addon).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(s)) if s.code == 409 => api.get(&name).await,
        Err(e) => Err(e),
    }
}

async fn reconcile_cluster(cluster: &CapiCluster, usage: &ClassUsage, actx: &AddonContext) -> Result<Action, Error> {
    let ctx = &actx.ctx;
    let known = ctx.watches.cluster_addon_known(&usage.cluster.namespace, &cluster_addon_name(&usage.cluster.name));
    let addon = ensure_cluster_addon(&ctx.client, cluster, known).await?;
    let status = addon.status.clone().unwrap_or_default();
    let mut pass = Pass { actx, usage, addon, status, now: Time(Timestamp::now()) };

    if decide::waits_for_control_plane(cluster.status.control_plane_initialized, Some(&pass.status)) {
        pass.condition(false, reason::WAITING_FOR_CONTROL_PLANE, "the control plane is not initialised yet");
        pass.save().await?;
        // The Cluster's own watch brings the change of its status; polling thousands of
        // provisioning Clusters would cost a request each per minute for nothing.
        return Ok(Action::requeue(actx.settings.resync_interval));
    }

    let tag = usage.class.tag();
    let release = match locate_release(ctx, &usage.class_namespace, &tag).await {
        Ok(r) => r,
        Err(message) => {
            pass.condition(false, reason::RELEASE_NOT_READY, format!("release {tag}: {message}"));
            pass.save().await?;
            return Ok(Action::requeue(Duration::from_secs(15)));
        }
    };
    let metadata = release.metadata().map_err(|e| Error::Config(format!("release {tag}: {e}")))?;
    let addon_version = metadata.versions.components.cluster_addon.dotted();

    // A spec change not yet acted on (`valuesFrom`) is due now, as drift correction is.
    let spec_changed = pass.addon.metadata.generation.is_some()
        && pass.status.observed_generation.is_some()
        && pass.addon.metadata.generation != pass.status.observed_generation;
    let due = spec_changed
        || decide::drift_due(actx.synced_at(&usage.cluster), Timestamp::now(), actx.settings.resync_interval);
    let decision = decide::decide(&tag, Some(&pass.status), Some(&addon_version), due);
    // `None`: stages run; `Some(due)`: in place, drift correction due or not.
    let in_place = match decision {
        Decision::SameAddonVersion { .. } => {
            actions::record_release(&mut pass, &tag, &addon_version).await?;
            return Ok(Action::requeue(actx.settings.resync_interval));
        }
        // The controller always knows the addon version: this is the plan's case only.
        Decision::UnknownAddonVersion { .. } => {
            return Err(Error::Config(format!("release {tag}: its addon version is unknown")));
        }
        Decision::InPlace { drift_due } => Some(drift_due),
        Decision::FirstInstall | Decision::Upgrade { .. } | Decision::ContinueStages { .. } => {
            if let Some(hooks) = decision.hooks() {
                actions::start_run(&mut pass, &tag, hooks);
            }
            None
        }
    };

    // Render (CPU-bound, off the async workers); a broken template fails this Cluster only.
    // Templates see the whole Cluster: read now (the store keeps only the fields decided on).
    let Some(objects) = cluster_objects(ctx, cluster).await? else {
        // Deleted meanwhile: its watch event ends the story.
        return Ok(Action::await_change());
    };
    let values = match platform_values(ctx, &pass.addon, &usage.cluster.namespace).await {
        Ok(v) => v,
        Err(message) => {
            pass.fail(reason::RENDER_FAILED, "Render", &message).await?;
            return Err(Error::Config(message));
        }
    };
    let rendered =
        match render_release(&release, &usage.class, &usage.cluster.namespace, objects, values, &actx.renders).await {
            Ok(r) => r,
            Err(message) => {
                pass.fail(reason::RENDER_FAILED, "Render", &message).await?;
                return Err(Error::Render(message));
            }
        };
    // Too many objects for one ClusterAddon status (it lists each) and for the workload
    // cluster's API server: refused whole, before anything is applied.
    let count: usize = rendered.charts.iter().map(|c| c.objects.len()).sum();
    if count > ctx.settings.max_objects_per_release {
        let what = format!("the addons of {tag}");
        let message = too_many_objects_message(&what, count, ctx.settings.max_objects_per_release);
        pass.fail(reason::TOO_MANY_OBJECTS, "Apply", &message).await?;
        return Err(Error::TooManyObjects(message));
    }

    let secret = workload::addon_kubeconfig_secret(&usage.cluster.name, cluster.annotations());
    let workload = match actx.workloads.get(&ctx.client, &usage.cluster, &secret).await {
        Ok(w) => w,
        Err(e) => return unreachable_workload(&mut pass, e.to_string()).await,
    };

    if let Some(due) = in_place {
        if due {
            actions::correct_drift(&mut pass, &workload, &rendered, &tag, &addon_version).await?;
        }
        return Ok(Action::requeue(actx.settings.resync_interval));
    }
    let planned = actions::planned_stages(&pass, &rendered);
    if pass.status.stages.is_empty() {
        actions::record_stages(&mut pass, &rendered).await?;
    }
    let after_upgrade_from = actions::after_upgrade_from(&pass, &rendered);
    if let Some(after) =
        run_stages(&mut pass, &workload, &rendered, &planned, after_upgrade_from, upgrade_finished(cluster)).await?
    {
        return Ok(Action::requeue(after));
    }
    actions::finish_run(&mut pass, &workload, &rendered, &planned, &tag, &addon_version).await?;
    Ok(Action::requeue(actx.settings.resync_interval))
}

/// Runs the ClusterAddon controller until `shutdown` resolves, on the operator's one Cluster
/// watch: `triggers` are the changes [`wants`] selects (subscribed before the watch started), the
/// Clusters are read from its store. The ClusterAddons are requeued, not watched, so our own
/// status writes do not trigger passes.
pub async fn run_controller(actx: Arc<AddonContext>, concurrency: u16, triggers: ClusterTriggers) {
    use futures::StreamExt;
    let Some((version, store)) = actx.ctx.watches.cluster_feed.served().await else {
        tracing::info!("no Cluster API served: the ClusterAddon controller is idle");
        return;
    };
    let config = kube::runtime::controller::Config::default().concurrency(concurrency);
    let spec_changes = cluster_addon_spec_changes(&actx.ctx, version);
    kube::runtime::Controller::for_stream_with(futures::stream::pending::<Result<CapiCluster, _>>(), store, version)
        .reconcile_on(triggers)
        .reconcile_on(spec_changes)
        .with_config(config)
        .run(reconcile, error_policy, actx)
        .for_each(|_| async {})
        .await;
}

/// The Clusters whose ClusterAddon's spec changed (a platform team edits `valuesFrom`): a pass
/// renders with the new values at once rather than at the next drift resync. A watch of the
/// ClusterAddons' metadata only; the Cluster is the ClusterAddon's owner. Only a change of a
/// generation seen before starts a pass: a ClusterAddon first seen (just created by a pass, or
/// listed at start) is the Cluster watch's business, and a pass per ClusterAddon more would cost
/// a read each.
fn cluster_addon_spec_changes(
    ctx: &Context,
    version: crate::controller::runtime::clusters::CapiVersion,
) -> impl futures::Stream<Item = kube::runtime::reflector::ObjectRef<CapiCluster>> + Send + 'static {
    use futures::StreamExt;
    use kube::core::PartialObjectMeta;
    use kube::runtime::{WatchStreamExt, watcher};
    let api: Api<PartialObjectMeta<ClusterAddon>> = match &ctx.settings.watch_namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let seen: Arc<Mutex<BTreeMap<(String, String), i64>>> = Arc::default();
    watcher(api, watcher::Config::default()).default_backoff().filter_map(move |event| {
        let seen = seen.clone();
        async move {
            let (addon, deleted) = match event.ok()? {
                watcher::Event::Apply(a) | watcher::Event::InitApply(a) => (a, false),
                watcher::Event::Delete(a) => (a, true),
                watcher::Event::Init | watcher::Event::InitDone => return None,
            };
            let ns = addon.metadata.namespace.clone()?;
            let key = (ns.clone(), addon.metadata.name.clone()?);
            let mut seen = lock(&seen);
            if deleted {
                seen.remove(&key);
                return None;
            }
            let generation = addon.metadata.generation?;
            let previous = seen.insert(key, generation);
            if previous.is_none_or(|p| p == generation) {
                return None;
            }
            let owner = addon.metadata.owner_references.as_ref()?.iter().find(|o| o.kind == "Cluster")?;
            Some(kube::runtime::reflector::ObjectRef::new_with(&owner.name, version).within(&ns))
        }
    })
}

/// Whether Cluster API has finished moving `cluster` to its spec (a new class or version): it
/// has observed the current generation and reports its topology reconciled (False while an
/// upgrade is held or rolls out). `Err` says what is still missing.
pub fn upgrade_finished(cluster: &CapiCluster) -> Result<(), String> {
    cluster.condition_true_now("TopologyReconciled")
}

/// Which Cluster changes start a pass: only a change the pass reads (its spec, by generation;
/// metadata, as templates see labels and annotations, and deletion; whether the control plane is
/// initialised). A Cluster's status changes several times per upgrade (TopologyReconciled,
/// Ready...), and each pass reads its ClusterAddon.
pub fn wants(old: Option<&CapiCluster>, new: &CapiCluster) -> bool {
    let Some(old) = old else { return true };
    let (o, n) = (&old.metadata, &new.metadata);
    o.generation != n.generation
        || o.deletion_timestamp.is_some() != n.deletion_timestamp.is_some()
        || o.labels != n.labels
        || o.annotations != n.annotations
        || o.finalizers != n.finalizers
        || old.status.control_plane_initialized != new.status.control_plane_initialized
}

impl ClusterAddon {
    /// The key of the Cluster this object tracks.
    pub fn cluster_key(&self) -> Option<ClusterKey> {
        Some(ClusterKey { namespace: self.namespace()?, name: self.spec.cluster_ref.name.clone()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(generation: i64, labels: serde_json::Value, status: serde_json::Value) -> CapiCluster {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "team", "generation": generation, "labels": labels},
            "spec": {"topology": {"class": "docker-ferrol-1-27-v2", "version": "v1.27.3"}},
            "status": status
        }))
        .unwrap()
    }

    #[test]
    fn a_pass_only_for_what_a_pass_reads() {
        let base = cluster(1, json!({"env": "prod"}), json!({"phase": "Provisioning"}));
        assert!(wants(None, &base), "a Cluster new to the store");
        // Status noise: conditions and phase move several times per upgrade.
        let noisy = cluster(
            1,
            json!({"env": "prod"}),
            json!({"phase": "Provisioned", "conditions": [{"type": "Ready", "status": "True"}]}),
        );
        assert!(!wants(Some(&base), &noisy));
        assert!(wants(Some(&base), &cluster(2, json!({"env": "prod"}), json!({"phase": "Provisioning"}))));
        assert!(wants(Some(&base), &cluster(1, json!({"env": "test"}), json!({"phase": "Provisioning"}))));
        let initialised = cluster(1, json!({"env": "prod"}), json!({"controlPlaneReady": true}));
        assert!(wants(Some(&base), &initialised));
        let mut deleting = base.clone();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert!(wants(Some(&base), &deleting));
    }

    #[test]
    fn the_upgrade_is_finished_only_once_capi_observed_it_and_reconciled_the_topology() {
        let reconciled = |s: &str| json!([{"type": "TopologyReconciled", "status": s, "reason": "ClusterUpgrading"}]);
        let done = cluster(3, json!({}), json!({"observedGeneration": 3, "conditions": reconciled("True")}));
        assert_eq!(upgrade_finished(&done), Ok(()));
        // The spec moved, CAPI has not looked yet: the old True does not count.
        let unseen = cluster(4, json!({}), json!({"observedGeneration": 3, "conditions": reconciled("True")}));
        assert!(upgrade_finished(&unseen).unwrap_err().contains("observedGeneration 3"));
        let upgrading = cluster(4, json!({}), json!({"observedGeneration": 4, "conditions": reconciled("False")}));
        let why = upgrade_finished(&upgrading).unwrap_err();
        assert!(why.contains("TopologyReconciled is False") && why.contains("ClusterUpgrading"), "{why}");
        let silent = cluster(4, json!({}), json!({"observedGeneration": 4}));
        assert!(upgrade_finished(&silent).unwrap_err().contains("not reported"));
        // The Cluster controller saw generation 4; the topology controller's True is still the
        // one of generation 3 (seen on real CAPI after a rollback).
        let stale = cluster(
            4,
            json!({}),
            json!({"observedGeneration": 4, "conditions": [{"type": "TopologyReconciled", "status": "True", "observedGeneration": 3}]}),
        );
        let why = upgrade_finished(&stale).unwrap_err();
        assert_eq!(why, "TopologyReconciled is not reported for generation 4 yet (it is for 3)");
        let fresh = cluster(
            4,
            json!({}),
            json!({"observedGeneration": 4, "conditions": [{"type": "TopologyReconciled", "status": "True", "observedGeneration": 4}]}),
        );
        assert_eq!(upgrade_finished(&fresh), Ok(()));
    }

    #[test]
    fn addons_go_through_the_annotated_secret_else_capis() {
        use std::collections::BTreeMap;
        let mut annotations = BTreeMap::new();
        assert_eq!(workload::addon_kubeconfig_secret("edge", &annotations), "edge-kubeconfig");
        annotations.insert(workload::KUBECONFIG_SECRET_ANNOTATION.to_string(), " ".to_string());
        assert_eq!(workload::addon_kubeconfig_secret("edge", &annotations), "edge-kubeconfig", "blank: CAPI's");
        annotations.insert(workload::KUBECONFIG_SECRET_ANNOTATION.to_string(), "edge-addons".to_string());
        assert_eq!(workload::addon_kubeconfig_secret("edge", &annotations), "edge-addons");
    }
}
