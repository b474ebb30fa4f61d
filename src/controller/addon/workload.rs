//! Clients of the workload clusters, built from the CAPI kubeconfig Secrets and cached per
//! Cluster. A cached client is dropped when its Secret's `resourceVersion` changes (a rotated
//! certificate or a moved endpoint) and when the Cluster goes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::apply::Applier;
use crate::controller::runtime::clusters::ClusterKey;
use crate::util::lock;

/// The field manager of every apply into a workload cluster.
pub const ADDON_FIELD_MANAGER: &str = "clusterstack-addons";
/// The key of the kubeconfig in the CAPI Secret.
pub const KUBECONFIG_KEY: &str = "value";
/// How long one request to a workload API server may take.
const WORKLOAD_TIMEOUT: Duration = Duration::from_secs(20);

/// On a Cluster: the Secret (in its namespace, key `value`) whose kubeconfig the addons are
/// applied with, instead of CAPI's `<cluster>-kubeconfig`. For an identity narrower than CAPI's
/// admin, or a way in where CAPI's endpoint is not reachable from the operator (a proxy); the
/// end-to-end tests point it at a real kube-apiserver, since CAPD's in-memory API servers do
/// not take server-side apply.
pub const KUBECONFIG_SECRET_ANNOTATION: &str = "clusterstack.x-k8s.io/addon-kubeconfig-secret";

/// The name of the CAPI kubeconfig Secret of a Cluster.
pub fn kubeconfig_secret_name(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

/// The Secret the addons of a Cluster are applied with: the annotation's, else CAPI's.
pub fn addon_kubeconfig_secret(cluster: &str, annotations: &std::collections::BTreeMap<String, String>) -> String {
    annotations
        .get(KUBECONFIG_SECRET_ANNOTATION)
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map_or_else(|| kubeconfig_secret_name(cluster), str::to_string)
}

/// Why a workload client cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("the kubeconfig Secret {0} does not exist yet")]
    NoSecret(String),
    #[error("the kubeconfig Secret {secret} is not usable: {message}")]
    BadSecret { secret: String, message: String },
    #[error("reading the kubeconfig Secret {secret} failed: {source}")]
    Management {
        secret: String,
        #[source]
        source: kube::Error,
    },
}

/// A cached workload cluster: its client and the applier (with its discovery cache).
pub struct Workload {
    pub client: Client,
    pub applier: Applier,
    secret_version: String,
}

/// The cache of workload clients, one per Cluster.
#[derive(Default)]
pub struct WorkloadClients {
    clients: Mutex<HashMap<ClusterKey, Arc<Workload>>>,
    concurrency: usize,
}

impl WorkloadClients {
    /// An empty cache whose appliers apply `concurrency` objects at a time.
    pub fn new(concurrency: usize) -> Self {
        Self { clients: Mutex::default(), concurrency: concurrency.max(1) }
    }

    /// How many clients are cached.
    pub fn len(&self) -> usize {
        lock(&self.clients).len()
    }

    /// Whether no client is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the client of a Cluster (it went, or its API server stopped answering).
    pub fn forget(&self, cluster: &ClusterKey) {
        lock(&self.clients).remove(cluster);
    }

    /// The client of `cluster` from its Secret `name`: cached while the Secret's name and
    /// `resourceVersion` are the same, built again when either changed. Reads the Secret through
    /// `management` (one GET per call).
    pub async fn get(
        &self,
        management: &Client,
        cluster: &ClusterKey,
        name: &str,
    ) -> Result<Arc<Workload>, WorkloadError> {
        let shown = format!("{}/{name}", cluster.namespace);
        let secrets: Api<Secret> = Api::namespaced(management.clone(), &cluster.namespace);
        let secret = secrets
            .get_opt(name)
            .await
            .map_err(|source| WorkloadError::Management { secret: shown.clone(), source })?
            .ok_or_else(|| WorkloadError::NoSecret(shown.clone()))?;
        let version = format!("{name}@{}", secret.metadata.resource_version.as_deref().unwrap_or_default());
        if let Some(w) = lock(&self.clients).get(cluster)
            && w.secret_version == version
        {
            return Ok(w.clone());
        }
        let bad = |message: String| WorkloadError::BadSecret { secret: shown.clone(), message };
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(KUBECONFIG_KEY))
            .ok_or_else(|| bad(format!("it has no key {KUBECONFIG_KEY:?}")))?;
        let text = std::str::from_utf8(&bytes.0).map_err(|e| bad(format!("not UTF-8: {e}")))?;
        let client = client_from_kubeconfig(text).await.map_err(bad)?;
        let workload = Arc::new(Workload {
            applier: Applier::new(client.clone())
                .with_field_manager(ADDON_FIELD_MANAGER)
                .with_concurrency(self.concurrency),
            client,
            secret_version: version,
        });
        lock(&self.clients).insert(cluster.clone(), workload.clone());
        Ok(workload)
    }
}

/// A client from kubeconfig text, with short timeouts (a workload API that does not answer must
/// not hold a reconcile worker for long).
pub async fn client_from_kubeconfig(text: &str) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|e| format!("not a kubeconfig: {e}"))?;
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("not a usable kubeconfig: {e}"))?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(WORKLOAD_TIMEOUT);
    config.write_timeout = Some(WORKLOAD_TIMEOUT);
    // The socket timeouts above do not end a request to a server that took the connection and
    // stopped answering (a frozen or overloaded API server): the whole request gets a deadline,
    // or one such Cluster would hold its reconcile for ever.
    let builder = kube::client::ClientBuilder::try_from(config).map_err(|e| format!("cannot build a client: {e}"))?;
    Ok(builder.with_layer(&tower::timeout::TimeoutLayer::new(WORKLOAD_TIMEOUT)).build())
}
