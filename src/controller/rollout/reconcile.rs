//! The rollout reconcile: gathers the inputs of [`decide`](super::decide::decide) from the
//! watch stores (the ClusterStack, its releases, the Clusters and their ClusterAddons) and one
//! cached read of the target ClusterClass, then carries the decision out in order: the status
//! first (so every Cluster's `from` is recorded before it moves), then the moves (server-side
//! apply of the class and version only, field manager `clusterstack-rollout`), Events, metrics.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::api::{ClusterStack, ClusterStackRollout, ClusterStackSpec};
use crate::controller::runtime::clusters::{CapiCluster, CapiVersion, ClusterKey};
use crate::controller::status_patch;
use crate::release::ReleaseId;
use crate::util::is_not_found;

use super::class::{ClassShape, Classes};
use super::context::RolloutContext;
use super::decide::{self, ClusterInput, Move, Releases, phase, state};
use super::view::{AddonView, ReleaseView};
use super::{CONTROLLER, FIELD_MANAGER, rules};

/// Moves (server-side applies of Clusters) in flight at once within one pass.
const MOVES_AT_ONCE: usize = 8;

/// Why a rollout pass failed; the variant is the failure metric's label.
#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("moving Cluster {cluster} failed: {source}")]
    Move {
        cluster: ClusterKey,
        #[source]
        source: kube::Error,
    },
    #[error("could not serialise: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl RolloutError {
    /// A bounded label for the failure metric.
    pub fn reason(&self) -> &'static str {
        match self {
            RolloutError::Kube(_) => "KubeError",
            RolloutError::Move { .. } => "MoveFailed",
            RolloutError::Serialize(_) => "SerializeFailed",
        }
    }
}

fn key_of(ro: &ClusterStackRollout) -> String {
    format!("{}/{}", ro.namespace().unwrap_or_default(), ro.name_any())
}

pub async fn reconcile(ro: Arc<ClusterStackRollout>, ctx: Arc<RolloutContext>) -> Result<Action, RolloutError> {
    let started = std::time::Instant::now();
    let key = key_of(&ro);
    if ro.meta().deletion_timestamp.is_some() {
        ctx.forget_rollout(&key);
        // Zero, not gone: a deleted rollout reports no Clusters and no halt.
        let none: Vec<(&str, u64)> = state::ALL.iter().map(|s| (*s, 0)).collect();
        ctx.shared.metrics.rollout(&key, false, &none);
        return Ok(Action::await_change());
    }
    let result = reconcile_inner(&ro, &ctx, &key).await;
    ctx.shared.metrics.reconciled(CONTROLLER, started.elapsed());
    if result.is_ok() {
        ctx.backoff.success(&key);
    }
    result
}

pub fn error_policy(ro: Arc<ClusterStackRollout>, error: &RolloutError, ctx: Arc<RolloutContext>) -> Action {
    let key = key_of(&ro);
    ctx.shared.metrics.failed(CONTROLLER, error.reason());
    let delay = ctx.backoff.failure(&key);
    tracing::warn!(rollout = %key, error = %error, retry_in = ?delay, "ClusterStackRollout reconcile failed");
    Action::requeue(delay)
}

async fn reconcile_inner(ro: &ClusterStackRollout, ctx: &RolloutContext, key: &str) -> Result<Action, RolloutError> {
    let ns = ro.namespace().unwrap_or_default();
    let mut ro = ro.clone();
    // Our last status write, if the store does not show it yet.
    if let Some(status) = ctx.written_status(key, ro.metadata.resource_version.as_deref()) {
        ro.status = Some(status);
    }
    let stack = stack_spec(ctx, &ns, &ro.spec.cluster_stack_ref.name).await?;
    let releases =
        stack.as_ref().map(|s| release_views(ctx, &ns, &ro.spec.cluster_stack_ref.name, s)).unwrap_or_default();
    let clusters = ctx.clusters();
    let addons: BTreeMap<ClusterKey, AddonView> =
        ctx.addons.state().iter().filter_map(|a| Some((a.cluster_key()?, a.view()))).collect();
    let inputs: Vec<ClusterInput<'_>> =
        clusters.iter().map(|c| ClusterInput { cluster: c, addon: addons.get(&c.key()) }).collect();

    // The class the decision will move Clusters to and the stack's classes they are on: what
    // Cluster API's webhook will compare.
    let mut classes = Classes::new();
    if let Some(stack) = stack.as_ref()
        && let Some(id) = target_of(&ro, stack, &releases)
    {
        let mut names = vec![id.class_name()];
        for c in &clusters {
            if let (Some(id), Some((name, class_ns))) = (c.release(), c.class())
                && class_ns == ns
                && rules::stack_release(stack, &id)
                && !names.iter().any(|n| n == name)
            {
                names.push(name.to_string());
            }
        }
        for name in names {
            let shape = class_shape(ctx, &ns, &name).await?;
            classes.insert(name, shape);
        }
    }
    let decision = decide::decide(
        &ro,
        &inputs,
        &Releases { stack: stack.as_ref(), releases: &releases, classes: &classes },
        Timestamp::now(),
    );

    // 1. The status, with each moving Cluster's `from`: nothing moves unless it is written.
    if ro.status.as_ref() != Some(&decision.status) {
        let api: Api<ClusterStackRollout> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = status_patch(ro.status.as_ref(), &decision.status)?;
        api.patch_status(&ro.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
        if let Some(rv) = ro.metadata.resource_version.clone() {
            ctx.remember_status(key, rv, decision.status.clone());
        }
    }
    // 2. The moves, a few at once (a wave of 25 would otherwise wait 25 round trips); every
    // answer is remembered before the first failure, if any, is returned.
    let moves = (0..decision.moves.len()).map(|i| {
        let m = &decision.moves[i];
        async move { (i, apply_move(ctx, m).await) }
    });
    let answers: Vec<(usize, Result<CapiCluster, RolloutError>)> =
        futures::stream::iter(moves).buffer_unordered(MOVES_AT_ONCE).collect().await;
    let mut failed = None;
    for (i, answer) in answers {
        let m = &decision.moves[i];
        match answer {
            Ok(moved) => {
                tracing::info!(rollout = %key, cluster = %m.cluster, class = %m.class, version = ?m.version, rollback = m.rollback, "moved Cluster");
                let stale =
                    clusters.iter().find(|c| c.key() == m.cluster).and_then(|c| c.metadata.resource_version.clone());
                if let Some(stale) = stale {
                    ctx.remember_move(m.cluster.clone(), stale, moved);
                }
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    // 3. Events (published together) and metrics.
    let reference = ro.object_ref(&());
    let events = decision.events.iter().map(|note| {
        let action = match note.reason {
            "Moving" | "RolledBack" => "Move",
            _ => "Rollout",
        };
        tracing::info!(rollout = %key, reason = note.reason, "{}", note.message);
        ctx.shared.event(&reference, note.warning, note.reason, action, note.message.clone())
    });
    futures::future::join_all(events).await;
    let by_state: Vec<(&str, u64)> = state::ALL
        .iter()
        .map(|s| (*s, decision.status.clusters.iter().filter(|e| e.state == *s).count() as u64))
        .collect();
    ctx.shared.metrics.rollout(key, decision.status.phase == phase::HALTED, &by_state);
    Ok(match decision.requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// The ClusterStack's spec from the stack controller's store (no request), read when the store
/// is not there yet; `None` when it does not exist.
async fn stack_spec(ctx: &RolloutContext, ns: &str, name: &str) -> Result<Option<ClusterStackSpec>, RolloutError> {
    if let Some(store) = ctx.shared.watches.stacks() {
        let reference = kube::runtime::reflector::ObjectRef::<ClusterStack>::new(name).within(ns);
        if let Some(stack) = store.get(&reference) {
            return Ok(Some(stack.spec.clone()));
        }
    }
    let api: Api<ClusterStack> = Api::namespaced(ctx.client.clone(), ns);
    Ok(api.get_opt(name).await?.map(|s| s.spec))
}

fn release_views(ctx: &RolloutContext, ns: &str, stack: &str, _spec: &ClusterStackSpec) -> Vec<ReleaseView> {
    ctx.shared
        .watches
        .releases_of(ns, stack)
        .unwrap_or_default()
        .iter()
        .filter(|r| r.meta().deletion_timestamp.is_none())
        .filter_map(|r| {
            let status = r.status.as_ref();
            Some(ReleaseView {
                id: ReleaseId::from_tag(&r.name_any()).ok()?,
                ready: status.is_some_and(|s| s.ready),
                kubernetes_version: status.map(|s| s.kubernetes_version.clone()).unwrap_or_default(),
            })
        })
        .collect()
}

/// The release the decision will work towards (see `decide`): the resolved target, or the
/// current one while its Clusters are still moving.
fn target_of(ro: &ClusterStackRollout, stack: &ClusterStackSpec, releases: &[ReleaseView]) -> Option<ReleaseId> {
    let resolved = rules::resolve_target(&ro.spec.target, stack, releases).ok()?;
    let status = ro.status.as_ref();
    let moving = status.is_some_and(|s| s.clusters.iter().any(|e| e.state == state::MOVING));
    let current = status.and_then(|s| releases.iter().find(|r| r.id.tag() == s.target));
    Some(match current {
        Some(cur) if moving => cur.id.clone(),
        _ => resolved.id.clone(),
    })
}

/// What a rollout reads of a ClusterClass, read at most once a minute; `None` when it does not
/// exist.
async fn class_shape(ctx: &RolloutContext, ns: &str, class: &str) -> Result<Option<ClassShape>, RolloutError> {
    if let Some(cached) = ctx.class_shape(ns, class) {
        return Ok(cached);
    }
    let gvk = kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", ctx.capi.as_str(), "ClusterClass");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "clusterclasses");
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &resource);
    match api.get_opt(class).await {
        Ok(Some(obj)) => {
            let shape = ClassShape::read(&serde_json::to_value(&obj)?);
            ctx.remember_class(ns, class, Some(shape.clone()));
            Ok(Some(shape))
        }
        Ok(None) => Ok(None),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A server-side apply of only the class (and version) under our own field manager.
async fn apply_move(ctx: &RolloutContext, m: &Move) -> Result<CapiCluster, RolloutError> {
    let mut topology = match m.capi {
        CapiVersion::V1beta1 => json!({"class": m.class}),
        CapiVersion::V1beta2 => json!({"classRef": {"name": m.class}}),
    };
    if let Some(v) = &m.version {
        topology["version"] = json!(v);
    }
    let body = json!({
        "apiVersion": format!("cluster.x-k8s.io/{}", m.capi.as_str()),
        "kind": "Cluster",
        "metadata": {"name": m.cluster.name, "namespace": m.cluster.namespace},
        "spec": {"topology": topology},
    });
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &m.cluster.namespace, &m.capi.resource());
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let answer = api
        .patch(&m.cluster.name, &pp, &Patch::Apply(&body))
        .await
        .map_err(|source| RolloutError::Move { cluster: m.cluster.clone(), source })?;
    let mut moved: CapiCluster = serde_json::from_value(serde_json::to_value(answer)?)?;
    crate::controller::runtime::watch::slim(&mut moved);
    moved.version = m.capi;
    Ok(moved)
}
