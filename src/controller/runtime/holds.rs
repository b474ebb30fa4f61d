//! The releases unfinished ClusterStackRollouts may move Clusters back to: the ClusterStack's
//! keep set holds them, so a roll back always finds its class. Read here, below both the stack
//! and the rollout reconcilers, from the rollouts' status alone.

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::Store;

use crate::api::ClusterStackRollout;
use crate::release::ReleaseId;
use crate::util::is_not_found;

/// A rollout's phase once it is done (`status.phase`): it holds nothing any more.
const SUCCEEDED: &str = "Succeeded";

/// A release a ClusterStackRollout that is not `Succeeded` may move Clusters back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutHold {
    /// The rollout's name (same namespace as the stack).
    pub rollout: String,
    /// The `from` class of one of its Clusters.
    pub release: ReleaseId,
}

/// The releases the unfinished rollouts of `namespace` may roll back to, for the ClusterStack's
/// keep set.
pub async fn holds(client: &kube::Client, namespace: &str) -> Result<Vec<RolloutHold>, kube::Error> {
    let api: Api<ClusterStackRollout> = Api::namespaced(client.clone(), namespace);
    let rollouts = match api.list(&Default::default()).await {
        Ok(list) => list.items,
        // No rollout CRD installed: nothing is held.
        Err(e) if is_not_found(&e) => vec![],
        Err(e) => return Err(e),
    };
    Ok(holds_of(rollouts.iter()))
}

/// The holds as a store of rollouts shows them (no request): good for reporting why a release
/// is kept, never enough to delete one, since the store may lag a status write that recorded a
/// `from` (see [`holds`]).
pub fn holds_in(store: &Store<ClusterStackRollout>, namespace: &str) -> Vec<RolloutHold> {
    let rollouts = store.state();
    holds_of(rollouts.iter().map(AsRef::as_ref).filter(|r| r.metadata.namespace.as_deref() == Some(namespace)))
}

/// The `from` releases of every rollout that is not `Succeeded`.
pub fn holds_of<'a>(rollouts: impl Iterator<Item = &'a ClusterStackRollout>) -> Vec<RolloutHold> {
    let mut out = vec![];
    for ro in rollouts {
        let Some(status) = ro.status.as_ref().filter(|s| s.phase != SUCCEEDED) else { continue };
        for from in status.clusters.iter().filter_map(|e| e.from.as_ref()) {
            if let Ok(release) = ReleaseId::from_class_name(&from.class).or_else(|_| ReleaseId::from_tag(&from.class)) {
                out.push(RolloutHold { rollout: ro.name_any(), release });
            }
        }
    }
    out
}
