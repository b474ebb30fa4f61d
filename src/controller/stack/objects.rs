//! The ClusterStackRelease objects a ClusterStack creates and owns, and what its last poll was
//! made for.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::Resource;

use crate::api::{ClusterStack, ClusterStackRelease, ClusterStackReleaseSpec};
use crate::release::ReleaseId;

use crate::controller::{RECONCILE_REQUESTED_AT, STACK_LABEL};

/// Why a release object cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// The ClusterStack has no name, namespace or uid yet (not read from the API server).
    #[error("ClusterStack {0} has no uid or namespace yet; it must be read from the API server first")]
    Unsaved(String),
}

/// The ClusterStackRelease to create for `id`: named in tag form, in the
/// stack's namespace, labelled with the stack's name, and controlled by the
/// stack (owner reference with `controller: true`), for server-side apply.
pub fn release_for(stack: &ClusterStack, id: &ReleaseId) -> Result<ClusterStackRelease, ObjectError> {
    let unsaved = || ObjectError::Unsaved(stack.metadata.name.clone().unwrap_or_default());
    let owner = stack.controller_owner_ref(&()).ok_or_else(unsaved)?;
    let namespace = stack.metadata.namespace.clone().ok_or_else(unsaved)?;
    let mut release = ClusterStackRelease::new(&id.tag(), ClusterStackReleaseSpec::default());
    release.metadata.namespace = Some(namespace);
    release.metadata.owner_references = Some(vec![owner]);
    let mut labels = BTreeMap::from([(STACK_LABEL.to_string(), stack.metadata.name.clone().unwrap_or_default())]);
    // A release belongs to its stack's shard.
    if let Some(shard) =
        stack.metadata.labels.as_ref().and_then(|l| l.get(crate::controller::runtime::watch::SHARD_LABEL))
    {
        labels.insert(crate::controller::runtime::watch::SHARD_LABEL.to_string(), shard.clone());
    }
    release.metadata.labels = Some(labels);
    Ok(release)
}

/// Whether `release` is controlled by `stack` (an owner reference with its uid and `controller: true`).
pub fn controlled_by(release: &ClusterStackRelease, stack: &ClusterStack) -> bool {
    let Some(uid) = stack.metadata.uid.as_deref() else { return false };
    release
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid && o.controller == Some(true) && o.kind == "ClusterStack")
}

/// What the last poll of a ClusterStack's source was made for. Kept in
/// memory: after a restart there is none, so the first pass polls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastPoll {
    pub at: Timestamp,
    /// `metadata.generation` of the stack at that poll.
    pub generation: Option<i64>,
    /// The `reconcile-requested-at` annotation at that poll.
    pub requested_at: Option<String>,
}

impl LastPoll {
    /// Records a poll of `stack` made at `at`.
    pub fn of(stack: &ClusterStack, at: Timestamp) -> Self {
        Self { at, generation: stack.metadata.generation, requested_at: requested_at(stack).map(str::to_owned) }
    }
}

fn requested_at(stack: &ClusterStack) -> Option<&str> {
    stack.metadata.annotations.as_ref().and_then(|a| a.get(RECONCILE_REQUESTED_AT)).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Channel, ClusterStackSpec};

    fn stack() -> ClusterStack {
        let mut cs = ClusterStack::new(
            "ferrol",
            ClusterStackSpec {
                provider: "docker".into(),
                name: "ferrol".into(),
                kubernetes_version: "1.27".into(),
                channel: Channel::Stable,
                versions: vec![],
                auto_subscribe: true,
                no_provider: false,
                provider_ref: None,
                source: None,
                poll_interval: None,
                suspend: false,
                verify: None,
            },
        );
        cs.metadata.namespace = Some("stacks".into());
        cs.metadata.uid = Some("uid-1".into());
        cs.metadata.generation = Some(1);
        cs
    }

    #[test]
    fn release_objects_are_named_in_tag_form_and_controlled_by_the_stack() {
        let cs = stack();
        let id = ReleaseId::from_class_name("docker-ferrol-1-27-v0-sha.abc").unwrap();
        let r = release_for(&cs, &id).unwrap();
        assert_eq!(r.metadata.name.as_deref(), Some("docker-ferrol-1-27-v0-sha-abc"));
        assert_eq!(r.metadata.namespace.as_deref(), Some("stacks"));
        let owner = &r.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("ClusterStack", "uid-1", Some(true)));
        assert_eq!(r.metadata.labels.as_ref().unwrap()[STACK_LABEL], "ferrol");
        assert!(controlled_by(&r, &cs));
        // Serialised for server-side apply: apiVersion and kind present, no status, no nulls.
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["apiVersion"], "clusterstack.x-k8s.io/v1alpha1");
        assert_eq!(json["kind"], "ClusterStackRelease");
        assert!(json.get("status").is_none());
        assert!(!json.to_string().contains("null"), "{json}");
    }

    #[test]
    fn an_unsaved_stack_cannot_own_releases() {
        let mut cs = stack();
        cs.metadata.uid = None;
        let id = ReleaseId::from_tag("docker-ferrol-1-27-v1").unwrap();
        assert_eq!(release_for(&cs, &id).unwrap_err(), ObjectError::Unsaved("ferrol".into()));
    }

    #[test]
    fn another_owner_does_not_control() {
        let cs = stack();
        let r = release_for(&cs, &ReleaseId::from_tag("docker-ferrol-1-27-v1").unwrap()).unwrap();
        let mut other = stack();
        other.metadata.uid = Some("uid-2".into());
        assert!(!controlled_by(&r, &other));
        let mut orphan = r.clone();
        orphan.metadata.owner_references = None;
        assert!(!controlled_by(&orphan, &cs));
    }
}
