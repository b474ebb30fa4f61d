//! `ClusterAddon`: the addons applied into one workload cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::{Condition, ObjectRef, ResourceStatus};

/// ClusterAddon tracks the cluster addons applied into one workload Cluster.
/// There is one per Cluster, named `cluster-addon-<cluster>`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "clusterstack.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterAddon",
    namespaced,
    doc = "ClusterAddon tracks the cluster addons applied into one workload Cluster.",
    status = "ClusterAddonStatus",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterRef.name"}"#,
    printcolumn = r#"{"name":"Hook","type":"string","jsonPath":".spec.hook"}"#,
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].reason"}"#,
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAddonSpec {
    /// The cluster class whose addons were last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_stack: Option<String>,
    /// The addon version last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The lifecycle hook the addons were last applied for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// Platform-team values: per addon, a ConfigMap or Secret in the Cluster's namespace whose
    /// `values.yaml` key is merged over the release's values (and the `overwrite.yaml` result)
    /// of that addon. Our addition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_from: Vec<AddonValuesRef>,
    /// The CAPI Cluster (same namespace) whose addons this object tracks. Immutable.
    #[x_kube(validation = Rule::new("has(self.kind) && self.kind == 'Cluster' && has(self.name) && self.name != ''").message("clusterRef must name a Cluster"))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("clusterRef is immutable"))]
    pub cluster_ref: ObjectRef,
}

/// Observed state of a ClusterAddon.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAddonStatus {
    /// The hook currently being worked on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_hook: Option<String>,
    /// Every object applied into the workload cluster, with its sync status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
    /// Progress of each addon stage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageStatus>,
    /// The release (tag) whose addons are in the workload cluster. Our addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// The addon version in the workload cluster. Our addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addon_version: Option<String>,
    /// The release (tag) the current hook works towards. Our addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_release: Option<String>,
    /// When the current `BeforeClusterUpgrade` hold started (Runtime SDK). Our addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_started_at: Option<Time>,
    /// Why the last hold ended (`Completed`, `DeadlineExceeded`, `Skipped`). Our addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_result: Option<String>,
    /// The `.metadata.generation` this status was computed for (kstatus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Whether every addon is applied.
    #[serde(default)]
    pub ready: bool,
    /// Conditions of the addons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Progress of one addon stage.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    /// Name of the addon (a top-level directory of the addon bundle).
    pub name: String,
    /// `apply` or `delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The lifecycle hook the stage belongs to (`BeforeClusterUpgrade`...). Our addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// Phase of the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// When the stage started waiting (its deadline counts from here). Our addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// What the stage waits for or why it failed. Our addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A ConfigMap or Secret holding platform-team values for one addon.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddonValuesRef {
    /// The addon (a top-level directory of the addon bundle).
    pub addon: String,
    /// `ConfigMap` or `Secret`.
    pub kind: String,
    /// Name of the ConfigMap or Secret in the Cluster's namespace.
    pub name: String,
    /// The key holding the YAML values; `values.yaml` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}
