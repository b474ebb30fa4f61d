//! Packaging: a stack's source directory, rendered as a check, becomes a
//! release with the ecosystem's asset names and layout.

pub mod build;
pub mod deps;
mod deps_fetch;
pub mod helm;
pub mod release_deps;
