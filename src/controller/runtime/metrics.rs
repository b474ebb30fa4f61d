//! The Prometheus metrics served on `/metrics`.
//!
//! kube-runtime counts nothing itself, so the controllers, the GitHub source
//! and the cache report here. Label values are bounded: controller names,
//! reasons (our constants), HTTP status codes, release names.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels naming a controller (`clusterstack`, `clusterstackrelease`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

/// Labels of a failed reconcile.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub controller: String,
    pub reason: String,
}

/// Labels of a GitHub request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// HTTP status code, or `error` when no answer came.
    pub status: String,
}

/// Labels of a source (`github:owner/repo`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub source: String,
}

/// Labels of a release's applied objects.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppliedLabels {
    pub namespace: String,
    pub release: String,
    /// `synced` or `not-synced`.
    pub status: String,
}

/// Labels of a release (its readiness).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReleaseLabels {
    pub namespace: String,
    pub release: String,
}

/// Labels of the addon stage a Cluster's ClusterAddon waits in.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    pub namespace: String,
    pub cluster: String,
    pub stage: String,
}

/// Labels of a rollout (`namespace/name`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutLabels {
    pub rollout: String,
}

/// Labels of a rollout's Clusters in one state (`Pending`, `Moving`, `Healthy`, `Failed`...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutStateLabels {
    pub rollout: String,
    pub state: String,
}

fn duration_histogram() -> Histogram {
    // 5 ms .. ~82 s: a reconcile is quick unless it waits on the API server.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.005, 2.0, 15))
}

/// Labels of a Runtime SDK hook call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HookLabels {
    /// The hook (`BeforeClusterUpgrade`), as CAPI names it.
    pub hook: String,
    /// `Success` (with `retry` when it asked CAPI to wait) or `Failure`.
    pub status: String,
}

/// Every metric of the operator, registered under the prefix `clusterstack`.
pub struct Metrics {
    hook_calls: Family<HookLabels, Counter>,
    registry: Registry,
    reconciles: Family<ControllerLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    duration: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    github_requests: Family<RequestLabels, Counter>,
    github_not_modified: Counter,
    rate_limit_remaining: Family<SourceLabels, Gauge>,
    rate_limit_limit: Family<SourceLabels, Gauge>,
    cache_bytes: Gauge,
    applied_objects: Family<AppliedLabels, Gauge>,
    release_ready: Family<ReleaseLabels, Gauge>,
    stage_started: Family<StageLabels, Gauge>,
    /// The stage each Cluster's series is labelled with (one series per Cluster at most).
    stage_of: std::sync::Mutex<std::collections::BTreeMap<(String, String), String>>,
    rollout_clusters: Family<RolloutStateLabels, Gauge>,
    rollout_halted: Family<RolloutLabels, Gauge>,
    /// The GitHub client's cumulative counts already added to the counters.
    github_seen: std::sync::Mutex<(std::collections::BTreeMap<String, u64>, u64)>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with every metric registered.
    pub fn new() -> Self {
        let mut root = Registry::with_prefix("clusterstack");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let failures = Family::<FailureLabels, Counter>::default();
        let duration = Family::<ControllerLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        let github_requests = Family::<RequestLabels, Counter>::default();
        let github_not_modified = Counter::default();
        let rate_limit_remaining = Family::<SourceLabels, Gauge>::default();
        let rate_limit_limit = Family::<SourceLabels, Gauge>::default();
        let cache_bytes = Gauge::default();
        let applied_objects = Family::<AppliedLabels, Gauge>::default();
        root.register("reconciles", "Reconcile passes, by controller", reconciles.clone());
        root.register("reconcile_failures", "Failed reconcile passes, by controller and reason", failures.clone());
        root.register("reconcile_duration_seconds", "Duration of reconcile passes, by controller", duration.clone());
        root.register("github_requests", "Requests sent to GitHub, by HTTP status", github_requests.clone());
        root.register(
            "github_not_modified",
            "GitHub answers 304 Not Modified to conditional requests (free of rate limit)",
            github_not_modified.clone(),
        );
        root.register(
            "github_rate_limit_remaining",
            "Requests left in the current GitHub rate-limit window, by source",
            rate_limit_remaining.clone(),
        );
        root.register(
            "github_rate_limit_limit",
            "Requests allowed per GitHub rate-limit window (60 without a token), by source",
            rate_limit_limit.clone(),
        );
        root.register("cache_bytes", "Bytes of verified releases in the cache", cache_bytes.clone());
        root.register("applied_objects", "Objects applied by a release, by sync status", applied_objects.clone());
        // The alerts of `install --export --monitoring` read the three below (see
        // `src/cli/monitoring/`): a gauge per object, so an alert names the object.
        let release_ready = Family::<ReleaseLabels, Gauge>::default();
        root.register("release_ready", "1 when a ClusterStackRelease is ready, else 0", release_ready.clone());
        let stage_started = Family::<StageLabels, Gauge>::default();
        root.register(
            "addon_stage_started_timestamp_seconds",
            "When the addon stage a ClusterAddon waits in started waiting (Unix seconds); absent when none waits",
            stage_started.clone(),
        );
        let rollout_clusters = Family::<RolloutStateLabels, Gauge>::default();
        root.register("rollout_clusters", "Clusters of a rollout, by state", rollout_clusters.clone());
        let rollout_halted = Family::<RolloutLabels, Gauge>::default();
        root.register("rollout_halted", "1 while a rollout is halted, else 0", rollout_halted.clone());
        let hook_calls = Family::<HookLabels, Counter>::default();
        root.register(
            "hook_calls",
            "Runtime SDK hook calls from Cluster API, by hook and answer (Success, Retry, Failure)",
            hook_calls.clone(),
        );
        Self {
            hook_calls,
            registry: root,
            reconciles,
            failures,
            duration,
            github_requests,
            github_not_modified,
            rate_limit_remaining,
            rate_limit_limit,
            cache_bytes,
            applied_objects,
            release_ready,
            stage_started,
            stage_of: std::sync::Mutex::default(),
            rollout_clusters,
            rollout_halted,
            github_seen: std::sync::Mutex::default(),
        }
    }

    /// Counts a Runtime SDK hook call and its answer.
    pub fn hook_called(&self, hook: &str, status: &str) {
        self.hook_calls.get_or_create(&HookLabels { hook: hook.into(), status: status.into() }).inc();
    }

    /// Brings the GitHub counters up to the client's cumulative `stats` (adds what is new since the
    /// last call) and sets the remaining rate limit.
    pub fn set_github_stats(&self, stats: &crate::source::github::GitHubStats) {
        let mut seen = crate::util::lock(&self.github_seen);
        let mut counts: Vec<(String, u64)> =
            stats.requests_by_status.iter().map(|(s, n)| (s.to_string(), *n)).collect();
        counts.push(("error".to_string(), stats.transport_errors));
        for (status, total) in counts {
            let before = seen.0.insert(status.clone(), total).unwrap_or(0);
            if total > before {
                self.github_requests.get_or_create(&RequestLabels { status }).inc_by(total - before);
            }
        }
        if stats.not_modified > seen.1 {
            self.github_not_modified.inc_by(stats.not_modified - seen.1);
            seen.1 = stats.not_modified;
        }
        if let Some(remaining) = stats.rate_limit_remaining {
            self.rate_limit_remaining("github", remaining);
        }
        if let Some(limit) = stats.rate_limit_limit {
            let v = i64::try_from(limit).unwrap_or(i64::MAX);
            self.rate_limit_limit.get_or_create(&SourceLabels { source: "github".into() }).set(v);
        }
    }

    /// Counts one reconcile pass of `controller` and records its duration.
    pub fn reconciled(&self, controller: &str, took: Duration) {
        let labels = ControllerLabels { controller: controller.to_string() };
        self.reconciles.get_or_create(&labels).inc();
        self.duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// Counts one failed pass of `controller`, by a bounded `reason` (a condition reason).
    pub fn failed(&self, controller: &str, reason: &str) {
        self.failures.get_or_create(&FailureLabels { controller: controller.into(), reason: reason.into() }).inc();
    }

    /// Counts one GitHub answer with this HTTP status (`None`: no answer).
    pub fn github_request(&self, status: Option<u16>) {
        let status = status.map_or_else(|| "error".to_string(), |s| s.to_string());
        if status == "304" {
            self.github_not_modified.inc();
        }
        self.github_requests.get_or_create(&RequestLabels { status }).inc();
    }

    /// Sets the remaining GitHub rate limit of a source.
    pub fn rate_limit_remaining(&self, source: &str, remaining: u64) {
        let v = i64::try_from(remaining).unwrap_or(i64::MAX);
        self.rate_limit_remaining.get_or_create(&SourceLabels { source: source.into() }).set(v);
    }

    /// Sets the size of the release cache.
    pub fn cache_bytes(&self, bytes: u64) {
        self.cache_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Sets the number of synced and not-synced objects of a release.
    pub fn applied_objects(&self, namespace: &str, release: &str, synced: u64, not_synced: u64) {
        for (status, n) in [("synced", synced), ("not-synced", not_synced)] {
            let labels = AppliedLabels { namespace: namespace.into(), release: release.into(), status: status.into() };
            self.applied_objects.get_or_create(&labels).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Drops the series of a deleted release.
    pub fn forget_release(&self, namespace: &str, release: &str) {
        for status in ["synced", "not-synced"] {
            let labels = AppliedLabels { namespace: namespace.into(), release: release.into(), status: status.into() };
            self.applied_objects.remove(&labels);
        }
        self.release_ready.remove(&ReleaseLabels { namespace: namespace.into(), release: release.into() });
    }

    /// Sets whether a release is ready.
    pub fn release_ready(&self, namespace: &str, release: &str, ready: bool) {
        let labels = ReleaseLabels { namespace: namespace.into(), release: release.into() };
        self.release_ready.get_or_create(&labels).set(i64::from(ready));
    }

    /// Sets the addon stage a Cluster's ClusterAddon waits in and since when (Unix seconds);
    /// `None` removes the Cluster's series (no stage waits, or the Cluster is gone).
    pub fn addon_stage(&self, namespace: &str, cluster: &str, waiting: Option<(&str, i64)>) {
        let mut stage_of = self.stage_of.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (namespace.to_string(), cluster.to_string());
        let labels = |stage: String| StageLabels { namespace: namespace.into(), cluster: cluster.into(), stage };
        match waiting {
            Some((stage, since)) => {
                if let Some(old) = stage_of.insert(key, stage.to_string())
                    && old != stage
                {
                    self.stage_started.remove(&labels(old));
                }
                self.stage_started.get_or_create(&labels(stage.into())).set(since);
            }
            None => {
                if let Some(old) = stage_of.remove(&key) {
                    self.stage_started.remove(&labels(old));
                }
            }
        }
    }

    /// Sets a rollout's Cluster counts by state and whether it is halted.
    pub fn rollout(&self, rollout: &str, halted: bool, clusters_by_state: &[(&str, u64)]) {
        for (state, n) in clusters_by_state {
            let labels = RolloutStateLabels { rollout: rollout.into(), state: (*state).into() };
            self.rollout_clusters.get_or_create(&labels).set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        self.rollout_halted.get_or_create(&RolloutLabels { rollout: rollout.into() }).set(i64::from(halted));
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn reconciles_failures_and_durations_are_counted() {
        let m = Metrics::new();
        m.reconciled("clusterstack", Duration::from_millis(20));
        m.reconciled("clusterstack", Duration::from_millis(30));
        m.reconciled("clusterstackrelease", Duration::from_millis(1));
        m.failed("clusterstack", "SourceUnavailable");
        let text = m.encode().unwrap();
        assert_eq!(
            line(&text, "clusterstack_reconciles_total{controller=\"clusterstack\"}"),
            Some("clusterstack_reconciles_total{controller=\"clusterstack\"} 2")
        );
        assert!(text.contains("clusterstack_reconciles_total{controller=\"clusterstackrelease\"} 1"));
        assert!(text.contains(
            "clusterstack_reconcile_failures_total{controller=\"clusterstack\",reason=\"SourceUnavailable\"} 1"
        ));
        assert!(text.contains("clusterstack_reconcile_duration_seconds_count{controller=\"clusterstack\"} 2"));
        let sum = line(&text, "clusterstack_reconcile_duration_seconds_sum{controller=\"clusterstack\"}").unwrap();
        let value: f64 = sum.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((value - 0.05).abs() < 1e-9, "{sum}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn github_requests_by_status_and_304_hits() {
        let m = Metrics::new();
        m.github_request(Some(200));
        m.github_request(Some(304));
        m.github_request(Some(304));
        m.github_request(None);
        m.rate_limit_remaining("github:o/r", 4999);
        let text = m.encode().unwrap();
        assert!(text.contains("clusterstack_github_requests_total{status=\"200\"} 1"));
        assert!(text.contains("clusterstack_github_requests_total{status=\"304\"} 2"));
        assert!(text.contains("clusterstack_github_requests_total{status=\"error\"} 1"));
        assert!(text.contains("clusterstack_github_not_modified_total 2"));
        assert!(text.contains("clusterstack_github_rate_limit_remaining{source=\"github:o/r\"} 4999"));
    }

    #[test]
    fn gauges_are_set_and_forgotten() {
        let m = Metrics::new();
        m.cache_bytes(123_456);
        m.applied_objects("stacks", "docker-ferrol-1-27-v2", 5, 1);
        m.applied_objects("stacks", "docker-ferrol-1-27-v2", 6, 0);
        let text = m.encode().unwrap();
        assert!(text.contains("clusterstack_cache_bytes 123456"));
        assert!(text.contains(
            "clusterstack_applied_objects{namespace=\"stacks\",release=\"docker-ferrol-1-27-v2\",status=\"synced\"} 6"
        ));
        assert!(text.contains(
            "clusterstack_applied_objects{namespace=\"stacks\",release=\"docker-ferrol-1-27-v2\",status=\"not-synced\"} 0"
        ));
        m.release_ready("stacks", "docker-ferrol-1-27-v2", true);
        assert!(
            m.encode()
                .unwrap()
                .contains("clusterstack_release_ready{namespace=\"stacks\",release=\"docker-ferrol-1-27-v2\"} 1")
        );
        m.forget_release("stacks", "docker-ferrol-1-27-v2");
        assert!(!m.encode().unwrap().contains("release=\"docker-ferrol-1-27-v2\""));
    }

    #[test]
    fn one_stage_series_per_cluster_follows_the_waiting_stage() {
        let m = Metrics::new();
        m.addon_stage("ns", "c1", Some(("cni", 100)));
        m.addon_stage("ns", "c1", Some(("csi", 200)));
        let text = m.encode().unwrap();
        assert!(!text.contains("stage=\"cni\""), "{text}");
        assert!(text.contains(
            "clusterstack_addon_stage_started_timestamp_seconds{namespace=\"ns\",cluster=\"c1\",stage=\"csi\"} 200"
        ));
        m.addon_stage("ns", "c1", None);
        assert!(!m.encode().unwrap().contains("cluster=\"c1\""));
    }

    #[test]
    fn rollouts_report_clusters_by_state_and_halt() {
        let m = Metrics::new();
        m.rollout("ns/r", true, &[("Failed", 2), ("Healthy", 3)]);
        let text = m.encode().unwrap();
        assert!(text.contains("clusterstack_rollout_clusters{rollout=\"ns/r\",state=\"Failed\"} 2"));
        assert!(text.contains("clusterstack_rollout_halted{rollout=\"ns/r\"} 1"));
    }
}
