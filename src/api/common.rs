//! Types shared by the custom resources.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Our own type rather than `k8s_openapi`'s `Condition`, so that
// `observedGeneration` and `lastTransitionTime` stay optional when reading
// objects written by the Go operator, whose CAPI conditions carry a
// `severity` and no generation.
/// A condition in the standard Kubernetes shape (`metav1.Condition`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Type of condition in CamelCase, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Status of the condition: `True`, `False` or `Unknown`.
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,
    /// A machine-readable CamelCase reason for the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A human-readable message with details about the last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The last time the condition changed from one status to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The `.metadata.generation` the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Severity of a false condition, as written by Cluster API style controllers
    /// (the Go operator). Kept so that its objects round-trip; we do not set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
}

/// A reference to another object, the shape of `corev1.ObjectReference`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// UID of the referent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Specific resourceVersion to which this reference is made, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// If referring to a piece of an object instead of an entire object, the field path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_path: Option<String>,
}

/// Whether an applied object matches what the release wants.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SyncStatus {
    /// The object was applied and matches the release.
    #[serde(rename = "synced")]
    Synced,
    /// The object could not be applied; `error` says why.
    #[serde(rename = "not-synced")]
    NotSynced,
}

/// The sync status of one object a release applied.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// API group of the object (empty for the core group).
    #[serde(default)]
    pub group: String,
    /// API version of the object, without the group.
    #[serde(default)]
    pub version: String,
    /// Kind of the object.
    #[serde(default)]
    pub kind: String,
    /// Namespace of the object (empty for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the object.
    #[serde(default)]
    pub name: String,
    /// `synced` or `not-synced`.
    pub status: SyncStatus,
    /// Why the object is not synced.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// The object's `resourceVersion` after our last apply: an apply answering another version
    /// changed it (drift corrected), and a watch event with another version is someone else's edit.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
}
