//! The Cluster API part of the journey on the real server, with the test standing in for Cluster
//! API's controllers.

use std::sync::Arc;

use serde_json::{Value, json};

use super::support::real::{RealCluster, WAIT, wait_until};
use super::{CS, V1, V2, releases_dir, serving, stack, wait_ready};

/// The Cluster API part of the journey, with the test standing in for CAPI's controllers (they run
/// here from the next issue on): the Cluster's kubeconfig Secret names a "workload cluster" (this
/// same kube-apiserver, another user), its control plane is reported initialised, and after a
/// move its topology is reported reconciled. The operator does the rest as in production: reads
/// the v1beta2 Cluster and what it references, the platform values, applies the addons into the
/// workload cluster, and the rollout moves the Cluster and waits for it.
pub async fn addons_reach_the_workload_cluster_and_a_rollout_moves_it(c: Arc<RealCluster>) {
    use base64::Engine;
    const CAPI: &str = "cluster.x-k8s.io/v1beta2";
    let k = c.admin().await;
    let ns = c.namespace("fleet").await;
    let _op = c.operator("fleet", &serving(&releases_dir()));
    k.apply(&stack(&ns, "ferrol", &["v1", "v2"], false)).await;
    wait_ready(&k, &ns, V1).await;
    wait_ready(&k, &ns, V2).await;

    let workload_kubeconfig = c.scratch.path().join("workload.kubeconfig");
    c.cp.user_kubeconfig("workload-admin", &["system:masters"], &workload_kubeconfig).expect("kubeconfig");
    let text = std::fs::read_to_string(&workload_kubeconfig).expect("kubeconfig");
    k.apply(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "edge-kubeconfig", "namespace": ns},
                    "data": {"value": base64::engine::general_purpose::STANDARD.encode(text)}}))
        .await;
    k.apply(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "platform", "namespace": ns},
                    "data": {"values.yaml": "image: registry.example/cni:platform\n"}}))
        .await;
    // Its control plane and infrastructure cluster do not exist (no CAPI): templates see nothing.
    k.apply(&json!({
        "apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "edge", "namespace": ns},
        "spec": {
            "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}},
            "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "edge"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevCluster", "name": "edge"},
            "topology": {"classRef": {"name": V1}, "version": "v1.35.0"}
        }
    }))
    .await;
    let initialised = |generation: &Value| {
        json!({"status": {
            "observedGeneration": generation,
            "initialization": {"controlPlaneInitialized": true, "infrastructureProvisioned": true},
            "conditions": [
                {"type": "TopologyReconciled", "status": "True", "reason": "ReconcileSucceeded", "message": "", "lastTransitionTime": "2026-11-28T00:00:00Z"},
                {"type": "Available", "status": "True", "reason": "Available", "message": "", "lastTransitionTime": "2026-11-28T00:00:00Z"}
            ]
        }})
    };
    let generation =
        k.get(CAPI, "Cluster", Some(&ns), "edge").await.expect("the Cluster")["metadata"]["generation"].clone();
    k.merge_status(CAPI, "Cluster", Some(&ns), "edge", &initialised(&generation)).await.expect("status");

    // The ClusterAddon appears, owned by the Cluster, and its first install completes.
    let addon = wait_until("the ClusterAddon Ready on v1", WAIT, || async {
        let a = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-edge").await?;
        (a["status"]["ready"] == true && a["status"]["release"] == V1).then_some(a)
    })
    .await;
    assert_eq!(addon["spec"]["clusterRef"]["name"], "edge", "{addon:#}");
    assert_eq!(addon["metadata"]["ownerReferences"][0]["kind"], "Cluster", "{addon:#}");
    let image = |ds: &Value| ds["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    let ds = k.get("apps/v1", "DaemonSet", Some("kube-system"), "cni").await.expect("the cni DaemonSet");
    assert_eq!(image(&ds), "registry.k8s.io/pause:3.10", "the release's own value first");
    // The platform team points the cni addon at its values: applied at once, not at the next
    // drift resync.
    k.merge(
        CS,
        "ClusterAddon",
        Some(&ns),
        "cluster-addon-edge",
        &json!({"spec": {"valuesFrom": [{"addon": "cni", "kind": "ConfigMap", "name": "platform"}]}}),
    )
    .await
    .expect("valuesFrom");
    // In the workload cluster: the release's objects, with the values rendered from the v1beta2
    // Cluster (name, pod CIDR) and the platform team's image.
    wait_until("the platform image in the workload cluster", WAIT, || async {
        let ds = k.get("apps/v1", "DaemonSet", Some("kube-system"), "cni").await?;
        (image(&ds) == "registry.example/cni:platform").then_some(())
    })
    .await;
    let config = k.get("v1", "ConfigMap", Some("kube-system"), "cni-config").await.expect("cni-config");
    assert_eq!(config["data"]["cluster"], "edge", "{config:#}");
    assert_eq!(config["data"]["podCIDR"], "10.244.0.0/16", "{config:#}");
    let managers: Vec<&str> = config["metadata"]["managedFields"]
        .as_array()
        .map(|m| m.iter().filter_map(|f| f["manager"].as_str()).collect())
        .unwrap_or_default();
    assert!(managers.contains(&"clusterstack-addons"), "applied by the addons' field manager: {managers:?}");

    // A rollout to v2: the operator moves the Cluster (only classRef.name, its own field
    // manager); the stand-in CAPI reports the new generation reconciled; the addons follow.
    k.apply(&json!({"apiVersion": CS, "kind": "ClusterStackRollout", "metadata": {"name": "ferrol", "namespace": ns},
                    "spec": {"clusterStackRef": {"name": "ferrol"}, "target": "v2", "progressDeadline": "5m"}}))
        .await;
    let moved = wait_until("the Cluster moved to v2", WAIT, || async {
        let cl = k.get(CAPI, "Cluster", Some(&ns), "edge").await?;
        (cl["spec"]["topology"]["classRef"]["name"] == V2).then_some(cl)
    })
    .await;
    let rollout_fields = moved["metadata"]["managedFields"]
        .as_array()
        .and_then(|m| m.iter().find(|f| f["manager"] == "clusterstack-rollout").cloned())
        .expect("the rollout's field manager");
    assert_eq!(
        rollout_fields["fieldsV1"]["f:spec"]["f:topology"]["f:classRef"],
        json!({"f:name": {}}),
        "the move owns the class name only: {rollout_fields:#}"
    );
    k.merge_status(CAPI, "Cluster", Some(&ns), "edge", &initialised(&moved["metadata"]["generation"]))
        .await
        .expect("status");
    let rollout = wait_until("the rollout Succeeded", WAIT, || async {
        let r = k.get(CS, "ClusterStackRollout", Some(&ns), "ferrol").await?;
        (r["status"]["phase"] == "Succeeded").then_some(r)
    })
    .await;
    assert_eq!(rollout["status"]["target"], V2, "{rollout:#}");
    let addon = k.get(CS, "ClusterAddon", Some(&ns), "cluster-addon-edge").await.expect("addon");
    assert_eq!(addon["status"]["release"], V2, "{addon:#}");
    assert_eq!(addon["status"]["ready"], true, "{addon:#}");
    for (kind, name) in [("DaemonSet", "cni"), ("Deployment", "metrics-server")] {
        k.delete("apps/v1", kind, Some("kube-system"), name).await;
    }
    k.delete("v1", "ConfigMap", Some("kube-system"), "cni-config").await;
    c.drop_namespace(&ns).await;
}
