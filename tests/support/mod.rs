//! Test support shared by integration tests (`mod support;`) and examples
//! (`#[path = "../tests/support/mod.rs"] mod support;`). Never part of the shipped binary.

// Each test binary uses a different part of the support code.
#![allow(dead_code)]

pub mod apiserver;
pub mod github;
pub mod releases;

#[allow(unused_imports)]
pub use apiserver::{ApiServer, RequestMatch, RequestRecord};
pub mod fixtures;
pub mod operator;
pub mod real;
pub mod sigstore;
pub mod topology;
