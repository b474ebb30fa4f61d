//! ClusterStackRollout end to end: the whole operator in-process against the API server double
//! and the repository's `releases/` (v1 and v2 name Kubernetes v1.27.3, v3 v1.27.11), with the
//! stand-in topology controller of `tests/support/topology.rs` reacting to every move.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clusterstack::controller::runtime::context::Settings;
use clusterstack::source::SourceSpec;
use serde_json::{Value, json};
use support::ApiServer;
use support::RequestMatch;
use support::operator::{Operator, POLL};
use support::topology::{FAIL_LABEL, Seen, Topology};

const NS: &str = "stacks";
const TEAM: &str = "team";
const CC: &str = "cluster.x-k8s.io/v1beta1";
const CS: &str = "clusterstack.x-k8s.io/v1alpha1";
const WAIT: Duration = Duration::from_secs(180);
/// How long the stand-in takes to settle a moved Cluster.
const SETTLE: Duration = Duration::from_millis(300);

fn releases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("releases")
}

fn settings(cache: &Path) -> Settings {
    let mut s = Settings::new(SourceSpec::dir(releases_dir()), cache);
    s.poll_interval = POLL;
    s.resync_interval = Duration::from_secs(3600);
    s.backoff.base = Duration::from_millis(100);
    s.backoff.cap = Duration::from_secs(1);
    s
}

/// A server with a stack pinning `versions`, the operator, and the releases ready.
async fn setup(versions: &[&str], cache: &Path) -> (ApiServer, Operator) {
    let server = support::operator::capi_server(&[NS, TEAM]).await;
    let op = Operator::start(&server, settings(cache));
    server.put_object(json!({
        "apiVersion": CS, "kind": "ClusterStack",
        "metadata": {"name": "ferrol", "namespace": NS},
        "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27", "channel": "stable",
                 "versions": versions, "autoSubscribe": false, "pollInterval": "1s"}
    }));
    for v in versions {
        let tag = format!("docker-ferrol-1-27-{v}");
        wait_for(&format!("{tag} ready"), || {
            server.get_object(CS, "ClusterStackRelease", Some(NS), &tag).is_some_and(|r| r["status"]["ready"] == true)
        })
        .await;
    }
    (server, op)
}

fn cluster(name: &str, version: u32, k8s: &str, labels: Value) -> Value {
    json!({
        "apiVersion": CC, "kind": "Cluster",
        "metadata": {"name": name, "namespace": TEAM, "labels": labels},
        "spec": {"topology": {"class": format!("docker-ferrol-1-27-v{version}"), "classNamespace": NS, "version": k8s}},
        "status": {"observedGeneration": 1, "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "TopologyReconciled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    })
}

fn rollout(spec: Value) -> Value {
    let mut spec = spec;
    spec["clusterStackRef"] = json!({"name": "ferrol"});
    json!({"apiVersion": CS, "kind": "ClusterStackRollout", "metadata": {"name": "ferrol", "namespace": NS}, "spec": spec})
}

fn status(server: &ApiServer) -> Value {
    server.get_object(CS, "ClusterStackRollout", Some(NS), "ferrol").map(|r| r["status"].clone()).unwrap_or(Value::Null)
}

fn states(server: &ApiServer) -> BTreeMap<String, String> {
    status(server)["clusters"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| (e["name"].as_str().unwrap().to_string(), e["state"].as_str().unwrap().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

fn phase(server: &ApiServer) -> String {
    status(server)["phase"].as_str().unwrap_or_default().to_string()
}

async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The moves in the API server's write log: `(cluster, class)` of each apply by the rollout's
/// field manager, in order.
fn moves(server: &ApiServer) -> Vec<(String, String)> {
    server
        .requests()
        .iter()
        .filter(|r| {
            r.verb == "patch"
                && r.resource == "clusters"
                && r.subresource.is_empty()
                && r.query.get("fieldManager").map(String::as_str) == Some("clusterstack-rollout")
                && r.status < 300
        })
        .map(|r| {
            let class =
                r.body.as_ref().map(|b| b["spec"]["topology"]["class"].as_str().unwrap_or_default().to_string());
            (r.name.clone(), class.unwrap_or_default())
        })
        .collect()
}

fn class_of(server: &ApiServer, name: &str) -> String {
    server.get_object(CC, "Cluster", Some(TEAM), name).unwrap()["spec"]["topology"]["class"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The most Clusters between their move and their settling, from the stand-in's log.
fn most_moving(seen: &[(tokio::time::Instant, Seen)]) -> usize {
    let mut moving = BTreeSet::new();
    let mut most = 0;
    for (_, s) in seen {
        match s {
            Seen::Moved(c, _, _) => {
                moving.insert(c.clone());
            }
            Seen::Settled(c, _) => {
                moving.remove(c);
            }
        }
        most = most.max(moving.len());
    }
    most
}

fn labels(i: usize, canary: usize) -> Value {
    if i < canary { json!({"rollout": "canary"}) } else { json!({}) }
}

#[tokio::test]
async fn twenty_clusters_canary_then_waves_of_five_with_soak() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v1", "v2"], cache.path()).await;
    let topology = Topology::start(&server, SETTLE);
    for i in 0..20 {
        server.put_object(cluster(&format!("c{i:02}"), 1, "v1.27.3", labels(i, 1)));
    }
    let soak = Duration::from_millis(800);
    wait_for("every ClusterAddon", || server.list_objects(CS, "ClusterAddon").len() == 20).await;
    server.clear_requests();
    server.put_object(rollout(json!({"target": "v2", "soakTime": "800ms", "progressDeadline": "120s", "waves": [
        {"name": "canary", "clusterSelector": {"matchLabels": {"rollout": "canary"}}},
        {"name": "rest", "maxConcurrent": 5}]})));
    wait_for("Succeeded", || phase(&server) == "Succeeded").await;

    let st = status(&server);
    assert_eq!(st["target"], "docker-ferrol-1-27-v2");
    assert_eq!(st["healthy"], "20/20");
    assert_eq!(st["failed"], 0);
    let moves = moves(&server);
    assert_eq!(moves.len(), 20, "each Cluster moved exactly once: {moves:?}");
    assert_eq!(moves.iter().map(|(c, _)| c.clone()).collect::<BTreeSet<_>>().len(), 20);
    assert!(moves.iter().all(|(_, class)| class == "docker-ferrol-1-27-v2"));
    assert_eq!(moves[0].0, "c00", "the canary first");
    let seen = topology.seen();
    let most = most_moving(&seen);
    assert!((2..=5).contains(&most), "at most 5 moving at once, and more than one in the rest wave: {most}");
    // The soak: the first move after the canary comes at least soakTime after it settled.
    let canary_settled = seen.iter().find(|(_, s)| matches!(s, Seen::Settled(c, true) if c == "c00")).unwrap().0;
    let next_move = seen.iter().find(|(_, s)| matches!(s, Seen::Moved(c, _, _) if c != "c00")).unwrap().0;
    assert!(next_move.duration_since(canary_settled) >= soak, "soak not respected");
    // Each entry keeps its way back.
    let entry = &st["clusters"][3];
    assert_eq!(entry["from"]["class"], "docker-ferrol-1-27-v1");
    assert_eq!(entry["to"]["class"], "docker-ferrol-1-27-v2");
    assert!(entry["movedAt"].is_string() && entry["healthyAt"].is_string());
    // What the moves cost the other controllers: each Cluster's status changes twice per move
    // (TopologyReconciled False, then True with Ready); the ClusterAddon controller reads the
    // ClusterAddon only for the move itself, and the stack controller reads the rollouts'
    // holds from its store (a fresh list only before it would delete a release).
    let counts = server.counters();
    eprintln!("requests during the rollout: {counts:?}");
    let count = |verb: &str, resource: &str| server.count(&RequestMatch::any().verb(verb).resource(resource));
    assert!(count("get", "clusteraddons") <= 20, "ClusterAddon reads: {}", count("get", "clusteraddons"));
    assert_eq!(count("list", "clusterstackrollouts"), 0, "the stack controller listed rollouts");
    // Events and the metric.
    // (Events follow the status write.)
    wait_for("the Succeeded event", || {
        server.list_objects("events.k8s.io/v1", "Event").iter().any(|e| e["reason"] == "Succeeded")
    })
    .await;
    let events = server.list_objects("events.k8s.io/v1", "Event");
    assert!(events.iter().any(|e| e["reason"] == "Moving" && e["regarding"]["kind"] == "ClusterStackRollout"));
    wait_for("the metric", || {
        let text = op.metrics.encode().unwrap();
        text.contains(r#"clusterstack_rollout_clusters{rollout="stacks/ferrol",state="Healthy"} 20"#)
            && text.contains(r#"clusterstack_rollout_clusters{rollout="stacks/ferrol",state="Pending"} 0"#)
    })
    .await;
    op.stop().await;
}

#[tokio::test]
async fn a_failing_canary_halts_with_no_other_cluster_moved_and_is_rolled_back() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v1", "v2"], cache.path()).await;
    let _topology = Topology::start(&server, SETTLE);
    for i in 0..6 {
        let mut l = labels(i, 1);
        if i == 0 {
            l[FAIL_LABEL] = json!("true");
        }
        server.put_object(cluster(&format!("c{i:02}"), 1, "v1.27.3", l));
    }
    server.put_object(rollout(json!({"target": "v2", "progressDeadline": "8s", "waves": [
        {"name": "canary", "clusterSelector": {"matchLabels": {"rollout": "canary"}}},
        {"name": "rest", "maxConcurrent": 5}]})));
    wait_for("Halted", || phase(&server) == "Halted").await;
    wait_for("c00 back on v1", || class_of(&server, "c00") == "docker-ferrol-1-27-v1").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let st = status(&server);
    assert_eq!(st["failedTargets"], json!(["docker-ferrol-1-27-v2"]));
    assert_eq!(states(&server)["c00"], "RolledBack");
    let moves = moves(&server);
    assert_eq!(
        moves,
        [("c00".into(), "docker-ferrol-1-27-v2".into()), ("c00".into(), "docker-ferrol-1-27-v1".into())],
        "no other Cluster moved"
    );
    let halted = st["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Halted").unwrap();
    assert_eq!(halted["status"], "True");
    assert!(halted["message"].as_str().unwrap().contains("team/c00"), "{halted}");
    // v1, the way back, stays although no Cluster... (c00 uses it again anyway); the stack keeps it.
    assert!(server.get_object(CS, "ClusterStackRelease", Some(NS), "docker-ferrol-1-27-v1").is_some());
    op.stop().await;
}

#[tokio::test]
async fn a_failure_in_the_third_wave_rolls_back_that_wave_only() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v1", "v2"], cache.path()).await;
    let _topology = Topology::start(&server, SETTLE);
    for i in 0..9 {
        let mut l = json!({"batch": format!("b{}", i / 3)});
        if i == 7 {
            l[FAIL_LABEL] = json!("true");
        }
        server.put_object(cluster(&format!("c{i}"), 1, "v1.27.3", l));
    }
    let wave = |n: &str| json!({"name": n, "clusterSelector": {"matchLabels": {"batch": n}}, "maxConcurrent": 3});
    server.put_object(rollout(
        json!({"target": "v2", "progressDeadline": "8s", "waves": [wave("b0"), wave("b1"), wave("b2")]}),
    ));
    wait_for("Halted", || phase(&server) == "Halted").await;
    wait_for("third wave back on v1", || {
        (6..9).all(|i| class_of(&server, &format!("c{i}")) == "docker-ferrol-1-27-v1")
    })
    .await;
    let s = states(&server);
    for i in 0..6 {
        assert_eq!(s[&format!("c{i}")], "Healthy", "c{i} of an earlier wave stays");
        assert_eq!(class_of(&server, &format!("c{i}")), "docker-ferrol-1-27-v2");
    }
    for i in 6..9 {
        assert_eq!(s[&format!("c{i}")], "RolledBack");
    }
    assert_eq!(status(&server)["currentWave"], "b2");
    op.stop().await;
}

#[tokio::test]
async fn a_raised_kubernetes_version_is_not_rolled_back() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v2", "v3"], cache.path()).await;
    let _topology = Topology::start(&server, SETTLE);
    server.put_object(cluster("c0", 2, "v1.27.3", json!({FAIL_LABEL: "true"})));
    server.put_object(rollout(json!({"target": "v3", "progressDeadline": "8s"})));
    wait_for("Halted", || phase(&server) == "Halted").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = server.get_object(CC, "Cluster", Some(TEAM), "c0").unwrap();
    assert_eq!(c["spec"]["topology"]["class"], "docker-ferrol-1-27-v3");
    assert_eq!(c["spec"]["topology"]["version"], "v1.27.11", "the move set the release's Kubernetes version");
    let entry = &status(&server)["clusters"][0];
    assert_eq!(entry["state"], "Failed");
    assert_eq!(entry["message"], "rollback impossible: Kubernetes version was raised from v1.27.3 to v1.27.11");
    assert_eq!(moves(&server).len(), 1);
    // Only class and version are ours.
    let managed = c["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    let ours = managed.iter().find(|m| m["manager"] == "clusterstack-rollout").expect("our field manager");
    assert_eq!(ours["fieldsV1"], json!({"f:spec": {"f:topology": {"f:class": {}, "f:version": {}}}}), "{ours:#}");
    op.stop().await;
}

#[tokio::test]
async fn killing_the_operator_mid_wave_moves_no_cluster_twice() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v1", "v2"], cache.path()).await;
    let _topology = Topology::start(&server, Duration::from_millis(600));
    for i in 0..10 {
        server.put_object(cluster(&format!("c{i}"), 1, "v1.27.3", json!({})));
    }
    server.put_object(rollout(
        json!({"target": "v2", "progressDeadline": "120s", "waves": [{"name": "all", "maxConcurrent": 3}]}),
    ));
    wait_for("some moved", || moves(&server).len() >= 4).await;
    op.kill().await;
    let op = Operator::start(&server, settings(cache.path()));
    wait_for("Succeeded", || phase(&server) == "Succeeded").await;
    let moves = moves(&server);
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    for (c, _) in &moves {
        *per.entry(c.clone()).or_default() += 1;
    }
    assert_eq!(per.len(), 10);
    assert!(per.values().all(|n| *n == 1), "a Cluster moved twice: {per:?}");
    op.stop().await;
}

#[tokio::test]
async fn a_closed_window_or_pause_moves_nothing_and_unpausing_goes_on() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v1", "v2"], cache.path()).await;
    let _topology = Topology::start(&server, SETTLE);
    server.put_object(cluster("c0", 1, "v1.27.3", json!({})));
    // A window of one minute, twelve hours from now: closed.
    let start = jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_hours(12)).unwrap();
    let hhmm = start.strftime("%H:%M").to_string();
    server.put_object(rollout(json!({"target": "v2", "maintenanceWindows": [{"start": hhmm, "duration": "1m"}]})));
    wait_for("Waiting", || phase(&server) == "Waiting").await;
    let ready =
        status(&server)["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").cloned().unwrap();
    assert_eq!(ready["reason"], "MaintenanceWindowClosed");
    // Paused instead: still nothing.
    server.edit_object(CS, "ClusterStackRollout", Some(NS), "ferrol", |r| {
        r["spec"]["maintenanceWindows"] = json!([]);
        r["spec"]["paused"] = json!(true);
    });
    wait_for("Paused", || phase(&server) == "Paused").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(moves(&server).is_empty(), "nothing moves while closed or paused");
    server.edit_object(CS, "ClusterStackRollout", Some(NS), "ferrol", |r| r["spec"]["paused"] = json!(false));
    wait_for("Succeeded", || phase(&server) == "Succeeded").await;
    assert_eq!(moves(&server).len(), 1);
    op.stop().await;
}

#[tokio::test]
async fn incompatible_variables_are_reported_and_the_others_move() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v1", "v2"], cache.path()).await;
    let _topology = Topology::start(&server, SETTLE);
    server.edit_object(CC, "ClusterClass", Some(NS), "docker-ferrol-1-27-v2", |c| {
        c["spec"]["variables"] = json!([{"name": "workerCount", "required": true,
            "schema": {"openAPIV3Schema": {"type": "integer", "minimum": 1}}}]);
    });
    let mut ok = cluster("fits", 1, "v1.27.3", json!({}));
    ok["spec"]["topology"]["variables"] = json!([{"name": "workerCount", "value": 2}]);
    server.put_object(ok);
    let mut bad = cluster("bad", 1, "v1.27.3", json!({}));
    bad["spec"]["topology"]["variables"] = json!([{"name": "workerCount", "value": 0}]);
    server.put_object(bad);
    server.put_object(cluster("missing", 1, "v1.27.3", json!({})));
    server.put_object(rollout(json!({"target": "v2", "waves": [{"name": "all", "maxConcurrent": 3}]})));
    wait_for("Succeeded", || phase(&server) == "Succeeded").await;
    let entries = status(&server)["clusters"].as_array().unwrap().clone();
    let by: BTreeMap<&str, &Value> = entries.iter().map(|e| (e["name"].as_str().unwrap(), e)).collect();
    assert_eq!(by["fits"]["state"], "Healthy");
    assert_eq!(by["bad"]["state"], "Incompatible");
    assert!(
        by["bad"]["message"].as_str().unwrap().contains("spec.topology.variables[workerCount].value: Invalid value: 0"),
        "{}",
        by["bad"]
    );
    assert_eq!(by["missing"]["state"], "Incompatible");
    assert!(
        by["missing"]["message"].as_str().unwrap().contains("required variable \"workerCount\" must be set"),
        "{}",
        by["missing"]
    );
    assert_eq!(moves(&server), [("fits".to_string(), "docker-ferrol-1-27-v2".to_string())]);
    op.stop().await;
}

#[tokio::test]
async fn the_retry_annotation_retries_a_halted_target() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v1", "v2"], cache.path()).await;
    let _topology = Topology::start(&server, SETTLE);
    server.put_object(cluster("c0", 1, "v1.27.3", json!({FAIL_LABEL: "true"})));
    server.put_object(rollout(json!({"target": "v2", "progressDeadline": "8s"})));
    wait_for("Halted", || phase(&server) == "Halted").await;
    wait_for("rolled back", || class_of(&server, "c0") == "docker-ferrol-1-27-v1").await;
    // Fixed: it no longer fails; retry.
    server.edit_object(CC, "Cluster", Some(TEAM), "c0", |c| {
        c["metadata"]["labels"] = json!({});
    });
    server.edit_object(CS, "ClusterStackRollout", Some(NS), "ferrol", |r| {
        r["metadata"]["annotations"] = json!({"clusterstack.x-k8s.io/retry-requested-at": "2026-11-24T18:00:00Z"});
    });
    wait_for("Succeeded", || phase(&server) == "Succeeded").await;
    let st = status(&server);
    assert_eq!(st["failedTargets"], Value::Null);
    assert_eq!(st["retryRequestedAt"], "2026-11-24T18:00:00Z");
    assert_eq!(class_of(&server, "c0"), "docker-ferrol-1-27-v2");
    op.stop().await;
}

#[tokio::test]
async fn the_way_back_of_an_unfinished_rollout_is_kept() {
    let cache = tempfile::tempdir().unwrap();
    let (server, op) = setup(&["v1", "v2"], cache.path()).await;
    // No stand-in: the moved Cluster never becomes healthy, the rollout stays Progressing.
    server.put_object(cluster("c0", 1, "v1.27.3", json!({})));
    server.put_object(rollout(json!({"target": "v2", "progressDeadline": "1h"})));
    wait_for("moved", || class_of(&server, "c0") == "docker-ferrol-1-27-v2").await;
    // Unpin v1: no Cluster uses it, but the rollout may move c0 back to it.
    server.edit_object(CS, "ClusterStack", Some(NS), "ferrol", |s| s["spec"]["versions"] = json!(["v2"]));
    // The edit reaches the stack at once, and every poll (1 s here) decides again: two polls'
    // time is watched.
    support::operator::holds_for("v1 kept while the rollout may move back to it", 2 * POLL, || {
        server
            .get_object(CS, "ClusterStackRelease", Some(NS), "docker-ferrol-1-27-v1")
            .is_some_and(|r| r["metadata"]["deletionTimestamp"].is_null())
    })
    .await;
    op.stop().await;
}
