//! Which cluster-stack ClusterClasses the CAPI Clusters use.
//!
//! Clusters are read as dynamic objects so that no CAPI types (and no CAPI
//! version) are compiled in: `cluster.x-k8s.io/v1beta1` names the class in
//! `spec.topology.class` (+ `spec.topology.classNamespace`), `v1beta2` in
//! `spec.topology.classRef.{name,namespace}`. Class names are compared as
//! parsed [`ReleaseId`]s, never as raw strings, so the dot and dash forms of a
//! non-stable version are the same release.

use std::collections::BTreeSet;
use std::fmt;

use kube::api::DynamicObject;
use serde_json::Value;

use crate::release::ReleaseId;

/// The CAPI API group of `Cluster`.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// The Cluster API versions read, newest first; each is used where served.
pub const CAPI_VERSIONS: [&str; 2] = ["v1beta2", "v1beta1"];

/// A CAPI Cluster, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterKey {
    pub namespace: String,
    pub name: String,
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

/// The class usage of one Cluster, or `None` when it has no managed topology,
/// names no class, or its class is not a cluster stack.
pub fn class_usage(cluster: &DynamicObject) -> Option<ClassUsage> {
    let name = cluster.metadata.name.clone()?;
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let topology = cluster.data.get("spec")?.get("topology")?;
    let str_at = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    // v1beta2 first; a v1beta1 object has no classRef.
    let (class, class_namespace) = match topology.get("classRef") {
        Some(class_ref) => (str_at(class_ref, "name")?, str_at(class_ref, "namespace")),
        None => (str_at(topology, "class")?, str_at(topology, "classNamespace")),
    };
    let id = ReleaseId::from_class_name(&class).or_else(|_| ReleaseId::from_tag(&class)).ok()?;
    Some(ClassUsage {
        class: id,
        class_namespace: class_namespace.unwrap_or_else(|| namespace.clone()),
        cluster: ClusterKey { namespace, name },
    })
}

/// The class usages of many Clusters (any namespace, any served version);
/// Clusters not using a cluster-stack class are skipped. The same Cluster read
/// through two API versions counts once.
pub fn class_usages<'a>(clusters: impl IntoIterator<Item = &'a DynamicObject>) -> Vec<ClassUsage> {
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
    use serde_json::json;

    fn cluster(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    fn v1beta1(ns: &str, name: &str, class: &str, class_ns: Option<&str>) -> DynamicObject {
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

    fn v1beta2(ns: &str, name: &str, class: &str, class_ns: Option<&str>) -> DynamicObject {
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
}
