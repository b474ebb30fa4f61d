//! The release model: a release's typed identity, its names, its version and
//! its `metadata.yaml`.

mod id;
mod metadata;

pub use id::{KubernetesMinor, NameError, ReleaseId, StackVersion};
pub use metadata::{
    Components, KubernetesVersion, METADATA_API_VERSION, METADATA_FILE, MetadataError, ReleaseMetadata, Versions,
    yaml_error_without_content,
};
