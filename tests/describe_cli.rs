//! `clusterstack describe` as a user runs it (the binary, a kubeconfig file) against the API
//! server double holding a stack's objects: the plain tree (not a terminal: no colour), the same
//! tree as JSON, a Cluster's side, and a cluster that does not serve the rollout kind.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use support::ApiServer;
use support::operator::capi_server;

const NS: &str = "team-a";
const CS: &str = "clusterstack.x-k8s.io/v1alpha1";
const CLUSTER: &str = "cluster.x-k8s.io/v1beta1";
const T0: &str = "2026-01-01T00:00:00Z";

fn kubeconfig(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {url}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\ncurrent-context: t\nusers:\n- name: t\n  user:\n    token: t\n"
        ),
    )
    .unwrap();
    path
}

async fn clusterstack(kubeconfig: &Path, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .output()
        .await
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Ages depend on the clock: `age 3s` becomes `age N`.
fn no_ages(s: &str) -> String {
    regex::Regex::new(r"age \d+[smhd]").unwrap().replace_all(s, "age N").into_owned()
}

fn cond(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": T0})
}

/// Writes an object and then its status (the create drops status on kinds with a subresource).
fn put(server: &ApiServer, obj: Value) -> Value {
    server.put_object(obj.clone());
    let mut stored = server.put_object(obj.clone());
    if obj.get("status").is_some() {
        stored["status"] = obj["status"].clone();
        stored = server.put_object(stored);
    }
    stored
}

fn synced(kind: &str, name: &str, ok: bool) -> Value {
    json!({"group": "cluster.x-k8s.io", "version": "v1beta1", "kind": kind, "namespace": NS, "name": name,
           "status": if ok { "synced" } else { "not-synced" }})
}

/// A stack with a ready v1 (used by c1, whose addons are done) and a stalled v2 (used by c2,
/// whose addons wait in a stage), optionally with a rollout of c2 onto v2.
async fn stack_server(rollout_kind: bool) -> ApiServer {
    let server = capi_server(&[NS]).await;
    let stack = put(
        &server,
        json!({
            "apiVersion": CS, "kind": "ClusterStack", "metadata": {"name": "ferrol", "namespace": NS},
            "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27", "versions": ["v1", "v2"]},
            "status": {"latestRelease": "docker-ferrol-1-27-v2", "usableVersions": "v1",
                       "conditions": [cond("Ready", "False", "ReleasesNotReady", "docker-ferrol-1-27-v2: failed: line 3"),
                                      cond("Stalled", "True", "ReleaseStalled", "docker-ferrol-1-27-v2: line 3")]}
        }),
    );
    let owner = json!([{"apiVersion": CS, "kind": "ClusterStack", "name": "ferrol",
                        "uid": stack["metadata"]["uid"], "controller": true}]);
    put(
        &server,
        json!({
            "apiVersion": CS, "kind": "ClusterStackRelease",
            "metadata": {"name": "docker-ferrol-1-27-v1", "namespace": NS, "ownerReferences": owner},
            "spec": {},
            "status": {"ready": true, "phase": "done", "kubernetesVersion": "v1.27.3",
                       "resources": [synced("ClusterClass", "docker-ferrol-1-27-v1", true), synced("DockerClusterTemplate", "c", true)],
                       "nodeImages": [{"name": "kindest/node:v1.27.3", "ready": true}],
                       "conditions": [cond("Ready", "True", "Succeeded", "")]}
        }),
    );
    put(
        &server,
        json!({
            "apiVersion": CS, "kind": "ClusterStackRelease",
            "metadata": {"name": "docker-ferrol-1-27-v2", "namespace": NS, "ownerReferences": owner},
            "spec": {},
            "status": {"ready": false, "phase": "failed",
                       "resources": [synced("ClusterClass", "docker-ferrol-1-27-v2", true), synced("DockerClusterTemplate", "c2", false)],
                       "conditions": [cond("Ready", "False", "RenderFailed", "line 3"),
                                      cond("Stalled", "True", "RenderFailed", "line 3")]}
        }),
    );
    // A release of another stack is not shown.
    put(
        &server,
        json!({
            "apiVersion": CS, "kind": "ClusterStackRelease", "metadata": {"name": "docker-other-1-27-v1", "namespace": NS},
            "spec": {}, "status": {"ready": true}
        }),
    );
    for (name, class) in [("c1", "docker-ferrol-1-27-v1"), ("c2", "docker-ferrol-1-27-v2")] {
        put(
            &server,
            json!({
                "apiVersion": CLUSTER, "kind": "Cluster", "metadata": {"name": name, "namespace": NS},
                "spec": {"topology": {"class": class, "version": "v1.27.3"}},
                "status": {"phase": "Provisioned"}
            }),
        );
    }
    put(
        &server,
        json!({
            "apiVersion": CS, "kind": "ClusterAddon", "metadata": {"name": "cluster-addon-c1", "namespace": NS},
            "spec": {"clusterRef": {"kind": "Cluster", "name": "c1"}, "hook": "AfterControlPlaneInitialized"},
            "status": {"ready": true, "release": "docker-ferrol-1-27-v1",
                       "stages": [{"name": "cni", "phase": "Done"}, {"name": "metrics-server", "phase": "Done"}],
                       "conditions": [cond("Ready", "True", "AddonsApplied", "")]}
        }),
    );
    put(
        &server,
        json!({
            "apiVersion": CS, "kind": "ClusterAddon", "metadata": {"name": "cluster-addon-c2", "namespace": NS},
            "spec": {"clusterRef": {"kind": "Cluster", "name": "c2"}},
            "status": {"ready": false, "currentHook": "BeforeClusterUpgrade",
                       "stages": [{"name": "cni", "phase": "Done"}, {"name": "metrics-server", "phase": "WaitingForPostCondition"}],
                       "conditions": [cond("Ready", "False", "StageRunning", "metrics-server waits for ms.status.readyReplicas >= 1"),
                                      cond("Reconciling", "True", "StageRunning", "metrics-server waits")]}
        }),
    );
    if rollout_kind {
        // The rollout kind as its CRD serves it (a minimal schema: the kind is read as JSON).
        server.put_object(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "clusterstackrollouts.clusterstack.x-k8s.io"},
            "spec": {"group": "clusterstack.x-k8s.io", "scope": "Namespaced",
                     "names": {"kind": "ClusterStackRollout", "plural": "clusterstackrollouts", "singular": "clusterstackrollout", "listKind": "ClusterStackRolloutList"},
                     "versions": [{"name": "v1alpha1", "served": true, "storage": true, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }));
        put(
            &server,
            json!({
                "apiVersion": CS, "kind": "ClusterStackRollout", "metadata": {"name": "to-v2", "namespace": NS},
                "spec": {"clusterStackRef": {"name": "ferrol"}, "target": "v2"},
                "status": {"target": "docker-ferrol-1-27-v2", "phase": "Progressing", "currentWave": "canary",
                           "clusters": [{"namespace": NS, "name": "c2", "wave": "canary", "state": "Moving", "message": "waiting for the class"}],
                           "conditions": [cond("Ready", "False", "Progressing", "wave canary")]}
            }),
        );
    }
    server
}

const STACK_TREE: &str = "\
ClusterStack team-a/ferrol  NotReady  latest docker-ferrol-1-27-v2  usable v1  age N
│  ReleaseStalled: docker-ferrol-1-27-v2: line 3
├─ ClusterStackRelease docker-ferrol-1-27-v1  Ready  objects 2/2  node images 1/1  kubernetes v1.27.3  age N
│  └─ Cluster team-a/c1  version v1.27.3  Provisioned  age N
│     └─ ClusterAddon cluster-addon-c1  Ready  hook AfterControlPlaneInitialized  stages 2/2  release docker-ferrol-1-27-v1  age N
├─ ClusterStackRelease docker-ferrol-1-27-v2  NotReady  objects 1/2  phase failed  age N
│  │  RenderFailed: line 3
│  └─ Cluster team-a/c2  version v1.27.3  Provisioned  age N
│     └─ ClusterAddon cluster-addon-c2  NotReady  hook BeforeClusterUpgrade  stages 1/2  metrics-server WaitingForPostCondition  age N
│           StageRunning: metrics-server waits for ms.status.readyReplicas >= 1
└─ ClusterStackRollout team-a/to-v2  NotReady  target docker-ferrol-1-27-v2  phase Progressing  wave canary  age N
   │  Progressing: wave canary
   └─ Cluster team-a/c2  wave canary  state Moving
         waiting for the class
";

#[tokio::test(flavor = "multi_thread")]
async fn a_stack_is_one_tree_of_releases_clusters_addons_and_its_rollout() {
    let server = stack_server(true).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &server.url());
    let out = clusterstack(&kc, &["describe", "clusterstack", "ferrol", "-n", NS]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    println!("{stdout}");
    assert_eq!(no_ages(&stdout), STACK_TREE);
    assert!(!stdout.contains('\u{1b}'), "colour on a pipe: {stdout:?}");
    assert_eq!(text(&out.stderr), "", "no log lines");

    // The same tree as JSON.
    let out = clusterstack(&kc, &["describe", "cs", &format!("{NS}/ferrol"), "-o", "json"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tree: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tree["kind"], "ClusterStack");
    assert_eq!(tree["ready"], false);
    let releases: Vec<&str> =
        tree["children"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(releases, ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "team-a/to-v2"]);
    assert_eq!(tree["children"][1]["reason"], "RenderFailed: line 3");
    assert_eq!(tree["children"][1]["children"][0]["children"][0]["info"][1], "stages 1/2");

    // The server was only read.
    assert!(server.requests().iter().all(|r| matches!(r.verb.as_str(), "get" | "list" | "discovery")));
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_rollout_kind_there_is_no_rollout_and_a_cluster_has_its_own_view() {
    let server = stack_server(false).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &server.url());
    let out = clusterstack(&kc, &["describe", "clusterstack", "ferrol", "-n", NS]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = no_ages(&text(&out.stdout));
    assert!(!stdout.contains("ClusterStackRollout"), "{stdout}");
    assert!(stdout.contains("└─ ClusterStackRelease docker-ferrol-1-27-v2  NotReady"), "{stdout}");

    let out = clusterstack(&kc, &["describe", "cluster", &format!("{NS}/c2")]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        no_ages(&text(&out.stdout)),
        "\
Cluster team-a/c2  version v1.27.3  Provisioned  age N
├─ ClusterStack team-a/ferrol  NotReady  latest docker-ferrol-1-27-v2  usable v1  age N
│     ReleaseStalled: docker-ferrol-1-27-v2: line 3
├─ ClusterStackRelease docker-ferrol-1-27-v2  NotReady  objects 1/2  phase failed  age N
│     RenderFailed: line 3
└─ ClusterAddon cluster-addon-c2  NotReady  hook BeforeClusterUpgrade  stages 1/2  metrics-server WaitingForPostCondition  age N
      StageRunning: metrics-server waits for ms.status.readyReplicas >= 1
"
    );

    let out = clusterstack(&kc, &["describe", "clusterstack", "nope", "-n", NS]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("ClusterStack team-a/nope not found"), "{}", text(&out.stderr));
}

/// Against a real cluster (`cargo test -- --ignored`): every ClusterStack of the namespace in
/// `CLUSTERSTACK_DESCRIBE_NAMESPACE` (default `default`) describes without error, as a tree and as JSON.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a real cluster running the operator (KUBECONFIG)"]
async fn real_cluster_describe() {
    use kube::api::{Api, ListParams};
    clusterstack::install_crypto_provider();
    let client = kube::Client::try_default().await.expect("a kubeconfig");
    let ns = std::env::var("CLUSTERSTACK_DESCRIBE_NAMESPACE").unwrap_or_else(|_| "default".into());
    let stacks: Api<clusterstack::api::ClusterStack> = Api::namespaced(client, &ns);
    let kc = std::env::var("KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".kube/config"));
    for s in stacks.list(&ListParams::default()).await.expect("list").items {
        let name = s.metadata.name.unwrap_or_default();
        for output in ["tree", "json"] {
            let out = clusterstack(&kc, &["describe", "clusterstack", &name, "-n", &ns, "-o", output]).await;
            assert!(out.status.success(), "{name}: {}", text(&out.stderr));
            assert!(text(&out.stdout).contains(&name));
        }
    }
}
