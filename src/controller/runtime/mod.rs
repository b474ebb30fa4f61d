//! What every controller runs on: the shared context, watches and pollers, backoff, Events,
//! metrics, the HTTP endpoints, the cache GC, the operator's settings, and the view of CAPI
//! Clusters. Nothing here knows a reconciler.

pub mod backoff;
pub mod cache_gc;
pub mod clusters;
pub mod config;
pub mod context;
pub mod events;
pub mod metrics;
pub mod poller;
pub mod serve;
pub mod watch;
