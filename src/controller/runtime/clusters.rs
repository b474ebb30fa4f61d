//! Which cluster-stack ClusterClasses the CAPI Clusters use.
//!
//! Clusters are read through [`CapiCluster`], a view with only the fields the operator decides
//! on (the class, the Kubernetes version and variables, whether the control plane is initialised,
//! the health conditions, metadata), so that no CAPI types are compiled in and thousands of
//! Clusters in the one watch store ([`super::cluster_watch`]) cost a few hundred bytes each;
//! templates see the whole object, read when rendering. `cluster.x-k8s.io/v1beta1` names the
//! class in `spec.topology.class` (+ `spec.topology.classNamespace`), `v1beta2` in
//! `spec.topology.classRef.{name,namespace}`. Class names are compared as parsed [`ReleaseId`]s,
//! never as raw strings, so the dot and dash forms of a non-stable version are the same release.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, GroupVersionKind};
use serde::{Deserialize, Deserializer};

use crate::release::ReleaseId;

/// The CAPI API group of `Cluster`.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";

/// A Cluster API version the operator reads Clusters in. It is the dynamic type of
/// [`CapiCluster`]: one byte in every store key and queue entry, where an `ApiResource` would
/// put five strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CapiVersion {
    #[default]
    V1beta2,
    V1beta1,
}

impl CapiVersion {
    /// Newest first; each is used where served.
    pub const ALL: [CapiVersion; 2] = [CapiVersion::V1beta2, CapiVersion::V1beta1];

    pub fn as_str(self) -> &'static str {
        match self {
            CapiVersion::V1beta2 => "v1beta2",
            CapiVersion::V1beta1 => "v1beta1",
        }
    }

    /// The `Cluster` kind in this version.
    pub fn gvk(self) -> GroupVersionKind {
        GroupVersionKind::gvk(CAPI_GROUP, self.as_str(), "Cluster")
    }

    /// The `clusters` resource in this version, for dynamic reads of the whole object.
    pub fn resource(self) -> ApiResource {
        ApiResource::from_gvk_with_plural(&self.gvk(), "clusters")
    }
}

/// A CAPI `Cluster`, trimmed to what the operator decides on (the addon controller, the class
/// usage index and the rollout read this one view, from one watch store); unknown fields are
/// dropped when it is read.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct CapiCluster {
    /// From `apiVersion`: `cluster.x-k8s.io/v1beta1` reads as v1beta1, anything else as v1beta2.
    #[serde(default, rename = "apiVersion", deserialize_with = "version_from_api_version")]
    pub version: CapiVersion,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CapiClusterSpec,
    #[serde(default)]
    pub status: CapiClusterStatus,
}

/// Reads `apiVersion` as a [`CapiVersion`].
fn version_from_api_version<'de, D: Deserializer<'de>>(d: D) -> Result<CapiVersion, D::Error> {
    let api_version = String::deserialize(d)?;
    Ok(if api_version == format!("{CAPI_GROUP}/v1beta1") { CapiVersion::V1beta1 } else { CapiVersion::V1beta2 })
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct CapiClusterSpec {
    #[serde(default)]
    pub topology: Option<Topology>,
}

/// `spec.topology`: v1beta1 `class`/`classNamespace`, v1beta2 `classRef`; the Kubernetes
/// version and the variables (a rollout moves and checks them).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    #[serde(default)]
    pub class: Option<String>,
    #[serde(default)]
    pub class_namespace: Option<String>,
    #[serde(default)]
    pub class_ref: Option<ClassRef>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub variables: Vec<Variable>,
    /// The worker classes the topology uses: a class move must keep them (Cluster API refuses a
    /// class that lacks one).
    #[serde(default)]
    pub workers: Option<Workers>,
}

/// `spec.topology.workers`, only the class each MachineDeployment and MachinePool names
/// (v1beta1 and v1beta2 share the shape).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workers {
    #[serde(default)]
    pub machine_deployments: Vec<WorkerTopology>,
    #[serde(default)]
    pub machine_pools: Vec<WorkerTopology>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WorkerTopology {
    #[serde(default)]
    pub class: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ClassRef {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// One `spec.topology.variables` entry.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
pub struct Variable {
    pub name: String,
    #[serde(default)]
    pub value: serde_json::Value,
}

/// What the operator reads of `status`: whether the control plane is initialised (v1beta2
/// `initialization.controlPlaneInitialized`, v1beta1 `controlPlaneReady` or the
/// `ControlPlaneInitialized` condition), and the fields a rollout judges health on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "RawStatus")]
pub struct CapiClusterStatus {
    pub control_plane_initialized: bool,
    pub observed_generation: Option<i64>,
    pub phase: Option<String>,
    pub conditions: Vec<ClusterCondition>,
}

/// A Cluster condition (CAPI v1beta1 or metav1 shape; only these fields are read).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
pub struct ClusterCondition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// The generation the condition was set for (v1beta2's metav1 conditions; v1beta1's have none).
    #[serde(default, rename = "observedGeneration", skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawStatus {
    #[serde(default)]
    initialization: Option<RawInitialization>,
    #[serde(default)]
    control_plane_ready: Option<bool>,
    #[serde(default)]
    observed_generation: Option<i64>,
    #[serde(default)]
    phase: Option<String>,
    #[serde(default)]
    conditions: Option<Vec<ClusterCondition>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawInitialization {
    #[serde(default)]
    control_plane_initialized: Option<bool>,
}

impl From<RawStatus> for CapiClusterStatus {
    fn from(raw: RawStatus) -> Self {
        let conditions = raw.conditions.unwrap_or_default();
        let initialized = raw.initialization.and_then(|i| i.control_plane_initialized) == Some(true)
            || raw.control_plane_ready == Some(true)
            || conditions.iter().any(|c| c.type_ == "ControlPlaneInitialized" && c.status == "True");
        CapiClusterStatus {
            control_plane_initialized: initialized,
            observed_generation: raw.observed_generation,
            phase: raw.phase,
            conditions,
        }
    }
}

/// A [`CapiCluster`]'s dynamic type is the [`CapiVersion`] it is read in.
impl kube::Resource for CapiCluster {
    type DynamicType = CapiVersion;
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("Cluster")
    }
    fn group(_: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(CAPI_GROUP)
    }
    fn version(version: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(version.as_str())
    }
    fn plural(_: &Self::DynamicType) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("clusters")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The class a topology names and the namespace it names (`None`: the Cluster's own), v1beta2's
/// `classRef` first (a v1beta1 object has none); `None` when no class is named.
pub fn named_class<'a>(
    class_ref: Option<&'a ClassRef>,
    class: &'a Option<String>,
    class_namespace: &'a Option<String>,
) -> Option<(&'a str, Option<&'a str>)> {
    fn set(s: &Option<String>) -> Option<&str> {
        s.as_deref().filter(|s| !s.is_empty())
    }
    match class_ref {
        Some(r) => Some((set(&r.name)?, set(&r.namespace))),
        None => Some((set(class)?, set(class_namespace))),
    }
}

impl CapiCluster {
    /// The Cluster's key.
    pub fn key(&self) -> ClusterKey {
        ClusterKey::of(&self.metadata)
    }

    /// `cluster.x-k8s.io/<version>`.
    pub fn api_version(&self) -> String {
        <Self as kube::Resource>::api_version(&self.version).into_owned()
    }

    /// Whether condition `type_` is True for the Cluster's current spec; `Err` says what is
    /// missing. Cluster API's controllers observe a generation one after the other: the Cluster
    /// controller may report `status.observedGeneration` for a new class while
    /// `TopologyReconciled` is still the True of the class before. So both the status's and the
    /// condition's own `observedGeneration` (v1beta2) must have reached the generation.
    pub fn condition_true_now(&self, type_: &str) -> Result<(), String> {
        let generation = self.metadata.generation.unwrap_or(0);
        match self.status.observed_generation {
            Some(g) if g >= generation => {}
            observed => {
                return Err(format!(
                    "observedGeneration {} has not reached generation {generation}",
                    observed.unwrap_or(0)
                ));
            }
        }
        let Some(cond) = self.status.conditions.iter().find(|c| c.type_ == type_) else {
            return Err(format!("{type_} is not reported yet"));
        };
        if let Some(g) = cond.observed_generation
            && g < generation
        {
            return Err(format!("{type_} is not reported for generation {generation} yet (it is for {g})"));
        }
        if cond.status == "True" {
            return Ok(());
        }
        let why =
            [cond.reason.as_deref(), cond.message.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(": ");
        Err(format!("{type_} is {}{}", cond.status, if why.is_empty() { String::new() } else { format!(" ({why})") }))
    }
}

/// A CAPI Cluster, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterKey {
    pub namespace: String,
    pub name: String,
}

impl ClusterKey {
    /// The key of the object `meta` describes.
    pub fn of(meta: &ObjectMeta) -> Self {
        ClusterKey {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One Cluster using the ClusterClass of a cluster-stack release.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClassUsage {
    /// The Cluster.
    pub cluster: ClusterKey,
    /// The release whose ClusterClass the Cluster names.
    pub class: ReleaseId,
    /// Namespace of the ClusterClass: `classNamespace` where set, else the Cluster's own.
    pub class_namespace: String,
}

/// The namespace of the ClusterClass a Cluster names (`classNamespace` where set, else the
/// Cluster's own), without parsing the class name; `None` when it names no class.
pub fn class_namespace_of(cluster: &CapiCluster) -> Option<&str> {
    let topology = cluster.spec.topology.as_ref()?;
    let (_, class_namespace) = named_class(topology.class_ref.as_ref(), &topology.class, &topology.class_namespace)?;
    Some(class_namespace.unwrap_or_else(|| cluster.metadata.namespace.as_deref().unwrap_or_default()))
}

/// The class usage of one Cluster, or `None` when it has no managed topology,
/// names no class, or its class is not a cluster stack.
pub fn class_usage(cluster: &CapiCluster) -> Option<ClassUsage> {
    let name = cluster.metadata.name.clone()?;
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let topology = cluster.spec.topology.as_ref()?;
    let (class, class_namespace) =
        named_class(topology.class_ref.as_ref(), &topology.class, &topology.class_namespace)?;
    let id = ReleaseId::from_class_name(class).or_else(|_| ReleaseId::from_tag(class)).ok()?;
    Some(ClassUsage {
        class: id,
        class_namespace: class_namespace.map_or_else(|| namespace.clone(), str::to_owned),
        cluster: ClusterKey { namespace, name },
    })
}

/// The class usages of many Clusters (any namespace, any served version);
/// Clusters not using a cluster-stack class are skipped. The same Cluster read
/// through two API versions counts once.
pub fn class_usages<'a>(clusters: impl IntoIterator<Item = &'a CapiCluster>) -> Vec<ClassUsage> {
    let mut seen = BTreeSet::new();
    clusters.into_iter().filter_map(class_usage).filter(|u| seen.insert(u.cluster.clone())).collect()
}

/// The Clusters that use the ClusterClass of `release` in `namespace`, sorted.
pub fn clusters_using(usages: &[ClassUsage], release: &ReleaseId, namespace: &str) -> Vec<ClusterKey> {
    let set: BTreeSet<ClusterKey> = usages
        .iter()
        .filter(|u| &u.class == release && u.class_namespace == namespace)
        .map(|u| u.cluster.clone())
        .collect();
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cluster(value: Value) -> CapiCluster {
        serde_json::from_value(value).unwrap()
    }

    fn v1beta1(ns: &str, name: &str, class: &str, class_ns: Option<&str>) -> CapiCluster {
        let mut topology = json!({"class": class, "version": "v1.27.3"});
        if let Some(cns) = class_ns {
            topology["classNamespace"] = json!(cns);
        }
        cluster(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"topology": topology}
        }))
    }

    fn v1beta2(ns: &str, name: &str, class: &str, class_ns: Option<&str>) -> CapiCluster {
        let mut class_ref = json!({"name": class});
        if let Some(cns) = class_ns {
            class_ref["namespace"] = json!(cns);
        }
        cluster(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"topology": {"classRef": class_ref, "version": "v1.27.3"}}
        }))
    }

    fn id(s: &str) -> ReleaseId {
        ReleaseId::parse_any(s).unwrap()
    }

    #[test]
    fn v1beta1_class_defaults_to_the_clusters_namespace() {
        let u = class_usage(&v1beta1("team-a", "c1", "docker-ferrol-1-27-v2", None)).unwrap();
        assert_eq!(u.cluster, ClusterKey { namespace: "team-a".into(), name: "c1".into() });
        assert_eq!(u.class, id("docker-ferrol-1-27-v2"));
        assert_eq!(u.class_namespace, "team-a");
    }

    #[test]
    fn v1beta1_class_namespace_is_honoured() {
        let u = class_usage(&v1beta1("team-a", "c1", "docker-ferrol-1-27-v2", Some("stacks"))).unwrap();
        assert_eq!(u.class_namespace, "stacks");
    }

    #[test]
    fn v1beta2_class_ref_is_read() {
        let u = class_usage(&v1beta2("team-b", "c2", "docker-ferrol-1-27-v0-sha.hipstsw", Some("stacks"))).unwrap();
        assert_eq!(u.class, id("docker-ferrol-1-27-v0-sha-hipstsw"));
        assert_eq!(u.class_namespace, "stacks");
        let u = class_usage(&v1beta2("team-b", "c3", "docker-ferrol-1-27-v3", None)).unwrap();
        assert_eq!(u.class_namespace, "team-b");
    }

    #[test]
    fn dot_and_tag_forms_name_the_same_release() {
        let dot = class_usage(&v1beta1("a", "c1", "docker-ferrol-1-27-v0-sha.hipstsw", None)).unwrap();
        let tag = class_usage(&v1beta1("a", "c2", "docker-ferrol-1-27-v0-sha-hipstsw", None)).unwrap();
        assert_eq!(dot.class, tag.class);
    }

    #[test]
    fn foreign_or_missing_classes_are_ignored() {
        assert_eq!(class_usage(&v1beta1("a", "c", "my-own-class", None)), None);
        assert_eq!(class_usage(&v1beta1("a", "c", "", None)), None);
        let no_topology = cluster(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "a"}, "spec": {"clusterNetwork": {}}
        }));
        assert_eq!(class_usage(&no_topology), None);
        let no_spec =
            cluster(json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "metadata": {"name": "c"}}));
        assert_eq!(class_usage(&no_spec), None);
    }

    #[test]
    fn clusters_using_matches_identity_and_namespace_across_namespaces() {
        let clusters = [
            v1beta1("team-a", "c1", "docker-ferrol-1-27-v2", Some("stacks")),
            v1beta2("team-b", "c2", "docker-ferrol-1-27-v2", Some("stacks")),
            v1beta1("stacks", "c3", "docker-ferrol-1-27-v2", None),
            // Same class name, other namespace: a different ClusterClass.
            v1beta1("team-c", "c4", "docker-ferrol-1-27-v2", None),
            // Other versions and stacks.
            v1beta1("stacks", "c5", "docker-ferrol-1-27-v3", None),
            v1beta1("stacks", "c6", "docker-ferrol-1-28-v2", None),
        ];
        let usages = class_usages(&clusters);
        assert_eq!(usages.len(), 6);
        let users = clusters_using(&usages, &id("docker-ferrol-1-27-v2"), "stacks");
        let names: Vec<String> = users.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["stacks/c3", "team-a/c1", "team-b/c2"]);
        assert!(clusters_using(&usages, &id("docker-ferrol-1-27-v9"), "stacks").is_empty());
    }

    #[test]
    fn a_cluster_seen_through_two_versions_counts_once() {
        let clusters =
            [v1beta1("a", "c1", "docker-ferrol-1-27-v2", None), v1beta2("a", "c1", "docker-ferrol-1-27-v2", None)];
        assert_eq!(class_usages(&clusters).len(), 1);
    }

    #[test]
    fn the_version_comes_from_api_version() {
        assert_eq!(v1beta1("a", "c", "x", None).version, CapiVersion::V1beta1);
        assert_eq!(v1beta2("a", "c", "x", None).version, CapiVersion::V1beta2);
        assert_eq!(cluster(json!({"metadata": {"name": "c"}})).version, CapiVersion::V1beta2);
        assert_eq!(v1beta1("a", "c", "x", None).api_version(), "cluster.x-k8s.io/v1beta1");
        assert_eq!(
            <CapiCluster as kube::Resource>::url_path(&CapiVersion::V1beta1, Some("team-a")),
            "/apis/cluster.x-k8s.io/v1beta1/namespaces/team-a/clusters"
        );
        assert_eq!(CapiVersion::V1beta2.resource().api_version, "cluster.x-k8s.io/v1beta2");
    }

    #[test]
    fn control_plane_initialised_in_each_version() {
        let with_status = |status: Value| {
            cluster(json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                "metadata": {"name": "c", "namespace": "a"}, "status": status}))
            .status
            .control_plane_initialized
        };
        assert!(with_status(json!({"initialization": {"controlPlaneInitialized": true}})));
        assert!(with_status(json!({"controlPlaneReady": true})));
        assert!(with_status(json!({"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "ControlPlaneInitialized", "status": "True", "reason": "x", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ]})));
        assert!(!with_status(json!({"conditions": [
            {"type": "ControlPlaneInitialized", "status": "False"}, {"type": "Ready", "status": "True"}
        ]})));
        assert!(!with_status(
            json!({"initialization": {"controlPlaneInitialized": false}, "controlPlaneReady": false})
        ));
        assert!(!with_status(json!({})));
        assert!(!v1beta1("a", "c", "x", None).status.control_plane_initialized);
    }

    #[test]
    fn a_full_cluster_reads_into_the_view() {
        // What CAPI serves: far more than the view keeps; nothing of it may break the read.
        let c = cluster(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "team-a", "uid": "u-1", "labels": {"env": "prod"},
                         "annotations": {"clusterstack.x-k8s.io/skip-addon-upgrade-hold": "true"}},
            "spec": {
                "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
                "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "c1"},
                "topology": {"classRef": {"name": "docker-ferrol-1-27-v3", "namespace": "stacks"}, "version": "v1.27.5",
                             "variables": [{"name": "workerCount", "value": 3}],
                             "workers": {"machineDeployments": [{"class": "default-worker", "name": "md-0", "replicas": 1}]}}
            },
            "status": {"phase": "Provisioned", "initialization": {"controlPlaneInitialized": true, "infrastructureProvisioned": true},
                       "conditions": [{"type": "Available", "status": "True"}]}
        }));
        assert_eq!(c.key(), ClusterKey { namespace: "team-a".into(), name: "c1".into() });
        assert_eq!(c.metadata.uid.as_deref(), Some("u-1"));
        assert!(c.status.control_plane_initialized);
        let u = class_usage(&c).unwrap();
        assert_eq!((u.class, u.class_namespace.as_str()), (id("docker-ferrol-1-27-v3"), "stacks"));
    }
}
