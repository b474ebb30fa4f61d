//! What every controller runs on, and knows no reconciler:
//!
//! - [`context`]: the shared [`context::Context`] (client, settings, metrics, Events, applier,
//!   sources, watches) and the operator's `Settings`;
//! - [`sources`]: opening sources (with a Secret's token or credentials), the release cache,
//!   the last listing of each source; [`poller`]: one poller per repository;
//! - [`cluster_watch`]: the one watch of CAPI Clusters (one store the addon and rollout
//!   controllers share, the class usage index fed from it);
//! - [`watch`]: the class usage index, the watches of applied and provider objects, triggers;
//! - [`clusters`]: the trimmed view of CAPI Clusters and which release classes they use;
//! - [`backoff`], [`events`], [`metrics`], [`serve`] (`/metrics`, `/healthz`, `/readyz`),
//!   [`cache_gc`], [`config`] (the `clusterstack operator` flags);
//! - [`tenancy`]: which directories a ClusterStack's `spec.source.directory` may name.

pub mod backoff;
pub mod cache_gc;
pub mod cluster_watch;
pub mod clusters;
pub mod config;
pub mod context;
pub mod events;
pub mod holds;
pub mod metrics;
pub mod poller;
pub mod serve;
pub mod signatures;
pub mod sources;
pub mod tenancy;
pub mod watch;
