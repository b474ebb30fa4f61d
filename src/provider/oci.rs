//! The registry client moved to [`crate::registry`], shared with the OCI release source; this
//! module keeps the provider's paths working.

pub use crate::registry::*;
