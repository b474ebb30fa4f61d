//! The operator's controllers: their pure logic, apart from I/O.
//!
//! - [`keep`]: which ClusterStackReleases a ClusterStack keeps, creates, deletes;
//! - [`clusters`]: which releases the CAPI Clusters use;
//! - [`conditions`], [`status`] and [`release_status`]: deterministic status, written only on change;
//! - [`backoff`]: per-object exponential backoff and jittered polling;
//! - [`metrics`] and [`serve`]: the Prometheus metrics, `/metrics`, `/healthz`, `/readyz`;
//! - [`objects`]: the ClusterStackRelease objects a stack owns, and when to poll;
//! - [`config`]: the `clusterstack operator` settings.
//!
//! `docs/DESIGN.md` describes both reconcile loops.

pub mod backoff;
pub mod clusters;
pub mod conditions;
pub mod config;
pub mod keep;
pub mod metrics;
pub mod objects;
pub mod release_status;
pub mod serve;
pub mod status;

/// The field manager of every server-side apply the operator makes.
pub const FIELD_MANAGER: &str = "clusterstack-operator";
/// The finalizer on ClusterStackReleases: applied objects are removed first.
pub const RELEASE_FINALIZER: &str = "clusterstack.x-k8s.io/release-cleanup";
/// Setting this annotation on a ClusterStack to a new value forces an immediate poll.
pub const RECONCILE_REQUESTED_AT: &str = "clusterstack.x-k8s.io/reconcile-requested-at";
