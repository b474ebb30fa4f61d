//! The whole operator in-process against the API server double: a server with our CRDs and the
//! CAPI CRDs, and a running operator stopped gracefully on `stop` (or when dropped).

use std::sync::Arc;
use std::time::Duration;

use clusterstack::controller::run::{Handles, RunOptions, run_with};
use clusterstack::controller::runtime::context::Settings;
use clusterstack::controller::runtime::metrics::Metrics;
use clusterstack::controller::runtime::serve::Readiness;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::ApiServer;
use super::fixtures::{capi_crds, load_yaml};

/// How long a graceful stop may take.
const STOP: Duration = Duration::from_secs(30);

/// A server with `namespaces`, our CRDs and the CAPI CRDs (Cluster included).
pub async fn capi_server(namespaces: &[&str]) -> ApiServer {
    clusterstack::install_crypto_provider();
    let server = ApiServer::start().await;
    for ns in namespaces {
        server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    for crd in clusterstack::api::all_crds() {
        server.put_object(serde_json::to_value(&crd).expect("a CRD serialises"));
    }
    for crd in capi_crds().into_iter().chain(load_yaml("operator/clusters.cluster.x-k8s.io.yaml")) {
        server.put_object(serde_json::to_value(&crd).expect("a CRD serialises"));
    }
    server
}

/// A running operator; stopped (gracefully) on `stop` or when dropped.
pub struct Operator {
    token: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    pub metrics: Arc<Metrics>,
    pub readiness: Readiness,
}

impl Operator {
    pub fn start(server: &ApiServer, settings: Settings) -> Self {
        Self::start_with(server, settings, RunOptions::default())
    }

    pub fn start_with(server: &ApiServer, settings: Settings, options: RunOptions) -> Self {
        let token = CancellationToken::new();
        let handles = Handles { metrics: Arc::new(Metrics::new()), readiness: Readiness::default() };
        let (metrics, readiness) = (handles.metrics.clone(), handles.readiness.clone());
        let client = server.client();
        let t = token.clone();
        let task = tokio::spawn(async move {
            run_with(client, settings, options, t, handles).await.expect("operator runs");
        });
        Self { token, task: Some(task), metrics, readiness }
    }

    /// Kills the operator abruptly (a crash): reconciles in flight are dropped mid-way.
    pub async fn kill(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    pub async fn stop(mut self) {
        self.token.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(STOP, task).await.expect("operator stops in time").expect("operator task");
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.token.cancel();
    }
}
