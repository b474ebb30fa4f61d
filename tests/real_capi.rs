//! The operator with the real Cluster API: its four managers (core with ClusterTopology and
//! RuntimeSDK, kubeadm bootstrap and control plane, CAPD's in-memory backend) built from their
//! pinned modules (`hack/controlplane/build --capi`) and started on the real control plane with
//! their webhooks and conversion served on 127.0.0.1 ([`clusterstack::controlplane::capi`]).
//! Nothing of Cluster API is played by the test: CAPI's webhooks accept or refuse the Clusters,
//! its topology controller provisions them from our released classes and calls our Runtime SDK
//! extension, registered by an ExtensionConfig, at its hooks.
//!
//! CAPD's in-memory workload API servers take no server-side apply, so each workload Cluster's
//! addons go to a real kube-apiserver of its own (same etcd, another key prefix), named by the
//! Cluster's `clusterstack.x-k8s.io/addon-kubeconfig-secret` annotation; CAPI keeps its own
//! kubeconfig Secret for its own use.
//!
//! `harness = false`; the binary moves itself into a network namespace with only loopback first
//! (CAPI's servers listen on every interface).

#[path = "support/stack_script.rs"]
mod stack_script;
mod support;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use clusterstack::controller::addon::workload::KUBECONFIG_SECRET_ANNOTATION;
use serde_json::{Value, json};
use support::real::{Kube, RealCluster, run_capi_scenarios, wait_until};

const CS: &str = "clusterstack.x-k8s.io/v1alpha1";
const CAPI: &str = "cluster.x-k8s.io/v1beta2";
const CAPI_V1BETA1: &str = "cluster.x-k8s.io/v1beta1";
const KCP: &str = "controlplane.cluster.x-k8s.io/v1beta2";
const V1: &str = "inmemory-ferrol-1-35-v1";
const V2: &str = "inmemory-ferrol-1-35-v2";
/// Provisioning and upgrades by the real controllers on two busy cores.
const SLOW: Duration = Duration::from_secs(240);

fn releases_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("releases")
}

fn stack(ns: &str, versions: &[&str]) -> Value {
    json!({
        "apiVersion": CS, "kind": "ClusterStack",
        "metadata": {"name": "ferrol", "namespace": ns},
        "spec": {"provider": "inmemory", "name": "ferrol", "kubernetesVersion": "1.35", "channel": "stable",
                 "versions": versions, "autoSubscribe": false, "pollInterval": "1s"}
    })
}

/// The operator with its hook server on 127.0.0.1 (a certificate of its own CA), and the CA.
struct Hooks {
    args: Vec<String>,
    url: String,
    ca_pem: String,
}

fn hooks(c: &RealCluster, name: &str) -> Hooks {
    hooks_with_deadline(c, name, "10m")
}

fn hooks_with_deadline(c: &RealCluster, name: &str, deadline: &str) -> Hooks {
    let (ca, serving) =
        clusterstack::controlplane::pki::serving_pair("hooks CA", &["127.0.0.1"]).expect("hook certificates");
    let dir = c.scratch.path().join(format!("hooks-{name}"));
    std::fs::create_dir_all(&dir).expect("the hook certificate directory");
    std::fs::write(dir.join("tls.crt"), &serving.cert).expect("tls.crt");
    std::fs::write(dir.join("tls.key"), &serving.key).expect("tls.key");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let mut args = vec![
        format!("--default-source=dir:{}", releases_dir().display()),
        format!("--allowed-directory-roots={}", releases_dir().display()),
        format!("--hooks-addr=127.0.0.1:{port}"),
        format!("--hooks-cert-dir={}", dir.display()),
    ];
    args.push(format!("--hooks-hold-deadline={deadline}"));
    Hooks { args, url: format!("https://127.0.0.1:{port}"), ca_pem: ca.cert }
}

/// Registers the hook server for `ns`'s Clusters with an ExtensionConfig in the shape `install
/// --export` ships (v1alpha1, converted by CAPI's webhook), and waits until CAPI has discovered
/// its handlers. Returns the handler names CAPI reports.
async fn register(k: &Kube, name: &str, ns: &str, hooks: &Hooks) -> Vec<String> {
    let ca = base64::engine::general_purpose::STANDARD.encode(&hooks.ca_pem);
    k.apply(&json!({
        "apiVersion": "runtime.cluster.x-k8s.io/v1alpha1", "kind": "ExtensionConfig",
        "metadata": {"name": name},
        "spec": {"clientConfig": {"url": hooks.url, "caBundle": ca},
                 "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
    }))
    .await;
    wait_until("CAPI discovered our hook handlers", SLOW, || async {
        let e = k.get("runtime.cluster.x-k8s.io/v1beta2", "ExtensionConfig", None, name).await?;
        let handlers: Vec<String> =
            e["status"]["handlers"].as_array()?.iter().filter_map(|h| h["name"].as_str().map(str::to_string)).collect();
        (!handlers.is_empty()).then_some(handlers)
    })
    .await
}

/// A v1beta2 Cluster of `class` with one control-plane machine, its addons sent with `secret`.
fn cluster(ns: &str, name: &str, class: &str, version: &str, secret: &str) -> Value {
    json!({
        "apiVersion": CAPI, "kind": "Cluster",
        "metadata": {"name": name, "namespace": ns, "annotations": {KUBECONFIG_SECRET_ANNOTATION: secret}},
        "spec": {
            "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "services": {"cidrBlocks": ["10.128.0.0/12"]}},
            "topology": {"classRef": {"name": class}, "version": version, "controlPlane": {"replicas": 1}}
        }
    })
}

/// `clusterstack_hook_calls_total{hook=...,status=...}` of the operator's `/metrics`.
fn hook_calls(metrics: &str, hook: &str, status: &str) -> u64 {
    let series = format!("clusterstack_hook_calls_total{{hook=\"{hook}\",status=\"{status}\"}}");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

fn condition(obj: &Value, type_: &str) -> Option<Value> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_).cloned()
}

/// The time our addon field manager last wrote `obj` (RFC 3339, seconds; "" when it did not).
fn applied_at(obj: &Value) -> String {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["manager"] == "clusterstack-addons")
        .and_then(|m| m["time"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The operator with the committed releases and no hook server.
fn plain_operator(c: &RealCluster, name: &str) -> support::real::RealOperator {
    c.operator(
        name,
        &[
            format!("--default-source=dir:{}", releases_dir().display()),
            format!("--allowed-directory-roots={}", releases_dir().display()),
        ],
    )
}

async fn wait_ready(k: &Kube, ns: &str, tags: &[&str]) {
    for tag in tags {
        wait_until(&format!("{tag} ready"), SLOW, || async {
            let r = k.get(CS, "ClusterStackRelease", Some(ns), tag).await?;
            (r["status"]["ready"] == true).then_some(())
        })
        .await;
    }
}

async fn wait_gone(k: &Kube, api_version: &str, kind: &str, ns: &str, name: &str) {
    wait_until(&format!("{kind} {name} gone"), SLOW, || async {
        k.get(api_version, kind, Some(ns), name).await.is_none().then_some(())
    })
    .await;
}

/// A workload API server of its own for `ns` (same etcd, another key prefix), and the Secret
/// `secret` holding its kubeconfig for the addons.
async fn workload_for(c: &RealCluster, k: &Kube, ns: &str, secret: &str) -> clusterstack::controlplane::ExtraApiServer {
    let workload = c.cp.start_extra_apiserver(&format!("workload-{ns}")).await.expect("a workload API server");
    let encoded = base64::engine::general_purpose::STANDARD.encode(workload.kubeconfig());
    k.apply(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret, "namespace": ns},
                    "data": {"value": encoded}}))
        .await;
    workload
}

/// Moves the Cluster `edge` to v2 and Kubernetes v1.35.4, and waits until CAPI has asked
/// BeforeClusterUpgrade and been told to retry.
async fn upgrade_edge_to_v2_and_see_it_held(k: &Kube, op: &support::real::RealOperator, ns: &str) {
    k.merge(
        CAPI,
        "Cluster",
        Some(ns),
        "edge",
        &json!({"spec": {"topology": {"classRef": {"name": V2}, "version": "v1.35.4"}}}),
    )
    .await
    .expect("moving the Cluster");
    wait_until("CAPI asked BeforeClusterUpgrade and was held", SLOW, || async {
        (hook_calls(&op.metrics().await, "BeforeClusterUpgrade", "Retry") >= 1).then_some(())
    })
    .await;
}

/// A Cluster of a released class: CAPI's webhooks accept it, its topology controller provisions
/// it (control plane initialised by CAPI), CAPI calls our AfterControlPlaneInitialized hook and
/// the addons land in the workload cluster. Then the Cluster moves to v2 with a new Kubernetes
/// version: CAPI asks BeforeClusterUpgrade, which holds the upgrade (the workload API server is
/// frozen, so the v2 addons cannot be applied) and lets it go once they are; the
/// AfterClusterUpgrade stage runs only after CAPI has finished, and CAPI calls that hook.
async fn a_cluster_is_provisioned_by_capi_gets_its_addons_and_its_upgrade_is_held_for_them(c: Arc<RealCluster>) {
    let k = c.admin().await;
    let ns = c.namespace("capi").await;
    let hooks = hooks(&c, "provision");
    let op = c.operator("capi", &hooks.args);
    let handlers = register(&k, &format!("clusterstack-{ns}"), &ns, &hooks).await;
    for hook in [
        "after-control-plane-initialized",
        "before-cluster-upgrade",
        "after-cluster-upgrade",
        "before-control-plane-upgrade",
        "after-control-plane-upgrade",
        "before-workers-upgrade",
        "after-workers-upgrade",
        "before-cluster-create",
        "before-cluster-delete",
    ] {
        assert!(handlers.iter().any(|h| h.starts_with(hook)), "CAPI discovered {handlers:?}");
    }
    k.apply(&stack(&ns, &["v1", "v2"])).await;
    wait_ready(&k, &ns, &[V1, V2]).await;

    // The workload cluster behind the Cluster, for the addons.
    let workload = workload_for(&c, &k, &ns, "edge-addons").await;
    let wk = Kube::new(
        clusterstack::controller::addon::workload::client_from_kubeconfig(workload.kubeconfig())
            .await
            .expect("a workload client"),
    );
    k.apply(&cluster(&ns, "edge", V1, "v1.35.0", "edge-addons")).await;

    // CAPI provisions it: the control plane initialised is CAPI's word, not ours.
    let provisioned = wait_until("CAPI initialised the control plane", SLOW, || async {
        let cl = k.get(CAPI, "Cluster", Some(&ns), "edge").await?;
        (cl["status"]["initialization"]["controlPlaneInitialized"] == true).then_some(cl)
    })
    .await;
    assert_eq!(provisioned["spec"]["topology"]["classRef"]["name"], V1);
    let kcp = k.list(KCP, "KubeadmControlPlane", Some(&ns), None).await;
    assert_eq!(kcp.len(), 1, "CAPI made the control plane of the class");
    assert_eq!(kcp[0]["spec"]["version"], "v1.35.0");

    let addon = wait_until("the ClusterAddon Ready on v1", SLOW, || async {
        let a = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-edge").await?;
        (a["status"]["ready"] == true && a["status"]["release"] == V1).then_some(a)
    })
    .await;
    assert_eq!(addon["metadata"]["ownerReferences"][0]["kind"], "Cluster", "{addon:#}");
    let ds = wk.get("apps/v1", "DaemonSet", Some("kube-system"), "cni").await.expect("cni in the workload cluster");
    assert!(!applied_at(&ds).is_empty(), "applied by our addon field manager: {ds:#}");
    assert!(
        k.get("apps/v1", "DaemonSet", Some("kube-system"), "cni").await.is_none(),
        "nothing of the addons reaches the management cluster"
    );
    // CAPI calls the hook once it has seen the control plane initialised (our controller reads
    // the same status from its watch, and may be first).
    wait_until("CAPI called AfterControlPlaneInitialized", SLOW, || async {
        (hook_calls(&op.metrics().await, "AfterControlPlaneInitialized", "Success") >= 1).then_some(())
    })
    .await;

    // The upgrade: v2 and a new Kubernetes version, with the workload API server frozen.
    workload.pause(true);
    upgrade_edge_to_v2_and_see_it_held(&k, &op, &ns).await;
    let held = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-edge").await.expect("the ClusterAddon");
    assert!(held["status"]["holdStartedAt"].is_string(), "the hold is recorded: {held:#}");
    let kcp = k.list(KCP, "KubeadmControlPlane", Some(&ns), None).await;
    assert_eq!(kcp[0]["spec"]["version"], "v1.35.0", "CAPI does not upgrade while held");
    workload.pause(false);

    // Until the ClusterAddon is Ready on v2: the AfterClusterUpgrade stage (cni) waits, saying
    // so, while CAPI upgrades, and is Done only once CAPI reports the topology reconciled.
    let waited_for_capi = std::sync::atomic::AtomicBool::new(false);
    let upgraded = wait_until("the ClusterAddon Ready on v2", SLOW, || {
        let (k, ns) = (&k, &ns);
        let waited = &waited_for_capi;
        async move {
            let a = k.get(CS, "ClusterAddon", Some(ns), "cluster-addon-edge").await?;
            let message = condition(&a, "Ready").and_then(|c| c["message"].as_str().map(str::to_string));
            if message
                .is_some_and(|m| m.contains("(AfterClusterUpgrade): waiting for Cluster API to finish the upgrade"))
            {
                waited.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let after_done = a["status"]["stages"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["hook"] == "AfterClusterUpgrade" && s["name"] == "cni" && s["phase"] == "Done");
            if after_done || a["status"]["release"] == V2 {
                let cl = k.get(CAPI, "Cluster", Some(ns), "edge").await?;
                let reconciled = condition(&cl, "TopologyReconciled").is_some_and(|c| c["status"] == "True");
                assert!(reconciled, "the AfterClusterUpgrade stage ran before CAPI finished: {a:#}\n{cl:#}");
            }
            (a["status"]["ready"] == true && a["status"]["release"] == V2).then_some(a)
        }
    })
    .await;
    assert!(waited_for_capi.into_inner(), "the AfterClusterUpgrade stage was never seen waiting for the upgrade");
    assert_eq!(upgraded["status"]["holdResult"], "Completed", "{upgraded:#}");
    let kcp = k.list(KCP, "KubeadmControlPlane", Some(&ns), None).await;
    assert_eq!(kcp[0]["spec"]["version"], "v1.35.4", "released, CAPI upgraded the control plane");
    wait_until("CAPI called AfterClusterUpgrade", SLOW, || async {
        (hook_calls(&op.metrics().await, "AfterClusterUpgrade", "Success") >= 1).then_some(())
    })
    .await;
    // The Cluster's creation and the control plane's own steps of the upgrade (CAPI v1.12+),
    // observed.
    let metrics = op.metrics().await;
    for hook in ["BeforeClusterCreate", "BeforeControlPlaneUpgrade", "AfterControlPlaneUpgrade"] {
        assert!(hook_calls(&metrics, hook, "Success") >= 1, "CAPI called {hook}: {metrics}");
    }

    k.delete(CAPI, "Cluster", Some(&ns), "edge").await;
    wait_gone(&k, CAPI, "Cluster", &ns, "edge").await;
    let metrics = op.metrics().await;
    assert!(hook_calls(&metrics, "BeforeClusterDelete", "Success") >= 1, "CAPI called BeforeClusterDelete: {metrics}");
    k.delete("runtime.cluster.x-k8s.io/v1beta2", "ExtensionConfig", None, &format!("clusterstack-{ns}")).await;
    // With the operator still running: our finalizers need it.
    c.drop_namespace(&ns).await;
    drop(op);
}

/// A v1beta1 Cluster (while CAPI serves v1beta1) goes through CAPI's conversion webhook: stored as
/// v1beta2 with its class, provisioned, and read by the operator as a user of the release.
async fn a_v1beta1_cluster_is_converted_and_provisioned(c: Arc<RealCluster>) {
    let k = c.admin().await;
    let ns = c.namespace("capi-v1beta1").await;
    let _op = c.operator("v1beta1", &hooks(&c, "v1beta1").args);
    k.apply(&stack(&ns, &["v1"])).await;
    wait_ready(&k, &ns, &[V1]).await;
    k.apply(&json!({
        "apiVersion": CAPI_V1BETA1, "kind": "Cluster",
        "metadata": {"name": "old", "namespace": ns},
        "spec": {
            "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "services": {"cidrBlocks": ["10.128.0.0/12"]}},
            "topology": {"class": V1, "version": "v1.35.0", "controlPlane": {"replicas": 1}}
        }
    }))
    .await;
    let stored = k.get(CAPI, "Cluster", Some(&ns), "old").await.expect("the Cluster as v1beta2");
    assert_eq!(stored["spec"]["topology"]["classRef"]["name"], V1, "converted by CAPI: {stored:#}");
    wait_until("CAPI initialised the control plane", SLOW, || async {
        let cl = k.get(CAPI_V1BETA1, "Cluster", Some(&ns), "old").await?;
        (cl["status"]["initialization"]["controlPlaneInitialized"] == true
            || condition(&cl, "ControlPlaneInitialized").is_some_and(|c| c["status"] == "True"))
        .then_some(())
    })
    .await;
    // The operator sees a user of v1: garbage collection keeps it while the Cluster lives.
    let addon = wait_until("the ClusterAddon of the v1beta1 Cluster", SLOW, || async {
        let a = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-old").await?;
        let ready = condition(&a, "Ready")?;
        (ready["reason"] != "WaitingForControlPlane").then_some(a)
    })
    .await;
    assert_eq!(addon["spec"]["clusterRef"]["name"], "old", "{addon:#}");
    k.delete(CAPI, "Cluster", Some(&ns), "old").await;
    wait_gone(&k, CAPI, "Cluster", &ns, "old").await;
    c.drop_namespace(&ns).await;
}

/// A ClusterStackRollout moves a provisioned Cluster to v2: the operator changes the class name
/// only, real CAPI's webhooks accept the move and its topology controller rebases the Cluster on
/// the new class; the rollout succeeds on CAPI's own conditions and the addons follow.
async fn a_rollout_moves_a_cluster_and_capi_rebases_it(c: Arc<RealCluster>) {
    let k = c.admin().await;
    let ns = c.namespace("capi-rollout").await;
    let hooks = hooks(&c, "rollout");
    let op = c.operator("rollout", &hooks.args);
    register(&k, &format!("clusterstack-{ns}"), &ns, &hooks).await;
    k.apply(&stack(&ns, &["v1", "v2"])).await;
    wait_ready(&k, &ns, &[V1, V2]).await;
    let _workload = workload_for(&c, &k, &ns, "edge-addons").await;
    k.apply(&cluster(&ns, "edge", V1, "v1.35.0", "edge-addons")).await;
    wait_until("the ClusterAddon Ready on v1", SLOW, || async {
        let a = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-edge").await?;
        (a["status"]["ready"] == true && a["status"]["release"] == V1).then_some(())
    })
    .await;

    k.apply(&json!({"apiVersion": CS, "kind": "ClusterStackRollout", "metadata": {"name": "ferrol", "namespace": ns},
                    "spec": {"clusterStackRef": {"name": "ferrol"}, "target": "v2", "progressDeadline": "5m"}}))
        .await;
    let rollout = wait_until("the rollout Succeeded", SLOW, || async {
        let r = k.get(CS, "ClusterStackRollout", Some(&ns), "ferrol").await?;
        (r["status"]["phase"] == "Succeeded").then_some(r)
    })
    .await;
    assert_eq!(rollout["status"]["target"], V2, "{rollout:#}");
    let cl = k.get(CAPI, "Cluster", Some(&ns), "edge").await.expect("the Cluster");
    assert_eq!(cl["spec"]["topology"]["classRef"]["name"], V2, "{cl:#}");
    assert!(cl["status"]["observedGeneration"].as_i64() >= cl["metadata"]["generation"].as_i64(), "{cl:#}");
    // Succeeded only once the topology controller reconciled this generation, not on its True of
    // the class before (its condition carries its own observedGeneration).
    let reconciled = condition(&cl, "TopologyReconciled").expect("TopologyReconciled");
    assert_eq!(reconciled["status"], "True", "CAPI rebased the topology on v2: {cl:#}");
    assert!(reconciled["observedGeneration"].as_i64() >= cl["metadata"]["generation"].as_i64(), "{cl:#}");
    let kcp_name = cl["spec"]["controlPlaneRef"]["name"].as_str().expect("a control plane").to_string();
    let kcp = k.get(KCP, "KubeadmControlPlane", Some(&ns), &kcp_name).await.expect("the KubeadmControlPlane");
    let cloned_from = &kcp["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"];
    assert!(cloned_from.as_str().is_some_and(|n| n.starts_with(V2)), "cloned from {cloned_from} {kcp:#}");
    let addon = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-edge").await.expect("the ClusterAddon");
    assert_eq!(addon["status"]["release"], V2, "{addon:#}");
    assert_eq!(addon["status"]["ready"], true, "{addon:#}");

    k.delete(CAPI, "Cluster", Some(&ns), "edge").await;
    wait_gone(&k, CAPI, "Cluster", &ns, "edge").await;
    k.delete("runtime.cluster.x-k8s.io/v1beta2", "ExtensionConfig", None, &format!("clusterstack-{ns}")).await;
    c.drop_namespace(&ns).await;
    drop(op);
}

/// Releases for the refusals: v1 as committed, and two built here (`clusterstack build`) from
/// the sample's source with one change each that Cluster API's Cluster webhooks refuse for a
/// Cluster of v1 that uses the `default-worker` class and sets no variable: v4 renames that
/// worker class, v5 adds a required variable.
fn incompatible_releases(c: &RealCluster) -> std::path::PathBuf {
    let releases = c.scratch.path().join("refuse-releases");
    stack_script::copy_dir(&releases_dir().join(V1), &releases.join(V1));
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/inmemory-ferrol-1-35");
    let edits: [(&str, &str, &str); 2] = [
        ("v4", "      - class: default-worker\n", "      - class: large-worker\n"),
        (
            "v5",
            "spec:\n",
            "spec:\n  variables:\n    - name: region\n      required: true\n      schema:\n        openAPIV3Schema:\n          type: string\n",
        ),
    ];
    for (version, from, to) in edits {
        let source = c.scratch.path().join(format!("refuse-source-{version}"));
        stack_script::copy_dir(&sample, &source);
        let class = source.join("cluster-class/templates/cluster-class.yaml");
        let text = std::fs::read_to_string(&class).expect("the sample's ClusterClass template");
        assert!(text.contains(from), "{text}");
        std::fs::write(&class, text.replacen(from, to, 1)).expect("the changed ClusterClass template");
        stack_script::run(
            std::process::Command::new(support::real::operator_binary())
                .args(["build", "--version", version, "--out"])
                .arg(&releases)
                .arg(&source),
        );
    }
    releases
}

/// A move Cluster API would refuse is refused by the rollout before anything moves, and its
/// reason names CAPI's rule: the same field and words CAPI's own webhooks answer when the same
/// move is tried by hand. The Cluster uses a worker class the first target no longer has; the
/// second target requires a variable it does not set.
async fn a_move_capi_would_refuse_is_refused_first_naming_capis_rule(c: Arc<RealCluster>) {
    const V4: &str = "inmemory-ferrol-1-35-v4";
    const V5: &str = "inmemory-ferrol-1-35-v5";
    let k = c.admin().await;
    let ns = c.namespace("capi-refuse").await;
    let releases = incompatible_releases(&c);
    let _op = c.operator(
        "refuse",
        &[
            format!("--default-source=dir:{}", releases.display()),
            format!("--allowed-directory-roots={}", releases.display()),
        ],
    );
    k.apply(&stack(&ns, &["v1", "v4", "v5"])).await;
    wait_ready(&k, &ns, &[V1, V4, V5]).await;
    let mut workers = cluster(&ns, "edge", V1, "v1.35.0", "none");
    workers["spec"]["topology"]["workers"] =
        json!({"machineDeployments": [{"class": "default-worker", "name": "md-0", "replicas": 0}]});
    k.apply(&workers).await;

    let cases = [
        (
            "v4",
            V4,
            "spec.topology.workers.machineDeployments[0].class",
            format!("MachineDeploymentClass with name \"default-worker\" does not exist in ClusterClass \"{V4}\""),
        ),
        ("v5", V5, "spec.topology.variables", "required variable \"region\" must be set".to_string()),
    ];
    for (target, class, field, rule) in cases {
        k.apply(
            &json!({"apiVersion": CS, "kind": "ClusterStackRollout", "metadata": {"name": "ferrol", "namespace": ns},
                        "spec": {"clusterStackRef": {"name": "ferrol"}, "target": target}}),
        )
        .await;
        // "v1 to vN: Cluster API would refuse it: FIELD: RULE".
        let reason = format!("{V1} to {class}: Cluster API would refuse it: {field}: {rule}");
        let rollout = wait_until(&format!("the Cluster Incompatible with {target}"), SLOW, || async {
            let r = k.get(CS, "ClusterStackRollout", Some(&ns), "ferrol").await?;
            let entry = r["status"]["clusters"].as_array()?.first()?.clone();
            (r["status"]["target"] == class && entry["state"] == "Incompatible").then_some(r)
        })
        .await;
        assert_eq!(rollout["status"]["clusters"][0]["message"], reason.as_str(), "{rollout:#}");
        let cl = k.get(CAPI, "Cluster", Some(&ns), "edge").await.expect("the Cluster");
        assert_eq!(cl["spec"]["topology"]["classRef"]["name"], V1, "nothing moved: {cl:#}");
        // CAPI's own answer to the same move names the same field and rule.
        let by_hand = json!({"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "edge", "namespace": ns},
                             "spec": {"topology": {"classRef": {"name": class}}}});
        let refused = k.try_apply_as(&by_hand, "by-hand", true).await.expect_err("CAPI refuses the move");
        let said = refused.to_string();
        assert!(said.contains(&format!("{field}: ")) && said.contains(&rule), "CAPI said: {said}");
        let events = k.list("v1", "Event", Some(&ns), None).await;
        assert!(
            events
                .iter()
                .any(|e| e["reason"] == "Incompatible" && e["message"].as_str().is_some_and(|m| m.contains(&reason))),
            "an Incompatible event naming the rule"
        );
    }
    k.delete(CAPI, "Cluster", Some(&ns), "edge").await;
    wait_gone(&k, CAPI, "Cluster", &ns, "edge").await;
    c.drop_namespace(&ns).await;
}

/// A rollout whose target fails its health check is halted and rolled back on real CAPI: the
/// Cluster moves from v2 to v3 (a class change only, same Kubernetes), is judged unhealthy, and
/// goes back to v2; CAPI accepts both moves and rebases the topology each time.
async fn a_failed_move_is_rolled_back_and_capi_rebases_it_back(c: Arc<RealCluster>) {
    const V3: &str = "inmemory-ferrol-1-35-v3";
    let k = c.admin().await;
    let ns = c.namespace("capi-rollback").await;
    let _op = plain_operator(&c, "rollback");
    k.apply(&stack(&ns, &["v2", "v3"])).await;
    wait_ready(&k, &ns, &[V2, V3]).await;
    k.apply(&cluster(&ns, "edge", V2, "v1.35.4", "none")).await;
    wait_until("CAPI reconciled the topology on v2", SLOW, || async {
        let cl = k.get(CAPI, "Cluster", Some(&ns), "edge").await?;
        (condition(&cl, "TopologyReconciled")?["status"] == "True").then_some(())
    })
    .await;
    k.apply(&json!({"apiVersion": CS, "kind": "ClusterStackRollout", "metadata": {"name": "ferrol", "namespace": ns},
        "spec": {"clusterStackRef": {"name": "ferrol"}, "target": "v3", "progressDeadline": "20s",
                 "failurePolicy": {"maxFailures": 0, "rollback": "Automatic"},
                 "healthCheck": {"expression": "'smoke' in cluster.metadata.labels"}}}))
        .await;
    wait_until("the Cluster moved to v3", SLOW, || async {
        let cl = k.get(CAPI, "Cluster", Some(&ns), "edge").await?;
        (cl["spec"]["topology"]["classRef"]["name"] == V3).then_some(())
    })
    .await;
    let rollout = wait_until("the rollout halted and rolled back", SLOW, || async {
        let r = k.get(CS, "ClusterStackRollout", Some(&ns), "ferrol").await?;
        let entry = r["status"]["clusters"].as_array()?.first()?.clone();
        (r["status"]["phase"] == "Halted" && entry["state"] == "RolledBack").then_some(r)
    })
    .await;
    assert_eq!(rollout["status"]["failedTargets"], json!([V3]), "{rollout:#}");
    let cl = wait_until("CAPI rebased the Cluster back on v2", SLOW, || async {
        let cl = k.get(CAPI, "Cluster", Some(&ns), "edge").await?;
        // The condition's own observedGeneration: the Cluster controller observes the move
        // before the topology controller has rebased anything.
        let reconciled = condition(&cl, "TopologyReconciled")?;
        let back = cl["spec"]["topology"]["classRef"]["name"] == V2
            && reconciled["observedGeneration"].as_i64() >= cl["metadata"]["generation"].as_i64()
            && reconciled["status"] == "True";
        back.then_some(cl)
    })
    .await;
    assert_eq!(cl["spec"]["topology"]["version"], "v1.35.4", "{cl:#}");
    // CAPI's clones of the templates follow the class back: the control plane's template is v2's.
    let kcp_name = cl["spec"]["controlPlaneRef"]["name"].as_str().expect("a control plane").to_string();
    let kcp = k.get(KCP, "KubeadmControlPlane", Some(&ns), &kcp_name).await.expect("the KubeadmControlPlane");
    let cloned_from = &kcp["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"];
    assert!(cloned_from.as_str().is_some_and(|n| n.starts_with(V2)), "cloned from {cloned_from} {kcp:#}");

    k.delete(CAPI, "Cluster", Some(&ns), "edge").await;
    wait_gone(&k, CAPI, "Cluster", &ns, "edge").await;
    c.drop_namespace(&ns).await;
}

/// A Cluster deleted while its addons are being applied: its workload API server is frozen, so
/// every apply hangs until the client's deadline. CAPI deletes the Cluster (nothing of ours holds
/// it), its ClusterAddon goes with it and is not made again, and the operator carries on.
async fn a_cluster_deleted_while_its_addons_apply_leaves_nothing_stuck(c: Arc<RealCluster>) {
    let k = c.admin().await;
    let ns = c.namespace("capi-delete").await;
    let op = plain_operator(&c, "delete");
    k.apply(&stack(&ns, &["v1"])).await;
    wait_ready(&k, &ns, &[V1]).await;
    let workload = workload_for(&c, &k, &ns, "doomed-addons").await;
    workload.pause(true);
    k.apply(&cluster(&ns, "doomed", V1, "v1.35.0", "doomed-addons")).await;
    wait_until("CAPI initialised the control plane and the addons are being applied", SLOW, || async {
        let cl = k.get(CAPI, "Cluster", Some(&ns), "doomed").await?;
        let a = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-doomed").await?;
        let applying = cl["status"]["initialization"]["controlPlaneInitialized"] == true
            && condition(&a, "Ready").is_none_or(|r| r["reason"] != "WaitingForControlPlane");
        applying.then_some(())
    })
    .await;
    // The addon controller reacts at once and is now inside an apply that cannot finish.
    tokio::time::sleep(Duration::from_secs(2)).await;
    k.delete(CAPI, "Cluster", Some(&ns), "doomed").await;
    wait_gone(&k, CAPI, "Cluster", &ns, "doomed").await;
    wait_gone(&k, CS, "ClusterAddon", &ns, "cluster-addon-doomed").await;
    workload.pause(false);
    // Past the workload client's 20 s deadline: the hung apply has ended and made nothing again.
    tokio::time::sleep(Duration::from_secs(22)).await;
    assert!(k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-doomed").await.is_none(), "made again");
    let release = k.get(CS, "ClusterStackRelease", Some(&ns), V1).await.expect("v1");
    assert_eq!(release["status"]["ready"], true, "{release:#}");
    assert!(!op.log().contains("panicked"), "{}", op.log());
    c.drop_namespace(&ns).await;
}

/// A ClusterClass in use outlives the deletion of its stack and release: the release waits,
/// saying which Cluster uses its class (CAPI's own webhook refuses to delete the class too), and
/// once CAPI has deleted the Cluster the release's objects and its finalizer go.
async fn a_class_in_use_is_kept_until_its_cluster_is_gone(c: Arc<RealCluster>) {
    let k = c.admin().await;
    let ns = c.namespace("capi-in-use").await;
    let _op = plain_operator(&c, "in-use");
    k.apply(&stack(&ns, &["v1"])).await;
    wait_ready(&k, &ns, &[V1]).await;
    k.apply(&cluster(&ns, "user", V1, "v1.35.0", "none")).await;
    wait_until("CAPI reconciled the topology", SLOW, || async {
        let cl = k.get(CAPI, "Cluster", Some(&ns), "user").await?;
        (condition(&cl, "TopologyReconciled")?["status"] == "True").then_some(())
    })
    .await;

    k.delete(CS, "ClusterStack", Some(&ns), "ferrol").await;
    let release = wait_until("the release waiting for its Cluster", SLOW, || async {
        let r = k.get(CS, "ClusterStackRelease", Some(&ns), V1).await?;
        let ready = condition(&r, "Ready")?;
        (r["metadata"]["deletionTimestamp"].is_string() && ready["reason"] == "InUse").then_some(r)
    })
    .await;
    let message = condition(&release, "Ready").and_then(|c| c["message"].as_str().map(str::to_string));
    assert_eq!(
        message.as_deref(),
        Some(format!("waiting to delete: ClusterClass {V1} is used by Cluster {ns}/user").as_str()),
        "{release:#}"
    );
    let classes = k.api(CAPI, "ClusterClass", Some(&ns)).await;
    let refused = classes.delete(V1, &Default::default()).await.expect_err("CAPI keeps a class in use");
    assert!(
        refused.to_string().contains("ClusterClass cannot be deleted because it is used by Cluster(s)"),
        "{refused}"
    );
    assert!(k.get(CAPI, "ClusterClass", Some(&ns), V1).await.is_some());

    k.delete(CAPI, "Cluster", Some(&ns), "user").await;
    wait_gone(&k, CAPI, "Cluster", &ns, "user").await;
    wait_gone(&k, CS, "ClusterStackRelease", &ns, V1).await;
    assert!(k.get(CAPI, "ClusterClass", Some(&ns), V1).await.is_none(), "the class went with its release");
    let templates = k.list("infrastructure.cluster.x-k8s.io/v1beta2", "DevClusterTemplate", Some(&ns), None).await;
    assert!(templates.is_empty(), "{templates:#?}");
    c.drop_namespace(&ns).await;
}

/// An upgrade held past `--hooks-hold-deadline` is let through with what the docs promise: the
/// addons cannot be applied (the workload API server stays frozen), CAPI is answered Retry until
/// the deadline, then the hold ends with `holdResult: DeadlineExceeded` and a Warning Event
/// `AddonUpgradeHoldExpired`, and CAPI upgrades the control plane.
async fn an_upgrade_held_past_its_deadline_is_let_through_with_a_warning(c: Arc<RealCluster>) {
    let k = c.admin().await;
    let ns = c.namespace("capi-deadline").await;
    let hooks = hooks_with_deadline(&c, "deadline", "20s");
    let op = c.operator("deadline", &hooks.args);
    register(&k, &format!("clusterstack-{ns}"), &ns, &hooks).await;
    k.apply(&stack(&ns, &["v1", "v2"])).await;
    wait_ready(&k, &ns, &[V1, V2]).await;
    let workload = workload_for(&c, &k, &ns, "edge-addons").await;
    k.apply(&cluster(&ns, "edge", V1, "v1.35.0", "edge-addons")).await;
    wait_until("the ClusterAddon Ready on v1", SLOW, || async {
        let a = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-edge").await?;
        (a["status"]["ready"] == true && a["status"]["release"] == V1).then_some(())
    })
    .await;

    workload.pause(true);
    let asked = std::time::Instant::now();
    upgrade_edge_to_v2_and_see_it_held(&k, &op, &ns).await;
    let expired = wait_until("the hold ended at its deadline", SLOW, || async {
        let a = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-edge").await?;
        (a["status"]["holdResult"] == "DeadlineExceeded").then_some(a)
    })
    .await;
    assert!(asked.elapsed() >= Duration::from_secs(20), "not before the deadline: {:?}", asked.elapsed());
    assert_ne!(expired["status"]["release"], V2, "the v2 addons could not be applied: {expired:#}");
    wait_until("CAPI upgraded the control plane", SLOW, || async {
        let kcp = k.list(KCP, "KubeadmControlPlane", Some(&ns), None).await;
        (kcp.first()?["spec"]["version"] == "v1.35.4").then_some(())
    })
    .await;
    let events = k.list("v1", "Event", Some(&ns), None).await;
    assert!(
        events.iter().any(|e| e["reason"] == "AddonUpgradeHoldExpired" && e["type"] == "Warning"),
        "a Warning event AddonUpgradeHoldExpired"
    );
    workload.pause(false);
    k.delete(CAPI, "Cluster", Some(&ns), "edge").await;
    wait_gone(&k, CAPI, "Cluster", &ns, "edge").await;
    k.delete("runtime.cluster.x-k8s.io/v1beta2", "ExtensionConfig", None, &format!("clusterstack-{ns}")).await;
    c.drop_namespace(&ns).await;
}

fn main() -> std::process::ExitCode {
    let all = support::real::scenarios![
        a_cluster_is_provisioned_by_capi_gets_its_addons_and_its_upgrade_is_held_for_them,
        a_v1beta1_cluster_is_converted_and_provisioned,
        a_rollout_moves_a_cluster_and_capi_rebases_it,
        a_move_capi_would_refuse_is_refused_first_naming_capis_rule,
        a_failed_move_is_rolled_back_and_capi_rebases_it_back,
        a_cluster_deleted_while_its_addons_apply_leaves_nothing_stuck,
        a_class_in_use_is_kept_until_its_cluster_is_gone,
        an_upgrade_held_past_its_deadline_is_let_through_with_a_warning,
    ];
    run_capi_scenarios("real_capi", &all, Duration::from_secs(600))
}
