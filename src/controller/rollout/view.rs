//! What the rollout decides on, read from the API objects: a Cluster trimmed to its topology,
//! labels, generation and health conditions ([`RolloutCluster`], a typed view like
//! [`CapiCluster`](crate::controller::runtime::clusters::CapiCluster), so a thousand Clusters in the watch
//! store cost little), and the stack's releases ([`ReleaseView`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

pub use crate::controller::runtime::clusters::ClassRef;
use crate::controller::runtime::clusters::{
    CAPI_GROUP, CapiVersion, ClusterKey, capi_cluster_resource, named_class, version_from_api_version,
};
use crate::release::ReleaseId;

/// A CAPI `Cluster` as the rollout sees it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RolloutCluster {
    #[serde(default, rename = "apiVersion", deserialize_with = "version_from_api_version")]
    pub version: CapiVersion,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Spec,
    #[serde(default)]
    pub status: Status,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Spec {
    #[serde(default)]
    pub topology: Option<Topology>,
}

/// `spec.topology`: v1beta1 `class`/`classNamespace`, v1beta2 `classRef`; the version and the
/// variables.
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
}

/// One `spec.topology.variables` entry.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, PartialEq)]
pub struct Variable {
    pub name: String,
    #[serde(default)]
    pub value: Value,
}

/// The status fields health is judged on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(default)]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub phase: Option<String>,
    #[serde(default)]
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
}

capi_cluster_resource!(RolloutCluster);

impl RolloutCluster {
    pub fn key(&self) -> ClusterKey {
        ClusterKey::of(&self.metadata)
    }

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
