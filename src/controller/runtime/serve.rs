//! The operator's HTTP endpoints: `/metrics` on one address, `/healthz` and
//! `/readyz` on another (so probes keep working if metrics scraping is slow).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::metrics::{CONTENT_TYPE, Metrics};

/// Whether the operator is ready: set once its caches are synced (and, with
/// leader election, whatever the lease says). Cheap to clone and share.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the operator ready or not.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }

    /// Whether it is ready.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// `GET /metrics`: the Prometheus exposition.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new().route("/metrics", get(serve_metrics)).with_state(metrics)
}

async fn serve_metrics(State(metrics): State<Arc<Metrics>>) -> Response {
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "could not encode the metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, "could not encode the metrics").into_response()
        }
    }
}

/// `GET /healthz` (the process answers) and `GET /readyz` (503 until ready).
pub fn health_router(readiness: Readiness) -> Router {
    Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(ready)).with_state(readiness)
}

async fn ready(State(readiness): State<Readiness>) -> (StatusCode, &'static str) {
    if readiness.get() { (StatusCode::OK, "ok") } else { (StatusCode::SERVICE_UNAVAILABLE, "not ready") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn spawn(router: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        format!("http://{addr}")
    }

    fn client() -> reqwest::Client {
        crate::install_crypto_provider();
        reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(5)).build().unwrap()
    }

    #[tokio::test]
    async fn metrics_are_served_with_their_content_type() {
        let metrics = Arc::new(Metrics::new());
        metrics.reconciled("clusterstack", Duration::from_millis(3));
        let base = spawn(metrics_router(metrics.clone())).await;
        let resp = client().get(format!("{base}/metrics")).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()[reqwest::header::CONTENT_TYPE], CONTENT_TYPE);
        let body = resp.text().await.unwrap();
        assert!(body.contains("clusterstack_reconciles_total{controller=\"clusterstack\"} 1"), "{body}");
        let resp = client().get(format!("{base}/healthz")).send().await.unwrap();
        assert_eq!(resp.status(), 404, "probes are on the other address");
    }

    #[tokio::test]
    async fn readiness_follows_the_flag_and_health_is_always_ok() {
        let readiness = Readiness::default();
        let base = spawn(health_router(readiness.clone())).await;
        let c = client();
        assert_eq!(c.get(format!("{base}/healthz")).send().await.unwrap().status(), 200);
        assert_eq!(c.get(format!("{base}/readyz")).send().await.unwrap().status(), 503);
        readiness.set(true);
        assert_eq!(c.get(format!("{base}/readyz")).send().await.unwrap().status(), 200);
        readiness.set(false);
        assert_eq!(c.get(format!("{base}/readyz")).send().await.unwrap().status(), 503);
    }
}
