//! `ClusterStackRollout`: moves a stack's Clusters onto a new release, wave by wave, with health
//! gates, a halt and an automatic roll back. Our addition (the Go operator has no such kind).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::Condition;

/// Setting this annotation on a ClusterStackRollout to a new value retries a halted target.
pub const RETRY_REQUESTED_AT: &str = "clusterstack.x-k8s.io/retry-requested-at";

/// ClusterStackRollout moves the Clusters using a ClusterStack's classes onto one of its releases,
/// wave by wave, checking health after each move, halting and rolling back on failures.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "clusterstack.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterStackRollout",
    namespaced,
    doc = "ClusterStackRollout moves a ClusterStack's Clusters onto a new release in waves, with health gates, halt and roll back.",
    status = "ClusterStackRolloutStatus",
    shortname = "cskro",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".status.target"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Wave","type":"string","jsonPath":".status.currentWave"}"#,
    printcolumn = r#"{"name":"Healthy","type":"string","jsonPath":".status.healthy"}"#,
    printcolumn = r#"{"name":"Failed","type":"integer","jsonPath":".status.failed"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStackRolloutSpec {
    /// The ClusterStack (in this namespace) whose Clusters follow this rollout.
    pub cluster_stack_ref: LocalObjectRef,
    /// Which of the stack's Clusters (any namespace) follow it; unset: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    /// `latest` (the stack's newest ready release) or a version such as `v4`.
    #[serde(default = "default_target")]
    #[schemars(length(min = 1))]
    pub target: String,
    /// Waves, in order; a Cluster joins the first wave it matches. None: one wave of every Cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<Wave>,
    /// After a wave is healthy, wait this long, check again, then go on (e.g. `10m`). Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h))+$"))]
    pub soak_time: Option<String>,
    /// A moved Cluster must be healthy within this (default `30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h))+$"))]
    pub progress_deadline: Option<String>,
    /// When to halt and whether to roll back.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// Moves start only inside one of these; none: any time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub maintenance_windows: Vec<MaintenanceWindow>,
    /// A CEL expression over `cluster` that must be true, on top of the built-in health rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// Stop moving Clusters (health is still followed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

fn default_target() -> String {
    "latest".to_string()
}

/// A reference to an object in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
pub struct LocalObjectRef {
    /// Name of the object.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// One wave of a rollout.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Wave {
    /// Name of the wave, shown in status.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Which Clusters join this wave; unset: every Cluster not in an earlier wave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<LabelSelector>,
    /// Clusters moving at once in this wave: a number or a percentage of the wave (`20%`). Default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent: Option<IntOrString>,
}

/// When to halt and what to do then.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// More failed Clusters than this halt the rollout. Default 0.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub max_failures: u32,
    /// `Automatic`: move the current wave's moved Clusters back on halt; `Never`: leave them.
    #[serde(default)]
    pub rollback: RollbackPolicy,
}

/// Whether a halt rolls back.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
pub enum RollbackPolicy {
    #[default]
    Automatic,
    Never,
}

/// A weekly maintenance window.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// Days it opens on: `Mon` .. `Sun`; none: every day.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(pattern(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)$")))]
    pub days: Vec<String>,
    /// Opening time of day, `HH:MM`.
    #[schemars(pattern(r"^([01][0-9]|2[0-3]):[0-5][0-9]$"))]
    pub start: String,
    /// How long it stays open, e.g. `4h`.
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h))+$"))]
    pub duration: String,
    /// IANA time zone of `start`; default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// An extra health rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
pub struct HealthCheck {
    /// CEL over `cluster` (its metadata, `spec.topology` and `status`), true when healthy.
    #[schemars(length(min = 1))]
    pub expression: String,
}

/// Observed state of a ClusterStackRollout; the rollout's only memory.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStackRolloutStatus {
    /// The `.metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The release (tag) being rolled out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// `Idle`, `Waiting`, `Progressing`, `Paused`, `Halted` or `Succeeded`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// The wave being worked on (or soaking).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_wave: String,
    /// When the current wave was last found wholly healthy: its soak counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak_started_at: Option<Time>,
    /// Healthy Clusters of all, e.g. `4/20`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub healthy: String,
    /// How many Clusters failed for this target.
    #[serde(default)]
    pub failed: u32,
    /// Targets that halted; `latest` does not pick them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_targets: Vec<String>,
    /// The last `retry-requested-at` annotation value acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_requested_at: Option<String>,
    /// One entry per Cluster following the rollout, sorted by namespace and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<RolloutClusterStatus>,
    /// Conditions: `Ready`, `Progressing`, `Halted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Where one Cluster stands in a rollout.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutClusterStatus {
    pub namespace: String,
    pub name: String,
    /// The wave it belongs to.
    pub wave: String,
    /// `Pending`, `Moving`, `Healthy`, `Failed`, `RolledBack` or `Incompatible`.
    pub state: String,
    /// Class and version before the move: written before the move, the way back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<ClassVersion>,
    /// Class and version the move sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<ClassVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_at: Option<Time>,
    /// When it failed (kept after a roll back, so the failure still counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<Time>,
    /// Why it is in this state.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// A ClusterClass name and a Kubernetes version.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
pub struct ClassVersion {
    pub class: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
}
