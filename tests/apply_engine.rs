//! The apply engine against the API server test double.

mod support;

use std::time::Duration;

use clusterstack::api::{ResourceStatus, SyncStatus};
use clusterstack::apply::{
    Applier, ApplyError, ApplyOptions, FIELD_MANAGER, ObjectKey, RELEASE_LABEL, RELEASE_NAMESPACE_LABEL, ReleaseOwner,
};
use kube::api::DynamicObject;
use serde_json::{Value, json};
use support::fixtures::{capi_crds, config_map, load_yaml};
use support::{ApiServer, RequestMatch};

const NS: &str = "cluster-stacks";

fn owner(tag: &str) -> ReleaseOwner {
    ReleaseOwner::new(tag, NS)
}

/// A server with the release namespace.
async fn server_with_namespace() -> ApiServer {
    let server = ApiServer::start().await;
    server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    server
}

/// A server with the release namespace and the CAPI CRDs installed.
async fn server_with_capi() -> ApiServer {
    let server = server_with_namespace().await;
    for crd in capi_crds() {
        server.put_object(serde_json::to_value(&crd).unwrap());
    }
    server
}

fn key(kind: &str, name: &str) -> (String, String) {
    (kind.to_string(), name.to_string())
}

fn keys(list: &[ObjectKey]) -> Vec<(String, String)> {
    let mut v: Vec<_> = list.iter().map(|k| key(&k.kind, &k.name)).collect();
    v.sort();
    v
}

fn get(server: &ApiServer, api_version: &str, kind: &str, name: &str) -> Option<Value> {
    server.get_object(api_version, kind, Some(NS), name)
}

const DMT: &str = "infrastructure.cluster.x-k8s.io/v1beta1";
const KCPT: &str = "controlplane.cluster.x-k8s.io/v1beta1";

#[tokio::test]
async fn cluster_class_v1_then_v2_updates_and_prunes() {
    let server = server_with_capi().await;
    let applier = Applier::new(server.client());
    let v1 = load_yaml("apply/cluster-class-v1.yaml");
    let report = applier.apply(&v1, &ApplyOptions::new(owner("docker-ferrol-1-27-v1"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.inventory);
    assert_eq!(report.inventory.len(), 6);
    assert_eq!(report.created.len(), 6);
    assert!(report.corrected.is_empty() && report.pruned.is_empty());
    // Every object landed in the release's namespace with our labels, in the inventory with its real group.
    let cc = get(&server, "cluster.x-k8s.io/v1beta1", "ClusterClass", "docker-ferrol-1-27-v1").unwrap();
    assert_eq!(cc["metadata"]["labels"][RELEASE_LABEL], "docker-ferrol-1-27-v1");
    assert_eq!(cc["metadata"]["labels"][RELEASE_NAMESPACE_LABEL], NS);
    assert_eq!(cc["metadata"]["managedFields"][0]["manager"], FIELD_MANAGER);
    let inv = &report.inventory[0];
    assert_eq!(
        (inv.group.as_str(), inv.version.as_str(), inv.kind.as_str(), inv.namespace.as_str()),
        ("cluster.x-k8s.io", "v1beta1", "ClusterClass", NS)
    );

    // v2, with the same release labels (an in-place update of the release's objects).
    let kcpt_before = get(&server, KCPT, "KubeadmControlPlaneTemplate", "docker-ferrol-1-27-control-plane-v1").unwrap();
    let dct_before = get(&server, DMT, "DockerClusterTemplate", "docker-ferrol-1-27-cluster-v1").unwrap();
    let v2 = load_yaml("apply/cluster-class-v2.yaml");
    let opts = ApplyOptions::new(owner("docker-ferrol-1-27-v1")).with_previous(report.inventory.clone());
    let report2 = applier.apply(&v2, &opts).await.unwrap();
    assert!(report2.all_synced(), "{:?}", report2.inventory);
    assert_eq!(keys(&report2.created), [key("DockerMachineTemplate", "docker-ferrol-1-27-worker-v2")]);
    assert_eq!(
        keys(&report2.corrected),
        [
            key("ClusterClass", "docker-ferrol-1-27-v1"),
            key("KubeadmControlPlaneTemplate", "docker-ferrol-1-27-control-plane-v1")
        ]
    );
    assert_eq!(keys(&report2.pruned), [key("DockerMachineTemplate", "docker-ferrol-1-27-worker-v1")]);
    assert!(get(&server, DMT, "DockerMachineTemplate", "docker-ferrol-1-27-worker-v1").is_none());
    assert!(get(&server, DMT, "DockerMachineTemplate", "docker-ferrol-1-27-worker-v2").is_some());
    let kcpt = get(&server, KCPT, "KubeadmControlPlaneTemplate", "docker-ferrol-1-27-control-plane-v1").unwrap();
    assert_eq!(
        kcpt["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]["certSANs"],
        json!(["localhost", "127.0.0.1", "0.0.0.0"])
    );
    assert_ne!(kcpt["metadata"]["resourceVersion"], kcpt_before["metadata"]["resourceVersion"]);
    assert_eq!(kcpt["metadata"]["generation"], 2);
    // Unchanged objects were not written.
    let dct = get(&server, DMT, "DockerClusterTemplate", "docker-ferrol-1-27-cluster-v1").unwrap();
    assert_eq!(dct["metadata"]["resourceVersion"], dct_before["metadata"]["resourceVersion"]);
    assert_eq!(report2.inventory.len(), 6);
}

#[tokio::test]
async fn reapply_changes_nothing_and_drift_is_restored() {
    let server = server_with_capi().await;
    let applier = Applier::new(server.client());
    let v1 = load_yaml("apply/cluster-class-v1.yaml");
    let opts = ApplyOptions::new(owner("docker-ferrol-1-27-v1"));
    let first = applier.apply(&v1, &opts).await.unwrap();
    let rv = server.resource_version();
    let again = applier.apply(&v1, &opts.clone().with_previous(first.inventory.clone())).await.unwrap();
    assert!(again.all_synced() && again.created.is_empty() && again.corrected.is_empty() && again.pruned.is_empty());
    assert_eq!(server.resource_version(), rv, "a re-apply of unchanged objects wrote something");

    // Someone edits a template by hand.
    server.edit_object(KCPT, "KubeadmControlPlaneTemplate", Some(NS), "docker-ferrol-1-27-control-plane-v1", |o| {
        o["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]["certSANs"] =
            json!(["evil.example.com"]);
        o["metadata"]["labels"][RELEASE_LABEL] = json!("tampered");
    });
    // A fresh applier (as after a restart) still sees and corrects the drift.
    let fresh = Applier::new(server.client());
    let fixed = fresh.apply(&v1, &opts.clone().with_previous(first.inventory.clone())).await.unwrap();
    assert_eq!(keys(&fixed.corrected), [key("KubeadmControlPlaneTemplate", "docker-ferrol-1-27-control-plane-v1")]);
    let kcpt = get(&server, KCPT, "KubeadmControlPlaneTemplate", "docker-ferrol-1-27-control-plane-v1").unwrap();
    assert_eq!(
        kcpt["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]["certSANs"],
        json!(["localhost", "127.0.0.1"])
    );
    assert_eq!(kcpt["metadata"]["labels"][RELEASE_LABEL], "docker-ferrol-1-27-v1");
    // And a deleted object is recreated: one request per object and no read before it, so it is
    // reported as corrected (its resourceVersion is not the recorded one).
    let dmt = get(&server, DMT, "DockerMachineTemplate", "docker-ferrol-1-27-worker-v1").unwrap();
    let uid = dmt["metadata"]["uid"].clone();
    let client = server.client();
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1beta1", "DockerMachineTemplate"),
        "dockermachinetemplates",
    );
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client, NS, &ar);
    api.delete("docker-ferrol-1-27-worker-v1", &Default::default()).await.unwrap();
    let again = applier.apply(&v1, &opts.clone().with_previous(fixed.inventory.clone())).await.unwrap();
    assert_eq!(keys(&again.corrected), [key("DockerMachineTemplate", "docker-ferrol-1-27-worker-v1")]);
    assert!(again.created.is_empty(), "{:?}", again.created);
    let dmt = get(&server, DMT, "DockerMachineTemplate", "docker-ferrol-1-27-worker-v1").unwrap();
    assert_ne!(dmt["metadata"]["uid"], uid);
}

#[tokio::test]
async fn one_failing_object_leaves_the_rest_synced() {
    let server = server_with_capi().await;
    let applier = Applier::new(server.client());
    server.fail_next(RequestMatch::any().verb("patch").resource("kubeadmconfigtemplates"), 500, 1);
    let v1 = load_yaml("apply/cluster-class-v1.yaml");
    let report = applier.apply(&v1, &ApplyOptions::new(owner("docker-ferrol-1-27-v1"))).await.unwrap();
    assert!(!report.all_synced());
    assert_eq!(report.failed, 1);
    let failed: Vec<&ResourceStatus> = report.failures().collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (failed[0].kind.as_str(), failed[0].name.as_str()),
        ("KubeadmConfigTemplate", "docker-ferrol-1-27-worker-v1")
    );
    assert!(failed[0].error.contains("500"), "{}", failed[0].error);
    assert_eq!(report.inventory.iter().filter(|r| r.status == SyncStatus::Synced).count(), 5);
    assert!(
        get(&server, "bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfigTemplate", "docker-ferrol-1-27-worker-v1")
            .is_none()
    );
    assert!(get(&server, DMT, "DockerMachineTemplate", "docker-ferrol-1-27-worker-v1").is_some());
    // The next pass heals it.
    let healed = applier
        .apply(&v1, &ApplyOptions::new(owner("docker-ferrol-1-27-v1")).with_previous(report.inventory.clone()))
        .await
        .unwrap();
    assert!(healed.all_synced());
    // The failed entry has no recorded version: it is new to the inventory.
    assert_eq!(keys(&healed.created), [key("KubeadmConfigTemplate", "docker-ferrol-1-27-worker-v1")]);
}

#[tokio::test]
async fn a_crd_and_its_objects_in_one_apply() {
    let server = server_with_namespace().await;
    // Established only after a while, so the engine has to wait for it.
    server.set_crd_establish_delay(Some(Duration::from_millis(300)));
    let applier = Applier::new(server.client());
    // Resolve something first, so the cached discovery predates the CRD.
    applier.apply(&[config_map("warm", None, &[])], &ApplyOptions::new(owner("r"))).await.unwrap();
    let mut objects: Vec<DynamicObject> = capi_crds()
        .into_iter()
        .filter(|c| c.metadata.name.as_deref() == Some("clusterclasses.cluster.x-k8s.io"))
        .collect();
    objects.extend(
        load_yaml("apply/cluster-class-v1.yaml")
            .into_iter()
            .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "ClusterClass")),
    );
    let report = applier.apply(&objects, &ApplyOptions::new(owner("r"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.inventory);
    assert_eq!(report.inventory[0].kind, "CustomResourceDefinition");
    assert_eq!(report.inventory[0].namespace, "", "a cluster-scoped object got a namespace");
    assert!(get(&server, "cluster.x-k8s.io/v1beta1", "ClusterClass", "docker-ferrol-1-27-v1").is_some());
    let crd = server.get_object(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        "clusterclasses.cluster.x-k8s.io",
    );
    assert_eq!(crd.unwrap()["metadata"]["labels"][RELEASE_LABEL], "r");
}

#[tokio::test]
async fn a_crd_never_established_times_out_and_its_objects_fail() {
    let server = server_with_namespace().await;
    server.set_crd_establish_delay(None);
    let applier = Applier::new(server.client());
    let mut objects: Vec<DynamicObject> = capi_crds()
        .into_iter()
        .filter(|c| c.metadata.name.as_deref() == Some("clusterclasses.cluster.x-k8s.io"))
        .collect();
    objects.extend(
        load_yaml("apply/cluster-class-v1.yaml")
            .into_iter()
            .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "ClusterClass")),
    );
    let mut opts = ApplyOptions::new(owner("r"));
    opts.crd_timeout = Duration::from_millis(300);
    let report = applier.apply(&objects, &opts).await.unwrap();
    assert_eq!(report.failed, 2);
    assert!(report.inventory[0].error.contains("not established"), "{}", report.inventory[0].error);
    assert!(report.inventory[1].error.contains("no kind ClusterClass"), "{}", report.inventory[1].error);
}

#[tokio::test]
async fn delete_all_removes_only_ours() {
    let server = server_with_capi().await;
    let applier = Applier::new(server.client());
    let mut objects = load_yaml("apply/cluster-class-v1.yaml");
    objects.push(config_map("shared-name", None, &[("a", "b")]));
    let report = applier.apply(&objects, &ApplyOptions::new(owner("docker-ferrol-1-27-v1"))).await.unwrap();
    assert!(report.all_synced());
    // Someone else's object of the same name in another namespace, and one of ours taken over by
    // hand (its labels removed).
    server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}));
    server.put_object(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared-name", "namespace": "other"}}),
    );
    server.edit_object(DMT, "DockerClusterTemplate", Some(NS), "docker-ferrol-1-27-cluster-v1", |o| {
        o["metadata"]["labels"] = json!({});
    });
    // One already gone.
    server.edit_object(DMT, "DockerMachineTemplate", Some(NS), "docker-ferrol-1-27-worker-v1", |_| {});
    let client = server.client();
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1beta1", "DockerMachineTemplate"),
        "dockermachinetemplates",
    );
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client, NS, &ar);
    api.delete("docker-ferrol-1-27-worker-v1", &Default::default()).await.unwrap();

    // Another release's owner finds nothing of its own.
    let foreign = applier.delete_all(&report.inventory, &owner("docker-ferrol-1-27-v9")).await;
    assert!(foreign.deleted.is_empty());
    assert_eq!(foreign.skipped.len(), 6);

    let deleted = applier.delete_all(&report.inventory, &owner("docker-ferrol-1-27-v1")).await;
    assert!(deleted.is_complete(), "{:?}", deleted.failed);
    assert_eq!(deleted.deleted.len(), 5);
    assert_eq!(keys(&deleted.already_gone), [key("DockerMachineTemplate", "docker-ferrol-1-27-worker-v1")]);
    assert_eq!(keys(&deleted.skipped), [key("DockerClusterTemplate", "docker-ferrol-1-27-cluster-v1")]);
    // Reverse order: the ConfigMap (last applied) went first.
    assert_eq!(deleted.deleted[0].kind, "ConfigMap");
    let labelled: Vec<Value> = [
        ("cluster.x-k8s.io/v1beta1", "ClusterClass"),
        ("bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfigTemplate"),
        (KCPT, "KubeadmControlPlaneTemplate"),
        (DMT, "DockerMachineTemplate"),
        (DMT, "DockerClusterTemplate"),
        ("v1", "ConfigMap"),
    ]
    .iter()
    .flat_map(|(av, k)| server.list_objects(av, k))
    .filter(|o| o["metadata"]["labels"][RELEASE_LABEL] == "docker-ferrol-1-27-v1")
    .collect();
    assert!(labelled.is_empty(), "objects of ours left: {labelled:?}");
    assert!(server.get_object("v1", "ConfigMap", Some("other"), "shared-name").is_some());
    assert!(get(&server, DMT, "DockerClusterTemplate", "docker-ferrol-1-27-cluster-v1").is_some());
    // Deleting again is a no-op success.
    let again = applier.delete_all(&report.inventory, &owner("docker-ferrol-1-27-v1")).await;
    assert!(again.is_complete() && again.deleted.is_empty());
    assert_eq!(again.already_gone.len(), 6);
}

#[tokio::test]
async fn prune_refuses_objects_without_our_labels_and_empty_renders() {
    let server = server_with_namespace().await;
    let applier = Applier::new(server.client());
    let objects = vec![config_map("keep", None, &[]), config_map("mine", None, &[]), config_map("adopted", None, &[])];
    let opts = ApplyOptions::new(owner("r1"));
    let first = applier.apply(&objects, &opts).await.unwrap();
    // "adopted" was relabelled by a person: it is no longer ours to delete.
    server.edit_object("v1", "ConfigMap", Some(NS), "adopted", |o| {
        o["metadata"]["labels"][RELEASE_LABEL] = json!("someone-else");
    });
    let report = applier
        .apply(&[config_map("keep", None, &[])], &ApplyOptions::new(owner("r1")).with_previous(first.inventory.clone()))
        .await
        .unwrap();
    assert_eq!(keys(&report.pruned), [key("ConfigMap", "mine")]);
    assert_eq!(keys(&report.prune_skipped), [key("ConfigMap", "adopted")]);
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "adopted").is_some());
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "mine").is_none());

    // An empty render never prunes everything by accident.
    let err =
        applier.apply(&[], &ApplyOptions::new(owner("r1")).with_previous(report.inventory.clone())).await.unwrap_err();
    assert!(matches!(err, ApplyError::EmptyRender { previous: 1, .. }), "{err}");
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "keep").is_some());
    let mut allow = ApplyOptions::new(owner("r1")).with_previous(report.inventory.clone());
    allow.allow_empty_prune = true;
    let emptied = applier.apply(&[], &allow).await.unwrap();
    assert_eq!(keys(&emptied.pruned), [key("ConfigMap", "keep")]);
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "keep").is_none());
}

#[tokio::test]
async fn a_failed_prune_stays_in_the_inventory() {
    let server = server_with_namespace().await;
    let applier = Applier::new(server.client());
    let first = applier
        .apply(&[config_map("a", None, &[]), config_map("b", None, &[])], &ApplyOptions::new(owner("r")))
        .await
        .unwrap();
    server.fail_next(RequestMatch::any().verb("delete").resource("configmaps").name("b"), 500, 1);
    let opts = ApplyOptions::new(owner("r")).with_previous(first.inventory.clone());
    let report = applier.apply(&[config_map("a", None, &[])], &opts).await.unwrap();
    assert_eq!(report.failed, 1);
    let b = report.inventory.iter().find(|r| r.name == "b").unwrap();
    assert_eq!(b.status, SyncStatus::NotSynced);
    assert!(b.error.contains("pruning failed") && b.error.contains("500"), "{}", b.error);
    let retry =
        applier.apply(&[config_map("a", None, &[])], &opts.with_previous(report.inventory.clone())).await.unwrap();
    assert!(retry.all_synced());
    assert_eq!(keys(&retry.pruned), [key("ConfigMap", "b")]);
}

#[tokio::test]
async fn namespaces_default_to_the_release_and_objects_keep_their_own() {
    let server = server_with_namespace().await;
    let applier = Applier::new(server.client());
    let ns: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "addons", "namespace": "bogus"}}),
    )
    .unwrap();
    let objects = vec![ns, config_map("in-addons", Some("addons"), &[]), config_map("defaulted", None, &[])];
    let report = applier.apply(&objects, &ApplyOptions::new(owner("r"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.inventory);
    assert_eq!(report.inventory[0].namespace, "");
    assert!(server.get_object("v1", "ConfigMap", Some("addons"), "in-addons").is_some());
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "defaulted").is_some());
    // Unknown kinds fail alone, with a message naming the kind.
    let bad: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}))
            .unwrap();
    let report = applier.apply(&[bad, config_map("ok", None, &[])], &ApplyOptions::new(owner("r"))).await.unwrap();
    assert_eq!(report.failed, 1);
    assert!(report.inventory[0].error.contains("Widget"), "{}", report.inventory[0].error);
}

#[tokio::test]
async fn objects_of_one_group_are_applied_concurrently_and_groups_in_order() {
    let server = server_with_namespace().await;
    server.set_latency(Duration::from_millis(20));
    let applier = Applier::new(server.client()).with_concurrency(4);
    let mut objects: Vec<DynamicObject> = vec![
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "first"}}))
            .unwrap(),
    ];
    objects.extend((0..12).map(|i| config_map(&format!("cm-{i}"), Some("first"), &[])));
    let report = applier.apply(&objects, &ApplyOptions::new(owner("r"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.failures().collect::<Vec<_>>());
    let max = server.max_in_flight();
    assert!((2..=4).contains(&max), "at most 4 and more than one request at once, saw {max}");
    // The Namespace (its own group) was applied before any ConfigMap in it.
    let patches: Vec<String> =
        server.requests().iter().filter(|r| r.verb == "patch").map(|r| r.resource.clone()).collect();
    assert_eq!(patches[0], "namespaces");
    assert_eq!(patches.iter().filter(|r| *r == "configmaps").count(), 12);
}
