//! `ClusterStackRelease`: one release of a stack in use, and what it applied.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::{Condition, ObjectRef, ResourceStatus};

/// ClusterStackRelease is one release of a cluster stack made available in
/// this cluster. It is named in tag form, e.g. `docker-ferrol-1-27-v2`, and
/// owned by its ClusterStack.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "clusterstack.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterStackRelease",
    namespaced,
    doc = "ClusterStackRelease is one release of a cluster stack in use in this cluster, and what it applied.",
    status = "ClusterStackReleaseStatus",
    shortname = "cskr",
    printcolumn = r#"{"name":"K8s Version","type":"string","jsonPath":".status.kubernetesVersion"}"#,
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].reason"}"#,
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStackReleaseSpec {
    /// Reference to the provider-specific object of this release, when a
    /// provider plug-in takes part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<ObjectRef>,
}

/// Observed state of a ClusterStackRelease.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStackReleaseStatus {
    /// The objects that are not synced, with why (at most 100; the `Applied` condition counts
    /// them all). Synced objects are listed in `inventory` only, so the status stays small.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
    /// Every object the release applied (or is applying), grouped by apiVersion, kind and
    /// namespace, in apply order: what pruning and deletion work from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inventory: Vec<InventoryGroup>,
    /// Whether `inventory` lists every object the release may have applied: each apply since
    /// the first was recorded in it beforehand. Deleting the release then deletes what it
    /// lists; without it (a status an older version wrote, which could miss objects) deletion
    /// also searches, by the release's labels, the kinds it lists.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inventory_complete: bool,
    /// Full Kubernetes version of the release, e.g. `v1.27.5`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes_version: String,
    /// Whether every object is synced and the release is usable.
    #[serde(default)]
    pub ready: bool,
    /// What the release is doing now, e.g. `downloading release assets`, `applying objects`, `done`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// The `.metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The node images the provider plug-in prepares for this release, one entry per image,
    /// with whether it is ready. Empty when the release has no node-image gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_images: Vec<NodeImageStatus>,
    /// Conditions: `Downloaded`, `NodeImagesReady`, `Rendered`, `Applied`, `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Objects of one apiVersion, kind and namespace that a release applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryGroup {
    /// `apiVersion` of the objects, e.g. `cluster.x-k8s.io/v1beta1` or `v1`.
    pub api_version: String,
    /// Kind of the objects.
    pub kind: String,
    /// Namespace of the objects (empty for cluster-scoped kinds).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Their names, in apply order.
    #[serde(default)]
    pub names: Vec<String>,
}

/// The state of one node image of a release, as its provider plug-in reported it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeImageStatus {
    /// The image, as named in the release's `node-images.yaml` (e.g. `kindest/node:v1.27.3`).
    pub name: String,
    /// Whether the image is available for the release's clusters.
    #[serde(default)]
    pub ready: bool,
    /// What is missing or under way, e.g. `not found in registry-1.docker.io`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
