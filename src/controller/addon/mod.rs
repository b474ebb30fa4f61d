//! The ClusterAddon controller: one `ClusterAddon` per CAPI Cluster whose class is a cluster-stack
//! class, and the release's addons applied into that Cluster's workload cluster, stage by stage
//! (`clusteraddon.yaml`), with all progress in `ClusterAddon.status` so a restart resumes where
//! it stopped. The loop is drawn in `docs/DESIGN.md` ("ClusterAddon loop").
//!
//! - [`stages`]: `clusteraddon.yaml` and its CEL wait conditions;
//! - [`workload`]: the cached workload clients.
//!
//! The lifecycle is followed by watching the Cluster (the fallback without the Runtime SDK): a
//! Cluster whose control plane is initialised gets the `AfterControlPlaneInitialized` stages; a
//! Cluster moving to a release with another **addon version** gets the new release's
//! `BeforeClusterUpgrade` and `AfterClusterUpgrade` stages, then every other addon of the new
//! version, and what the new version no longer renders is pruned from the inventory. Watching
//! cannot hold an upgrade: CAPI may roll the control plane while the stages run.

pub mod hooks;
pub mod stages;
pub mod workload;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use crate::api::conditions::{self, FALSE, READY, TRUE};
use crate::api::{AddonValuesRef, ClusterAddon, ClusterAddonSpec, ClusterAddonStatus, ObjectRef, StageStatus};
use crate::apply::{Action as ChangeAction, ApplyOptions, Identity, ObjectKey, ReleaseOwner, WhenEmpty};
use crate::render::{ClusterObjects, RenderContext, RenderedChart, merge_values};
use crate::source::FetchPolicy;
use crate::source::cache::FetchedRelease;

use super::backoff::Backoff;
use super::clusters::{CapiCluster, ClassUsage, ClusterKey, class_usage};
use super::context::Context;
use super::inventory;
use super::{ReconcileError, status_patch};
use stages::{Action as StageAction, ClusterAddonConfig, Stage, WaitOutcome};
use workload::{Workload, WorkloadClients};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusteraddon";
/// The default deadline of a stage's wait condition.
pub const DEFAULT_WAIT_DEADLINE: Duration = Duration::from_secs(600);
/// How often a waiting stage looks again.
const WAIT_POLL: Duration = Duration::from_secs(5);

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
    pub const STAGE_RUNNING: &str = "StageRunning";
    pub const STAGE_FAILED: &str = "StageFailed";
    pub const APPLY_FAILED: &str = "ApplyFailed";
    pub const ADDONS_APPLIED: &str = "AddonsApplied";
    pub const ADDON_VERSION_UNCHANGED: &str = "AddonVersionUnchanged";
}

/// `Ready` reasons of a ClusterAddon that mean kstatus `Stalled`.
pub const ADDON_STALLED_REASONS: &[&str] = &[reason::STAGE_FAILED, reason::RENDER_FAILED];

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
    /// When each Cluster's addons were last applied in full (drift correction is due after the
    /// resync interval). Lost on restart: then the first pass re-applies once.
    synced: Mutex<BTreeMap<ClusterKey, Timestamp>>,
}

impl AddonContext {
    pub fn new(ctx: Arc<Context>, settings: AddonSettings) -> Self {
        Self {
            workloads: WorkloadClients::new(settings.apply_concurrency),
            backoff: Backoff::new(ctx.settings.backoff, ctx.random.clone()),
            ctx,
            settings,
            synced: Mutex::default(),
        }
    }

    fn synced_at(&self, key: &ClusterKey) -> Option<Timestamp> {
        self.synced.lock().unwrap_or_else(PoisonError::into_inner).get(key).copied()
    }

    fn set_synced(&self, key: &ClusterKey, at: Option<Timestamp>) {
        let mut m = self.synced.lock().unwrap_or_else(PoisonError::into_inner);
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
pub async fn reconcile(cluster: Arc<CapiCluster>, actx: Arc<AddonContext>) -> Result<Action, ReconcileError> {
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
pub fn error_policy(cluster: Arc<CapiCluster>, error: &ReconcileError, actx: Arc<AddonContext>) -> Action {
    let key = cluster.key().to_string();
    actx.ctx.metrics.failed(CONTROLLER, error.reason());
    let delay = actx.backoff.failure(&key);
    tracing::warn!(cluster = %key, error = %error, retry_in = ?delay, "ClusterAddon reconcile failed");
    Action::requeue(delay)
}

/// Creates the ClusterAddon of a Cluster when it is missing, owned by the Cluster.
pub async fn ensure_cluster_addon(client: &kube::Client, cluster: &CapiCluster) -> Result<ClusterAddon, kube::Error> {
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster_addon_name(&cluster.name_any());
    let api: Api<ClusterAddon> = Api::namespaced(client.clone(), &ns);
    if let Some(existing) = api.get_opt(&name).await? {
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

/// What one pass decided; the status is written once at the end of each step.
struct Pass<'a> {
    actx: &'a AddonContext,
    usage: &'a ClassUsage,
    addon: ClusterAddon,
    status: ClusterAddonStatus,
    now: Time,
}

impl Pass<'_> {
    fn condition(&mut self, ok: bool, reason: &str, message: impl Into<String>) {
        let generation = self.addon.metadata.generation;
        let c = conditions::condition(READY, if ok { TRUE } else { FALSE }, reason, message, generation);
        conditions::set_condition(&mut self.status.conditions, c, &self.now);
        // kstatus: a failed stage or a render that fails needs a change (a new release, other
        // values) to progress; anything else not ready is under way.
        let progress = conditions::progress_from_ready(&self.status.conditions, ADDON_STALLED_REASONS);
        conditions::set_progress(&mut self.status.conditions, progress, generation, &self.now);
        self.status.observed_generation = generation;
        self.status.ready = ok;
    }

    /// Writes the status when it changed.
    async fn save(&mut self) -> Result<(), ReconcileError> {
        // The gauge follows the status even when nothing changed (a restarted operator starts empty).
        let cluster = &self.usage.cluster;
        self.actx.ctx.metrics.addon_stage(&cluster.namespace, &cluster.name, waiting_stage(&self.status));
        let old = self.addon.status.clone();
        if old.as_ref() == Some(&self.status) {
            return Ok(());
        }
        let api: Api<ClusterAddon> = Api::namespaced(self.actx.ctx.client.clone(), &self.usage.cluster.namespace);
        let patch = status_patch(old.as_ref(), &self.status)?;
        let updated = api.patch_status(&self.addon.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
        self.addon = updated;
        self.addon.status = Some(self.status.clone());
        Ok(())
    }
}

async fn reconcile_cluster(
    cluster: &CapiCluster,
    usage: &ClassUsage,
    actx: &AddonContext,
) -> Result<Action, ReconcileError> {
    let ctx = &actx.ctx;
    let addon = ensure_cluster_addon(&ctx.client, cluster).await?;
    let status = addon.status.clone().unwrap_or_default();
    let mut pass = Pass { actx, usage, addon, status, now: Time(Timestamp::now()) };

    if !cluster.status.control_plane_initialized && pass.status.release.is_none() {
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
    let metadata = release.metadata().map_err(|e| ReconcileError::Config(format!("release {tag}: {e}")))?;
    let addon_version = metadata.versions.components.cluster_addon.dotted();

    // Start a hook when the Cluster names another release than the one applied.
    let in_place = pass.status.release.as_deref() == Some(tag.as_str());
    let working = pass.status.target_release.as_deref() == Some(tag.as_str());
    if !in_place && !working {
        if pass.status.release.is_some() && pass.status.addon_version.as_deref() == Some(addon_version.as_str()) {
            // Only the stack version changed: the addons are the same, nothing is sent.
            pass.status.release = Some(tag.clone());
            pass.status.target_release = None;
            pass.condition(
                true,
                reason::ADDON_VERSION_UNCHANGED,
                format!("release {tag} has the addon version {addon_version} already applied"),
            );
            pass.save().await?;
            return Ok(Action::requeue(actx.settings.resync_interval));
        }
        let hooks: &[&str] = if pass.status.release.is_none() {
            &[stages::AFTER_CONTROL_PLANE_INITIALIZED]
        } else {
            &[stages::BEFORE_CLUSTER_UPGRADE, stages::AFTER_CLUSTER_UPGRADE]
        };
        pass.status.target_release = Some(tag.clone());
        pass.status.current_hook = Some(hooks.join(","));
        pass.status.stages = Vec::new();
        actx.set_synced(&usage.cluster, None);
    }

    // Render (CPU-bound, off the async workers); a broken template fails this Cluster only.
    // Templates see the whole Cluster: read now (the store keeps only the fields decided on).
    let Some(objects) = cluster_objects(ctx, cluster).await? else {
        // Deleted meanwhile: its watch event ends the story.
        return Ok(Action::await_change());
    };
    let values = match platform_values(ctx, &pass.addon, &usage.cluster.namespace).await {
        Ok(v) => v,
        Err(message) => {
            pass.condition(false, reason::RENDER_FAILED, message.clone());
            pass.save().await?;
            return Err(ReconcileError::Config(message));
        }
    };
    let rendered = match render_release(&release, &usage.class, &usage.cluster.namespace, objects, values).await {
        Ok(r) => r,
        Err(message) => {
            pass.condition(false, reason::RENDER_FAILED, message.clone());
            pass.save().await?;
            return Err(ReconcileError::Config(message));
        }
    };

    let workload = match actx.workloads.get(&ctx.client, &usage.cluster).await {
        Ok(w) => w,
        Err(e) => return unreachable_workload(&mut pass, e.to_string()).await,
    };

    if pass.status.target_release.is_some() {
        let hook_list = pass.status.current_hook.clone().unwrap_or_default();
        let planned: Vec<Stage> = hook_list.split(',').flat_map(|h| rendered.stages(h)).collect();
        if pass.status.stages.is_empty() {
            pass.status.stages = planned
                .iter()
                .map(|s| StageStatus {
                    name: s.name.clone(),
                    action: Some(s.action.as_str().into()),
                    phase: Some(phase::PENDING.into()),
                    started_at: None,
                    message: None,
                })
                .collect();
            pass.save().await?;
        }
        for (i, stage) in planned.iter().enumerate() {
            match run_stage(&mut pass, &workload, &rendered, i, stage).await? {
                StageStep::Done => continue,
                StageStep::Wait(after) => return Ok(Action::requeue(after)),
            }
        }
        // The stages are done: apply what they did not, prune what the new version dropped.
        let deleted: BTreeSet<&str> =
            planned.iter().filter(|s| s.action == StageAction::Delete).map(|s| s.name.as_str()).collect();
        let staged: BTreeSet<&str> = planned.iter().map(|s| s.name.as_str()).collect();
        let rest: Vec<DynamicObject> = rendered
            .charts
            .iter()
            .filter(|c| !staged.contains(c.name.as_str()))
            .flat_map(|c| c.objects.iter().cloned())
            .collect();
        let owner = addon_owner(&usage.cluster);
        let previous = inventory::from_status(&pass.status.resources);
        let opts = ApplyOptions::new(owner.clone()).with_previous(previous.clone());
        let applied = match workload.applier.apply(&rest, &opts).await {
            Ok(r) => r,
            Err(e) => return unreachable_workload(&mut pass, e.to_string()).await,
        };
        // What the new version still renders (the staged addons were applied by their stages),
        // but not what a `delete` stage removed; an addon version without addons prunes all.
        let mut keep = rendered.keys_except(&deleted);
        keep.extend(applied.identities());
        let stale = crate::apply::stale(&previous, &keep, WhenEmpty::Prune, &owner)?;
        let pruned = workload.applier.prune(&stale, &owner).await;
        inventory::record(&mut pass.status.resources, &applied);
        inventory::record(&mut pass.status.resources, &pruned);
        let failed = applied.failed() + pruned.failed();
        if failed > 0 {
            let first = applied
                .failures()
                .chain(pruned.failures())
                .next()
                .map(|f| format!("{} {}: {}", f.key.kind, f.key.name, f.error))
                .unwrap_or_default();
            pass.condition(false, reason::APPLY_FAILED, format!("{failed} objects not applied; first: {first}"));
            pass.save().await?;
            return Err(ReconcileError::Config(format!("{failed} objects not applied into the workload cluster")));
        }
        pass.status.release = Some(tag.clone());
        pass.status.addon_version = Some(addon_version.clone());
        pass.status.target_release = None;
        pass.condition(
            true,
            reason::ADDONS_APPLIED,
            format!("the addons of {tag} (addon version {addon_version}) are applied"),
        );
        pass.save().await?;
        actx.set_synced(&usage.cluster, Some(Timestamp::now()));
        return Ok(Action::requeue(actx.settings.resync_interval));
    }

    // In place: correct drift once per resync interval.
    let due = actx
        .synced_at(&usage.cluster)
        .is_none_or(|t| Timestamp::now().duration_since(t).unsigned_abs() >= actx.settings.resync_interval);
    if due {
        let all: Vec<DynamicObject> = rendered.charts.iter().flat_map(|c| c.objects.iter().cloned()).collect();
        let previous = inventory::from_status(&pass.status.resources);
        let opts = ApplyOptions::new(addon_owner(&usage.cluster)).with_previous(previous);
        let applied = match workload.applier.apply(&all, &opts).await {
            Ok(r) => r,
            Err(e) => return unreachable_workload(&mut pass, e.to_string()).await,
        };
        inventory::record(&mut pass.status.resources, &applied);
        if !applied.all_ok() {
            pass.condition(false, reason::APPLY_FAILED, format!("{} objects not applied", applied.failed()));
            pass.save().await?;
            return Err(ReconcileError::Config(format!(
                "{} objects not applied into the workload cluster",
                applied.failed()
            )));
        }
        let corrected = applied.with(ChangeAction::Created).len() + applied.with(ChangeAction::Configured).len();
        if corrected > 0 {
            tracing::info!(cluster = %usage.cluster, corrected, "addon drift corrected");
        }
        pass.condition(
            true,
            reason::ADDONS_APPLIED,
            format!("the addons of {tag} (addon version {addon_version}) are applied"),
        );
        pass.save().await?;
        actx.set_synced(&usage.cluster, Some(Timestamp::now()));
    }
    Ok(Action::requeue(actx.settings.resync_interval))
}

async fn unreachable_workload(pass: &mut Pass<'_>, message: String) -> Result<Action, ReconcileError> {
    pass.actx.workloads.forget(&pass.usage.cluster);
    pass.condition(false, reason::WORKLOAD_UNREACHABLE, message.clone());
    pass.save().await?;
    Err(ReconcileError::Config(format!("workload cluster {}: {message}", pass.usage.cluster)))
}

enum StageStep {
    Done,
    Wait(Duration),
}

/// Runs stage `i` as far as it goes: pre-condition, apply or delete, post-condition.
async fn run_stage(
    pass: &mut Pass<'_>,
    workload: &Workload,
    rendered: &RenderedRelease,
    i: usize,
    stage: &Stage,
) -> Result<StageStep, ReconcileError> {
    let current = pass.status.stages.get(i).and_then(|s| s.phase.clone()).unwrap_or_default();
    match current.as_str() {
        phase::DONE => return Ok(StageStep::Done),
        phase::FAILED => return Ok(StageStep::Wait(Duration::from_secs(300))),
        _ => {}
    }
    let hook = pass.status.current_hook.clone().unwrap_or_default();
    if current != phase::WAITING_POST {
        if let Some(wait) = &stage.wait_for_pre_condition
            && let Some(step) =
                wait_for(pass, workload, i, wait, phase::WAITING_PRE, "waitForPreCondition", &hook).await?
        {
            return Ok(step);
        }
        let objects =
            rendered.charts.iter().find(|c| c.name == stage.name).map(|c| c.objects.clone()).unwrap_or_default();
        let owner = addon_owner(&pass.usage.cluster);
        match stage.action {
            StageAction::Apply => {
                let previous = inventory::from_status(&pass.status.resources);
                let opts = ApplyOptions::new(owner).with_previous(previous);
                let applied = match workload.applier.apply(&objects, &opts).await {
                    Ok(r) => r,
                    Err(e) => return unreachable_workload(pass, e.to_string()).await.map(|_| StageStep::Done),
                };
                inventory::record(&mut pass.status.resources, &applied);
                if let Some(f) = applied.failures().next() {
                    let first = format!("{} {}: {}", f.key.kind, f.key.name, f.error);
                    pass.condition(false, reason::APPLY_FAILED, format!("stage {} ({hook}): {first}", stage.name));
                    pass.save().await?;
                    return Err(ReconcileError::Config(format!("stage {}: objects not applied", stage.name)));
                }
            }
            StageAction::Delete => {
                let ids: HashSet<Identity> = objects.iter().map(|o| ObjectKey::of(o).identity()).collect();
                let targets = inventory::from_status(&pass.status.resources).only(&ids);
                let deleted = workload.applier.delete_all(&targets, &owner).await;
                if let Some(f) = deleted.failures().next() {
                    pass.condition(
                        false,
                        reason::APPLY_FAILED,
                        format!("stage {} ({hook}): deleting {}: {}", stage.name, f.key, f.error),
                    );
                    pass.save().await?;
                    return Err(ReconcileError::Config(format!("stage {}: objects not deleted", stage.name)));
                }
                inventory::record(&mut pass.status.resources, &deleted);
            }
        }
        set_phase(pass, i, phase::WAITING_POST, None, None);
    }
    if let Some(wait) = &stage.wait_for_post_condition
        && let Some(step) =
            wait_for(pass, workload, i, wait, phase::WAITING_POST, "waitForPostCondition", &hook).await?
    {
        return Ok(step);
    }
    set_phase(pass, i, phase::DONE, None, None);
    pass.save().await?;
    Ok(StageStep::Done)
}

/// The stage a ClusterAddon waits in and since when (Unix seconds), for the stuck-stage alert.
fn waiting_stage(status: &ClusterAddonStatus) -> Option<(&str, i64)> {
    status.stages.iter().find_map(|s| {
        let waiting = matches!(s.phase.as_deref(), Some(phase::WAITING_PRE | phase::WAITING_POST));
        let since = s.started_at.as_ref()?.0.as_second();
        waiting.then_some((s.name.as_str(), since))
    })
}

fn set_phase(pass: &mut Pass<'_>, i: usize, phase_name: &str, started_at: Option<Time>, message: Option<String>) {
    if let Some(s) = pass.status.stages.get_mut(i) {
        s.phase = Some(phase_name.into());
        s.started_at = started_at;
        s.message = message;
    }
}

/// Evaluates a wait; `None` when it is met, else the step (wait again, or failed after the deadline).
async fn wait_for(
    pass: &mut Pass<'_>,
    workload: &Workload,
    i: usize,
    wait: &stages::WaitCondition,
    waiting_phase: &str,
    what: &str,
    hook: &str,
) -> Result<Option<StageStep>, ReconcileError> {
    let objects = read_keyed(workload, wait).await;
    let message = match stages::evaluate(wait, &objects) {
        WaitOutcome::Met => return Ok(None),
        WaitOutcome::NotMet(m) => m,
    };
    let stage_name = pass.status.stages.get(i).map(|s| s.name.clone()).unwrap_or_default();
    let started = pass
        .status
        .stages
        .get(i)
        .filter(|s| s.phase.as_deref() == Some(waiting_phase))
        .and_then(|s| s.started_at.clone())
        .unwrap_or_else(|| pass.now.clone());
    let waited = pass.now.0.duration_since(started.0).unsigned_abs();
    if waited >= pass.actx.settings.wait_deadline {
        let text = format!(
            "stage {stage_name} ({hook}): {what} not met after {}: {message}",
            humantime::format_duration(pass.actx.settings.wait_deadline)
        );
        set_phase(pass, i, phase::FAILED, Some(started), Some(text.clone()));
        pass.condition(false, reason::STAGE_FAILED, text);
        pass.save().await?;
        return Ok(Some(StageStep::Wait(Duration::from_secs(300))));
    }
    set_phase(pass, i, waiting_phase, Some(started), Some(message.clone()));
    pass.condition(false, reason::STAGE_RUNNING, format!("stage {stage_name} ({hook}): {what}: {message}"));
    pass.save().await?;
    let left = pass.actx.settings.wait_deadline.saturating_sub(waited);
    Ok(Some(StageStep::Wait(WAIT_POLL.min(left.max(Duration::from_millis(100))))))
}

/// Reads the keyed objects of a wait from the workload cluster (missing or unreadable: absent).
async fn read_keyed(workload: &Workload, wait: &stages::WaitCondition) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for k in &wait.objects {
        let (group, version) = match k.api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", k.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &k.kind);
        let Ok(Some(resolved)) = workload.applier.discovery().resolve(&gvk).await else { continue };
        let api: Api<DynamicObject> = match (&k.namespace, resolved.namespaced) {
            (Some(ns), true) => Api::namespaced_with(workload.client.clone(), ns, &resolved.resource),
            (None, true) => Api::namespaced_with(workload.client.clone(), "default", &resolved.resource),
            _ => Api::all_with(workload.client.clone(), &resolved.resource),
        };
        if let Ok(Some(obj)) = api.get_opt(&k.name).await
            && let Ok(v) = serde_json::to_value(&obj)
        {
            out.insert(k.key.clone(), v);
        }
    }
    out
}

/// A release's addons rendered for one Cluster, with its stages.
pub struct RenderedRelease {
    pub charts: Vec<RenderedChart>,
    pub config: Option<ClusterAddonConfig>,
}

impl RenderedRelease {
    /// The stages of `hook`: from `clusteraddon.yaml`, or every addon when the bundle has none
    /// (for the first hook; an upgrade without the file applies everything after its stages).
    pub fn stages(&self, hook: &str) -> Vec<Stage> {
        match &self.config {
            Some(c) => c.stages(hook).to_vec(),
            None if hook == stages::AFTER_CONTROL_PLANE_INITIALIZED || hook == stages::BEFORE_CLUSTER_UPGRADE => {
                stages::all_addons(&self.charts.iter().map(|c| c.name.clone()).collect::<Vec<_>>())
            }
            None => Vec::new(),
        }
    }

    /// The identities of every object rendered (namespaces as written), except those of
    /// `excluded` addons.
    fn keys_except(&self, excluded: &BTreeSet<&str>) -> HashSet<Identity> {
        self.charts
            .iter()
            .filter(|c| !excluded.contains(c.name.as_str()))
            .flat_map(|c| c.objects.iter().map(|o| ObjectKey::of(o).identity()))
            .collect()
    }

    /// The object keys of one addon, for display.
    pub fn object_keys(&self, addon: &str) -> Vec<String> {
        self.charts
            .iter()
            .filter(|c| c.name == addon)
            .flat_map(|c| {
                c.objects.iter().map(|o| {
                    let key = ObjectKey::of(o);
                    format!(
                        "{} {}",
                        key.kind,
                        if key.namespace.is_empty() { key.name } else { format!("{}/{}", key.namespace, key.name) }
                    )
                })
            })
            .collect()
    }
}

/// Renders the addons of `release` for a Cluster, with platform values per addon; reads
/// `clusteraddon.yaml` when the release has it.
pub async fn render_release(
    release: &FetchedRelease,
    class: &crate::release::ReleaseId,
    namespace: &str,
    objects: ClusterObjects,
    values: BTreeMap<String, Value>,
) -> Result<RenderedRelease, String> {
    let Some(bundle) = release.cluster_addon_dir() else {
        return Ok(RenderedRelease { charts: Vec::new(), config: None });
    };
    let config_path = release.asset_path(stages::CLUSTER_ADDON_FILE).filter(|p| p.exists());
    let mut ctx = RenderContext::new(class, namespace).with_cluster(objects).with_addon_values(values);
    // Helm addon charts see the release's Kubernetes version, as `--kube-version` gives it.
    if let Ok(metadata) = release.metadata() {
        ctx = ctx.with_kube_version(metadata.versions.kubernetes.to_string());
    }
    tokio::task::spawn_blocking(move || render_bundle(&bundle, config_path.as_deref(), &ctx))
        .await
        .map_err(|e| format!("render task failed: {e}"))?
}

/// The pure part of [`render_release`], also used by `clusterstack render --addons`.
pub fn render_bundle(
    bundle: &std::path::Path,
    config_path: Option<&std::path::Path>,
    ctx: &RenderContext,
) -> Result<RenderedRelease, String> {
    let charts = crate::render::render_addons(bundle, ctx).map_err(|e| e.to_string())?;
    let config = match config_path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            let names: Vec<String> = charts.iter().map(|c| c.name.clone()).collect();
            Some(ClusterAddonConfig::parse(&text, &names).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    Ok(RenderedRelease { charts, config })
}

/// The Cluster, its control plane and its infrastructure cluster, as templates see them; `None`
/// when the Cluster is gone.
async fn cluster_objects(ctx: &Context, cluster: &CapiCluster) -> Result<Option<ClusterObjects>, ReconcileError> {
    let ns = cluster.namespace().unwrap_or_default();
    read_cluster_objects(&ctx.client, ctx.applier.discovery(), &ns, &cluster.version.resource(), &cluster.name_any())
        .await
}

/// [`cluster_objects`] for any client (also `clusterstack diff --addons`): the Cluster through
/// `clusters` (its served version), its referenced objects through discovery.
pub async fn read_cluster_objects(
    client: &kube::Client,
    discovery: &crate::apply::DiscoveryCache,
    ns: &str,
    clusters: &kube::api::ApiResource,
    name: &str,
) -> Result<Option<ClusterObjects>, ReconcileError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, clusters);
    let Some(full) = api.get_opt(name).await? else { return Ok(None) };
    let mut out = ClusterObjects { cluster: serde_json::to_value(full)?, ..Default::default() };
    for (field, slot) in [("controlPlaneRef", &mut out.control_plane), ("infrastructureRef", &mut out.infra_cluster)] {
        let r = &out.cluster["spec"][field];
        let (Some(kind), Some(name)) = (r["kind"].as_str(), r["name"].as_str()) else { continue };
        // v1beta1 refs carry apiVersion; v1beta2 refs carry apiGroup only.
        let gvk = match (r["apiVersion"].as_str(), r["apiGroup"].as_str()) {
            (Some(av), _) => match av.rsplit_once('/') {
                Some((g, v)) => Some(GroupVersionKind::gvk(g, v, kind)),
                None => Some(GroupVersionKind::gvk("", av, kind)),
            },
            (None, Some(group)) => preferred(discovery, group, kind).await,
            _ => None,
        };
        let Some(gvk) = gvk else { continue };
        let Ok(Some(resolved)) = discovery.resolve(&gvk).await else { continue };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resolved.resource);
        if let Some(obj) = api.get_opt(name).await? {
            *slot = serde_json::to_value(obj)?;
        }
    }
    Ok(Some(out))
}

/// The served version of a CAPI kind, newest first (`v1beta2`, then `v1beta1`).
pub async fn preferred(discovery: &crate::apply::DiscoveryCache, group: &str, kind: &str) -> Option<GroupVersionKind> {
    for version in ["v1beta2", "v1beta1"] {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        if let Ok(Some(_)) = discovery.resolve(&gvk).await {
            return Some(gvk);
        }
    }
    None
}

/// The platform-team values of a ClusterAddon's `spec.valuesFrom`, per addon.
async fn platform_values(
    ctx: &Context,
    addon: &ClusterAddon,
    namespace: &str,
) -> Result<BTreeMap<String, Value>, String> {
    let mut out = BTreeMap::new();
    for r in &addon.spec.values_from {
        let value = read_values_ref(&ctx.client, namespace, r).await?;
        merge_values(out.entry(r.addon.clone()).or_insert_with(|| json!({})), value);
    }
    Ok(out)
}

/// Reads one values reference: the YAML mapping under its key.
pub async fn read_values_ref(client: &kube::Client, namespace: &str, r: &AddonValuesRef) -> Result<Value, String> {
    let key = r.key.clone().unwrap_or_else(|| "values.yaml".into());
    let what = format!("{} {namespace}/{} key {key:?} (valuesFrom of addon {})", r.kind, r.name, r.addon);
    let text = match r.kind.as_str() {
        "ConfigMap" => {
            let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), namespace);
            let cm = api.get_opt(&r.name).await.map_err(|e| format!("cannot read {what}: {e}"))?;
            cm.and_then(|c| c.data).and_then(|d| d.get(&key).cloned())
        }
        "Secret" => {
            let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), namespace);
            let s = api.get_opt(&r.name).await.map_err(|e| format!("cannot read {what}: {e}"))?;
            s.and_then(|s| s.data).and_then(|d| d.get(&key).and_then(|b| String::from_utf8(b.0.clone()).ok()))
        }
        other => return Err(format!("{what}: kind must be ConfigMap or Secret, not {other:?}")),
    }
    .ok_or_else(|| format!("{what} does not exist"))?;
    parse_values_text(&text).map_err(|e| format!("{what}: {e}"))
}

/// Parses platform values: one YAML mapping (empty is `{}`).
pub fn parse_values_text(text: &str) -> Result<Value, String> {
    let v: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    match v {
        Value::Null => Ok(json!({})),
        v @ Value::Object(_) => Ok(v),
        _ => Err("values must be a mapping".into()),
    }
}

/// The release `tag` of the ClusterClass in `namespace`, from the cache (downloaded by the
/// ClusterStackRelease controller; fetched here only when the cache lacks it).
async fn locate_release(ctx: &Context, namespace: &str, tag: &str) -> Result<FetchedRelease, String> {
    let releases: Api<crate::api::ClusterStackRelease> = Api::namespaced(ctx.client.clone(), namespace);
    let csr = releases.get_opt(tag).await.map_err(|e| e.to_string())?;
    let source = match &csr {
        Some(r) => super::release::release_source(r, ctx).await.map_err(|e| e.to_string())?.0,
        None => ctx.open(&ctx.settings.default_source).map_err(|e| e.to_string())?,
    };
    let id = crate::release::ReleaseId::from_tag(tag).map_err(|e| e.to_string())?;
    if let Some(cached) = ctx.cache.open(&source, &id, tag).await.map_err(|e| e.to_string())? {
        return Ok(cached);
    }
    let listing = ctx.list(&source, Duration::from_secs(60)).await;
    let releases = listing.result.map_err(|e| format!("{e:?}"))?;
    let listed = releases.iter().find(|r| r.tag == tag).ok_or_else(|| "not found in its source".to_string())?;
    ctx.cache.fetch(&source, listed, FetchPolicy::default()).await.map_err(|e| e.to_string())
}

/// Runs the ClusterAddon controller until `shutdown` resolves: watches the Clusters (the served
/// CAPI version); the ClusterAddons are requeued, not watched, so our own status writes do not
/// trigger passes.
pub async fn run_controller(actx: Arc<AddonContext>, concurrency: u16) {
    use futures::StreamExt;
    let Some(version) = super::watch::served_cluster_version(&actx.ctx).await else {
        tracing::info!("no Cluster API served: the ClusterAddon controller is idle");
        return;
    };
    let clusters: Api<CapiCluster> = Api::all_with(actx.ctx.client.clone(), &version);
    let config = kube::runtime::controller::Config::default().concurrency(concurrency);
    // The store keeps the trimmed view of each Cluster, slimmed further (see `watch::slim`).
    let writer = kube::runtime::reflector::store::Writer::<CapiCluster>::new(version);
    let reader = writer.as_reader();
    let stream = kube::runtime::reflector(
        writer,
        kube::runtime::WatchStreamExt::modify(
            kube::runtime::watcher(clusters, kube::runtime::watcher::Config::default()),
            move |c: &mut CapiCluster| {
                super::watch::slim(c);
                // The version watched, whatever an item says (list items may omit `apiVersion`).
                c.version = version;
            },
        ),
    );
    let stream = kube::runtime::WatchStreamExt::applied_objects(stream);
    kube::runtime::Controller::for_stream_with(stream, reader, version)
        .with_config(config)
        .run(reconcile, error_policy, actx)
        .for_each(|_| async {})
        .await;
}

impl ClusterAddon {
    /// The key of the Cluster this object tracks.
    pub fn cluster_key(&self) -> Option<ClusterKey> {
        Some(ClusterKey { namespace: self.namespace()?, name: self.spec.cluster_ref.name.clone()? })
    }
}

/// Whether a Cluster's addons would be (re-)applied, and why: the decision of a pass, for
/// `clusterstack plan --clusters`. `target_addon_version` is the addon version of the Cluster's
/// class (`None` when unknown, i.e. the release was not fetched).
pub fn addon_decision(
    class_tag: &str,
    status: Option<&ClusterAddonStatus>,
    target_addon_version: Option<&str>,
) -> (bool, String) {
    let applied = status.and_then(|s| s.release.as_deref());
    let applied_version = status.and_then(|s| s.addon_version.as_deref());
    match (applied, status.and_then(|s| s.target_release.as_deref())) {
        (_, Some(t)) if t == class_tag => (true, format!("the stages towards {t} are running")),
        (None, _) => (
            true,
            "first install: the AfterControlPlaneInitialized stages, once the control plane is initialised".into(),
        ),
        (Some(r), _) if r == class_tag => (false, format!("{r} is applied; only drift correction")),
        (Some(r), _) => match (applied_version, target_addon_version) {
            (Some(a), Some(t)) if a == t => {
                (false, format!("{r} -> {class_tag} keeps addon version {t}: nothing is sent"))
            }
            (Some(a), Some(t)) => (
                true,
                format!(
                    "{r} -> {class_tag} changes the addon version {a} -> {t}: BeforeClusterUpgrade, AfterClusterUpgrade, the rest, prune"
                ),
            ),
            (a, None) => (
                true,
                format!(
                    "{r} -> {class_tag}: unless its addon version is {} (pass --render to fetch the release and know)",
                    a.unwrap_or("unknown")
                ),
            ),
            (None, Some(t)) => {
                (true, format!("{r} -> {class_tag}: addon version {t}; the applied one is not recorded"))
            }
        },
    }
}

#[cfg(test)]
mod decision_tests {
    use super::*;

    fn status(release: &str, version: &str) -> ClusterAddonStatus {
        ClusterAddonStatus { release: Some(release.into()), addon_version: Some(version.into()), ..Default::default() }
    }

    #[test]
    fn the_decision_follows_the_addon_version_not_the_stack_version() {
        assert!(addon_decision("s-v1", None, None).0);
        assert!(!addon_decision("s-v2", Some(&status("s-v2", "v2")), Some("v2")).0);
        let (again, why) = addon_decision("s-v3", Some(&status("s-v2", "v2")), Some("v2"));
        assert!(!again, "{why}");
        let (again, why) = addon_decision("s-v2", Some(&status("s-v1", "v1")), Some("v2"));
        assert!(again && why.contains("v1 -> v2"), "{why}");
        assert!(addon_decision("s-v2", Some(&status("s-v1", "v1")), None).1.contains("--render"));
    }
}
