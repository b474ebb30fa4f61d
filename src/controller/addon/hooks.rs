//! The CAPI Runtime SDK extension server: lifecycle hooks over HTTPS.
//!
//! - `POST /hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery` (as CAPI calls it; GET too): the handlers below;
//! - `POST .../afterControlPlaneInitialized/...`, `.../afterClusterUpgrade/...`: answered at once
//!   (the ClusterAddon controller starts the stages from the Cluster watch);
//! - the upgrade's steps CAPI v1.12+ announces (`beforeControlPlaneUpgrade`,
//!   `afterControlPlaneUpgrade`, `beforeWorkersUpgrade`, `afterWorkersUpgrade`): answered at once
//!   and counted in `clusterstack_hook_calls_total`, so an upgrade's progress shows in the
//!   metrics; no stage format names them yet, so nothing is held there (failure policy `Ignore`:
//!   an unreachable operator never stops an upgrade at those steps);
//! - `beforeClusterCreate`, `beforeClusterDelete`: likewise observed only, so that every
//!   lifecycle hook the pinned CAPI (v1.14) calls reaches us and is counted;
//! - `POST .../beforeClusterUpgrade/...`: holds the upgrade (`retryAfterSeconds`) while the
//!   ClusterAddon has not applied the addons of the Cluster's class, until the hold deadline,
//!   after which the upgrade is let through with a Warning event and `status.holdResult`
//!   `DeadlineExceeded`. The annotation [`SKIP_HOLD_ANNOTATION`] on the Cluster skips the hold.
//!
//! The hold's start lives in `ClusterAddon.status.holdStartedAt`, never in memory: a restarted
//! operator keeps the same deadline. Serving certificates are `tls.crt` / `tls.key` of a
//! directory (a mounted Secret), read again when either file changes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::routing::{get, post};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::cluster_addon_name;
use crate::api::ClusterAddon;
use crate::controller::runtime::clusters;
use crate::util::lock;

/// The Runtime SDK hooks API version.
pub const HOOKS_API: &str = "hooks.runtime.cluster.x-k8s.io/v1alpha1";
/// On a Cluster: let its upgrades through without waiting for the addons.
pub const SKIP_HOLD_ANNOTATION: &str = "clusterstack.x-k8s.io/skip-addon-upgrade-hold";
/// The default hold deadline.
pub const DEFAULT_HOLD_DEADLINE: Duration = Duration::from_secs(1800);
/// How long CAPI is asked to wait before asking again.
pub const RETRY_AFTER_SECONDS: i64 = 10;

/// Hold results in `ClusterAddon.status.holdResult`.
pub mod hold {
    pub const COMPLETED: &str = "Completed";
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    pub const SKIPPED: &str = "Skipped";
}

/// What the handlers need.
pub struct HookState {
    pub ctx: Arc<super::Context>,
    pub hold_deadline: Duration,
}

/// Why the hook server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HookServerError {
    #[error("the serving certificate in {dir}: {message}")]
    Certificate { dir: String, message: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The hook router (plain HTTP; [`serve_tls`] puts TLS in front).
pub fn router(state: Arc<HookState>) -> axum::Router {
    axum::Router::new()
        // CAPI's runtime client POSTs a DiscoveryRequest; GET is kept for people with curl.
        .route("/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", get(discovery).post(discovery))
        .route("/hooks.runtime.cluster.x-k8s.io/v1alpha1/{hook}/{handler}", post(handle))
        .with_state(state)
}

/// The discovery answer: one handler per hook we serve.
pub fn discovery_response() -> Value {
    let handler = |name: &str, hook: &str, policy: &str| {
        json!({"name": name, "requestHook": {"apiVersion": HOOKS_API, "hook": hook},
               "timeoutSeconds": 10, "failurePolicy": policy})
    };
    json!({
        "apiVersion": HOOKS_API, "kind": "DiscoveryResponse", "status": "Success",
        "handlers": [
            handler("after-control-plane-initialized", "AfterControlPlaneInitialized", "Ignore"),
            handler("before-cluster-upgrade", "BeforeClusterUpgrade", "Fail"),
            handler("after-cluster-upgrade", "AfterClusterUpgrade", "Ignore"),
            handler("before-control-plane-upgrade", "BeforeControlPlaneUpgrade", "Ignore"),
            handler("after-control-plane-upgrade", "AfterControlPlaneUpgrade", "Ignore"),
            handler("before-workers-upgrade", "BeforeWorkersUpgrade", "Ignore"),
            handler("after-workers-upgrade", "AfterWorkersUpgrade", "Ignore"),
            handler("before-cluster-create", "BeforeClusterCreate", "Ignore"),
            handler("before-cluster-delete", "BeforeClusterDelete", "Ignore"),
        ]
    })
}

async fn discovery() -> Json<Value> {
    Json(discovery_response())
}

fn response(kind: &str, status: &str, message: &str, retry: Option<i64>) -> Json<Value> {
    let mut r = json!({"apiVersion": HOOKS_API, "kind": kind, "status": status});
    if !message.is_empty() {
        r["message"] = json!(message);
    }
    if let Some(s) = retry {
        r["retryAfterSeconds"] = json!(s);
    }
    Json(r)
}

/// The hooks served here, as CAPI names them: the three `clusteraddon.yaml` stages name, then the
/// ones only observed.
const SERVED: [&str; 9] = [
    "AfterControlPlaneInitialized",
    "BeforeClusterUpgrade",
    "AfterClusterUpgrade",
    "BeforeControlPlaneUpgrade",
    "AfterControlPlaneUpgrade",
    "BeforeWorkersUpgrade",
    "AfterWorkersUpgrade",
    "BeforeClusterCreate",
    "BeforeClusterDelete",
];

async fn handle(
    State(state): State<Arc<HookState>>,
    UrlPath((hook, _handler)): UrlPath<(String, String)>,
    body: axum::body::Bytes,
) -> Json<Value> {
    // CAPI puts the hook's name in the path in lower case.
    let name = SERVED.iter().copied().find(|h| h.eq_ignore_ascii_case(&hook)).unwrap_or("Unknown");
    // CAPI's runtime client sends its JSON without a Content-Type header: read the body as JSON
    // whatever the header says (axum's `Json` would answer 415).
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            state.ctx.metrics.hook_called(name, "Failure");
            return response(&format!("{name}Response"), "Failure", &format!("the request is not JSON: {e}"), None);
        }
    };
    let (status, message, retry) = match name {
        "BeforeClusterUpgrade" => match before_cluster_upgrade(&state, &request).await {
            Ok(retry) => ("Success", String::new(), Some(retry)),
            Err(message) => {
                tracing::warn!(message, "BeforeClusterUpgrade hook failed");
                ("Failure", message, None)
            }
        },
        "Unknown" => ("Failure", format!("hook {hook} is not served"), None),
        _ => ("Success", String::new(), None),
    };
    let counted = if retry.is_some_and(|r| r > 0) { "Retry" } else { status };
    state.ctx.metrics.hook_called(name, counted);
    tracing::debug!(hook = name, status = counted, "Runtime SDK hook called");
    response(&format!("{name}Response"), status, &message, retry)
}

/// The decision on one `BeforeClusterUpgrade` call: seconds to retry after (0: go ahead).
async fn before_cluster_upgrade(state: &HookState, request: &Value) -> Result<i64, String> {
    let cluster: clusters::CapiCluster =
        serde_json::from_value(request["cluster"].clone()).map_err(|e| format!("the request's cluster: {e}"))?;
    let Some(usage) = clusters::class_usage(&cluster) else { return Ok(0) };
    let ns = usage.cluster.namespace.clone();
    let api: Api<ClusterAddon> = Api::namespaced(state.ctx.client.clone(), &ns);
    let name = cluster_addon_name(&usage.cluster.name);
    let Some(addon) = api.get_opt(&name).await.map_err(|e| e.to_string())? else {
        // No addons applied yet: nothing to wait for.
        return Ok(0);
    };
    let status = addon.status.clone().unwrap_or_default();
    let tag = usage.class.tag();
    // Done: the class's release is applied, or the run towards it has finished every stage of
    // BeforeClusterUpgrade (its AfterClusterUpgrade stages wait for the upgrade this lets go).
    let applied = status.release.as_deref() == Some(tag.as_str()) && status.target_release.is_none();
    let before_done = status.target_release.as_deref() == Some(tag.as_str())
        && !status.stages.is_empty()
        && status
            .stages
            .iter()
            .filter(|s| s.hook.as_deref() != Some(super::stages::AFTER_CLUSTER_UPGRADE))
            .all(|s| s.phase.as_deref() == Some(super::phase::DONE));
    let done = applied || before_done;
    let skip = cluster.annotations().get(SKIP_HOLD_ANNOTATION).is_some_and(|v| v != "false");
    let now = Timestamp::now();
    let (result, retry) = if done {
        (hold::COMPLETED, 0)
    } else if skip {
        (hold::SKIPPED, 0)
    } else {
        let started = status.hold_started_at.as_ref().map(|t| t.0).unwrap_or(now);
        let held = now.duration_since(started).unsigned_abs();
        if held >= state.hold_deadline {
            let note = format!(
                "the addons of {tag} are not applied after holding the upgrade for {}: letting it through",
                humantime::format_duration(state.hold_deadline)
            );
            state.ctx.event(&addon.object_ref(&()), true, "AddonUpgradeHoldExpired", "HoldUpgrade", note).await;
            (hold::DEADLINE_EXCEEDED, 0)
        } else {
            if status.hold_started_at.is_none() {
                patch_hold(&api, &name, json!({"holdStartedAt": Time(now), "holdResult": null})).await?;
            }
            return Ok(RETRY_AFTER_SECONDS);
        }
    };
    if status.hold_started_at.is_some() || status.hold_result.as_deref() != Some(result) {
        patch_hold(&api, &name, json!({"holdStartedAt": null, "holdResult": result})).await?;
    }
    Ok(retry)
}

async fn patch_hold(api: &Api<ClusterAddon>, name: &str, fields: Value) -> Result<(), String> {
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": fields})))
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot record the hold in ClusterAddon {name}: {e}"))
}

/// The TLS configuration of `tls.crt` / `tls.key` in `dir`.
pub fn load_tls(dir: &Path) -> Result<Arc<rustls::ServerConfig>, HookServerError> {
    let bad = |message: String| HookServerError::Certificate { dir: dir.display().to_string(), message };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("tls.crt"))
        .map_err(|e| bad(format!("tls.crt: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(format!("tls.crt: {e}")))?;
    let key = PrivateKeyDer::from_pem_file(dir.join("tls.key")).map_err(|e| bad(format!("tls.key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn modified(dir: &Path) -> Option<(SystemTime, SystemTime)> {
    let m = |f: &str| std::fs::metadata(dir.join(f)).and_then(|m| m.modified()).ok();
    Some((m("tls.crt")?, m("tls.key")?))
}

/// The modification times of `tls.crt` and `tls.key`.
type Stamp = Option<(SystemTime, SystemTime)>;

/// The TLS config, read again when the files change (a rotated Secret).
struct Reloading {
    dir: PathBuf,
    current: Mutex<(Stamp, Arc<rustls::ServerConfig>)>,
}

impl Reloading {
    fn get(&self) -> Arc<rustls::ServerConfig> {
        let stamp = modified(&self.dir);
        let mut current = lock(&self.current);
        if stamp.is_some() && stamp != current.0 {
            match load_tls(&self.dir) {
                Ok(config) => {
                    tracing::info!(dir = %self.dir.display(), "hook server certificate reloaded");
                    *current = (stamp, config);
                }
                // Half-written files during a rotation: keep serving the old pair.
                Err(e) => tracing::warn!(error = %e, "keeping the previous hook server certificate"),
            }
        }
        current.1.clone()
    }
}

/// Serves `router` over HTTPS on `addr` with the certificates of `cert_dir` until `shutdown`.
/// Returns the bound address (useful with port 0) and the task.
pub async fn serve_tls(
    addr: SocketAddr,
    cert_dir: &Path,
    router: axum::Router,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), HookServerError> {
    let initial = load_tls(cert_dir)?;
    let tls = Arc::new(Reloading { dir: cert_dir.to_path_buf(), current: Mutex::new((modified(cert_dir), initial)) });
    let listener =
        tokio::net::TcpListener::bind(addr).await.map_err(|source| HookServerError::Bind { addr, source })?;
    let bound = listener.local_addr().map_err(|source| HookServerError::Bind { addr, source })?;
    let task = tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => { tracing::warn!(error = %e, "hook server accept failed"); continue }
                },
                () = shutdown.cancelled() => return,
            };
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.get());
            let service = hyper_util::service::TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let stream = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => return tracing::debug!(error = %e, "hook TLS handshake failed"),
                    Err(_) => return tracing::debug!("hook TLS handshake timed out"),
                };
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                    tracing::debug!(error = %e, "hook connection ended");
                }
            });
        }
    });
    Ok((bound, task))
}
