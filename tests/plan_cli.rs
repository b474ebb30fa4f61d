//! `clusterstack plan` on the bundled releases: the operator's keep-set
//! decisions, offline.

use std::process::{Command, Output};

use serde_json::Value;

fn plan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("GIT_ORG_NAME")
        .env_remove("GIT_REPOSITORY_NAME")
        .env_remove("CLUSTERSTACK_SOURCE")
        .arg("plan")
        .args(args)
        .output()
        .expect("the binary runs")
}

fn plan_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let out = plan(&all);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// `(name, action)` of every release in the first stack's plan.
fn actions(report: &Value) -> Vec<(String, String)> {
    report[0]["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r["action"].as_str().unwrap().to_string()))
        .collect()
}

fn pair(name: &str, action: &str) -> (String, String) {
    (name.to_string(), action.to_string())
}

#[test]
fn the_quick_start_creates_the_pinned_and_the_latest_release() {
    let out = plan(&["-f", "docs/examples/clusterstack.yaml"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // The directory holds the Docker sample (3) and the in-memory sample (3); the plan picks this
    // stack's.
    assert!(text.contains("source dir:releases: 6 releases listed"), "{text}");
    assert!(text.contains("create  docker-ferrol-1-27-v1"), "{text}");
    assert!(text.contains("create  docker-ferrol-1-27-v3"), "{text}");
    assert!(!text.contains("docker-ferrol-1-27-v2"), "v2 is neither pinned, latest nor used:\n{text}");

    let report = plan_json(&["-f", "docs/examples/clusterstack.yaml"]);
    assert_eq!(report[0]["latest"], "docker-ferrol-1-27-v3");
    assert_eq!(actions(&report), [pair("docker-ferrol-1-27-v1", "create"), pair("docker-ferrol-1-27-v3", "create")]);
}

#[test]
fn an_unwanted_existing_release_is_deleted_unless_a_cluster_uses_it() {
    // v2 exists and is ready, but v3 will be the latest: without Clusters, v2 is
    // still the latest *ready* release and stays until v3 is ready.
    let report =
        plan_json(&["-f", "docs/examples/clusterstack.yaml", "--existing", "docs/examples/existing-releases.yaml"]);
    assert!(actions(&report).contains(&pair("docker-ferrol-1-27-v2", "keep")));

    // Once v3 exists and is ready, v2 goes...
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("existing.yaml");
    std::fs::write(
        &existing,
        "apiVersion: v1
kind: List
items:
- {apiVersion: clusterstack.x-k8s.io/v1alpha1, kind: ClusterStackRelease, metadata: {name: docker-ferrol-1-27-v2, namespace: default}, spec: {}, status: {ready: true}}
- {apiVersion: clusterstack.x-k8s.io/v1alpha1, kind: ClusterStackRelease, metadata: {name: docker-ferrol-1-27-v3, namespace: default}, spec: {}, status: {ready: true}}
- {apiVersion: clusterstack.x-k8s.io/v1alpha1, kind: ClusterStackRelease, metadata: {name: docker-ferrol-1-27-v2, namespace: elsewhere}, spec: {}, status: {ready: true}}
",
    )
    .unwrap();
    let existing = existing.to_str().unwrap();
    let report = plan_json(&["-f", "docs/examples/clusterstack.yaml", "--existing", existing]);
    assert_eq!(
        actions(&report),
        [
            pair("docker-ferrol-1-27-v1", "create"),
            pair("docker-ferrol-1-27-v2", "delete"),
            pair("docker-ferrol-1-27-v3", "keep"),
        ]
    );

    // ...unless a Cluster in another namespace uses its class.
    let report = plan_json(&[
        "-f",
        "docs/examples/clusterstack.yaml",
        "--existing",
        existing,
        "--clusters",
        "docs/examples/clusters.yaml",
    ]);
    let v2 = report[0]["releases"].as_array().unwrap().iter().find(|r| r["name"] == "docker-ferrol-1-27-v2").unwrap();
    assert_eq!(v2["action"], "keep");
    assert!(v2["reasons"].to_string().contains("team-a/team-a"), "{v2}");
}

#[test]
fn render_lists_the_objects_each_kept_release_applies() {
    let cache = tempfile::tempdir().unwrap();
    let report =
        plan_json(&["-f", "docs/examples/clusterstack.yaml", "--render", "--cache", cache.path().to_str().unwrap()]);
    let v3 = report[0]["releases"].as_array().unwrap().iter().find(|r| r["name"] == "docker-ferrol-1-27-v3").unwrap();
    let objects = v3["objects"].as_array().expect("rendered objects");
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "ClusterClass", "apply order puts the class first: {kinds:?}");
    assert_eq!(objects[0]["metadata"]["name"], "docker-ferrol-1-27-v3");
    assert_eq!(objects[0]["metadata"]["namespace"], "default");
    for kind in
        ["DockerClusterTemplate", "KubeadmControlPlaneTemplate", "DockerMachineTemplate", "KubeadmConfigTemplate"]
    {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
}

#[test]
fn a_source_that_cannot_be_read_fails_clearly() {
    let out = plan(&["-f", "docs/examples/clusterstack.yaml", "--source", "dir:/nonexistent/releases"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/releases"), "{stderr}");
}

#[test]
fn a_file_without_cluster_stacks_is_an_error() {
    let out = plan(&["-f", "docs/examples/clusters.yaml"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ClusterStack"));
}

#[test]
fn clusters_say_whether_their_addons_would_be_reapplied_and_why() {
    let cache = tempfile::tempdir().unwrap();
    let out = plan(&[
        "-f",
        "docs/examples/clusterstack.yaml",
        "--clusters",
        "docs/examples/clusters.yaml",
        "--cluster-addons",
        "docs/examples/cluster-addons.yaml",
        "--render",
        "--cache",
        cache.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |c: &str| text.lines().find(|l| l.trim_start().starts_with(c)).unwrap_or_default().to_string();
    let team_a = line("team-a/team-a:");
    assert!(team_a.contains("addons would be applied") && team_a.contains("v1 -> v2"), "{text}");
    let demo = line("default/demo:");
    assert!(demo.contains("nothing to apply") && demo.contains("keeps addon version v2"), "{text}");
}

#[test]
fn a_rollout_shows_its_waves_first_moves_and_incompatible_clusters() {
    let out = plan(&["-f", "docs/examples/rollout.yaml", "--clusters", "docs/examples/rollout-clusters.yaml"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ClusterStackRollout default/ferrol: target docker-ferrol-1-27-v3"), "{text}");
    assert!(text.contains("wave canary (1 Clusters, 1 at once)"), "{text}");
    assert!(text.contains("team-a/canary") && text.contains("-> docker-ferrol-1-27-v3"), "{text}");
    assert!(text.contains("(moves first)"), "{text}");
    assert!(text.contains("wave rest (2 Clusters, 2 at once)"), "{text}");
    assert!(
        text.contains("team-b/legacy") && text.contains("INCOMPATIBLE: docker-ferrol-1-27-v1 to docker-ferrol-1-27-v3: Cluster API would refuse it: spec.topology.variables: required variable \"workerCount\" must be set"),
        "{text}"
    );
}
