//! The custom resources of group `clusterstack.x-k8s.io`, version `v1alpha1`.
//!
//! Field for field compatible with the Go `cluster-stack-operator`, so manifests
//! written for it apply unchanged. Our additions are all optional.

mod cluster_addon;
mod cluster_stack;
mod cluster_stack_release;
mod cluster_stack_rollout;
mod common;
pub mod conditions;
mod crds;
mod verify;

pub use cluster_addon::{AddonValuesRef, ClusterAddon, ClusterAddonSpec, ClusterAddonStatus, StageStatus};
pub use cluster_stack::{
    Channel, ClusterStack, ClusterStackReleaseSummary, ClusterStackSpec, ClusterStackStatus, DEFAULT_POLL_INTERVAL,
    DirectorySource, GitHubSource, OciSource, ReleaseSourceSpec, SecretKeyRef,
};
pub use cluster_stack_release::{
    ClusterStackRelease, ClusterStackReleaseSpec, ClusterStackReleaseStatus, InventoryGroup, NodeImageStatus,
};
pub use cluster_stack_rollout::{
    ClassVersion, ClusterStackRollout, ClusterStackRolloutSpec, ClusterStackRolloutStatus, FailurePolicy, HealthCheck,
    LocalObjectRef, MaintenanceWindow, RETRY_REQUESTED_AT, RollbackPolicy, RolloutClusterStatus, Wave,
};
pub use common::{Condition, ObjectRef, ResourceStatus, SyncStatus};
pub use crds::{all_crds, crd_file_name, crd_yaml, crds_yaml};
pub use verify::{KeyRef, KeySource, TrustedRootSource, VerifyIdentity, VerifyKind, VerifySpec};

/// The API group of every resource here.
pub const GROUP: &str = "clusterstack.x-k8s.io";
/// The one served and stored version.
pub const VERSION: &str = "v1alpha1";
