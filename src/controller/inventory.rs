//! The controllers' edge of the apply engine: its [`Inventory`] to and from the CRDs'
//! status, so the engine never sees a CRD type. A ClusterAddon lists every object in
//! `status.resources` ([`ResourceStatus`]); a ClusterStackRelease, which may apply thousands,
//! keeps the compact form ([`to_release_status`]): names grouped by apiVersion, kind and
//! namespace in `status.inventory`, and only the objects that are not synced in
//! `status.resources`, bounded, so its status always fits in one object.

use std::collections::HashMap;

use crate::api::{ClusterStackReleaseStatus, InventoryGroup, ResourceStatus, SyncStatus};
use crate::apply::{ChangeSet, Identity, Inventory, InventoryEntry, ObjectKey};

/// How many objects that are not synced a ClusterStackRelease status names with their errors
/// (the `Applied` condition counts them all): about 30 kB at most.
pub const MAX_NOT_SYNCED_IN_STATUS: usize = 100;

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

/// A ClusterStackRelease's compact status of an inventory: the groups of names (every object,
/// in apply order), and the first [`MAX_NOT_SYNCED_IN_STATUS`] objects that are not synced.
pub fn to_release_status(inventory: &Inventory) -> (Vec<InventoryGroup>, Vec<ResourceStatus>) {
    let mut groups: Vec<InventoryGroup> = Vec::new();
    let mut index: HashMap<(String, &str, &str), usize> = HashMap::new();
    for e in &inventory.entries {
        let k = &e.key;
        let api_version = if k.group.is_empty() { k.version.clone() } else { format!("{}/{}", k.group, k.version) };
        let slot = *index.entry((api_version.clone(), k.kind.as_str(), k.namespace.as_str())).or_insert_with(|| {
            groups.push(InventoryGroup {
                api_version,
                kind: k.kind.clone(),
                namespace: k.namespace.clone(),
                names: Vec::new(),
            });
            groups.len() - 1
        });
        groups[slot].names.push(k.name.clone());
    }
    let not_synced = Inventory {
        entries: inventory.entries.iter().filter(|e| !e.synced).take(MAX_NOT_SYNCED_IN_STATUS).cloned().collect(),
    };
    (groups, to_status(&not_synced))
}

/// The engine's inventory of a ClusterStackRelease status: the objects of `inventory` (synced
/// unless `resources` says otherwise), then those only `resources` lists (a status written
/// before the compact form, which listed every object there).
pub fn from_release_status(status: &ClusterStackReleaseStatus) -> Inventory {
    let listed = from_status(&status.resources);
    let mut details: HashMap<Identity, &InventoryEntry> =
        listed.entries.iter().map(|e| (e.key.identity(), e)).collect();
    let mut entries = Vec::new();
    for g in &status.inventory {
        let (group, version) = match g.api_version.rsplit_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (String::new(), g.api_version.clone()),
        };
        for name in &g.names {
            let key = ObjectKey {
                group: group.clone(),
                version: version.clone(),
                kind: g.kind.clone(),
                namespace: g.namespace.clone(),
                name: name.clone(),
            };
            let entry = match details.remove(&key.identity()) {
                Some(d) => InventoryEntry { key, ..d.clone() },
                None => InventoryEntry { key, synced: true, error: String::new(), resource_version: String::new() },
            };
            entries.push(entry);
        }
    }
    entries.extend(listed.entries.iter().filter(|e| details.contains_key(&e.key.identity())).cloned());
    Inventory { entries }
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

    fn entry(group: &str, kind: &str, namespace: &str, name: &str, synced: bool) -> InventoryEntry {
        InventoryEntry {
            key: ObjectKey {
                group: group.into(),
                version: "v1".into(),
                kind: kind.into(),
                namespace: namespace.into(),
                name: name.into(),
            },
            synced,
            error: if synced { String::new() } else { format!("{name} failed") },
            resource_version: String::new(),
        }
    }

    #[test]
    fn the_release_status_groups_names_and_keeps_only_failures_in_detail() {
        let inventory = Inventory {
            entries: vec![
                entry("apiextensions.k8s.io", "CustomResourceDefinition", "", "crd", true),
                entry("", "ConfigMap", "a", "c1", true),
                entry("", "ConfigMap", "b", "c2", false),
                entry("", "ConfigMap", "a", "c3", true),
            ],
        };
        let (groups, resources) = to_release_status(&inventory);
        let shown: Vec<(&str, &str, &str, Vec<&str>)> = groups
            .iter()
            .map(|g| {
                (
                    g.api_version.as_str(),
                    g.kind.as_str(),
                    g.namespace.as_str(),
                    g.names.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", vec!["crd"]),
                ("v1", "ConfigMap", "a", vec!["c1", "c3"]),
                ("v1", "ConfigMap", "b", vec!["c2"]),
            ]
        );
        assert_eq!(resources.len(), 1);
        assert_eq!((resources[0].name.as_str(), resources[0].error.as_str()), ("c2", "c2 failed"));
        let status = ClusterStackReleaseStatus { inventory: groups, resources, ..Default::default() };
        let back = from_release_status(&status);
        // Grouped: the apply order within a group, groups in the order they first appeared.
        let names: Vec<(&str, bool)> = back.entries.iter().map(|e| (e.key.name.as_str(), e.synced)).collect();
        assert_eq!(names, [("crd", true), ("c1", true), ("c3", true), ("c2", false)]);
        assert_eq!(back.entries[3].error, "c2 failed");
        assert_eq!(back.entries[0].key.group, "apiextensions.k8s.io");
    }

    #[test]
    fn a_release_status_stays_small_and_bounded() {
        let entries: Vec<InventoryEntry> =
            (0..5000).map(|i| entry("", "ConfigMap", "team-a", &format!("config-{i:05}"), i % 2 == 0)).collect();
        let inventory = Inventory { entries };
        let (groups, resources) = to_release_status(&inventory);
        assert_eq!(groups.len(), 1);
        assert_eq!(resources.len(), MAX_NOT_SYNCED_IN_STATUS);
        let compact =
            serde_json::to_vec(&ClusterStackReleaseStatus { inventory: groups, resources, ..Default::default() })
                .unwrap()
                .len();
        let full = serde_json::to_vec(&to_status(&inventory)).unwrap().len();
        println!("status of 5000 objects: {full} bytes listed one by one, {compact} bytes compact");
        assert!(compact < 100_000, "{compact}");
        assert!(full > 4 * compact, "{full} vs {compact}");
    }

    #[test]
    fn a_status_of_the_older_form_still_lists_every_object() {
        let old = ClusterStackReleaseStatus {
            resources: to_status(&Inventory {
                entries: vec![entry("", "ConfigMap", "a", "c1", true), entry("", "Secret", "a", "s1", false)],
            }),
            ..Default::default()
        };
        let inventory = from_release_status(&old);
        let names: Vec<(&str, bool)> = inventory.entries.iter().map(|e| (e.key.name.as_str(), e.synced)).collect();
        assert_eq!(names, [("c1", true), ("s1", false)]);
    }
}
