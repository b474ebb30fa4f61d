//! The ClusterStackRelease reconciler: download into the cache, render, apply, prune what the
//! previous inventory has and the render has not, report; on deletion wait for Clusters, delete what the inventory lists, and drop
//! the finalizer. The flowchart is `docs/DESIGN.md` §3; the status is built by the pure
//! [`status`].

pub mod context;
pub mod memo;
pub mod status;

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::api::{ClusterStackRelease, ClusterStackReleaseStatus};
use crate::apply::{self as engine, ApplyOptions, Inventory, ReleaseOwner, WhenEmpty};
use crate::provider::{Cleanup, GateOutcome, NODE_IMAGES_FILE, NodeImagesFile, ReleaseContext as GateContext};
use crate::release::ReleaseId;
use crate::render::RenderContext;
use crate::source::cache::FetchedRelease;
use crate::source::verify::policy::ReleasePolicy;
use crate::source::verify::{Failure, FailureReason};
use crate::source::{AnySource, FetchPolicy, NoProgress, ReleaseSource};

use crate::api::conditions::reason;
use crate::controller::RELEASE_FINALIZER;
use crate::controller::runtime::backoff::jittered;
use crate::controller::runtime::clusters::clusters_using;
use crate::controller::runtime::context::key_of;
use crate::util::is_not_found;
pub use context::{DownloadState, Error, ReleaseContext};
use memo::ReleaseMemo;
use status::{ReleaseObservation, ReleaseStep, build_release_status};

/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusterstackrelease";

/// How often a running download is looked at (its progress goes into status).
const DOWNLOAD_POLL: Duration = Duration::from_millis(500);
/// How often a deletion waiting for Clusters looks again.
const IN_USE_POLL: Duration = Duration::from_secs(5);

/// How a pass ended, for the backoff.
enum Outcome {
    /// Everything done (applied and synced, or deleted): the failure count starts over.
    Done(Action),
    /// Work under way (a download, the node-image gate, Clusters still using it): neither.
    Waiting(Action),
    /// Failed and reported in the status: retried after the backoff, and triggers before then
    /// are ignored (see [`ReleaseContext::wait_left`]).
    Failed,
}

/// One reconcile pass of a ClusterStackRelease.
pub async fn reconcile(release: Arc<ClusterStackRelease>, rctx: Arc<ReleaseContext>) -> Result<Action, Error> {
    let key = key_of(release.as_ref());
    let generation = release.meta().generation;
    let deleting = release.meta().deletion_timestamp.is_some();
    // A release that failed is left alone until its backoff elapses: our own status write and the
    // watch events of its objects trigger passes that would only fail again.
    if let Some(left) = rctx.wait_left(&key, generation, deleting) {
        return Ok(Action::requeue(left));
    }
    let started = Instant::now();
    // Readiness as last written: our own status writes trigger the next pass, so the gauge
    // follows within one pass (a deleted release's series goes with `forget_release`).
    if release.metadata.deletion_timestamp.is_none() {
        let ready = release.status.as_ref().is_some_and(|s| s.ready);
        rctx.ctx.metrics.release_ready(&release.namespace().unwrap_or_default(), &release.name_any(), ready);
    }
    let result = reconcile_inner(&release, &rctx, &key).await;
    rctx.ctx.metrics.reconciled(CONTROLLER, started.elapsed());
    match result? {
        Outcome::Done(action) => {
            rctx.succeeded(&key);
            Ok(action)
        }
        Outcome::Waiting(action) => Ok(action),
        Outcome::Failed => {
            let delay = rctx.failed(&key, generation, deleting);
            tracing::debug!(release = %key, retry_in = ?delay, failures = rctx.backoff.failures(&key), "backing off");
            Ok(Action::requeue(delay))
        }
    }
}

/// The error policy: count the failure and back off per object.
pub fn error_policy(release: Arc<ClusterStackRelease>, error: &Error, rctx: Arc<ReleaseContext>) -> Action {
    let key = key_of(release.as_ref());
    rctx.ctx.metrics.failed(CONTROLLER, error.metric_label());
    // A failed pass may have left the object half-done: do not skip the next trigger.
    rctx.memos.forget(&key);
    let delay = rctx.failed(&key, release.meta().generation, release.meta().deletion_timestamp.is_some());
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
) -> Result<ClusterStackReleaseStatus, Error> {
    let now = Time(Timestamp::now());
    let mut status = build_release_status(release.status.as_ref(), obs, &now);
    if let Some(gate) = gate {
        // The gate's `NodeImagesReady` condition and `nodeImages` (removed when there is no gate).
        gate.record(&mut status, &now);
    }
    if release.status.as_ref() != Some(&status) {
        let body = crate::controller::status_patch(release.status.as_ref(), &status)?;
        match api.patch_status(&release.name_any(), &PatchParams::default(), &Patch::Merge(&body)).await {
            Ok(_) => {}
            // Gone while we worked (deleted with its stack): nothing left to report on.
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(status)
}

/// Whether the status already reports a failed download: a retry keeps it (no flip to
/// `Downloading` and back on every attempt) until it succeeds or fails otherwise.
fn download_failed(release: &ClusterStackRelease) -> bool {
    ready_reason(release)
        .is_some_and(|r| r == reason::DOWNLOAD_FAILED || FailureReason::ALL.iter().any(|f| f.as_str() == r))
}

/// The reason of the `Ready` condition as last written.
fn ready_reason(release: &ClusterStackRelease) -> Option<&str> {
    let conditions = &release.status.as_ref()?.conditions;
    crate::api::conditions::find(conditions, crate::api::conditions::READY).map(|c| c.reason.as_str())
}

async fn reconcile_inner(
    release: &ClusterStackRelease,
    rctx: &Arc<ReleaseContext>,
    key: &str,
) -> Result<Outcome, Error> {
    let ctx = &rctx.ctx;
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
        return delete(release, rctx, key, &api).await;
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
    let (memo, ticket) = rctx.memos.get(key);
    let ready = release.status.as_ref().is_some_and(|s| s.ready);
    if let Some(left) = memo::still_good(memo.as_ref(), generation, ready, now) {
        return Ok(Outcome::Waiting(Action::requeue(left)));
    }

    let id = match ReleaseId::from_tag(&tag) {
        Ok(id) => id,
        Err(e) => {
            let message = format!("ClusterStackRelease name {tag:?} is not a release tag: {e}");
            write_status(&api, release, &observe(ReleaseStep::InvalidMetadata { message }, None), None).await?;
            return Ok(Outcome::Waiting(Action::await_change()));
        }
    };

    let (source, stack) = ctx.release_source(release).await?;
    // With a signature policy the release is verified before it is extracted, and a cached copy
    // only used when it was verified under this very policy.
    let api_ref = &api;
    let refuse = |failure: Failure| async move {
        let why = failure.reason.as_str();
        ctx.metrics.failed(CONTROLLER, why);
        tracing::warn!(release = %key, reason = why, error = %failure.message, "release refused: signature check failed; backing off");
        ctx.event(
            &release.object_ref(&()),
            true,
            why,
            "Verify",
            format!("signature check failed: {}", failure.message),
        )
        .await;
        let step = ReleaseStep::SignatureFailed { reason: failure.reason, message: failure.message };
        write_status(api_ref, release, &observe(step, None), None).await?;
        Ok::<_, Error>(Outcome::Failed)
    };
    let policy = match ctx.release_policy(stack.as_ref(), &ns).await {
        Ok(policy) => policy.map(Arc::new),
        Err(failure) => return refuse(failure).await,
    };
    let fetched = match fetch(release, rctx, key, &source, &tag, policy).await? {
        Fetch::Ready(f) => f,
        Fetch::Running(progress) => {
            if !download_failed(release) {
                write_status(&api, release, &observe(ReleaseStep::Downloading { progress }, None), None).await?;
            }
            return Ok(Outcome::Waiting(Action::requeue(DOWNLOAD_POLL)));
        }
        Fetch::Refused(failure) => return refuse(failure).await,
        Fetch::Failed(message) => {
            ctx.metrics.failed(CONTROLLER, reason::DOWNLOAD_FAILED);
            tracing::warn!(release = %key, error = %message, "download failed; backing off");
            write_status(&api, release, &observe(ReleaseStep::DownloadFailed { message }, None), None).await?;
            return Ok(Outcome::Failed);
        }
    };

    let metadata = match fetched.metadata() {
        Ok(m) => m,
        Err(e) => {
            ctx.metrics.failed(CONTROLLER, reason::INVALID_METADATA);
            let message = format!("metadata.yaml of release {tag}: {e}");
            tracing::warn!(release = %key, error = %message, "invalid release; backing off");
            write_status(&api, release, &observe(ReleaseStep::InvalidMetadata { message }, None), None).await?;
            return Ok(Outcome::Failed);
        }
    };
    let k8s = Some(metadata.versions.kubernetes.to_string());

    // The node-image gate (docs/providers.md): provider work before the class is usable.
    let node_images = match fetched.asset_path(NODE_IMAGES_FILE).filter(|p| p.exists()) {
        Some(path) => match NodeImagesFile::read(&path) {
            Ok(f) => Some(f),
            Err(e) => {
                let message = format!("{NODE_IMAGES_FILE} of release {tag}: {e}");
                tracing::warn!(release = %key, error = %message, "invalid release; backing off");
                write_status(&api, release, &observe(ReleaseStep::InvalidMetadata { message }, k8s), None).await?;
                return Ok(Outcome::Failed);
            }
        },
        None => None,
    };
    let (no_provider, provider_ref) =
        stack.as_ref().map_or((false, None), |s| (s.spec.no_provider, s.spec.provider_ref.clone()));
    let gate_ctx = GateContext::for_release(release, metadata.clone(), ctx.client.clone())
        .map_err(|e| Error::Config(e.to_string()))?
        .with_provider_ref(provider_ref)
        .with_node_images(node_images);
    let gate =
        rctx.gate.check(&gate_ctx, no_provider, release.status.as_ref(), generation, &Time(Timestamp::now())).await;
    if !gate.passed() {
        let step = ReleaseStep::ProviderWork { message: gate.message.clone() };
        write_status(&api, release, &observe(step, k8s), Some(&gate)).await?;
        rctx.memos.forget(key);
        return Ok(Outcome::Waiting(gate.requeue_after.map_or_else(Action::await_change, Action::requeue)));
    }

    let chart = fetched.cluster_class_chart_dir();
    let render_ctx = RenderContext::new(&id, &ns);
    let rendered = crate::render::worker::render_cluster_class_isolated(&tag, chart, render_ctx).await;
    let objects = match rendered {
        Ok(o) => o,
        Err(e) => {
            ctx.metrics.failed(CONTROLLER, reason::RENDER_FAILED);
            let message = format!("rendering the cluster class of {tag}: {e}");
            tracing::warn!(release = %key, error = %message, "render failed; backing off");
            write_status(&api, release, &observe(ReleaseStep::RenderFailed { message }, k8s), None).await?;
            return Ok(Outcome::Failed);
        }
    };

    // A release too large for one status (and for the API server's patience) is refused whole:
    // nothing applied, nothing pruned, the inventory of an earlier apply kept.
    let cap = ctx.settings.max_objects_per_release;
    if objects.len() > cap {
        ctx.metrics.failed(CONTROLLER, reason::TOO_MANY_OBJECTS);
        let message = status::too_many_objects_message(objects.len(), cap);
        tracing::warn!(release = %key, objects = objects.len(), cap, "release refused: {message}");
        if ready_reason(release) != Some(reason::TOO_MANY_OBJECTS) {
            ctx.event(&release.object_ref(&()), true, reason::TOO_MANY_OBJECTS, "Apply", message).await;
        }
        let step = ReleaseStep::TooManyObjects { count: objects.len(), cap };
        write_status(&api, release, &observe(step, k8s), Some(&gate)).await?;
        rctx.memos.forget(key);
        return Ok(Outcome::Failed);
    }

    // Apply, then prune what the previous inventory has and this render has not.
    let previous = release.status.as_ref().map(super::inventory::from_release_status).unwrap_or_default();
    let owner = ReleaseOwner::new(&tag, &ns);
    // Written ahead: the inventory lists every object before it may exist, so a deletion finds
    // all of them even when the pass stops half-way; a status the server refuses stops the pass
    // before anything is applied.
    let with_intent: ClusterStackRelease;
    let release = match record_intent(&api, release, &previous, &objects, &owner, ctx).await {
        // The status written last is what the final write must turn into its own (a merge patch
        // built against the older one would leave the intent's fields behind).
        Ok(Some(status)) => {
            with_intent = ClusterStackRelease { status: Some(status), ..release.clone() };
            &with_intent
        }
        Ok(None) => release,
        Err(e) => {
            ctx.metrics.failed(CONTROLLER, "StatusWriteFailed");
            tracing::warn!(release = %key, error = %e, "recording the inventory before the apply failed: nothing applied; backing off");
            let note =
                format!("the status could not record the {} object(s) to apply, nothing applied: {e}", objects.len());
            ctx.event(&release.object_ref(&()), true, "StatusWriteFailed", "Apply", note).await;
            rctx.memos.forget(key);
            return Ok(Outcome::Failed);
        }
    };
    let applied = ctx
        .applier
        .apply(&objects, &ApplyOptions::new(owner.clone()).with_previous(previous.clone()).confined())
        .await?;
    let stale = engine::stale(&previous, &applied.identities(), WhenEmpty::Refuse, &owner)?;
    let pruned = ctx.applier.prune(&stale, &owner).await;
    let mut inventory = Inventory::from_changes(&applied);
    inventory.record(&pruned);
    // Someone else's change to what was applied reaches this release within seconds.
    for kind in &kinds_of(&inventory) {
        crate::controller::runtime::watch::watch_kind(ctx, kind).await;
    }
    for created in applied.with(engine::Action::Created) {
        tracing::debug!(release = %key, kind = %created.kind, name = %created.name, "created object");
    }
    let corrected = applied.with(engine::Action::Configured).len();
    if corrected > 0 {
        tracing::info!(release = %key, corrected, "corrected drifted objects");
    }
    let forbidden: Vec<String> = inventory
        .entries
        .iter()
        .filter(|e| e.error.starts_with(engine::FORBIDDEN_PREFIX))
        .map(|e| format!("{} {}: {}", e.key.kind, e.key.name, e.error))
        .collect();
    if !forbidden.is_empty() {
        tracing::warn!(release = %key, objects = forbidden.len(), first = %forbidden[0], "applying objects was forbidden");
        let note = forbidden.join("; ");
        ctx.event(&release.object_ref(&()), true, "ApplyForbidden", "Apply", note).await;
    }
    let refused: Vec<String> = inventory
        .entries
        .iter()
        .filter(|e| e.error.starts_with(engine::CONFINED_PREFIX))
        .map(|e| format!("{} {}/{}", e.key.kind, e.key.namespace, e.key.name))
        .collect();
    if !refused.is_empty() {
        // One namespace's release writing into another namespace, or the whole cluster.
        tracing::warn!(release = %key, objects = refused.len(), first = %refused[0], "objects outside the release's namespace refused");
        let note = format!("refused outside namespace {ns}: {}", refused.join(", "));
        ctx.event(&release.object_ref(&()), true, "ObjectsRefused", "Apply", note).await;
    }
    let synced = inventory.entries.iter().filter(|e| e.synced).count() as u64;
    let not_synced = inventory.len() as u64 - synced;
    ctx.metrics.applied_objects(&ns, &tag, synced, not_synced);
    let all_synced = not_synced == 0;
    let step = ReleaseStep::Applied { inventory };
    // A refused status write (too large, invalid, a server error) is an error: the error policy
    // backs off, and the triggers before the retry are held back, so nothing is re-applied in a
    // loop.
    let status = write_status(&api, release, &observe(step, k8s), Some(&gate)).await?;

    if all_synced && status.ready {
        let next = jittered(ctx.settings.resync_interval, 0.1, &ctx.random);
        let next = gate.requeue_after.map_or(next, |g| g.min(next));
        rctx.memos.remember(key, ticket, ReleaseMemo { generation, applied_at: now, valid_for: next });
        Ok(Outcome::Done(Action::requeue(next)))
    } else {
        ctx.metrics.failed(CONTROLLER, reason::APPLY_FAILED);
        rctx.memos.forget(key);
        Ok(Outcome::Failed)
    }
}

/// Records the inventory an apply of `objects` may leave (the previous one and every object of
/// the render, keyed as the apply will key it) in the status before applying, when it lists
/// something new; the status written, if any.
async fn record_intent(
    api: &Api<ClusterStackRelease>,
    release: &ClusterStackRelease,
    previous: &Inventory,
    objects: &[kube::api::DynamicObject],
    owner: &ReleaseOwner,
    ctx: &crate::controller::runtime::context::Context,
) -> Result<Option<ClusterStackReleaseStatus>, Error> {
    let keys = ctx.applier.planned_keys(objects, owner).await;
    let mut intent = previous.clone();
    let known: std::collections::HashSet<engine::Identity> =
        previous.entries.iter().map(|e| e.key.identity()).collect();
    let new: Vec<engine::InventoryEntry> = keys
        .into_iter()
        // An object without a kind or a name fails its apply and is never created.
        .filter(|k| !k.kind.is_empty() && !k.name.is_empty() && !known.contains(&k.identity()))
        .map(|key| engine::InventoryEntry {
            key,
            synced: false,
            error: "not applied yet".into(),
            resource_version: String::new(),
        })
        .collect();
    if new.is_empty() {
        return Ok(None);
    }
    intent.entries.extend(new);
    let current = release.status.clone().unwrap_or_default();
    let mut next = current.clone();
    (next.inventory, next.resources) = super::inventory::to_release_status(&intent);
    // Complete from the first apply on: nothing can exist that an earlier, unrecorded apply left.
    next.inventory_complete |= previous.entries.is_empty();
    let body = crate::controller::status_patch(Some(&current), &next)?;
    match api.patch_status(&release.name_any(), &PatchParams::default(), &Patch::Merge(&body)).await {
        Ok(_) => Ok(Some(next)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

enum Fetch {
    Ready(Box<FetchedRelease>),
    Running(String),
    Failed(String),
    /// Downloaded, but its signatures do not satisfy the policy: never extracted nor applied.
    Refused(Failure),
}

/// The release from the cache; else the state of its background download, started when needed.
/// A restarted operator finds a verified release on disk and needs no listing at all.
async fn fetch(
    release: &ClusterStackRelease,
    rctx: &Arc<ReleaseContext>,
    key: &str,
    source: &AnySource,
    tag: &str,
    policy: Option<Arc<ReleasePolicy>>,
) -> Result<Fetch, Error> {
    let ctx = &rctx.ctx;
    let id = ReleaseId::from_tag(tag).map_err(|e| Error::Config(e.to_string()))?;
    match ctx.sources.cache.open_signed(source, &id, tag, policy.as_deref()).await {
        Ok(Some(f)) => {
            rctx.clear_download(key);
            return Ok(Fetch::Ready(Box::new(f)));
        }
        // Not there, or damaged and discarded by the cache: download it below.
        Ok(None) => {}
        Err(e) => tracing::warn!(release = %key, error = %e, "cached release unusable; downloading again"),
    }
    match rctx.download(key) {
        Some(DownloadState::Running(progress)) => return Ok(Fetch::Running(progress)),
        Some(DownloadState::Failed(message)) => {
            // Reported once; the next pass (after the backoff) tries again.
            rctx.clear_download(key);
            return Ok(Fetch::Failed(message));
        }
        Some(DownloadState::Refused(failure)) => {
            rctx.clear_download(key);
            return Ok(Fetch::Refused(failure));
        }
        Some(DownloadState::Done) | None => {}
    }
    let name = source.name();
    // The latest listing, a poller's or one made on demand; listed again when it lacks the tag.
    let latest = ctx.sources.pollers.latest(&source.cache_key()).and_then(|l| l.result.ok());
    let listed = match latest {
        Some(l) if l.iter().any(|r| r.tag == tag) => l,
        _ => match ctx.sources.list(source, Duration::ZERO).await.result {
            Ok(l) => l,
            Err(outcome) => return Ok(Fetch::Failed(format!("cannot list {name} to download {tag}: {outcome:?}"))),
        },
    };
    let Some(listed) = listed.iter().find(|r| r.tag == tag).cloned() else {
        return Ok(Fetch::Failed(format!("{name} does not publish release {tag}")));
    };
    let progress = format!("{} asset(s) of {tag} from {name}", listed.assets.len());
    rctx.set_download(key, DownloadState::Running(progress.clone()));
    let task_ctx = Arc::clone(rctx);
    let task_source = source.clone();
    let task_key = key.to_string();
    let release_name = release.name_any();
    tokio::spawn(async move {
        // Bounded: at most `concurrency` downloads at once; the others wait here, not in a reconcile.
        let Ok(_permit) = task_ctx.download_slots.clone().acquire_owned().await else { return };
        let cache = &task_ctx.ctx.sources.cache;
        let fetched = cache.fetch_signed(&task_source, &listed, FetchPolicy::default(), policy.as_deref(), &NoProgress);
        let state = match fetched.await {
            Ok(_) => {
                tracing::info!(release = %task_key, "release downloaded and verified");
                DownloadState::Done
            }
            Err(crate::source::CacheError::Signature { failure, .. }) => DownloadState::Refused(failure),
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
        task_ctx.ctx.sources.record_github_stats();
        task_ctx.set_download(&task_key, state);
    });
    Ok(Fetch::Running(progress))
}

/// The deletion path: needs only the inventory in status, never the cache or a render.
async fn delete(
    release: &ClusterStackRelease,
    rctx: &ReleaseContext,
    key: &str,
    api: &Api<ClusterStackRelease>,
) -> Result<Outcome, Error> {
    if !has_finalizer(release) {
        return Ok(Outcome::Waiting(Action::await_change()));
    }
    let ctx = &rctx.ctx;
    let ns = release.namespace().unwrap_or_default();
    let tag = release.name_any();
    let observe = |step| ReleaseObservation { step, kubernetes_version: None, generation: release.meta().generation };
    if let Ok(id) = ReleaseId::from_tag(&tag) {
        let usages = ctx.watches.cluster_usages_in(&ns).await?;
        let users = clusters_using(&usages, &id, &ns);
        if !users.is_empty() {
            let step = ReleaseStep::WaitingForClusters { class: id.class_name(), clusters: users };
            write_status(api, release, &observe(step), None).await?;
            return Ok(Outcome::Waiting(Action::requeue(IN_USE_POLL)));
        }
    }
    let inventory = release.status.as_ref().map(super::inventory::from_release_status).unwrap_or_default();
    let owner = ReleaseOwner::new(&tag, &ns);
    let mut deleted = ctx.applier.delete_all(&inventory, &owner).await;
    // Objects carrying our labels that an older version's status did not list (one that could
    // not hold them, or an apply not recorded ahead): found by label among the kinds the release
    // applied. A complete inventory needs none of these cluster-wide lists.
    if !release.status.as_ref().is_some_and(|s| s.inventory_complete) {
        let kinds = kinds_of(&inventory);
        deleted.changes.extend(ctx.applier.delete_labelled(&kinds, &owner, &deleted.identities()).await.changes);
    }
    if !deleted.all_ok() {
        let failed: Vec<String> =
            deleted.failures().map(|c| format!("{} {}: {}", c.key.kind, c.key.name, c.error)).collect();
        let message = format!("could not delete {} object(s): {}", failed.len(), failed.join("; "));
        ctx.metrics.failed(CONTROLLER, reason::DELETING);
        write_status(api, release, &observe(ReleaseStep::Deleting { message }), None).await?;
        return Ok(Outcome::Failed);
    }
    // The provider plug-in removes what it made (e.g. a provider operator's release object).
    if let Ok(gate_ctx) = GateContext::for_release(release, None, ctx.client.clone()) {
        let stack = ctx.owning_stack(release).await?;
        let (no_provider, provider_ref) =
            stack.as_ref().map_or((false, None), |s| (s.spec.no_provider, s.spec.provider_ref.clone()));
        if let Cleanup::InProgress { message, recheck_after } =
            rctx.gate.cleanup(&gate_ctx.with_provider_ref(provider_ref), no_provider).await
        {
            write_status(api, release, &observe(ReleaseStep::Deleting { message }), None).await?;
            return Ok(Outcome::Waiting(Action::requeue(recheck_after)));
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
    rctx.memos.remove(key);
    rctx.clear_download(key);
    Ok(Outcome::Done(Action::await_change()))
}

/// The kinds an inventory lists, each once.
fn kinds_of(inventory: &Inventory) -> Vec<kube::api::GroupVersionKind> {
    let mut kinds: Vec<kube::api::GroupVersionKind> = inventory
        .entries
        .iter()
        .map(|e| kube::api::GroupVersionKind::gvk(&e.key.group, &e.key.version, &e.key.kind))
        .collect();
    kinds.sort_by(|a, b| (&a.group, &a.version, &a.kind).cmp(&(&b.group, &b.version, &b.kind)));
    kinds.dedup();
    kinds
}
