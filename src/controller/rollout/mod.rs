//! The ClusterStackRollout controller: moves the Clusters using a ClusterStack's classes onto a
//! new release, wave by wave, with health gates, a halt and an automatic roll back.
//!
//! - [`decide`]: the pure decision (status, moves, events) with [`rules`], [`variables`],
//!   [`window`] and [`selector`];
//! - [`view`]: the Cluster and release views it decides on;
//! - [`reconcile`]: gathers the inputs and carries out the decision; [`context`]: its state.
//!
//! The loop is drawn in `docs/DESIGN.md` ("Rollout loop").

pub mod decide;
pub mod rules;
pub mod selector;
pub mod variables;
pub mod view;
pub mod window;

/// The field manager of a move: only `spec.topology.class` (or `classRef.name`) and
/// `spec.topology.version` are applied under it.
pub const FIELD_MANAGER: &str = "clusterstack-rollout";
/// The controller's name in metrics and logs.
pub const CONTROLLER: &str = "clusterstackrollout";
