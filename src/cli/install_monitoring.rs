//! The monitoring objects of `clusterstack install --export --monitoring`: a Prometheus Operator
//! `ServiceMonitor` scraping the operator's metrics Service, and a `PrometheusRule` with the
//! operator's alerts.
//!
//! The alerts live in one file, `charts/clusterstack/files/prometheus-rules.yaml`, which the
//! Helm chart embeds too and `tests/monitoring.rs` checks and unit-tests with the real
//! `promtool`: the CLI, the chart and the tests cannot disagree about them.

use serde_json::{Value, json};

/// The rule groups (the `spec` of the PrometheusRule), as the chart ships them.
pub const RULES_YAML: &str = include_str!("../../charts/clusterstack/files/prometheus-rules.yaml");

/// The label that tells the metrics Service from the hooks Service (both select the pods).
pub const METRICS_SERVICE_LABEL: (&str, &str) = ("clusterstack.x-k8s.io/metrics", "true");

/// How often Prometheus scrapes the operator.
const SCRAPE_INTERVAL: &str = "30s";

/// The ServiceMonitor: the metrics Service of `namespace`, port `metrics`, path `/metrics`.
pub fn service_monitor(namespace: &str, name: &str, labels: &Value) -> Value {
    json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {METRICS_SERVICE_LABEL.0: METRICS_SERVICE_LABEL.1}},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [{"port": "metrics", "path": "/metrics", "interval": SCRAPE_INTERVAL}]
        }
    })
}

/// The PrometheusRule holding [`RULES_YAML`].
pub fn prometheus_rule(namespace: &str, name: &str, labels: &Value) -> Result<Value, serde_saphyr::Error> {
    let spec: Value = serde_saphyr::from_str(RULES_YAML)?;
    Ok(json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_file_holds_the_five_alerts() {
        let rule = prometheus_rule("ns", "n", &json!({})).unwrap();
        let alerts: Vec<&str> = rule["spec"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["alert"].as_str().unwrap())
            .collect();
        assert_eq!(
            alerts,
            [
                "ClusterStackReleaseNotReady",
                "ClusterStackReconcileFailuresRising",
                "ClusterStackGitHubRateLimitLow",
                "ClusterStackAddonStageStuck",
                "ClusterStackRolloutHalted"
            ]
        );
        assert_eq!(rule["spec"]["groups"][0]["rules"][0]["for"], "15m");
    }

    fn install(extra: &[&str]) -> Vec<Value> {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrap {
            #[command(flatten)]
            args: super::super::install::InstallArgs,
        }
        let argv = [&["install", "--export"][..], extra].concat();
        let args = Wrap::try_parse_from(argv).unwrap().args;
        serde_saphyr::from_multiple(&super::super::install::manifests(&args).unwrap()).unwrap()
    }

    #[test]
    fn the_service_monitor_selects_the_metrics_service_only_and_only_with_monitoring() {
        let plain = install(&[]);
        assert!(!plain.iter().any(|d| d["apiVersion"] == "monitoring.coreos.com/v1"));
        let docs = install(&["--monitoring", "--namespace", "ops"]);
        let of = |kind: &str| docs.iter().filter(|d| d["kind"] == kind).collect::<Vec<_>>();
        let monitor = of("ServiceMonitor")[0];
        assert_eq!(monitor["metadata"]["namespace"], "ops");
        assert_eq!(of("PrometheusRule")[0]["metadata"]["namespace"], "ops");
        let selects = |svc: &Value| {
            monitor["spec"]["selector"]["matchLabels"]
                .as_object()
                .unwrap()
                .iter()
                .all(|(k, v)| &svc["metadata"]["labels"][k] == v)
        };
        let selected: Vec<&str> =
            of("Service").into_iter().filter(|s| selects(s)).map(|s| s["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(selected, ["clusterstack-operator-metrics"]);
        // The endpoint's port is a port of that Service.
        let svc = of("Service").into_iter().find(|s| selects(s)).unwrap();
        assert_eq!(svc["spec"]["ports"][0]["name"], monitor["spec"]["endpoints"][0]["port"]);
    }
}
