//! The actions that carry a pass's decision out: record a release with the same addon version,
//! start a run of stages, apply what the stages did not and prune what the new version dropped,
//! correct drift. Each writes `ClusterAddon.status` before it returns.

use std::collections::BTreeSet;

use jiff::Timestamp;
use kube::api::DynamicObject;

use crate::api::StageStatus;
use crate::apply::{Action as ChangeAction, ApplyOptions, WhenEmpty};
use crate::controller::inventory;

use super::error::Error;
use super::render::RenderedRelease;
use super::stage_runner::{Pass, unreachable_workload};
use super::stages::{Action as StageAction, Stage};
use super::workload::Workload;
use super::{addon_owner, phase, reason};

/// Only the stack version changed: the addons are the same, nothing is sent.
pub(super) async fn record_release(pass: &mut Pass<'_>, tag: &str, addon_version: &str) -> Result<(), Error> {
    pass.status.release = Some(tag.to_string());
    pass.status.target_release = None;
    pass.condition(
        true,
        reason::ADDON_VERSION_UNCHANGED,
        format!("release {tag} has the addon version {addon_version} already applied"),
    );
    pass.save().await
}

/// Starts a run of the stages of `hooks` towards `tag` (written with the first stage's status).
pub(super) fn start_run(pass: &mut Pass<'_>, tag: &str, hooks: &[&str]) {
    pass.status.target_release = Some(tag.to_string());
    pass.status.current_hook = Some(hooks.join(","));
    pass.status.stages = Vec::new();
    pass.actx.set_synced(&pass.usage.cluster, None);
}

/// The stages of the run in status, in order.
pub(super) fn planned_stages(pass: &Pass<'_>, rendered: &RenderedRelease) -> Vec<Stage> {
    let hook_list = pass.status.current_hook.clone().unwrap_or_default();
    hook_list.split(',').flat_map(|h| rendered.stages(h)).collect()
}

/// The index of the first `AfterClusterUpgrade` stage of the run (the number of stages when it
/// has none).
pub(super) fn after_upgrade_from(pass: &Pass<'_>, rendered: &RenderedRelease) -> usize {
    let hook_list = pass.status.current_hook.clone().unwrap_or_default();
    hook_list
        .split(',')
        .take_while(|h| *h != super::stages::AFTER_CLUSTER_UPGRADE)
        .map(|h| rendered.stages(h).len())
        .sum()
}

/// Records the stages of a new run as `Pending`, each with its hook.
pub(super) async fn record_stages(pass: &mut Pass<'_>, rendered: &RenderedRelease) -> Result<(), Error> {
    let hook_list = pass.status.current_hook.clone().unwrap_or_default();
    let planned: Vec<(String, Stage)> =
        hook_list.split(',').flat_map(|h| rendered.stages(h).into_iter().map(move |s| (h.to_string(), s))).collect();
    pass.status.stages = planned
        .into_iter()
        .map(|(hook, s)| StageStatus {
            name: s.name.clone(),
            action: Some(s.action.as_str().into()),
            hook: Some(hook),
            phase: Some(phase::PENDING.into()),
            started_at: None,
            message: None,
        })
        .collect();
    pass.save().await
}

/// The stages are done: apply what they did not, prune what the new version dropped, and record
/// the release as applied.
pub(super) async fn finish_run(
    pass: &mut Pass<'_>,
    workload: &Workload,
    rendered: &RenderedRelease,
    planned: &[Stage],
    tag: &str,
    addon_version: &str,
) -> Result<(), Error> {
    let deleted: BTreeSet<&str> =
        planned.iter().filter(|s| s.action == StageAction::Delete).map(|s| s.name.as_str()).collect();
    let staged: BTreeSet<&str> = planned.iter().map(|s| s.name.as_str()).collect();
    let rest: Vec<DynamicObject> = rendered
        .charts
        .iter()
        .filter(|c| !staged.contains(c.name.as_str()))
        .flat_map(|c| c.objects.iter().cloned())
        .collect();
    let owner = addon_owner(&pass.usage.cluster);
    let previous = inventory::from_status(&pass.status.resources);
    let opts = ApplyOptions::new(owner.clone()).with_previous(previous.clone());
    let changes = match workload.applier.apply(&rest, &opts).await {
        Ok(r) => r,
        Err(e) => return unreachable_workload(pass, e.to_string()).await,
    };
    // What the new version still renders (the staged addons were applied by their stages),
    // but not what a `delete` stage removed; an addon version without addons prunes all.
    let mut keep = rendered.keys_except(&deleted);
    keep.extend(changes.identities());
    let stale =
        crate::apply::stale(&previous, &keep, WhenEmpty::Prune, &owner).map_err(|e| Error::Apply(e.to_string()))?;
    let pruned = workload.applier.prune(&stale, &owner).await;
    inventory::record(&mut pass.status.resources, &changes);
    inventory::record(&mut pass.status.resources, &pruned);
    let failed = changes.failed() + pruned.failed();
    if failed > 0 {
        let first = changes
            .failures()
            .chain(pruned.failures())
            .next()
            .map(|f| format!("{} {}: {}", f.key.kind, f.key.name, f.error))
            .unwrap_or_default();
        pass.condition(false, reason::APPLY_FAILED, format!("{failed} objects not applied; first: {first}"));
        pass.save().await?;
        return Err(Error::Apply(format!("{failed} objects not applied into the workload cluster")));
    }
    pass.status.release = Some(tag.to_string());
    pass.status.addon_version = Some(addon_version.to_string());
    pass.status.target_release = None;
    applied(pass, tag, addon_version).await
}

/// In place: re-applies every addon (drift correction).
pub(super) async fn correct_drift(
    pass: &mut Pass<'_>,
    workload: &Workload,
    rendered: &RenderedRelease,
    tag: &str,
    addon_version: &str,
) -> Result<(), Error> {
    let all: Vec<DynamicObject> = rendered.charts.iter().flat_map(|c| c.objects.iter().cloned()).collect();
    let previous = inventory::from_status(&pass.status.resources);
    let opts = ApplyOptions::new(addon_owner(&pass.usage.cluster)).with_previous(previous);
    let changes = match workload.applier.apply(&all, &opts).await {
        Ok(r) => r,
        Err(e) => return unreachable_workload(pass, e.to_string()).await,
    };
    inventory::record(&mut pass.status.resources, &changes);
    if !changes.all_ok() {
        pass.condition(false, reason::APPLY_FAILED, format!("{} objects not applied", changes.failed()));
        pass.save().await?;
        return Err(Error::Apply(format!("{} objects not applied into the workload cluster", changes.failed())));
    }
    let corrected = changes.with(ChangeAction::Created).len() + changes.with(ChangeAction::Configured).len();
    if corrected > 0 {
        tracing::info!(cluster = %pass.usage.cluster, corrected, "addon drift corrected");
    }
    applied(pass, tag, addon_version).await
}

/// Everything is applied: `Ready`, and drift correction is due a resync interval from now.
async fn applied(pass: &mut Pass<'_>, tag: &str, addon_version: &str) -> Result<(), Error> {
    pass.condition(
        true,
        reason::ADDONS_APPLIED,
        format!("the addons of {tag} (addon version {addon_version}) are applied"),
    );
    pass.save().await?;
    pass.actx.set_synced(&pass.usage.cluster, Some(Timestamp::now()));
    Ok(())
}
