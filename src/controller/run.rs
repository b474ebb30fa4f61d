//! The whole operator process as a library function: the three controllers, each with its own
//! context over the shared runtime, `/metrics`, `/healthz`, `/readyz`, the hook server, optional
//! leader election, and graceful shutdown on one shared signal. The one module that sees every
//! controller. Tests start it in-process against the API server double.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Resource, ResourceExt};
use kube_lease_manager::LeaseManagerBuilder;
use tokio_util::sync::CancellationToken;

use crate::api::{ClusterStack, ClusterStackRelease};

use super::runtime::context::{Context, Settings};
use super::runtime::metrics::Metrics;
use super::runtime::serve::{Readiness, health_router, metrics_router};
use super::{release, stack};

/// The name of the leader-election Lease.
pub const LEASE_NAME: &str = "clusterstack-operator";

/// Process-level options around the controllers.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Serve `/metrics` here.
    pub metrics_addr: Option<SocketAddr>,
    /// Serve `/healthz` and `/readyz` here.
    pub health_addr: Option<SocketAddr>,
    /// Run the controllers only while holding the Lease [`LEASE_NAME`] in this namespace.
    pub leader_election_namespace: Option<String>,
    /// Serve the Runtime SDK lifecycle hooks (HTTPS) here.
    pub hooks_addr: Option<SocketAddr>,
    /// The directory of the hook server's `tls.crt` and `tls.key` (reloaded when they change).
    pub hooks_cert_dir: Option<std::path::PathBuf>,
    /// How long `BeforeClusterUpgrade` may hold an upgrade; `None`: the default (30 min).
    pub hooks_hold_deadline: Option<Duration>,
}

/// Why the operator could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot set up the operator: {0}")]
    Setup(#[from] crate::source::SourceError),
    #[error("cannot start the hook server: {0}")]
    Hooks(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("leader election on Lease {LEASE_NAME}: {0}")]
    Lease(String),
}

/// Handles a running operator exposes (tests read them).
#[derive(Debug, Clone)]
pub struct Handles {
    pub metrics: Arc<Metrics>,
    pub readiness: Readiness,
}

/// Runs the operator until `shutdown` is cancelled (or leadership is lost), then stops the
/// controllers gracefully: passes in flight finish, no new ones start.
pub async fn run(
    client: Client,
    settings: Settings,
    options: RunOptions,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let handles = Handles { metrics: Arc::new(Metrics::new()), readiness: Readiness::default() };
    run_with(client, settings, options, shutdown, handles).await
}

/// [`run`] with handles created by the caller.
pub async fn run_with(
    client: Client,
    settings: Settings,
    options: RunOptions,
    shutdown: CancellationToken,
    handles: Handles,
) -> Result<(), RunError> {
    let mut servers = Vec::new();
    if let Some(addr) = options.metrics_addr {
        servers.push(serve(addr, metrics_router(handles.metrics.clone()), shutdown.clone()).await?);
    }
    if let Some(addr) = options.health_addr {
        servers.push(serve(addr, health_router(handles.readiness.clone()), shutdown.clone()).await?);
    }

    if let Some(ns) = &options.leader_election_namespace {
        let identity = std::env::var("HOSTNAME").unwrap_or_else(|_| format!("clusterstack-{}", std::process::id()));
        // One Lease per shard: the replicas of a shard elect their leader among themselves.
        let lease = settings.shard.as_ref().map_or_else(|| LEASE_NAME.to_string(), |s| format!("{LEASE_NAME}-{s}"));
        let manager = LeaseManagerBuilder::new(client.clone(), &lease)
            .with_namespace(ns)
            .with_identity(identity.clone())
            .with_field_manager(crate::apply::FIELD_MANAGER)
            .build()
            .await
            .map_err(|e| RunError::Lease(e.to_string()))?;
        let (mut leader, _task) = manager.watch().await;
        tracing::info!(identity, namespace = %ns, "waiting for the leader Lease");
        loop {
            if *leader.borrow_and_update() {
                break;
            }
            tokio::select! {
                changed = leader.changed() => if changed.is_err() { return Err(RunError::Lease("the lease task stopped".into())) },
                () = shutdown.cancelled() => return Ok(()),
            }
        }
        tracing::info!("leading: starting the controllers");
        let lost = shutdown.clone();
        tokio::spawn(async move {
            // Losing the Lease stops this replica; its restart waits for the Lease again.
            while leader.changed().await.is_ok() {
                if !*leader.borrow() {
                    tracing::warn!("lost the leader Lease: stopping");
                    lost.cancel();
                    return;
                }
            }
        });
    }

    let ctx = Arc::new(Context::new(client.clone(), settings.clone(), handles.metrics.clone())?);
    let (stacks, releases): (Api<ClusterStack>, Api<ClusterStackRelease>) = match &settings.watch_namespace {
        Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), ns)),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let config = ControllerConfig::default().concurrency(settings.concurrency);
    // Sharding: this instance sees only its shard's ClusterStacks and releases.
    let selector = super::runtime::watch::shard_selector(settings.shard.as_deref());
    let by_shard = || watcher::Config::default().labels(&selector);
    let Some(triggers) = ctx.watches.take_streams() else {
        return Err(RunError::Lease("the trigger streams were taken twice".into()));
    };
    // The controllers' stores keep slimmed objects (see `watch::slim`).
    let stack_writer = reflector::store::Writer::<ClusterStack>::default();
    let stack_reader = stack_writer.as_reader();
    let stack_stream =
        reflector(stack_writer, watcher(stacks, by_shard()).modify(super::runtime::watch::slim)).applied_objects();
    let release_writer = reflector::store::Writer::<ClusterStackRelease>::default();
    let release_reader = release_writer.as_reader();
    // The one watch of releases: besides the release controller, it triggers the owning stack
    // and tells the rollout controller the namespace of every release created, changed or
    // deleted (a watch each cost every release event decoded three times, and served three
    // times by the API server).
    let (owners_tx, owners) = futures::channel::mpsc::unbounded();
    let (release_namespaces_tx, release_namespaces) = futures::channel::mpsc::unbounded();
    let release_stream =
        reflector(release_writer, watcher(releases.clone(), by_shard()).modify(super::runtime::watch::slim))
            .inspect_ok(move |event| {
                tell_release_event(
                    event,
                    |owner| {
                        let _ = owners_tx.unbounded_send(owner);
                    },
                    // Nobody listens when Cluster API is not served (the rollout is idle).
                    |ns| {
                        let _ = release_namespaces_tx.unbounded_send(ns);
                    },
                )
            })
            .applied_objects();
    let stack_ctrl = Controller::for_stream(stack_stream, stack_reader)
        .reconcile_on(owners)
        .reconcile_on(triggers.stacks)
        .with_config(config.clone())
        .graceful_shutdown_on(shutdown.clone().cancelled_owned());
    let release_ctrl = Controller::for_stream(release_stream, release_reader)
        .reconcile_on(triggers.releases)
        .with_config(config)
        .graceful_shutdown_on(shutdown.clone().cancelled_owned());

    let addon_ctx = Arc::new(super::addon::AddonContext::new(
        ctx.clone(),
        super::addon::AddonSettings {
            wait_deadline: settings.addon_wait_deadline,
            resync_interval: settings.resync_interval,
            ..Default::default()
        },
    ));
    if let (Some(addr), Some(dir)) = (options.hooks_addr, options.hooks_cert_dir.as_deref()) {
        let state = Arc::new(super::addon::hooks::HookState {
            ctx: ctx.clone(),
            hold_deadline: options.hooks_hold_deadline.unwrap_or(super::addon::hooks::DEFAULT_HOLD_DEADLINE),
        });
        let router = super::addon::hooks::router(state);
        match super::addon::hooks::serve_tls(addr, dir, router, shutdown.clone()).await {
            Ok((bound, _task)) => tracing::info!(%bound, "Runtime SDK hook server listening"),
            Err(e) => return Err(RunError::Hooks(e.to_string())),
        }
    }
    // One watch of CAPI Clusters for the usage index and both controllers that read Clusters;
    // they subscribe before it starts, so none misses the first list.
    let addon_clusters = ctx.watches.cluster_feed.subscribe(super::addon::wants);
    let rollout_clusters = ctx.watches.cluster_feed.subscribe(super::rollout::wants);
    let addon_stop = shutdown.clone();
    let addon_concurrency = settings.concurrency;
    tokio::spawn(async move {
        tokio::select! {
            () = super::addon::run_controller(addon_ctx, addon_concurrency, addon_clusters) => {}
            () = addon_stop.cancelled() => {}
        }
    });
    let (stack_store, release_store) = (stack_ctrl.store(), release_ctrl.store());
    ctx.watches.set_stores(stack_store.clone(), release_store.clone());
    super::rollout::start(ctx.clone(), shutdown.clone(), rollout_clusters, release_namespaces);
    super::runtime::cluster_watch::start_clusters(&ctx);
    let watch_stop = ctx.watches.stop.clone();
    let stop_watches = shutdown.clone();
    tokio::spawn(async move {
        stop_watches.cancelled().await;
        watch_stop.cancel();
    });
    let readiness = handles.readiness.clone();
    tokio::spawn(async move {
        // `wait_until_ready` wakes only the last task that polled it (the controller polls it
        // too), so poll again now and then instead of waiting once.
        for store_ready in [
            Box::pin(async { ready_soon(|| stack_store.wait_until_ready()).await })
                as futures::future::BoxFuture<'_, bool>,
            Box::pin(async { ready_soon(|| release_store.wait_until_ready()).await }),
        ] {
            if !store_ready.await {
                return;
            }
        }
        tracing::info!("caches synced: ready");
        readiness.set(true);
    });
    // Unreferenced releases leave the cache after the grace period; `cache_bytes` follows.
    super::runtime::cache_gc::start(&ctx);

    let stack_ctx = Arc::new(stack::StackContext::new(ctx.clone()));
    let release_ctx = Arc::new(release::ReleaseContext::new(ctx.clone()));
    let stacks_done = stack_ctrl.run(stack::reconcile, stack::error_policy, stack_ctx).for_each(|r| async move {
        if let Err(e) = r {
            tracing::debug!(error = %e, "ClusterStack controller");
        }
    });
    let releases_done =
        release_ctrl.run(release::reconcile, release::error_policy, release_ctx).for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "ClusterStackRelease controller");
            }
        });
    futures::join!(stacks_done, releases_done);
    handles.readiness.set(false);
    shutdown.cancel();
    for s in servers {
        let _ = s.await;
    }
    tracing::info!("operator stopped");
    Ok(())
}

/// Tells of one event of the release watch: the owning ClusterStack of each release created,
/// changed or deleted (as `Controller::owns` would, from a watch of its own), and its namespace.
fn tell_release_event(
    event: &watcher::Event<ClusterStackRelease>,
    mut owner: impl FnMut(ObjectRef<ClusterStack>),
    mut namespace: impl FnMut(String),
) {
    let (watcher::Event::Apply(release) | watcher::Event::InitApply(release) | watcher::Event::Delete(release)) = event
    else {
        return;
    };
    let Some(ns) = release.metadata.namespace.as_deref() else { return };
    let (kind, api_version) = (ClusterStack::kind(&()), ClusterStack::api_version(&()));
    for o in release.owner_references().iter().filter(|o| o.kind == kind && o.api_version == api_version) {
        owner(ObjectRef::new(&o.name).within(ns));
    }
    namespace(ns.to_string());
}

/// Polls `wait` (a store's `wait_until_ready`) until it resolves; false when its writer is gone.
async fn ready_soon<F, Fut, E>(wait: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(100), wait()).await {
            Ok(result) => return result.is_ok(),
            Err(_elapsed) => continue,
        }
    }
}

async fn serve(
    addr: SocketAddr,
    router: axum::Router,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, RunError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| RunError::Listen { addr, source })?;
    tracing::info!(addr = %listener.local_addr().unwrap_or(addr), "serving");
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(shutdown.cancelled_owned()).await {
            tracing::warn!(error = %e, "HTTP server failed");
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn release(owners: serde_json::Value) -> ClusterStackRelease {
        serde_json::from_value(json!({
            "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStackRelease",
            "metadata": {"name": "docker-ferrol-1-27-v3", "namespace": "team-a", "ownerReferences": owners},
            "spec": {}
        }))
        .unwrap()
    }

    fn told(event: &watcher::Event<ClusterStackRelease>) -> (Vec<String>, Vec<String>) {
        let (mut owners, mut namespaces) = (Vec::new(), Vec::new());
        tell_release_event(event, |o| owners.push(o.to_string()), |ns| namespaces.push(ns));
        (owners, namespaces)
    }

    #[test]
    fn a_release_event_triggers_its_owning_stack_and_names_its_namespace() {
        let owned = release(json!([
            {"apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStack", "name": "ferrol", "uid": "u1", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "not-a-stack", "uid": "u2"}
        ]));
        let stack = ObjectRef::<ClusterStack>::new("ferrol").within("team-a").to_string();
        for event in [
            watcher::Event::Apply(owned.clone()),
            watcher::Event::InitApply(owned.clone()),
            watcher::Event::Delete(owned.clone()),
        ] {
            assert_eq!(told(&event), (vec![stack.clone()], vec!["team-a".to_string()]));
        }
        // Without an owning stack: only the rollouts hear of it.
        assert_eq!(told(&watcher::Event::Apply(release(json!([])))), (vec![], vec!["team-a".to_string()]));
        assert_eq!(told(&watcher::Event::Init), (vec![], vec![]));
        assert_eq!(told(&watcher::Event::InitDone), (vec![], vec![]));
    }
}
