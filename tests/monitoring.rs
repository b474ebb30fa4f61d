//! What `install --export --monitoring` and the chart ship for Prometheus, checked for real:
//!
//! - the alerting rules (`charts/clusterstack/files/prometheus-rules.yaml`) pass the real
//!   `promtool check rules`, and `promtool test rules` runs `tests/monitoring/alerts_test.yaml`,
//!   where each alert is shown firing and staying silent;
//! - every metric name the rules and the Grafana dashboard (`docs/grafana-dashboard.json`) use is
//!   one the running operator serves on `/metrics` (started in-process against the API server
//!   double and scraped over HTTP).
//!
//! promtool comes from Debian's `prometheus` package, which `.ci/run` unpacks (pinned,
//! sha256-checked) and names in `CLUSTERSTACK_PROMTOOL`. Without it a local run prints a loud
//! SKIPPED line; with `CI=true` a missing promtool fails.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use clusterstack::controller::context::Settings;
use clusterstack::controller::run::RunOptions;
use clusterstack::source::SourceSpec;
use clusterstack::source::github::GitHubConfig;
use serde_json::{Value, json};
use support::github::{FakeAsset, FakeGitHub, FakeRelease};
use support::operator::{Operator, capi_server};

const INSTALL_HINT: &str = "run `.ci/run` (it unpacks Debian's prometheus package into target/ci-tools) or set \
     CLUSTERSTACK_PROMTOOL to a promtool binary";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn rules_file() -> PathBuf {
    repo().join("charts/clusterstack/files/prometheus-rules.yaml")
}

/// `$CLUSTERSTACK_PROMTOOL`, else the one `.ci/run` unpacks under `target/ci-tools`.
fn promtool(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("CLUSTERSTACK_PROMTOOL")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| Some(repo().join("target/ci-tools/prometheus/usr/bin/promtool")))
        .filter(|p| p.is_file());
    match found {
        Some(p) => Some(p),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: promtool not found and CI=true; {INSTALL_HINT}")
        }
        None => {
            eprintln!("\n*** SKIPPED: {test}: promtool not found, {INSTALL_HINT} ***\n");
            None
        }
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run promtool");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

#[test]
fn the_rules_pass_promtool_check_rules() {
    let Some(promtool) = promtool("the_rules_pass_promtool_check_rules") else { return };
    let text = run(Command::new(&promtool).arg("check").arg("rules").arg(rules_file()));
    assert!(text.contains("SUCCESS: 5 rules found"), "{text}");
}

/// The alerts of the rule file.
fn alerts() -> BTreeSet<String> {
    let rules: Value = serde_saphyr::from_str(&std::fs::read_to_string(rules_file()).unwrap()).unwrap();
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn every_alert_has_unit_tests_firing_and_silent_and_they_pass() {
    let tests: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo().join("tests/monitoring/alerts_test.yaml")).unwrap())
            .unwrap();
    // Each alert is tested both ways: some eval time expects it, another expects nothing.
    let cases: Vec<&Value> =
        tests["tests"].as_array().unwrap().iter().flat_map(|t| t["alert_rule_test"].as_array().unwrap()).collect();
    for alert in alerts() {
        let of: Vec<&&Value> = cases.iter().filter(|c| c["alertname"] == alert.as_str()).collect();
        let fires = of.iter().any(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()));
        let silent = of.iter().any(|c| c["exp_alerts"].as_array().is_some_and(Vec::is_empty));
        assert!(fires && silent, "{alert}: needs a firing and a silent case in alerts_test.yaml");
    }

    let Some(promtool) = promtool("every_alert_has_unit_tests_firing_and_silent_and_they_pass") else { return };
    // The test file names the rule file by a relative path: run both from one directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(rules_file(), dir.path().join("prometheus-rules.yaml")).unwrap();
    std::fs::copy(repo().join("tests/monitoring/alerts_test.yaml"), dir.path().join("alerts_test.yaml")).unwrap();
    let text = run(Command::new(&promtool).current_dir(dir.path()).args(["test", "rules", "alerts_test.yaml"]));
    assert!(text.contains("SUCCESS"), "{text}");
}

/// The `clusterstack_*` metric names in a PromQL text.
fn metric_names(promql: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\bclusterstack_[a-z0-9_]+").unwrap();
    re.find_iter(promql).map(|m| m.as_str().to_string()).collect()
}

fn rule_metric_names() -> BTreeSet<String> {
    let rules: Value = serde_saphyr::from_str(&std::fs::read_to_string(rules_file()).unwrap()).unwrap();
    let mut names = BTreeSet::new();
    for group in rules["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            names.extend(metric_names(rule["expr"].as_str().unwrap()));
        }
    }
    names
}

/// Every `expr` of the dashboard's panels (and templating queries).
fn dashboard_metric_names() -> BTreeSet<String> {
    fn walk(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if (k == "expr" || k == "query")
                        && let Some(s) = v.as_str().or_else(|| v["query"].as_str())
                    {
                        out.extend(metric_names(s));
                    }
                    walk(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let text = std::fs::read_to_string(repo().join("docs/grafana-dashboard.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut names = BTreeSet::new();
    walk(&dashboard, &mut names);
    names
}

/// The series names of an exposition (families without a series are not printed at all).
fn served_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect()
}

fn free_port() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

/// Publishes the repository's built release `tag` on the fake GitHub as `acme/stacks`.
fn publish(fake: &FakeGitHub, tag: &str) {
    let mut release = FakeRelease::new(tag);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(repo().join("releases").join(tag)).unwrap().map(|f| f.unwrap().path()).collect();
    files.sort();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        release = release.asset(FakeAsset::new(&name, std::fs::read(&f).unwrap()));
    }
    fake.add_release("acme", "stacks", release);
}

/// Scrapes `/metrics` until `done` holds (60 s at most).
async fn scrape_until(addr: std::net::SocketAddr, what: &str, done: impl Fn(&str) -> bool) -> String {
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let text = match client.get(format!("http://{addr}/metrics")).send().await {
            Ok(resp) => resp.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if done(&text) {
            return text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: not on /metrics after 60 s:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Metrics the scenario below cannot produce, set through the running operator's own registry
/// (the one `/metrics` serves), so that their names are still checked against what the
/// operator exports: the addon stage gauge needs a workload cluster mid-stage (its wiring is
/// tested in tests/cluster_addons.rs), the rollout gauges come from the rollout controller.
fn set_what_the_scenario_cannot(metrics: &clusterstack::controller::metrics::Metrics) {
    metrics.addon_stage("stacks", "c1", Some(("cni", 1_700_000_000)));
    metrics.rollout("stacks/ferrol", false, &[("Healthy", 1)]);
}

#[tokio::test]
async fn every_metric_the_rules_and_the_dashboard_use_is_served_by_the_operator() {
    let rules = rule_metric_names();
    let dashboard = dashboard_metric_names();
    assert!(rules.len() >= 6, "{rules:?}");
    assert!(dashboard.len() >= 8, "{dashboard:?}");

    // The operator on the fake GitHub: a release that installs, then one whose downloads break
    // (a reconcile failure), so the GitHub, readiness and failure series are real.
    let server = capi_server(&["stacks"]).await;
    let cache = tempfile::tempdir().unwrap();
    let fake = FakeGitHub::start().await;
    publish(&fake, "docker-ferrol-1-27-v1");
    let mut settings = Settings::new(SourceSpec::github("acme", "stacks"), cache.path());
    settings.github = GitHubConfig { api_url: fake.api_url(), token: None, include_prereleases: false };
    settings.poll_interval = Duration::from_secs(1);
    settings.backoff.base = Duration::from_millis(100);
    settings.backoff.cap = Duration::from_secs(1);
    let addr = free_port();
    let options = RunOptions { metrics_addr: Some(addr), ..RunOptions::default() };
    let op = Operator::start_with(&server, settings, options);
    server.put_object(json!({
        "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStack",
        "metadata": {"name": "ferrol", "namespace": "stacks"},
        "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27",
                 "channel": "stable", "versions": ["v1", "v2"], "autoSubscribe": false, "pollInterval": "1s"}
    }));
    scrape_until(addr, "v1 ready", |t| {
        t.contains(r#"clusterstack_release_ready{namespace="stacks",release="docker-ferrol-1-27-v1"} 1"#)
    })
    .await;
    fake.truncate_downloads(true);
    publish(&fake, "docker-ferrol-1-27-v2");
    set_what_the_scenario_cannot(&op.metrics);
    let text = scrape_until(addr, "a failed download", |t| {
        t.contains("clusterstack_reconcile_failures_total{") && t.contains("clusterstack_github_rate_limit_limit{")
    })
    .await;
    op.stop().await;

    let served = served_names(&text);
    for (what, names) in [("the rules", &rules), ("the dashboard", &dashboard)] {
        let missing: Vec<&String> = names.iter().filter(|n| !served.contains(*n)).collect();
        assert!(missing.is_empty(), "{what} use metrics /metrics does not serve: {missing:?}\n{text}");
    }
}
