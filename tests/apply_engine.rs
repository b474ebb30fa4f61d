//! The apply engine against the API server test double.

mod support;

use std::time::Duration;

use clusterstack::apply::{
    Action, Applier, ApplyError, ApplyOptions, Change, ChangeSet, FIELD_MANAGER, Inventory, InventoryEntry, ObjectKey,
    RELEASE_LABEL, RELEASE_NAMESPACE_LABEL, ReleaseOwner, WhenEmpty,
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

/// A pass as the release controller makes it: apply, then prune what `previous` has and the
/// render has not; the changes of both steps and the inventory they leave.
#[derive(Debug)]
struct Pass {
    applied: ChangeSet,
    pruned: ChangeSet,
    inventory: Inventory,
}

async fn pass(applier: &Applier, objects: &[DynamicObject], opts: &ApplyOptions) -> Result<Pass, ApplyError> {
    pass_with(applier, objects, opts, WhenEmpty::Refuse).await
}

async fn pass_with(
    applier: &Applier,
    objects: &[DynamicObject],
    opts: &ApplyOptions,
    when_empty: WhenEmpty,
) -> Result<Pass, ApplyError> {
    let applied = applier.apply(objects, opts).await?;
    let stale = clusterstack::apply::stale(&opts.previous, &applied.identities(), when_empty, &opts.owner)?;
    let pruned = applier.prune(&stale, &opts.owner).await;
    let mut inventory = Inventory::from_changes(&applied);
    inventory.record(&pruned);
    Ok(Pass { applied, pruned, inventory })
}

impl Pass {
    fn all_synced(&self) -> bool {
        self.inventory.entries.iter().all(|e| e.synced)
    }
    fn failures(&self) -> Vec<&InventoryEntry> {
        self.inventory.entries.iter().filter(|e| !e.synced).collect()
    }
    fn failed(&self) -> usize {
        self.failures().len()
    }
    fn created(&self) -> Vec<ObjectKey> {
        self.applied.with(Action::Created)
    }
    fn corrected(&self) -> Vec<ObjectKey> {
        self.applied.with(Action::Configured)
    }
    fn pruned(&self) -> Vec<ObjectKey> {
        self.pruned.removed()
    }
    fn prune_skipped(&self) -> Vec<ObjectKey> {
        self.pruned.with(Action::Skipped)
    }
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
    let report = pass(&applier, &v1, &ApplyOptions::new(owner("docker-ferrol-1-27-v1"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.inventory);
    assert_eq!(report.inventory.len(), 6);
    assert_eq!(report.created().len(), 6);
    assert!(report.corrected().is_empty() && report.pruned().is_empty());
    // Every object landed in the release's namespace with our labels, in the inventory with its real group.
    let cc = get(&server, "cluster.x-k8s.io/v1beta1", "ClusterClass", "docker-ferrol-1-27-v1").unwrap();
    assert_eq!(cc["metadata"]["labels"][RELEASE_LABEL], "docker-ferrol-1-27-v1");
    assert_eq!(cc["metadata"]["labels"][RELEASE_NAMESPACE_LABEL], NS);
    assert_eq!(cc["metadata"]["managedFields"][0]["manager"], FIELD_MANAGER);
    let inv = &report.inventory.entries[0].key;
    assert_eq!(
        (inv.group.as_str(), inv.version.as_str(), inv.kind.as_str(), inv.namespace.as_str()),
        ("cluster.x-k8s.io", "v1beta1", "ClusterClass", NS)
    );

    // v2, with the same release labels (an in-place update of the release's objects).
    let kcpt_before = get(&server, KCPT, "KubeadmControlPlaneTemplate", "docker-ferrol-1-27-control-plane-v1").unwrap();
    let dct_before = get(&server, DMT, "DockerClusterTemplate", "docker-ferrol-1-27-cluster-v1").unwrap();
    let v2 = load_yaml("apply/cluster-class-v2.yaml");
    let opts = ApplyOptions::new(owner("docker-ferrol-1-27-v1")).with_previous(report.inventory.clone());
    let report2 = pass(&applier, &v2, &opts).await.unwrap();
    assert!(report2.all_synced(), "{:?}", report2.inventory);
    assert_eq!(keys(&report2.created()), [key("DockerMachineTemplate", "docker-ferrol-1-27-worker-v2")]);
    assert_eq!(
        keys(&report2.corrected()),
        [
            key("ClusterClass", "docker-ferrol-1-27-v1"),
            key("KubeadmControlPlaneTemplate", "docker-ferrol-1-27-control-plane-v1")
        ]
    );
    assert_eq!(keys(&report2.pruned()), [key("DockerMachineTemplate", "docker-ferrol-1-27-worker-v1")]);
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
    let first = pass(&applier, &v1, &opts).await.unwrap();
    let rv = server.resource_version();
    let again = pass(&applier, &v1, &opts.clone().with_previous(first.inventory.clone())).await.unwrap();
    assert!(
        again.all_synced() && again.created().is_empty() && again.corrected().is_empty() && again.pruned().is_empty()
    );
    assert_eq!(server.resource_version(), rv, "a re-apply of unchanged objects wrote something");

    // Someone edits a template by hand.
    server.edit_object(KCPT, "KubeadmControlPlaneTemplate", Some(NS), "docker-ferrol-1-27-control-plane-v1", |o| {
        o["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]["certSANs"] =
            json!(["evil.example.com"]);
        o["metadata"]["labels"][RELEASE_LABEL] = json!("tampered");
    });
    // A fresh applier (as after a restart) still sees and corrects the drift.
    let fresh = Applier::new(server.client());
    let fixed = pass(&fresh, &v1, &opts.clone().with_previous(first.inventory.clone())).await.unwrap();
    assert_eq!(keys(&fixed.corrected()), [key("KubeadmControlPlaneTemplate", "docker-ferrol-1-27-control-plane-v1")]);
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
    let again = pass(&applier, &v1, &opts.clone().with_previous(fixed.inventory.clone())).await.unwrap();
    assert_eq!(keys(&again.corrected()), [key("DockerMachineTemplate", "docker-ferrol-1-27-worker-v1")]);
    assert!(again.created().is_empty(), "{:?}", again.created());
    let dmt = get(&server, DMT, "DockerMachineTemplate", "docker-ferrol-1-27-worker-v1").unwrap();
    assert_ne!(dmt["metadata"]["uid"], uid);
}

#[tokio::test]
async fn one_failing_object_leaves_the_rest_synced() {
    let server = server_with_capi().await;
    let applier = Applier::new(server.client());
    server.fail_next(RequestMatch::any().verb("patch").resource("kubeadmconfigtemplates"), 500, 1);
    let v1 = load_yaml("apply/cluster-class-v1.yaml");
    let report = pass(&applier, &v1, &ApplyOptions::new(owner("docker-ferrol-1-27-v1"))).await.unwrap();
    assert!(!report.all_synced());
    assert_eq!(report.failed(), 1);
    let failed: Vec<&InventoryEntry> = report.failures();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (failed[0].key.kind.as_str(), failed[0].key.name.as_str()),
        ("KubeadmConfigTemplate", "docker-ferrol-1-27-worker-v1")
    );
    assert!(failed[0].error.contains("500"), "{}", failed[0].error);
    assert_eq!(report.inventory.entries.iter().filter(|r| r.synced).count(), 5);
    assert!(
        get(&server, "bootstrap.cluster.x-k8s.io/v1beta1", "KubeadmConfigTemplate", "docker-ferrol-1-27-worker-v1")
            .is_none()
    );
    assert!(get(&server, DMT, "DockerMachineTemplate", "docker-ferrol-1-27-worker-v1").is_some());
    // The next pass heals it.
    let healed =
        pass(&applier, &v1, &ApplyOptions::new(owner("docker-ferrol-1-27-v1")).with_previous(report.inventory.clone()))
            .await
            .unwrap();
    assert!(healed.all_synced());
    // The failed entry has no recorded version: it is new to the inventory.
    assert_eq!(keys(&healed.created()), [key("KubeadmConfigTemplate", "docker-ferrol-1-27-worker-v1")]);
}

#[tokio::test]
async fn a_crd_and_its_objects_in_one_apply() {
    let server = server_with_namespace().await;
    // Established only after a while, so the engine has to wait for it.
    server.set_crd_establish_delay(Some(Duration::from_millis(300)));
    let applier = Applier::new(server.client());
    // Resolve something first, so the cached discovery predates the CRD.
    pass(&applier, &[config_map("warm", None, &[])], &ApplyOptions::new(owner("r"))).await.unwrap();
    let mut objects: Vec<DynamicObject> = capi_crds()
        .into_iter()
        .filter(|c| c.metadata.name.as_deref() == Some("clusterclasses.cluster.x-k8s.io"))
        .collect();
    objects.extend(
        load_yaml("apply/cluster-class-v1.yaml")
            .into_iter()
            .filter(|o| o.types.as_ref().is_some_and(|t| t.kind == "ClusterClass")),
    );
    let report = pass(&applier, &objects, &ApplyOptions::new(owner("r"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.inventory);
    assert_eq!(report.inventory.entries[0].key.kind, "CustomResourceDefinition");
    assert_eq!(report.inventory.entries[0].key.namespace, "", "a cluster-scoped object got a namespace");
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
    let report = pass(&applier, &objects, &opts).await.unwrap();
    assert_eq!(report.failed(), 2);
    assert!(report.inventory.entries[0].error.contains("not established"), "{}", report.inventory.entries[0].error);
    assert!(
        report.inventory.entries[1].error.contains("no kind ClusterClass"),
        "{}",
        report.inventory.entries[1].error
    );
}

#[tokio::test]
async fn delete_all_removes_only_ours() {
    let server = server_with_capi().await;
    let applier = Applier::new(server.client());
    let mut objects = load_yaml("apply/cluster-class-v1.yaml");
    objects.push(config_map("shared-name", None, &[("a", "b")]));
    let report = pass(&applier, &objects, &ApplyOptions::new(owner("docker-ferrol-1-27-v1"))).await.unwrap();
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
    assert!(foreign.with(Action::Deleted).is_empty());
    assert_eq!(foreign.with(Action::Skipped).len(), 6);

    let deleted = applier.delete_all(&report.inventory, &owner("docker-ferrol-1-27-v1")).await;
    assert!(deleted.all_ok(), "{:?}", deleted.failures().collect::<Vec<&Change>>());
    assert_eq!(deleted.with(Action::Deleted).len(), 5);
    assert_eq!(keys(&deleted.with(Action::Gone)), [key("DockerMachineTemplate", "docker-ferrol-1-27-worker-v1")]);
    assert_eq!(keys(&deleted.with(Action::Skipped)), [key("DockerClusterTemplate", "docker-ferrol-1-27-cluster-v1")]);
    // Reverse order: the ConfigMap (last applied) went first.
    assert_eq!(deleted.with(Action::Deleted)[0].kind, "ConfigMap");
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
    assert!(again.all_ok() && again.with(Action::Deleted).is_empty());
    assert_eq!(again.with(Action::Gone).len(), 6);
}

#[tokio::test]
async fn prune_refuses_objects_without_our_labels_and_empty_renders() {
    let server = server_with_namespace().await;
    let applier = Applier::new(server.client());
    let objects = vec![config_map("keep", None, &[]), config_map("mine", None, &[]), config_map("adopted", None, &[])];
    let opts = ApplyOptions::new(owner("r1"));
    let first = pass(&applier, &objects, &opts).await.unwrap();
    // "adopted" was relabelled by a person: it is no longer ours to delete.
    server.edit_object("v1", "ConfigMap", Some(NS), "adopted", |o| {
        o["metadata"]["labels"][RELEASE_LABEL] = json!("someone-else");
    });
    let report = pass(
        &applier,
        &[config_map("keep", None, &[])],
        &ApplyOptions::new(owner("r1")).with_previous(first.inventory.clone()),
    )
    .await
    .unwrap();
    assert_eq!(keys(&report.pruned()), [key("ConfigMap", "mine")]);
    assert_eq!(keys(&report.prune_skipped()), [key("ConfigMap", "adopted")]);
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "adopted").is_some());
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "mine").is_none());

    // An empty render never prunes everything by accident.
    let err =
        pass(&applier, &[], &ApplyOptions::new(owner("r1")).with_previous(report.inventory.clone())).await.unwrap_err();
    assert!(matches!(err, ApplyError::EmptyRender { previous: 1, .. }), "{err}");
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "keep").is_some());
    let allow = ApplyOptions::new(owner("r1")).with_previous(report.inventory.clone());
    let emptied = pass_with(&applier, &[], &allow, WhenEmpty::Prune).await.unwrap();
    assert_eq!(keys(&emptied.pruned()), [key("ConfigMap", "keep")]);
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "keep").is_none());
}

#[tokio::test]
async fn a_failed_prune_stays_in_the_inventory() {
    let server = server_with_namespace().await;
    let applier = Applier::new(server.client());
    let first =
        pass(&applier, &[config_map("a", None, &[]), config_map("b", None, &[])], &ApplyOptions::new(owner("r")))
            .await
            .unwrap();
    server.fail_next(RequestMatch::any().verb("delete").resource("configmaps").name("b"), 500, 1);
    let opts = ApplyOptions::new(owner("r")).with_previous(first.inventory.clone());
    let report = pass(&applier, &[config_map("a", None, &[])], &opts).await.unwrap();
    assert_eq!(report.failed(), 1);
    let b = report.inventory.entries.iter().find(|r| r.key.name == "b").unwrap();
    assert!(!b.synced);
    assert!(b.error.contains("pruning failed") && b.error.contains("500"), "{}", b.error);
    let retry =
        pass(&applier, &[config_map("a", None, &[])], &opts.with_previous(report.inventory.clone())).await.unwrap();
    assert!(retry.all_synced());
    assert_eq!(keys(&retry.pruned()), [key("ConfigMap", "b")]);
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
    let report = pass(&applier, &objects, &ApplyOptions::new(owner("r"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.inventory);
    assert_eq!(report.inventory.entries[0].key.namespace, "");
    assert!(server.get_object("v1", "ConfigMap", Some("addons"), "in-addons").is_some());
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "defaulted").is_some());
    // Unknown kinds fail alone, with a message naming the kind.
    let bad: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}))
            .unwrap();
    let report = pass(&applier, &[bad, config_map("ok", None, &[])], &ApplyOptions::new(owner("r"))).await.unwrap();
    assert_eq!(report.failed(), 1);
    assert!(report.inventory.entries[0].error.contains("Widget"), "{}", report.inventory.entries[0].error);
}

/// A release in the management cluster is confined to its namespace: a chart naming another
/// team's namespace, or a cluster-scoped kind (a Namespace here; a ClusterRoleBinding would be
/// worse), is refused per object before any request for it, and the rest applies.
#[tokio::test]
async fn a_confined_release_writes_nothing_outside_its_namespace() {
    let server = server_with_namespace().await;
    server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}));
    let applier = Applier::new(server.client());
    let cluster_scoped: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "planted"}}))
            .unwrap();
    let objects = vec![
        config_map("own", None, &[]),
        config_map("own-explicit", Some(NS), &[]),
        config_map("foreign", Some("team-a"), &[("stolen", "yes")]),
        cluster_scoped,
    ];
    let report = pass(&applier, &objects, &ApplyOptions::new(owner("r")).confined()).await.unwrap();
    assert_eq!(report.failed(), 2, "{:?}", report.inventory);
    let refused: Vec<_> =
        report.inventory.entries.iter().filter(|e| !e.error.is_empty()).map(|e| e.error.clone()).collect();
    assert!(refused.iter().all(|e| e.starts_with(clusterstack::apply::CONFINED_PREFIX)), "{refused:?}");
    assert!(refused.iter().any(|e| e.contains("it names namespace team-a")), "{refused:?}");
    assert!(refused.iter().any(|e| e.contains("it is cluster-scoped")), "{refused:?}");
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "own").is_some());
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "own-explicit").is_some());
    assert!(server.get_object("v1", "ConfigMap", Some("team-a"), "foreign").is_none());
    assert!(server.get_object("v1", "Namespace", None, "planted").is_none());
    // Not one write was sent for the refused objects.
    assert!(server.requests().iter().all(|r| r.name != "foreign" && r.name != "planted"));
    // Unconfined (addons into a workload cluster), the same objects apply.
    let report = pass(&applier, &objects, &ApplyOptions::new(owner("r"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.inventory);
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
    let report = pass(&applier, &objects, &ApplyOptions::new(owner("r"))).await.unwrap();
    assert!(report.all_synced(), "{:?}", report.failures());
    let max = server.max_in_flight();
    assert!((2..=4).contains(&max), "at most 4 and more than one request at once, saw {max}");
    // The Namespace (its own group) was applied before any ConfigMap in it.
    let patches: Vec<String> =
        server.requests().iter().filter(|r| r.verb == "patch").map(|r| r.resource.clone()).collect();
    assert_eq!(patches[0], "namespaces");
    assert_eq!(patches.iter().filter(|r| *r == "configmaps").count(), 12);
}
