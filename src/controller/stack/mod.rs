//! The ClusterStack reconciler: poll the source, keep the wanted releases, report status.
//! The flowchart is `docs/DESIGN.md` §2. A pass gathers its inputs (the poller's listing, the
//! stack's releases from the store, the Cluster usages from the index), decides with the pure
//! [`decide`], [`keep::plan`] and [`status::build_status`], and carries the plan out (create,
//! delete, write the status).

pub mod context;
pub mod decide;
pub mod keep;
pub mod objects;
pub mod status;

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::api::{ClusterStack, ClusterStackRelease};
use crate::apply::FIELD_MANAGER;
use crate::controller::runtime::backoff::{jittered, poll_interval};
use crate::controller::runtime::context::{SourceLookupError, key_of};
use crate::controller::runtime::holds;
use crate::controller::runtime::poller::SyncOutcome;
use crate::controller::{RECONCILE_REQUESTED_AT, RELEASE_FINALIZER, STACK_LABEL};
use crate::source::ReleaseSource;
use crate::util::is_not_found;

pub use context::{Error, StackContext, StackPoll};
use keep::ExistingRelease;
use objects::{LastPoll, controlled_by, release_for};
use status::{StatusInput, build_status, status_changed};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusterstack";

/// One reconcile pass of a ClusterStack.
pub async fn reconcile(stack: Arc<ClusterStack>, sctx: Arc<StackContext>) -> Result<Action, Error> {
    let started = Instant::now();
    let key = key_of(stack.as_ref());
    let result = reconcile_inner(&stack, &sctx, &key).await;
    sctx.ctx.metrics.reconciled(CONTROLLER, started.elapsed());
    if result.is_ok() {
        sctx.backoff.success(&key);
    }
    result
}

/// The error policy: count the failure and back off per object.
pub fn error_policy(stack: Arc<ClusterStack>, error: &Error, sctx: Arc<StackContext>) -> Action {
    let key = key_of(stack.as_ref());
    sctx.ctx.metrics.failed(CONTROLLER, error.metric_label());
    let delay = sctx.backoff.failure(&key);
    tracing::warn!(stack = %key, error = %error, retry_in = ?delay, "ClusterStack reconcile failed");
    Action::requeue(delay)
}

async fn reconcile_inner(stack: &ClusterStack, sctx: &StackContext, key: &str) -> Result<Action, Error> {
    let ctx = &sctx.ctx;
    let ns = stack.namespace().unwrap_or_default();
    let name = stack.name_any();
    if stack.meta().deletion_timestamp.is_some() {
        // Owner references make the API server delete the releases; their finalizers clean up.
        sctx.forget_stack(key);
        ctx.sources.pollers.unsubscribe(key);
        return Ok(Action::await_change());
    }
    // The provider objects of its releases are watched: a regression reaches them in seconds.
    if let Some(kind) = stack.spec.provider_ref.as_ref().and_then(crate::provider::provider_object_kind) {
        crate::controller::runtime::watch::watch_kind(ctx, &kind).await;
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
    // The way back of unfinished rollouts stays (a roll back needs its class): from the rollout
    // controller's store (a usage change of every moved Cluster triggers this pass), read afresh
    // below before anything is deleted.
    let cached_holds = ctx.watches.rollouts().map(|store| holds::holds_in(store, &ns));
    let holds = match &cached_holds {
        Some(h) => h.clone(),
        None => holds::holds(&ctx.client, &ns).await?,
    };
    let now = Timestamp::now();
    let time = Time(now);

    let (sync, listing) = if stack.spec.suspend {
        (SyncOutcome::Suspended, None)
    } else {
        // The repository's poller lists it once per interval for every stack reading it, and
        // triggers them when the listing changed; a new `reconcile-requested-at` forces a poll.
        let previous = sctx.poll(key);
        let request = decide::poll_request(
            previous.as_ref(),
            stack.annotations().get(RECONCILE_REQUESTED_AT).map(String::as_str),
        );
        let opened = match ctx.stack_source(stack) {
            Ok(spec) => {
                if request.reread_tokens {
                    // A rotated tokenSecretRef is read again.
                    ctx.sources.forget_tokens(&ns);
                }
                ctx.sources.open_in(&spec, &ns).await.map_err(|e| e.to_string())
            }
            Err(SourceLookupError::Refused(refused)) => {
                // Told once per change of the reason (a condition, a log line, an Event), and
                // nothing is read: a stack sees no file the operator does not let it see.
                let message = refused.to_string();
                let told = previous.as_ref().is_some_and(
                    |p| matches!(&p.listing, Err(SyncOutcome::Unavailable { message: m, .. }) if *m == message),
                );
                if !told {
                    tracing::warn!(stack = %key, %message, "source refused");
                    ctx.event(&stack.object_ref(&()), true, "SourceRefused", "Poll", message.clone()).await;
                }
                Err(message)
            }
            Err(e) => return Err(e.into()),
        };
        let listing = match opened {
            Ok(source) => {
                let source_key = source.cache_key();
                let latest = ctx.sources.pollers.subscribe(&source_key, &source, interval, key);
                if request.forced {
                    ctx.sources.pollers.poll_now(&source_key, key);
                }
                match latest {
                    Some(l) => Some((l.at, l.result)),
                    // The poller's first listing triggers this stack again.
                    None => None,
                }
            }
            // E.g. a directory source that is not there (yet): unavailable, like a source that is down.
            Err(message) => Some((now, Err(SyncOutcome::Unavailable { message, retry_at: None }))),
        };
        let Some((at, listing)) = listing else {
            sctx.set_poll(key, StackPoll { last: LastPoll::of(stack, now), listing: Err(SyncOutcome::Suspended) });
            return Ok(Action::requeue(jittered(ctx.settings.resync_interval, 0.1, &ctx.random)));
        };
        let poll = StackPoll { last: LastPoll::of(stack, at), listing };
        sctx.set_poll(key, poll.clone());
        decide::sync_outcome(poll, interval)
    };

    let plan = if stack.spec.suspend {
        None
    } else {
        let existing: Vec<ExistingRelease> = releases
            .iter()
            .map(|r| ExistingRelease { name: r.name_any(), ready: r.status.as_ref().is_some_and(|s| s.ready) })
            .collect();
        let ids: Option<Vec<_>> = listing.as_ref().map(|l| l.iter().map(|r| r.id.clone()).collect());
        let plan = keep::plan_with_holds(stack, ids.as_deref(), &existing, &usages, &holds);
        if cached_holds.is_some() && plan.source_listed && !plan.delete.is_empty() {
            // A deletion is decided on the rollouts as the API server has them now.
            let fresh = holds::holds(&ctx.client, &ns).await?;
            Some(keep::plan_with_holds(stack, ids.as_deref(), &existing, &usages, &fresh))
        } else {
            Some(plan)
        }
    };

    let mut plan = plan;
    if let Some(plan) = &mut plan {
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        for id in plan.create.clone() {
            let release = release_for(stack, &id)?;
            let tag = id.tag();
            let created = match create_release(&releases_api, stack, release, &pp).await? {
                Created::New(created) => created,
                Created::Existing(existing) => {
                    // Ours already (a pass whose store had not yet seen it): nothing was created.
                    releases.push(existing);
                    continue;
                }
                // Another stack of this namespace (the same provider, name and Kubernetes
                // version) controls a release of this name: left to it.
                Created::Taken { owner } => {
                    tracing::warn!(stack = %key, release = %tag, %owner, "release name taken by another ClusterStack");
                    plan.warnings.push(keep::PlanWarning::NameTaken { release: tag, owner });
                    continue;
                }
            };
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
                // Already being deleted (its finalizer waits for its objects to go): deleting it
                // again would only cost a request, another Event and another pass.
                if releases.iter().any(|r| r.name_any() == *tag && r.metadata.deletion_timestamp.is_some()) {
                    continue;
                }
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
        let body = crate::controller::status_patch(stack.status.as_ref(), &status)?;
        stacks_api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&body)).await?;
    }

    // The poller and the watches trigger what matters; the resync is a safety net.
    let next = match &sync {
        SyncOutcome::Suspended => ctx.settings.poll_interval,
        _ => ctx.settings.resync_interval,
    };
    Ok(Action::requeue(jittered(next.max(Duration::from_millis(100)), 0.1, &ctx.random)))
}

/// What creating a release found.
enum Created {
    /// Created now, with the release finalizer.
    New(ClusterStackRelease),
    /// It existed already, controlled by this stack (re-applied: labels and owner as they should
    /// be).
    Existing(ClusterStackRelease),
    /// It exists, controlled by another ClusterStack (or none): `owner` names it.
    Taken { owner: String },
}

/// Creates `release` with the release finalizer already set (one request; the release controller
/// need not add it). A create never touches an existing object, so neither a release of another
/// stack nor one being deleted is changed by it: only when the name exists is the object read,
/// and re-applied (without the finalizer) if it is this stack's, so that a relabelled stack's
/// release follows it to its shard as before.
async fn create_release(
    api: &Api<ClusterStackRelease>,
    stack: &ClusterStack,
    mut release: ClusterStackRelease,
    pp: &PatchParams,
) -> Result<Created, Error> {
    let tag = release.name_any();
    let applied = release.clone();
    release.metadata.finalizers = Some(vec![RELEASE_FINALIZER.to_string()]);
    let post = PostParams { field_manager: Some(FIELD_MANAGER.to_string()), ..Default::default() };
    match api.create(&post, &release).await {
        Ok(created) => return Ok(Created::New(created)),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let other = api.get_opt(&tag).await?;
    if let Some(other) = other.as_ref().filter(|o| !controlled_by(o, stack)) {
        let owner = other
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .map_or_else(|| "(none)".to_string(), |o| o.name.clone());
        return Ok(Created::Taken { owner });
    }
    // This stack's (or gone again since the create): a forced apply under our one field manager,
    // as before the create was tried first.
    let applied = api.patch(&tag, pp, &Patch::Apply(&applied)).await?;
    Ok(if other.is_some() { Created::Existing(applied) } else { Created::New(applied) })
}
