//! The stage runner: one stage of `clusteraddon.yaml` as far as it goes (pre-condition, apply or
//! delete, post-condition), every step written to `ClusterAddon.status` before it returns.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Resource as _, ResourceExt};
use serde_json::Value;

use crate::api::conditions::{self, FALSE, READY, TRUE};
use crate::api::{ClusterAddon, ClusterAddonStatus};
use crate::apply::{ApplyOptions, Identity, ObjectKey};
use crate::controller::inventory;
use crate::controller::runtime::clusters::ClassUsage;
use crate::controller::status_patch;

use super::error::Error;
use super::render::RenderedRelease;
use super::stages::{self, Action as StageAction, Stage, WaitOutcome};
use super::workload::Workload;
use super::{ADDON_STALLED_REASONS, AddonContext, CONTROLLER, WAIT_POLL, addon_owner, phase, reason};

/// What one pass decided; the status is written once at the end of each step.
pub(super) struct Pass<'a> {
    pub(super) actx: &'a AddonContext,
    pub(super) usage: &'a ClassUsage,
    pub(super) addon: ClusterAddon,
    pub(super) status: ClusterAddonStatus,
    pub(super) now: Time,
}

impl Pass<'_> {
    pub(super) fn condition(&mut self, ok: bool, reason: &str, message: impl Into<String>) {
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
    /// A failure that needs a change to clear: `Ready=False` with `reason`, saved, and a warning
    /// Event when the reason or message is new (not again on each backoff retry).
    pub(super) async fn fail(&mut self, reason: &str, action: &str, message: &str) -> Result<(), Error> {
        let new =
            !self.status.conditions.iter().any(|c| c.type_ == READY && c.reason == reason && c.message == message);
        self.condition(false, reason, message);
        self.save().await?;
        if new {
            let reference = self.addon.object_ref(&());
            self.actx.ctx.event(&reference, true, reason, action, message.to_string()).await;
        }
        Ok(())
    }

    pub(super) async fn save(&mut self) -> Result<(), Error> {
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

/// The workload cluster cannot be reached: drop its client (built again next time), say so.
pub(super) async fn unreachable_workload<T>(pass: &mut Pass<'_>, message: String) -> Result<T, Error> {
    pass.actx.workloads.forget(&pass.usage.cluster);
    pass.condition(false, reason::WORKLOAD_UNREACHABLE, message.clone());
    pass.save().await?;
    Err(Error::WorkloadUnreachable { cluster: pass.usage.cluster.clone(), message })
}

/// How far a stage went in this pass.
enum StageStep {
    Done,
    Wait(Duration),
}

/// How often a run waiting for Cluster API to finish an upgrade looks again.
const UPGRADE_POLL: Duration = Duration::from_secs(10);

/// Runs the stages of the run in order, as far as they go; `Some(after)`: one waits, look again
/// then; `None`: all are done. The stages from `after_upgrade_from` on are the
/// `AfterClusterUpgrade` ones: they start only once `upgraded` is `Ok` (Cluster API finished
/// moving the Cluster), as Cluster API calls that hook only then.
pub(super) async fn run_stages(
    pass: &mut Pass<'_>,
    workload: &Workload,
    rendered: &RenderedRelease,
    planned: &[Stage],
    after_upgrade_from: usize,
    upgraded: Result<(), String>,
) -> Result<Option<Duration>, Error> {
    for (i, stage) in planned.iter().enumerate() {
        if i >= after_upgrade_from
            && let Err(why) = &upgraded
        {
            let current = pass.status.stages.get(i).and_then(|s| s.phase.clone()).unwrap_or_default();
            if current == phase::PENDING || current.is_empty() {
                pass.condition(
                    false,
                    reason::STAGE_RUNNING,
                    format!(
                        "stage {} (AfterClusterUpgrade): waiting for Cluster API to finish the upgrade: {why}",
                        stage.name
                    ),
                );
                pass.save().await?;
                return Ok(Some(UPGRADE_POLL));
            }
        }
        match run_stage(pass, workload, rendered, i, stage).await? {
            StageStep::Done => continue,
            StageStep::Wait(after) => return Ok(Some(after)),
        }
    }
    Ok(None)
}

/// Runs stage `i` as far as it goes: pre-condition, apply or delete, post-condition.
async fn run_stage(
    pass: &mut Pass<'_>,
    workload: &Workload,
    rendered: &RenderedRelease,
    i: usize,
    stage: &Stage,
) -> Result<StageStep, Error> {
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
                    Err(e) => return unreachable_workload(pass, e.to_string()).await,
                };
                inventory::record(&mut pass.status.resources, &applied);
                if let Some(f) = applied.failures().next() {
                    let first = format!("{} {}: {}", f.key.kind, f.key.name, f.error);
                    pass.condition(false, reason::APPLY_FAILED, format!("stage {} ({hook}): {first}", stage.name));
                    pass.save().await?;
                    return Err(Error::Apply(format!("stage {}: objects not applied", stage.name)));
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
                    return Err(Error::Apply(format!("stage {}: objects not deleted", stage.name)));
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
) -> Result<Option<StageStep>, Error> {
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
        // Counted once, when the deadline passes: the stage stays Failed, looked at again later.
        let timeout = Error::StageTimeout(format!("cluster {}: {text}", pass.usage.cluster));
        pass.actx.ctx.metrics.failed(CONTROLLER, timeout.metric_label());
        tracing::warn!(error = %timeout, "an addon stage timed out");
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
