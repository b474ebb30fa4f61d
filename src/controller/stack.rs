//! The ClusterStack reconciler: poll the source, keep the wanted releases, report status.
//! The flowchart is `docs/DESIGN.md` §2; the decisions are the pure functions of
//! [`keep`](super::keep) and [`status`](super::status).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::api::{ClusterStack, ClusterStackRelease};
use crate::apply::FIELD_MANAGER;
use crate::source::{ReleaseSource, SourceSpec};

use super::backoff::{jittered, poll_interval};

use super::context::{Context, StackPoll};
use super::keep::{self, ExistingRelease};
use super::objects::{LastPoll, STACK_LABEL, controlled_by, release_for};
use super::status::{StatusInput, SyncOutcome, build_status, status_changed};
use super::{ReconcileError, is_not_found};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusterstack";

/// The key of an object in the context's maps.
pub fn key_of<K: Resource>(obj: &K) -> String {
    format!(
        "{}/{}",
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}

/// The source a stack follows: `spec.source`, else the operator's default.
pub fn source_spec(stack: &ClusterStack, ctx: &Context) -> Result<SourceSpec, ReconcileError> {
    match &stack.spec.source {
        Some(s) => SourceSpec::from_crd(s).map_err(|e| ReconcileError::Config(e.to_string())),
        None => Ok(ctx.settings.default_source.clone()),
    }
}

/// One reconcile pass of a ClusterStack.
pub async fn reconcile(stack: Arc<ClusterStack>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let key = key_of(stack.as_ref());
    let result = reconcile_inner(&stack, &ctx, &key).await;
    ctx.metrics.reconciled(CONTROLLER, started.elapsed());
    if result.is_ok() {
        ctx.stack_backoff.success(&key);
    }
    result
}

/// The error policy: count the failure and back off per object.
pub fn error_policy(stack: Arc<ClusterStack>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let key = key_of(stack.as_ref());
    ctx.metrics.failed(CONTROLLER, error.reason());
    let delay = ctx.stack_backoff.failure(&key);
    tracing::warn!(stack = %key, error = %error, retry_in = ?delay, "ClusterStack reconcile failed");
    Action::requeue(delay)
}

async fn reconcile_inner(stack: &ClusterStack, ctx: &Arc<Context>, key: &str) -> Result<Action, ReconcileError> {
    let ns = stack.namespace().unwrap_or_default();
    let name = stack.name_any();
    if stack.meta().deletion_timestamp.is_some() {
        // Owner references make the API server delete the releases; their finalizers clean up.
        ctx.forget_stack(key);
        ctx.pollers.unsubscribe(key);
        return Ok(Action::await_change());
    }
    // The provider objects of its releases are watched: a regression reaches them in seconds.
    if let Some(kind) = stack.spec.provider_ref.as_ref().and_then(crate::provider::provider_object_kind) {
        super::watch::watch_kind(ctx, &kind).await;
    }
    let interval = poll_interval(stack.spec.poll_interval.as_deref(), ctx.settings.poll_interval)
        .unwrap_or(ctx.settings.poll_interval);
    let releases_api: Api<ClusterStackRelease> = Api::namespaced(ctx.client.clone(), &ns);
    let stacks_api: Api<ClusterStack> = Api::namespaced(ctx.client.clone(), &ns);

    // From the controller's store (no request); listed only before the store exists.
    let mut releases: Vec<ClusterStackRelease> = match ctx.watches.releases_of(&ns, &name) {
        Some(found) => found.iter().map(|r| r.as_ref().clone()).filter(|r| controlled_by(r, stack)).collect(),
        None => {
            let lp = ListParams::default().labels(&format!("{STACK_LABEL}={name}"));
            releases_api.list(&lp).await?.items.into_iter().filter(|r| controlled_by(r, stack)).collect()
        }
    };
    let usages = ctx.watches.cluster_usages_in(&ns).await?;
    // The way back of unfinished rollouts stays (a roll back needs its class).
    let holds = super::rollout::reconcile::holds(&ctx.client, &ns).await?;
    let now = Timestamp::now();
    let time = Time(now);

    let (sync, listing) = if stack.spec.suspend {
        (SyncOutcome::Suspended, None)
    } else {
        // The repository's poller lists it once per interval for every stack reading it, and
        // triggers them when the listing changed; a new `reconcile-requested-at` forces a poll.
        let previous = ctx.poll(key);
        let forced = previous.as_ref().is_some_and(|p| {
            p.last.requested_at.as_deref() != stack.annotations().get(super::RECONCILE_REQUESTED_AT).map(String::as_str)
        });
        let spec = source_spec(stack, ctx)?;
        let refused = previous.as_ref().is_some_and(|p| {
            matches!(&p.listing, Err(SyncOutcome::Unavailable { message, .. })
                if message.contains("401") || message.contains("Bad credentials"))
        });
        if forced || refused {
            // A rotated tokenSecretRef is read again.
            ctx.forget_tokens(&ns);
        }
        let listing = match ctx.open_in(&spec, &ns).await {
            Ok(source) => {
                let source_key = source.cache_key();
                let latest = ctx.pollers.subscribe(&source_key, &source, interval, key);
                if forced {
                    ctx.pollers.poll_now(&source_key, key);
                }
                match latest {
                    Some(l) => Some((l.at, l.result)),
                    // The poller's first listing triggers this stack again.
                    None => None,
                }
            }
            // E.g. a directory source that is not there (yet): unavailable, like a source that is down.
            Err(e) => Some((now, Err(SyncOutcome::Unavailable { message: e.to_string(), retry_at: None }))),
        };
        let Some((at, listing)) = listing else {
            ctx.set_poll(key, StackPoll { last: LastPoll::of(stack, now), listing: Err(SyncOutcome::Suspended) });
            return Ok(Action::requeue(jittered(ctx.settings.resync_interval, 0.1, &ctx.random)));
        };
        let poll = StackPoll { last: LastPoll::of(stack, at), listing };
        ctx.set_poll(key, poll.clone());
        match poll.listing {
            Ok(list) => (SyncOutcome::Listed, Some(list)),
            Err(SyncOutcome::Unavailable { message, retry_at: None }) => {
                // Derived from the poll's time, so that passes before the retry write the same status.
                let retry_at = poll.last.at.checked_add(interval).ok();
                (SyncOutcome::Unavailable { message, retry_at }, None)
            }
            Err(outcome) => (outcome, None),
        }
    };

    let plan = if stack.spec.suspend {
        None
    } else {
        let existing: Vec<ExistingRelease> = releases
            .iter()
            .map(|r| ExistingRelease { name: r.name_any(), ready: r.status.as_ref().is_some_and(|s| s.ready) })
            .collect();
        let ids: Option<Vec<_>> = listing.as_ref().map(|l| l.iter().map(|r| r.id.clone()).collect());
        Some(keep::plan_with_holds(stack, ids.as_deref(), &existing, &usages, &holds))
    };

    if let Some(plan) = &plan {
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        for id in &plan.create {
            let release = release_for(stack, id).map_err(|e| ReconcileError::Config(e.to_string()))?;
            let tag = id.tag();
            let created = releases_api.patch(&tag, &pp, &Patch::Apply(&release)).await?;
            tracing::info!(stack = %key, release = %tag, "created ClusterStackRelease");
            ctx.event(
                &stack.object_ref(&()),
                false,
                "ReleaseCreated",
                "Create",
                format!("created ClusterStackRelease {tag}"),
            )
            .await;
            releases.push(created);
        }
        if plan.source_listed {
            for tag in &plan.delete {
                match releases_api.delete(tag, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(e.into()),
                }
                tracing::info!(stack = %key, release = %tag, "deleting ClusterStackRelease outside the keep set");
                ctx.event(
                    &stack.object_ref(&()),
                    false,
                    "ReleaseDeleted",
                    "Delete",
                    format!("deleting ClusterStackRelease {tag}: no longer pinned, latest or in use"),
                )
                .await;
                // Shown as deleting until it is gone.
                if let Some(r) = releases.iter_mut().find(|r| r.name_any() == *tag)
                    && r.metadata.deletion_timestamp.is_none()
                {
                    r.metadata.deletion_timestamp = Some(time.clone());
                }
            }
        }
    }

    let status = build_status(
        stack.status.as_ref(),
        StatusInput {
            plan: plan.as_ref(),
            releases: &releases,
            sync: &sync,
            generation: stack.meta().generation,
            now: &time,
        },
    );
    if status_changed(stack.status.as_ref(), &status) {
        let body = super::status_patch(stack.status.as_ref(), &status)?;
        stacks_api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body)).await?;
    }

    // The poller and the watches trigger what matters; the resync is a safety net.
    let next = match &sync {
        SyncOutcome::Suspended => ctx.settings.poll_interval,
        _ => ctx.settings.resync_interval,
    };
    Ok(Action::requeue(jittered(next.max(Duration::from_millis(100)), 0.1, &ctx.random)))
}
