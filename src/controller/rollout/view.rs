//! What the rollout decides on, read from the API objects: a Cluster trimmed to its topology,
//! labels, generation and health conditions (the operator's one typed view,
//! [`CapiCluster`], from the one Cluster watch store the addon controller and the class usage
//! index read too), and the stack's releases ([`ReleaseView`]).

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use crate::api::ClusterAddon;
use crate::controller::runtime::clusters::{CAPI_GROUP, CapiCluster, ClusterKey, named_class};
pub use crate::controller::runtime::clusters::{ClusterCondition, Variable};
use crate::release::ReleaseId;

/// What the rollout reads of a Cluster (the view is the operator's one, shared with the addon
/// controller and the class usage index).
impl CapiCluster {
    /// The class name and namespace (the Cluster's own when unset), if the Cluster has one.
    pub fn class(&self) -> Option<(&str, String)> {
        let t = self.spec.topology.as_ref()?;
        let (name, ns) = named_class(t.class_ref.as_ref(), &t.class, &t.class_namespace)?;
        Some((name, ns.map_or_else(|| self.metadata.namespace.clone().unwrap_or_default(), str::to_owned)))
    }

    /// The release the class names, if it is a cluster-stack class.
    pub fn release(&self) -> Option<ReleaseId> {
        let (name, _) = self.class()?;
        ReleaseId::from_class_name(name).or_else(|_| ReleaseId::from_tag(name)).ok()
    }

    /// `spec.topology.version`, empty when unset.
    pub fn kubernetes_version(&self) -> &str {
        self.spec.topology.as_ref().and_then(|t| t.version.as_deref()).unwrap_or_default()
    }

    pub fn variables(&self) -> &[Variable] {
        self.spec.topology.as_ref().map_or(&[], |t| t.variables.as_slice())
    }

    /// The status of condition `type_`, if set.
    pub fn condition(&self, type_: &str) -> Option<&ClusterCondition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// What a `healthCheck` expression sees as `cluster`: the fields of this view.
    pub fn cel_document(&self) -> Value {
        serde_json::json!({
            "apiVersion": format!("{CAPI_GROUP}/{}", self.version.as_str()),
            "kind": "Cluster",
            "metadata": {
                "name": self.metadata.name, "namespace": self.metadata.namespace,
                "labels": self.metadata.labels.clone().unwrap_or_default(),
                "annotations": self.metadata.annotations.clone().unwrap_or_default(),
                "generation": self.metadata.generation,
            },
            "spec": {"topology": {
                "class": self.class().map(|(n, _)| n.to_string()),
                "version": self.kubernetes_version(),
                "variables": self.variables(),
            }},
            "status": {
                "observedGeneration": self.status.observed_generation,
                "phase": self.status.phase,
                "conditions": self.status.conditions,
            },
        })
    }
}

/// A ClusterStackRelease of the stack, as the rollout needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseView {
    pub id: ReleaseId,
    pub ready: bool,
    /// `status.kubernetesVersion`, the full version its `metadata.yaml` names; empty if unknown.
    pub kubernetes_version: String,
}

/// A Cluster's ClusterAddon, as far as health needs it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddonView {
    /// The release whose addons are in the workload cluster.
    pub release: Option<String>,
    pub ready: bool,
}

/// A ClusterAddon as the rollout's watch store keeps it: its name, which Cluster it tracks and
/// [`AddonView`]'s two fields. There is one ClusterAddon per managed Cluster, thousands of them;
/// the whole object (its spec, the applied resources, stages and conditions in status) would
/// cost several times as much in the store.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AddonRecord {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    spec: AddonRecordSpec,
    #[serde(default)]
    status: Option<AddonRecordStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddonRecordSpec {
    #[serde(default)]
    cluster_ref: AddonClusterRef,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct AddonClusterRef {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct AddonRecordStatus {
    #[serde(default)]
    release: Option<String>,
    #[serde(default)]
    ready: bool,
}

impl AddonRecord {
    /// The Cluster this ClusterAddon tracks (same namespace).
    pub fn cluster_key(&self) -> Option<ClusterKey> {
        Some(ClusterKey { namespace: self.metadata.namespace.clone()?, name: self.spec.cluster_ref.name.clone()? })
    }

    pub fn view(&self) -> AddonView {
        let status = self.status.as_ref();
        AddonView { release: status.and_then(|s| s.release.clone()), ready: status.is_some_and(|s| s.ready) }
    }

    /// Drops from the metadata what the store needs not keep: the store key (namespace, name)
    /// stays.
    pub fn trim(&mut self) {
        let m = &mut self.metadata;
        *m = ObjectMeta { name: m.name.take(), namespace: m.namespace.take(), ..ObjectMeta::default() };
    }
}

impl kube::Resource for AddonRecord {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        <ClusterAddon as kube::Resource>::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        <ClusterAddon as kube::Resource>::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        <ClusterAddon as kube::Resource>::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        <ClusterAddon as kube::Resource>::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_addon_record_keeps_its_key_cluster_release_and_ready() {
        let mut record: AddonRecord = serde_json::from_value(json!({
            "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterAddon",
            "metadata": {"name": "cluster-addon-c1", "namespace": "team", "uid": "u-1", "resourceVersion": "7",
                         "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "c1", "uid": "u-0"}]},
            "spec": {"clusterRef": {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "c1", "namespace": "team"}},
            "status": {"release": "docker-ferrol-1-27-v2", "ready": true, "addonVersion": "v1",
                       "resources": [{"kind": "ConfigMap", "name": "x", "status": "Synced"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "AddonsApplied", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap();
        record.trim();
        assert_eq!(
            record.metadata,
            ObjectMeta {
                name: Some("cluster-addon-c1".into()),
                namespace: Some("team".into()),
                ..ObjectMeta::default()
            }
        );
        assert_eq!(record.cluster_key(), Some(ClusterKey { namespace: "team".into(), name: "c1".into() }));
        assert_eq!(record.view(), AddonView { release: Some("docker-ferrol-1-27-v2".into()), ready: true });
        let fresh: AddonRecord = serde_json::from_value(json!({"metadata": {"name": "a", "namespace": "team"},
            "spec": {"clusterRef": {"kind": "Cluster", "name": "c2"}}}))
        .unwrap();
        assert_eq!(fresh.view(), AddonView::default());
        assert_eq!(
            <AddonRecord as kube::Resource>::url_path(&(), Some("team")),
            "/apis/clusterstack.x-k8s.io/v1alpha1/namespaces/team/clusteraddons"
        );
    }
}
