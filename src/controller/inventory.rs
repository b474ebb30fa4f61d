//! The controllers' edge of the apply engine: its [`Inventory`] to and from the CRDs'
//! `status.resources` ([`ResourceStatus`]), so the engine never sees a CRD type.

use crate::api::{ResourceStatus, SyncStatus};
use crate::apply::{ChangeSet, Inventory, InventoryEntry, ObjectKey};

/// The engine's inventory of a `status.resources` list.
pub fn from_status(resources: &[ResourceStatus]) -> Inventory {
    Inventory {
        entries: resources
            .iter()
            .map(|r| InventoryEntry {
                key: ObjectKey {
                    group: r.group.clone(),
                    version: r.version.clone(),
                    kind: r.kind.clone(),
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                },
                synced: r.status == SyncStatus::Synced,
                error: r.error.clone(),
                resource_version: r.resource_version.clone(),
            })
            .collect(),
    }
}

/// The `status.resources` list of an inventory.
pub fn to_status(inventory: &Inventory) -> Vec<ResourceStatus> {
    inventory
        .entries
        .iter()
        .map(|e| ResourceStatus {
            group: e.key.group.clone(),
            version: e.key.version.clone(),
            kind: e.key.kind.clone(),
            namespace: e.key.namespace.clone(),
            name: e.key.name.clone(),
            status: if e.synced { SyncStatus::Synced } else { SyncStatus::NotSynced },
            error: e.error.clone(),
            resource_version: e.resource_version.clone(),
        })
        .collect()
}

/// Records what a call did in a `status.resources` list (see [`Inventory::record`]).
pub fn record(resources: &mut Vec<ResourceStatus>, changes: &ChangeSet) {
    let mut inventory = from_status(resources);
    inventory.record(changes);
    *resources = to_status(&inventory);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips() {
        let resources = vec![
            ResourceStatus {
                group: "apps".into(),
                version: "v1".into(),
                kind: "Deployment".into(),
                namespace: "ns".into(),
                name: "d".into(),
                status: SyncStatus::Synced,
                error: String::new(),
                resource_version: "7".into(),
            },
            ResourceStatus {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: String::new(),
                name: "c".into(),
                status: SyncStatus::NotSynced,
                error: "server-side apply failed: 500".into(),
                resource_version: String::new(),
            },
        ];
        let inventory = from_status(&resources);
        assert!(inventory.entries[0].synced && !inventory.entries[1].synced);
        assert_eq!(to_status(&inventory), resources);
    }
}
