//! clusterstack: a declarative cluster-stack release manager for Kubernetes
//! Cluster API.
//!
//! The modules follow the data's journey: [`api`] (the custom resources and
//! their conditions), [`release`] (names, versions, metadata), [`source`]
//! (where releases come from, the verified cache), [`render`] (charts to
//! objects), [`package`] (a stack source to a release), [`apply`] (objects to
//! a cluster), [`provider`] (node images), [`controller`] (the reconcile
//! loops), then the command line in [`cli`]. [`controlplane`] starts a real local Kubernetes
//! control plane for `clusterstack sandbox` and the end-to-end tests.

pub mod api;
pub mod apply;
pub mod cli;
pub mod controller;
pub mod controlplane;
pub mod package;
pub mod provider;
pub mod registry;
pub mod release;
pub mod render;
pub mod source;
pub mod util;

/// Installs the process-wide TLS crypto provider (ring).
///
/// kube and reqwest both use rustls; with more than one provider compiled in,
/// rustls cannot pick one by itself and panics when a client is built. Calling
/// this first in `main` and in tests avoids that. Calling it twice is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
