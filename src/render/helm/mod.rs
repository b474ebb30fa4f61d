//! Helm charts: loading, values, schema, objects and rendering through the Go-template engine.

pub mod ignore;
pub mod schema;
