//! The ClusterStackRelease reconciler: download into the cache, render, apply, prune what the
//! previous inventory has and the render has not, report; on deletion wait for Clusters, delete what the inventory lists, and drop
//! the finalizer. The flowchart is `docs/DESIGN.md` §3; the status is built by the pure
//! [`release_status`](super::release_status).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::api::{ClusterStack, ClusterStackRelease, ClusterStackReleaseStatus, SyncStatus};
use crate::apply::{self as engine, ApplyOptions, Inventory, ReleaseOwner, WhenEmpty};
use crate::provider::{Cleanup, GateOutcome, NODE_IMAGES_FILE, NodeImagesFile, ReleaseContext};
use crate::release::ReleaseId;
use crate::render::{RenderContext, render_cluster_class};
use crate::source::cache::FetchedRelease;
use crate::source::{AnySource, FetchPolicy, ReleaseSource};

use super::backoff::jittered;
use super::clusters::clusters_using;
use super::context::{Context, DownloadState, ReleaseMemo};
use super::release_status::{ReleaseObservation, ReleaseStep, build_release_status};
use super::stack::{key_of, source_spec};
use super::{RELEASE_FINALIZER, ReconcileError, is_not_found};
use crate::api::conditions::reason;

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusterstackrelease";

/// How often a running download is looked at (its progress goes into status).
const DOWNLOAD_POLL: Duration = Duration::from_millis(500);
/// How often a deletion waiting for Clusters looks again.
const IN_USE_POLL: Duration = Duration::from_secs(5);

/// One reconcile pass of a ClusterStackRelease.
pub async fn reconcile(release: Arc<ClusterStackRelease>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let key = key_of(release.as_ref());
    // Readiness as last written: our own status writes trigger the next pass, so the gauge
    // follows within one pass (a deleted release's series goes with `forget_release`).
    if release.metadata.deletion_timestamp.is_none() {
        let ready = release.status.as_ref().is_some_and(|s| s.ready);
        ctx.metrics.release_ready(&release.namespace().unwrap_or_default(), &release.name_any(), ready);
    }
    let result = reconcile_inner(&release, &ctx, &key).await;
    ctx.metrics.reconciled(CONTROLLER, started.elapsed());
    if result.is_ok() {
        ctx.release_backoff.success(&key);
    }
    result
}

/// The error policy: count the failure and back off per object.
pub fn error_policy(release: Arc<ClusterStackRelease>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    let key = key_of(release.as_ref());
    ctx.metrics.failed(CONTROLLER, error.reason());
    // A failed pass may have left the object half-done: do not skip the next trigger.
    ctx.memos.forget(&key);
    let delay = ctx.release_backoff.failure(&key);
    tracing::warn!(release = %key, error = %error, retry_in = ?delay, "ClusterStackRelease reconcile failed");
    Action::requeue(delay)
}

fn has_finalizer(release: &ClusterStackRelease) -> bool {
    release.finalizers().iter().any(|f| f == RELEASE_FINALIZER)
}

/// Writes the status built from `obs` when it differs from the current one.
async fn write_status(
    api: &Api<ClusterStackRelease>,
    release: &ClusterStackRelease,
    obs: &ReleaseObservation,
    gate: Option<&GateOutcome>,
) -> Result<ClusterStackReleaseStatus, ReconcileError> {
    let now = Time(Timestamp::now());
    let mut status = build_release_status(release.status.as_ref(), obs, &now);
    if let Some(gate) = gate {
        // The gate's `NodeImagesReady` condition and `nodeImages` (removed when there is no gate).
        gate.record(&mut status, &now);
    }
    if release.status.as_ref() != Some(&status) {
        let body = super::status_patch(release.status.as_ref(), &status)?;
        match api.patch_status(&release.name_any(), &PatchParams::default(), &Patch::Merge(&body)).await {
            Ok(_) => {}
            // Gone while we worked (deleted with its stack): nothing left to report on.
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(status)
}

async fn reconcile_inner(
    release: &ClusterStackRelease,
    ctx: &Arc<Context>,
    key: &str,
) -> Result<Action, ReconcileError> {
    let ns = release.namespace().unwrap_or_default();
    let tag = release.name_any();
    let api: Api<ClusterStackRelease> = Api::namespaced(ctx.client.clone(), &ns);
    let generation = release.meta().generation;
    let observe = |step: ReleaseStep, kubernetes_version: Option<String>| ReleaseObservation {
        step,
        kubernetes_version,
        generation,
    };

    if release.meta().deletion_timestamp.is_some() {
        return delete(release, ctx, key, &api).await;
    }
    if !has_finalizer(release) {
        let mut finalizers = release.finalizers().to_vec();
        finalizers.push(RELEASE_FINALIZER.to_string());
        let body = serde_json::json!({ "metadata": { "finalizers": finalizers, "resourceVersion": release.resource_version() } });
        api.patch(&tag, &PatchParams::default(), &Patch::Merge(&body)).await?;
    }

    // Our own status writes trigger us again; a pass with nothing new (same generation, ready,
    // re-applied recently) does nothing until the drift-correction re-apply is due.
    let now = Timestamp::now();
    let (memo, ticket) = ctx.memos.get(key);
    if let Some(memo) = memo
        && memo.generation == generation
        && release.status.as_ref().is_some_and(|s| s.ready)
    {
        let elapsed = now.duration_since(memo.applied_at).unsigned_abs();
        if elapsed < memo.valid_for {
            return Ok(Action::requeue(memo.valid_for - elapsed));
        }
    }

    let id = match ReleaseId::from_tag(&tag) {
        Ok(id) => id,
        Err(e) => {
            let message = format!("ClusterStackRelease name {tag:?} is not a release tag: {e}");
            write_status(&api, release, &observe(ReleaseStep::InvalidMetadata { message }, None), None).await?;
            return Ok(Action::await_change());
        }
    };

    let (source, stack) = release_source(release, ctx).await?;
    let fetched = match fetch(release, ctx, key, &source, &tag).await? {
        Fetch::Ready(f) => f,
        Fetch::Running(progress) => {
            write_status(&api, release, &observe(ReleaseStep::Downloading { progress }, None), None).await?;
            return Ok(Action::requeue(DOWNLOAD_POLL));
        }
        Fetch::Failed(message) => {
            ctx.metrics.failed(CONTROLLER, reason::DOWNLOAD_FAILED);
            write_status(&api, release, &observe(ReleaseStep::DownloadFailed { message }, None), None).await?;
            return Ok(Action::requeue(ctx.release_backoff.failure(key)));
        }
    };

    let metadata = match fetched.metadata() {
        Ok(m) => m,
        Err(e) => {
            ctx.metrics.failed(CONTROLLER, reason::INVALID_METADATA);
            let message = format!("metadata.yaml of release {tag}: {e}");
            write_status(&api, release, &observe(ReleaseStep::InvalidMetadata { message }, None), None).await?;
            return Ok(Action::requeue(ctx.release_backoff.failure(key)));
        }
    };
    let k8s = Some(metadata.versions.kubernetes.to_string());

    // The node-image gate (docs/providers.md): provider work before the class is usable.
    let node_images = match fetched.asset_path(NODE_IMAGES_FILE).filter(|p| p.exists()) {
        Some(path) => match NodeImagesFile::read(&path) {
            Ok(f) => Some(f),
            Err(e) => {
                let message = format!("{NODE_IMAGES_FILE} of release {tag}: {e}");
                write_status(&api, release, &observe(ReleaseStep::InvalidMetadata { message }, k8s), None).await?;
                return Ok(Action::requeue(ctx.release_backoff.failure(key)));
            }
        },
        None => None,
    };
    let (no_provider, provider_ref) =
        stack.as_ref().map_or((false, None), |s| (s.spec.no_provider, s.spec.provider_ref.clone()));
    let gate_ctx = ReleaseContext::for_release(release, metadata.clone(), ctx.client.clone())
        .map_err(|e| ReconcileError::Config(e.to_string()))?
        .with_provider_ref(provider_ref)
        .with_node_images(node_images);
    let gate =
        ctx.gate.check(&gate_ctx, no_provider, release.status.as_ref(), generation, &Time(Timestamp::now())).await;
    if !gate.passed() {
        let step = ReleaseStep::ProviderWork { message: gate.message.clone() };
        write_status(&api, release, &observe(step, k8s), Some(&gate)).await?;
        ctx.memos.forget(key);
        return Ok(gate.requeue_after.map_or_else(Action::await_change, Action::requeue));
    }

    let chart = fetched.cluster_class_chart_dir();
    let render_ctx = RenderContext::new(&id, &ns);
    let rendered = tokio::task::spawn_blocking(move || render_cluster_class(&chart, &render_ctx))
        .await
        .map_err(|e| ReconcileError::Task(e.to_string()))?;
    let objects = match rendered {
        Ok(o) => o,
        Err(e) => {
            ctx.metrics.failed(CONTROLLER, reason::RENDER_FAILED);
            let message = format!("rendering the cluster class of {tag}: {e}");
            write_status(&api, release, &observe(ReleaseStep::RenderFailed { message }, k8s), None).await?;
            return Ok(Action::requeue(ctx.release_backoff.failure(key)));
        }
    };

    // Apply, then prune what the previous inventory has and this render has not.
    let previous = release.status.as_ref().map(|s| super::inventory::from_status(&s.resources)).unwrap_or_default();
    let owner = ReleaseOwner::new(&tag, &ns);
    let applied =
        ctx.applier.apply(&objects, &ApplyOptions::new(owner.clone()).with_previous(previous.clone())).await?;
    let stale = engine::stale(&previous, &applied.identities(), WhenEmpty::Refuse, &owner)?;
    let pruned = ctx.applier.prune(&stale, &owner).await;
    let mut inventory = Inventory::from_changes(&applied);
    inventory.record(&pruned);
    let resources = super::inventory::to_status(&inventory);
    // Someone else's change to what was applied reaches this release within seconds.
    let mut kinds: Vec<kube::api::GroupVersionKind> =
        resources.iter().map(|r| kube::api::GroupVersionKind::gvk(&r.group, &r.version, &r.kind)).collect();
    kinds.sort_by(|a, b| (&a.group, &a.version, &a.kind).cmp(&(&b.group, &b.version, &b.kind)));
    kinds.dedup();
    for kind in &kinds {
        super::watch::watch_kind(ctx, kind).await;
    }
    for created in applied.with(engine::Action::Created) {
        tracing::debug!(release = %key, kind = %created.kind, name = %created.name, "created object");
    }
    let corrected = applied.with(engine::Action::Configured).len();
    if corrected > 0 {
        tracing::info!(release = %key, corrected, "corrected drifted objects");
    }
    let forbidden: Vec<String> = resources
        .iter()
        .filter(|r| r.error.starts_with(engine::FORBIDDEN_PREFIX))
        .map(|r| format!("{} {}: {}", r.kind, r.name, r.error))
        .collect();
    if !forbidden.is_empty() {
        tracing::warn!(release = %key, objects = forbidden.len(), first = %forbidden[0], "applying objects was forbidden");
        let note = forbidden.join("; ");
        ctx.event(&release.object_ref(&()), true, "ApplyForbidden", "Apply", note).await;
    }
    let synced = resources.iter().filter(|r| r.status == SyncStatus::Synced).count() as u64;
    let not_synced = resources.len() as u64 - synced;
    ctx.metrics.applied_objects(&ns, &tag, synced, not_synced);
    let all_synced = not_synced == 0;
    let step = ReleaseStep::Applied { resources };
    let status = write_status(&api, release, &observe(step, k8s), Some(&gate)).await?;

    if all_synced && status.ready {
        let next = jittered(ctx.settings.resync_interval, 0.1, &ctx.random);
        let next = gate.requeue_after.map_or(next, |g| g.min(next));
        ctx.memos.remember(key, ticket, ReleaseMemo { generation, applied_at: now, valid_for: next });
        Ok(Action::requeue(next))
    } else {
        ctx.metrics.failed(CONTROLLER, reason::APPLY_FAILED);
        ctx.memos.forget(key);
        Ok(Action::requeue(ctx.release_backoff.failure(key)))
    }
}

/// The release's ClusterStack (its controller owner), if it still exists.
async fn owning_stack(release: &ClusterStackRelease, ctx: &Context) -> Result<Option<ClusterStack>, ReconcileError> {
    let owner = release.owner_references().iter().find(|o| o.kind == "ClusterStack" && o.controller == Some(true));
    let ns = release.namespace().unwrap_or_default();
    if let (Some(o), Some(store)) = (owner, ctx.watches.stacks()) {
        // From the controller's store: no request per pass.
        let found = store.get(&kube::runtime::reflector::ObjectRef::new(&o.name).within(&ns));
        return Ok(found.filter(|s| s.metadata.uid.as_deref() == Some(o.uid.as_str())).map(|s| s.as_ref().clone()));
    }
    match owner {
        Some(o) => {
            let stacks: Api<ClusterStack> =
                Api::namespaced(ctx.client.clone(), &release.namespace().unwrap_or_default());
            Ok(stacks.get_opt(&o.name).await?)
        }
        None => Ok(None),
    }
}

/// The source of the release's ClusterStack, else the operator's default; and the stack.
pub(crate) async fn release_source(
    release: &ClusterStackRelease,
    ctx: &Context,
) -> Result<(AnySource, Option<ClusterStack>), ReconcileError> {
    let stack = owning_stack(release, ctx).await?;
    let spec = match &stack {
        Some(stack) => source_spec(stack, ctx)?,
        None => ctx.settings.default_source.clone(),
    };
    let ns = release.namespace().unwrap_or_default();
    let source = ctx.open_in(&spec, &ns).await.map_err(|e| ReconcileError::Config(e.to_string()))?;
    Ok((source, stack))
}

enum Fetch {
    Ready(Box<FetchedRelease>),
    Running(String),
    Failed(String),
}

/// The release from the cache; else the state of its background download, started when needed.
/// A restarted operator finds a verified release on disk and needs no listing at all.
async fn fetch(
    release: &ClusterStackRelease,
    ctx: &Arc<Context>,
    key: &str,
    source: &AnySource,
    tag: &str,
) -> Result<Fetch, ReconcileError> {
    let id = ReleaseId::from_tag(tag).map_err(|e| ReconcileError::Config(e.to_string()))?;
    match ctx.cache.open(source, &id, tag).await {
        Ok(Some(f)) => {
            ctx.clear_download(key);
            return Ok(Fetch::Ready(Box::new(f)));
        }
        // Not there, or damaged and discarded by the cache: download it below.
        Ok(None) => {}
        Err(e) => tracing::warn!(release = %key, error = %e, "cached release unusable; downloading again"),
    }
    match ctx.download(key) {
        Some(DownloadState::Running(progress)) => return Ok(Fetch::Running(progress)),
        Some(DownloadState::Failed(message)) => {
            // Reported once; the next pass (after the backoff) tries again.
            ctx.clear_download(key);
            return Ok(Fetch::Failed(message));
        }
        Some(DownloadState::Done) | None => {}
    }
    let name = source.name();
    let polled = ctx.pollers.latest(&source.cache_key()).and_then(|l| l.result.ok());
    let listed = match polled.or_else(|| ctx.last_listing(&name)) {
        Some(l) if l.iter().any(|r| r.tag == tag) => l,
        _ => match ctx.list(source, Duration::ZERO).await.result {
            Ok(l) => l,
            Err(outcome) => return Ok(Fetch::Failed(format!("cannot list {name} to download {tag}: {outcome:?}"))),
        },
    };
    let Some(listed) = listed.iter().find(|r| r.tag == tag).cloned() else {
        return Ok(Fetch::Failed(format!("{name} does not publish release {tag}")));
    };
    let progress = format!("{} asset(s) of {tag} from {name}", listed.assets.len());
    ctx.set_download(key, DownloadState::Running(progress.clone()));
    let task_ctx = Arc::clone(ctx);
    let task_source = source.clone();
    let task_key = key.to_string();
    let release_name = release.name_any();
    tokio::spawn(async move {
        // Bounded: at most `concurrency` downloads at once; the others wait here, not in a reconcile.
        let Ok(_permit) = task_ctx.download_slots.clone().acquire_owned().await else { return };
        let state = match task_ctx.cache.fetch(&task_source, &listed, FetchPolicy::default()).await {
            Ok(_) => {
                tracing::info!(release = %task_key, "release downloaded and verified");
                DownloadState::Done
            }
            Err(e) => {
                tracing::warn!(release = %release_name, error = %e, "download failed");
                let text = e.to_string();
                // A full cache volume is named as such, not left to an I/O error text.
                let full = std::error::Error::source(&e)
                    .and_then(|s| s.downcast_ref::<std::io::Error>())
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::StorageFull)
                    || text.contains("No space left on device");
                DownloadState::Failed(if full {
                    format!("the release cache volume is full (raise its size or lower --cache-grace): {text}")
                } else {
                    text
                })
            }
        };
        task_ctx.record_github_stats();
        task_ctx.set_download(&task_key, state);
    });
    Ok(Fetch::Running(progress))
}

/// The deletion path: needs only the inventory in status, never the cache or a render.
async fn delete(
    release: &ClusterStackRelease,
    ctx: &Context,
    key: &str,
    api: &Api<ClusterStackRelease>,
) -> Result<Action, ReconcileError> {
    if !has_finalizer(release) {
        return Ok(Action::await_change());
    }
    let ns = release.namespace().unwrap_or_default();
    let tag = release.name_any();
    let observe = |step| ReleaseObservation { step, kubernetes_version: None, generation: release.meta().generation };
    if let Ok(id) = ReleaseId::from_tag(&tag) {
        let usages = ctx.watches.cluster_usages_in(&ns).await?;
        let users = clusters_using(&usages, &id, &ns);
        if !users.is_empty() {
            let step = ReleaseStep::WaitingForClusters { class: id.class_name(), clusters: users };
            write_status(api, release, &observe(step), None).await?;
            return Ok(Action::requeue(IN_USE_POLL));
        }
    }
    let inventory = release.status.as_ref().map(|s| super::inventory::from_status(&s.resources)).unwrap_or_default();
    let deleted = ctx.applier.delete_all(&inventory, &ReleaseOwner::new(&tag, &ns)).await;
    if !deleted.all_ok() {
        let failed: Vec<String> =
            deleted.failures().map(|c| format!("{} {}: {}", c.key.kind, c.key.name, c.error)).collect();
        let message = format!("could not delete {} object(s): {}", failed.len(), failed.join("; "));
        ctx.metrics.failed(CONTROLLER, reason::DELETING);
        write_status(api, release, &observe(ReleaseStep::Deleting { message }), None).await?;
        return Ok(Action::requeue(ctx.release_backoff.failure(key)));
    }
    // The provider plug-in removes what it made (e.g. a provider operator's release object).
    if let Ok(gate_ctx) = ReleaseContext::for_release(release, None, ctx.client.clone()) {
        let stack = owning_stack(release, ctx).await?;
        let (no_provider, provider_ref) =
            stack.as_ref().map_or((false, None), |s| (s.spec.no_provider, s.spec.provider_ref.clone()));
        if let Cleanup::InProgress { message, recheck_after } =
            ctx.gate.cleanup(&gate_ctx.with_provider_ref(provider_ref), no_provider).await
        {
            write_status(api, release, &observe(ReleaseStep::Deleting { message }), None).await?;
            return Ok(Action::requeue(recheck_after));
        }
    }
    let finalizers: Vec<&String> = release.finalizers().iter().filter(|f| *f != RELEASE_FINALIZER).collect();
    let body =
        serde_json::json!({ "metadata": { "finalizers": finalizers, "resourceVersion": release.resource_version() } });
    match api.patch(&tag, &PatchParams::default(), &Patch::Merge(&body)).await {
        Ok(_) => {}
        // Gone already (deleted together with its stack): the work is done.
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(release = %key, deleted = deleted.with(engine::Action::Deleted).len(), "deleted the release's objects and removed the finalizer");
    ctx.metrics.forget_release(&ns, &tag);
    ctx.memos.remove(key);
    ctx.clear_download(key);
    Ok(Action::await_change())
}
