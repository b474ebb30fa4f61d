//! Table and property tests of the rollout decision, on a small simulated fleet: moves are
//! applied to the Clusters, a stand-in topology controller marks them healthy (or not), time
//! advances.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::api::{ClusterStack, ClusterStackRollout};
use crate::controller::rollout::class::ClassShape;
use crate::release::ReleaseId;

const NS: &str = "stacks";

fn stack() -> ClusterStackSpec {
    let s: ClusterStack = serde_json::from_value(json!({
        "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStack",
        "metadata": {"name": "ferrol", "namespace": NS},
        "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27"}
    }))
    .unwrap();
    s.spec
}

fn release(v: u32, k8s: &str, ready: bool) -> ReleaseView {
    ReleaseView {
        id: ReleaseId::from_tag(&format!("docker-ferrol-1-27-v{v}")).unwrap(),
        ready,
        kubernetes_version: k8s.into(),
    }
}

fn release_class(v: u32) -> String {
    format!("docker-ferrol-1-27-v{v}")
}

fn rollout(spec: Value) -> ClusterStackRollout {
    let mut spec = spec;
    spec["clusterStackRef"] = json!({"name": "ferrol"});
    serde_json::from_value(json!({
        "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStackRollout",
        "metadata": {"name": "ferrol", "namespace": NS, "generation": 1},
        "spec": spec
    }))
    .unwrap()
}

/// A simulated Cluster: its view, whether it fails after a move, when it becomes healthy.
#[derive(Clone)]
struct Sim {
    view: CapiCluster,
    fails: bool,
    settles_at: Option<Timestamp>,
}

fn cluster(name: &str, labels: Value, class_version: u32, k8s: &str) -> CapiCluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": "team", "labels": labels, "generation": 1},
        "spec": {"topology": {"class": format!("docker-ferrol-1-27-v{class_version}"), "classNamespace": NS, "version": k8s,
                 "variables": [{"name": "workerCount", "value": 2}]}},
        "status": {"observedGeneration": 1, "conditions": [
            {"type": "TopologyReconciled", "status": "True"}, {"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

struct World {
    ro: ClusterStackRollout,
    clusters: Vec<Sim>,
    releases: Vec<ReleaseView>,
    classes: crate::controller::rollout::class::Classes,
    now: Timestamp,
    /// Every move made, in order.
    moves: Vec<Move>,
    events: Vec<Note>,
    settle: Duration,
}

impl World {
    fn new(ro: ClusterStackRollout, clusters: Vec<CapiCluster>, fail: &[&str]) -> Self {
        let class = |release: u32| {
            let shape = ClassShape::read(&json!({"spec": {"variables": [
                {"name": "workerCount", "required": true, "schema": {"openAPIV3Schema": {"type": "integer", "minimum": 1}}}]}}));
            (release_class(release), Some(shape))
        };
        let classes = [class(1), class(2), class(3)].into_iter().collect();
        Self {
            ro,
            clusters: clusters
                .into_iter()
                .map(|view| {
                    let fails = fail.contains(&view.metadata.name.as_deref().unwrap_or_default());
                    Sim { view, fails, settles_at: None }
                })
                .collect(),
            releases: vec![release(1, "v1.27.3", true), release(2, "v1.27.3", true)],
            classes,
            now: "2026-11-24T12:00:00Z".parse().unwrap(),
            moves: vec![],
            events: vec![],
            settle: Duration::from_secs(60),
        }
    }

    fn decide(&self) -> Actions {
        let stack = stack();
        let inputs: Vec<ClusterInput<'_>> =
            self.clusters.iter().map(|s| ClusterInput { cluster: &s.view, addon: None }).collect();
        let releases = Releases { stack: Some(&stack), releases: &self.releases, classes: &self.classes };
        decide(&self.ro, &inputs, &releases, self.now)
    }

    /// One pass: decide, write the status, make the moves; then the topology controller reacts.
    fn step(&mut self) -> Actions {
        let actions = self.decide();
        self.ro.status = Some(actions.status.clone());
        for m in &actions.moves {
            let sim = self.clusters.iter_mut().find(|s| s.view.key() == m.cluster).expect("a move of a known Cluster");
            let t = sim.view.spec.topology.as_mut().unwrap();
            t.class = Some(m.class.clone());
            if let Some(v) = &m.version {
                t.version = Some(v.clone());
            }
            sim.view.metadata.generation = Some(sim.view.metadata.generation.unwrap_or(0) + 1);
            sim.view.status.conditions[0].status = "False".into();
            sim.settles_at = Some(self.now.checked_add(self.settle).unwrap());
        }
        self.moves.extend(actions.moves.iter().cloned());
        self.events.extend(actions.events.iter().cloned());
        actions
    }

    /// Time passes; settled Clusters report their health.
    fn advance(&mut self, by: Duration) {
        self.now = self.now.checked_add(by).unwrap();
        let target = self.ro.status.as_ref().map(|s| s.target.clone()).unwrap_or_default();
        for sim in &mut self.clusters {
            if sim.settles_at.is_some_and(|t| t <= self.now) {
                sim.settles_at = None;
                sim.view.status.observed_generation = sim.view.metadata.generation;
                sim.view.status.conditions[0].status = "True".into();
                let on_target = sim.view.release().is_some_and(|r| r.tag() == target);
                sim.view.status.conditions[1].status = if sim.fails && on_target { "False" } else { "True" }.into();
            }
        }
    }

    fn run(&mut self, steps: usize, by: Duration) {
        for _ in 0..steps {
            self.step();
            self.advance(by);
        }
    }

    fn states(&self) -> BTreeMap<String, String> {
        self.ro.status.as_ref().unwrap().clusters.iter().map(|e| (e.name.clone(), e.state.clone())).collect()
    }

    fn status(&self) -> &ClusterStackRolloutStatus {
        self.ro.status.as_ref().unwrap()
    }
}

fn fleet(n: usize, canary: usize) -> Vec<CapiCluster> {
    (0..n)
        .map(|i| {
            let labels = if i < canary { json!({"rollout": "canary"}) } else { json!({}) };
            cluster(&format!("c{i:02}"), labels, 1, "v1.27.3")
        })
        .collect()
}

fn waves_spec(max: i32) -> Value {
    json!({"target": "latest", "waves": [
        {"name": "canary", "clusterSelector": {"matchLabels": {"rollout": "canary"}}},
        {"name": "rest", "maxConcurrent": max}], "soakTime": "5m", "progressDeadline": "10m"})
}

#[test]
fn a_healthy_rollout_goes_wave_by_wave_and_succeeds() {
    let mut w = World::new(rollout(waves_spec(3)), fleet(7, 1), &[]);
    let a = w.step();
    assert_eq!(a.status.target, "docker-ferrol-1-27-v2");
    assert_eq!(a.status.phase, phase::PROGRESSING);
    assert_eq!(a.moves.len(), 1, "the canary alone");
    assert_eq!(a.moves[0].cluster.name, "c00");
    assert_eq!(a.moves[0].version, None, "same Kubernetes version: class only");
    let canary = &a.status.clusters[0];
    assert_eq!(
        (canary.state.as_str(), canary.from.as_ref().unwrap().class.as_str()),
        ("Moving", "docker-ferrol-1-27-v1")
    );
    w.advance(Duration::from_secs(61));
    let a = w.step();
    assert!(a.moves.is_empty(), "the canary wave soaks first");
    assert_eq!(w.states()["c00"], "Healthy");
    assert!(a.status.conditions.iter().any(|c| c.message.contains("soaking")), "{:?}", a.status.conditions);
    w.advance(Duration::from_secs(299));
    assert!(w.step().moves.is_empty(), "soak not over");
    w.advance(Duration::from_secs(1));
    let a = w.step();
    assert_eq!(a.status.current_wave, "rest");
    let names: Vec<&str> = a.moves.iter().map(|m| m.cluster.name.as_str()).collect();
    assert_eq!(names, ["c01", "c02", "c03"], "maxConcurrent 3, in name order");
    w.run(40, Duration::from_secs(30));
    assert_eq!(w.status().phase, phase::SUCCEEDED);
    assert_eq!(w.status().healthy, "7/7");
    assert_eq!(w.moves.len(), 7, "each Cluster moved once");
    assert!(w.events.iter().any(|e| e.reason == "Succeeded"));
}

#[test]
fn a_failing_canary_halts_and_is_rolled_back_nothing_else_moves() {
    for soak in [json!("5m"), Value::Null] {
        let mut spec = waves_spec(3);
        spec["soakTime"] = soak;
        a_failing_canary_halts(spec);
    }
}

fn a_failing_canary_halts(spec: Value) {
    let mut w = World::new(rollout(spec), fleet(6, 1), &["c00"]);
    w.run(40, Duration::from_secs(30));
    let st = w.status();
    assert_eq!(st.phase, phase::HALTED);
    assert_eq!(st.failed_targets, ["docker-ferrol-1-27-v2"]);
    assert_eq!(st.failed, 1);
    assert_eq!(w.states()["c00"], "RolledBack");
    let moved: BTreeSet<&str> = w.moves.iter().map(|m| m.cluster.name.as_str()).collect();
    assert_eq!(moved, BTreeSet::from(["c00"]), "no other Cluster moved");
    assert_eq!(w.moves.len(), 2);
    assert!(w.moves[1].rollback && w.moves[1].class == "docker-ferrol-1-27-v1");
    let halted = st.conditions.iter().find(|c| c.type_ == HALTED).unwrap();
    assert_eq!(halted.status, "True");
    assert!(halted.message.contains("team/c00"), "the reason names the Cluster: {}", halted.message);
    assert!(w.events.iter().any(|e| e.reason == "Halted" && e.warning));
}

#[test]
fn a_failure_in_a_later_batch_rolls_back_that_wave_only() {
    let spec = json!({"waves": [
        {"name": "one", "clusterSelector": {"matchLabels": {"w": "1"}}, "maxConcurrent": 2},
        {"name": "two", "clusterSelector": {"matchLabels": {"w": "2"}}, "maxConcurrent": 2},
        {"name": "three", "maxConcurrent": 2}], "progressDeadline": "5m"});
    let clusters: Vec<CapiCluster> = (0..6)
        .map(|i| {
            let labels = match i {
                0 | 1 => json!({"w": "1"}),
                2 | 3 => json!({"w": "2"}),
                _ => json!({}),
            };
            cluster(&format!("c{i}"), labels, 1, "v1.27.3")
        })
        .collect();
    let mut w = World::new(rollout(spec), clusters, &["c5"]);
    w.run(60, Duration::from_secs(30));
    let states = w.states();
    assert_eq!(w.status().phase, phase::HALTED);
    for c in ["c0", "c1", "c2", "c3"] {
        assert_eq!(states[c], "Healthy", "{c} of an earlier wave stays");
    }
    assert_eq!(states["c4"], "RolledBack");
    assert_eq!(states["c5"], "RolledBack");
    let rollbacks: Vec<&str> = w.moves.iter().filter(|m| m.rollback).map(|m| m.cluster.name.as_str()).collect();
    assert_eq!(rollbacks, ["c4", "c5"]);
}

#[test]
fn a_raised_kubernetes_version_is_not_rolled_back() {
    let mut w = World::new(rollout(json!({"progressDeadline": "2m"})), fleet(1, 0), &["c00"]);
    w.releases.push(release(3, "v1.27.11", true));
    w.run(20, Duration::from_secs(30));
    assert_eq!(w.moves.len(), 1, "no roll back: {:?}", w.moves);
    assert_eq!(w.moves[0].version.as_deref(), Some("v1.27.11"));
    let e = &w.status().clusters[0];
    assert_eq!(e.state, "Failed");
    assert_eq!(e.message, "rollback impossible: Kubernetes version was raised from v1.27.3 to v1.27.11");
}

#[test]
fn a_cluster_already_on_the_target_is_healthy_and_untouched() {
    let mut clusters = fleet(2, 0);
    clusters.push(cluster("on-target", json!({}), 2, "v1.27.3"));
    let mut w = World::new(rollout(json!({"waves": [{"name": "all", "maxConcurrent": 5}]})), clusters, &[]);
    let a = w.step();
    assert_eq!(a.moves.len(), 2);
    assert!(a.moves.iter().all(|m| m.cluster.name != "on-target"));
    assert_eq!(w.states()["on-target"], "Healthy");
}

#[test]
fn incompatible_variables_are_not_moved_and_the_others_go_on() {
    let mut clusters = fleet(2, 0);
    clusters[1].spec.topology.as_mut().unwrap().variables.clear();
    let mut w = World::new(rollout(json!({"waves": [{"name": "all", "maxConcurrent": 5}]})), clusters, &[]);
    let a = w.step();
    assert_eq!(a.moves.len(), 1);
    let e = &a.status.clusters[1];
    assert_eq!(e.state, "Incompatible");
    assert!(e.message.contains("workerCount") && e.message.contains("required"), "{}", e.message);
    w.run(10, Duration::from_secs(61));
    assert_eq!(w.status().phase, phase::SUCCEEDED);
    assert!(w.status().conditions.iter().any(|c| c.message.contains("1 incompatible")));
}

/// A v1beta2 ClusterClass with a control plane and infrastructure of `kinds` and the worker
/// classes `workers` (each on a DevMachineTemplate).
fn class_with(kinds: (&str, &str), workers: &[&str]) -> Option<ClassShape> {
    let workers: Vec<Value> = workers
        .iter()
        .map(|w| {
            json!({"class": w, "infrastructure": {"templateRef":
            {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachineTemplate", "name": w}}})
        })
        .collect();
    Some(ClassShape::read(&json!({"spec": {
        "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": kinds.0, "name": "i"}},
        "controlPlane": {"templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": kinds.1, "name": "cp"}},
        "workers": {"machineDeployments": workers},
        "variables": [{"name": "workerCount", "required": true, "schema": {"openAPIV3Schema": {"type": "integer"}}}]
    }})))
}

/// Each rule Cluster API's Cluster webhook applies to a class change keeps that Cluster where it
/// is, with CAPI's own words; the others still move.
#[test]
fn what_cluster_api_would_refuse_is_not_moved_and_named() {
    const DEV: (&str, &str) = ("DevClusterTemplate", "KubeadmControlPlaneTemplate");
    let with_md = |mut c: CapiCluster, class: &str| {
        let t = c.spec.topology.as_mut().unwrap();
        t.workers = serde_json::from_value(json!({"machineDeployments": [{"class": class, "name": "md-0"}]})).unwrap();
        c
    };
    /// (case, the Cluster's class, the target class, the Cluster, what CAPI would say).
    type Case<'a> = (&'a str, Option<ClassShape>, Option<ClassShape>, CapiCluster, Option<&'a str>);
    let table: Vec<Case<'_>> = vec![
        (
            "same kinds, worker class kept",
            class_with(DEV, &["default-worker"]),
            class_with(DEV, &["default-worker"]),
            with_md(cluster("c", json!({}), 1, "v1.27.3"), "default-worker"),
            None,
        ),
        (
            "worker class removed",
            class_with(DEV, &["default-worker"]),
            class_with(DEV, &["big-worker"]),
            with_md(cluster("c", json!({}), 1, "v1.27.3"), "default-worker"),
            Some(
                "spec.topology.workers.machineDeployments[0].class: MachineDeploymentClass with name \"default-worker\" does not exist in ClusterClass \"docker-ferrol-1-27-v2\"",
            ),
        ),
        (
            "infrastructure kind changed",
            class_with(DEV, &[]),
            class_with(("DockerClusterTemplate", DEV.1), &[]),
            cluster("c", json!({}), 1, "v1.27.3"),
            Some(
                "docker-ferrol-1-27-v1 to docker-ferrol-1-27-v2: Cluster API would refuse it: spec.infrastructure.templateRef.kind: kind cannot be changed from \"DevClusterTemplate\" to \"DockerClusterTemplate\" to prevent incompatible changes in the Clusters",
            ),
        ),
        (
            "control plane kind changed",
            class_with(DEV, &[]),
            class_with((DEV.0, "RKE2ControlPlaneTemplate"), &[]),
            cluster("c", json!({}), 1, "v1.27.3"),
            Some(
                "spec.controlPlane.templateRef.kind: kind cannot be changed from \"KubeadmControlPlaneTemplate\" to \"RKE2ControlPlaneTemplate\"",
            ),
        ),
        (
            "current class gone",
            None,
            class_with(DEV, &[]),
            cluster("c", json!({}), 1, "v1.27.3"),
            Some("valid ClusterClass with name \"docker-ferrol-1-27-v1\" could not be retrieved"),
        ),
        (
            "two minors up",
            class_with(DEV, &[]),
            class_with(DEV, &[]),
            cluster("c", json!({}), 1, "v1.25.9"),
            Some(
                "docker-ferrol-1-27-v1 to docker-ferrol-1-27-v2: Cluster API would refuse it: spec.topology.version: version cannot be increased from \"1.25.9\" to \"1.27.3\"",
            ),
        ),
        ("one minor up", class_with(DEV, &[]), class_with(DEV, &[]), cluster("c", json!({}), 1, "v1.26.9"), None),
        (
            "version lowered",
            class_with(DEV, &[]),
            class_with(DEV, &[]),
            cluster("c", json!({}), 1, "v1.27.5"),
            Some("spec.topology.version: version cannot be decreased from \"1.27.5\" to \"1.27.3\""),
        ),
    ];
    for (case, current, target, c, refused) in table {
        let mut w = World::new(rollout(json!({})), vec![c, cluster("other", json!({}), 1, "v1.27.3")], &[]);
        w.classes.insert(release_class(1), current);
        w.classes.insert(release_class(2), target.clone());
        // The other Cluster is on a class compatible with any target.
        let a = w.decide();
        let e = a.status.clusters.iter().find(|e| e.name == "c").unwrap();
        match refused {
            None => assert!(["Pending", "Moving"].contains(&e.state.as_str()), "{case}: {} {}", e.state, e.message),
            Some(why) => {
                assert_eq!(e.state, "Incompatible", "{case}");
                assert!(e.message.contains(why), "{case}: {}", e.message);
                assert!(a.moves.iter().all(|m| m.cluster.name != "c"), "{case}");
                assert!(a.events.iter().any(|n| n.reason == "Incompatible" && n.message.contains(why)), "{case}");
            }
        }
    }
}

#[test]
fn paused_closed_window_or_unknown_variables_move_nothing() {
    let w = World::new(rollout(json!({"paused": true})), fleet(2, 0), &[]);
    let a = w.decide();
    assert!(a.moves.is_empty());
    assert_eq!(a.status.phase, phase::PAUSED);

    // 12:00 UTC on a Tuesday; the window opens on Saturdays at 02:00.
    let w = World::new(
        rollout(json!({"maintenanceWindows": [{"days": ["Sat"], "start": "02:00", "duration": "4h"}]})),
        fleet(2, 0),
        &[],
    );
    let a = w.decide();
    assert!(a.moves.is_empty());
    assert_eq!(a.status.phase, phase::WAITING);
    assert_eq!(a.requeue_after, Some(Duration::from_secs(3 * 86400 + 14 * 3600)));

    let w = World::new(rollout(json!({})), fleet(2, 0), &[]);
    let stack = stack();
    let inputs: Vec<ClusterInput<'_>> =
        w.clusters.iter().map(|s| ClusterInput { cluster: &s.view, addon: None }).collect();
    let releases = Releases { stack: Some(&stack), releases: &w.releases, classes: &Default::default() };
    let a = decide(&w.ro, &inputs, &releases, w.now);
    assert!(a.moves.is_empty(), "variables not known yet");
    assert!(a.status.clusters[0].message.contains("waiting for ClusterClass"));
}

#[test]
fn the_retry_annotation_tries_a_halted_target_again() {
    let mut w = World::new(rollout(json!({"progressDeadline": "5m"})), fleet(2, 0), &["c00"]);
    w.run(30, Duration::from_secs(61));
    assert_eq!(w.status().phase, phase::HALTED);
    let before = w.moves.len();
    w.run(3, Duration::from_secs(61));
    assert_eq!(w.moves.len(), before, "halted: nothing moves");
    w.clusters[0].fails = false;
    w.ro.metadata.annotations = Some([(RETRY_REQUESTED_AT.to_string(), "1".to_string())].into());
    w.run(30, Duration::from_secs(61));
    assert_eq!(w.status().phase, phase::SUCCEEDED, "{:?}", w.status());
    assert!(w.status().failed_targets.is_empty());
    assert_eq!(w.status().retry_requested_at.as_deref(), Some("1"));
}

#[test]
fn a_deleted_stack_halts_and_a_deleted_cluster_is_dropped() {
    let w = World::new(rollout(json!({})), fleet(2, 0), &[]);
    let inputs: Vec<ClusterInput<'_>> =
        w.clusters.iter().map(|s| ClusterInput { cluster: &s.view, addon: None }).collect();
    let releases = Releases { stack: None, releases: &w.releases, classes: &w.classes };
    let a = decide(&w.ro, &inputs, &releases, w.now);
    assert_eq!(a.status.phase, phase::HALTED);
    assert!(a.moves.is_empty());

    let mut w = World::new(rollout(json!({})), fleet(3, 0), &[]);
    w.step();
    w.clusters.remove(0);
    let a = w.step();
    assert_eq!(a.status.clusters.len(), 2);
    assert!(a.events.iter().any(|e| e.reason == "ClusterDropped" && e.message.contains("team/c00")));
    assert_eq!(a.moves.len(), 1, "the next Cluster moves in its place");
}

#[test]
fn a_status_written_without_its_move_makes_the_move_then() {
    // A crash between the status write and the apply: the status says Moving, the Cluster did not move.
    let mut w = World::new(rollout(json!({})), fleet(2, 0), &[]);
    let first = w.decide();
    w.ro.status = Some(first.status.clone());
    let again = w.decide();
    assert_eq!(again.moves, first.moves, "the same move, once it is applied it is never made again");
    w.ro.status = None;
    w.step();
    assert!(w.decide().moves.is_empty(), "moved and recorded: nothing to do until healthy");
}

#[test]
fn max_concurrent_takes_percentages() {
    assert_eq!(rules::max_concurrent(Some(&IntOrString::String("20%".into())), 12), 3);
    assert_eq!(rules::max_concurrent(Some(&IntOrString::String("1%".into())), 5), 1);
    assert_eq!(rules::max_concurrent(Some(&IntOrString::Int(0)), 5), 1);
    assert_eq!(rules::max_concurrent(None, 5), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the fleet, waves and failures: never more than maxConcurrent moving, waves in
    /// order, no forward move while halted, a Cluster on the target never touched, roll backs
    /// only of the current wave and never of a raised version, `from` in status with each move.
    #[test]
    fn invariants_hold(
        n in 1usize..14,
        canary in 0usize..3,
        max in 1i32..4,
        max_failures in 0u32..2,
        fail in proptest::collection::btree_set(0usize..14, 0..3),
        on_target in proptest::collection::btree_set(0usize..14, 0..3),
        raise in any::<bool>(),
        step_secs in 20u64..400,
    ) {
        let mut clusters = fleet(n, canary.min(n));
        for i in on_target.iter().filter(|i| **i < n) {
            clusters[*i] = cluster(&format!("c{i:02}"), json!({}), if raise { 3 } else { 2 }, if raise { "v1.27.11" } else { "v1.27.3" });
        }
        let failing: Vec<String> = fail.iter().map(|i| format!("c{i:02}")).collect();
        let failing: Vec<&str> = failing.iter().map(String::as_str).collect();
        let mut spec = waves_spec(max);
        spec["failurePolicy"] = json!({"maxFailures": max_failures});
        let mut w = World::new(rollout(spec), clusters, &failing);
        if raise {
            w.releases.push(release(3, "v1.27.11", true));
        }
        let initially_on_target: BTreeSet<String> =
            on_target.iter().filter(|i| **i < n).map(|i| format!("c{i:02}")).collect();
        let wave_of = |name: &str| if name < format!("c{:02}", canary.min(n)).as_str() { 0 } else { 1 };
        for _ in 0..60 {
            let halted_before = w.ro.status.as_ref().is_some_and(|s| s.phase == phase::HALTED);
            let a = w.step();
            let moving = a.status.clusters.iter().filter(|e| e.state == state::MOVING).count();
            prop_assert!(moving <= max.max(1) as usize, "{moving} moving, max {max}");
            for m in &a.moves {
                prop_assert!(!initially_on_target.contains(&m.cluster.name), "{} was on the target", m.cluster.name);
                let e = a.status.clusters.iter().find(|e| e.name == m.cluster.name).unwrap();
                prop_assert!(e.from.is_some(), "from recorded with the move");
                if m.rollback {
                    let (from, to) = (e.from.as_ref().unwrap(), e.to.as_ref().unwrap());
                    prop_assert!(!raised(&from.version, &to.version), "a raised version rolled back");
                    prop_assert_eq!(&e.wave, &a.status.current_wave);
                    prop_assert_eq!(m.version.as_ref(), None);
                } else {
                    prop_assert!(!halted_before, "a forward move while halted");
                    prop_assert_ne!(a.status.phase.as_str(), phase::HALTED);
                    // Waves in order: no earlier wave has Clusters left to move.
                    let w_moved = wave_of(&m.cluster.name);
                    for e in &a.status.clusters {
                        if wave_of(&e.name) < w_moved {
                            prop_assert!(e.state != state::PENDING && e.state != state::MOVING, "{} of an earlier wave is {}", e.name, e.state);
                        }
                    }
                }
            }
            w.advance(Duration::from_secs(step_secs));
        }
        // Each Cluster moved forward at most once.
        let mut forward = BTreeMap::new();
        for m in w.moves.iter().filter(|m| !m.rollback) {
            *forward.entry(m.cluster.name.clone()).or_insert(0) += 1;
        }
        prop_assert!(forward.values().all(|n| *n == 1), "{forward:?}");
    }
}

/// `target: latest` follows the stack's channel: the highest ready `vN` on `stable`, the newest
/// ready development build on `ttl` (by its time); `custom` has no latest.
#[test]
fn latest_follows_the_stacks_channel() {
    let view = |tag: &str, ready: bool| ReleaseView {
        id: ReleaseId::from_tag(tag).unwrap(),
        ready,
        kubernetes_version: "v1.27.3".into(),
    };
    let releases = [
        view("docker-ferrol-1-27-v2", true),
        view("docker-ferrol-1-27-v0-ttl-1712000000", true),
        view("docker-ferrol-1-27-v0-ttl-1712345678", true),
        view("docker-ferrol-1-27-v0-ttl-1712999999", false),
    ];
    let latest = |channel: &str| {
        let mut spec = stack();
        spec.channel = crate::api::Channel::parse(channel).unwrap();
        rules::resolve_target("latest", &spec, &releases).map(|r| r.id.tag())
    };
    assert_eq!(latest("stable").unwrap(), "docker-ferrol-1-27-v2");
    assert_eq!(latest("ttl").unwrap(), "docker-ferrol-1-27-v0-ttl-1712345678");
    assert!(latest("custom").is_err());
}

/// RKE2's build metadata takes no part in whether a move raises the Kubernetes version (Cluster
/// API's own check ignores it too): `+rke2r1` → `+rke2r2` can be rolled back, a patch bump cannot.
#[test]
fn rke2_build_metadata_does_not_raise_the_version() {
    assert!(!raised("v1.30.4+rke2r1", "v1.30.4+rke2r2"));
    assert!(!raised("v1.30.4+rke2r2", "v1.30.4+rke2r1"));
    assert!(raised("v1.30.4+rke2r1", "v1.30.5+rke2r1"));
    assert!(raised("v1.30.4", "v1.31.0+rke2r1"));
}
