//! The inventory of what was applied into a workload cluster, by object identity.

use kube::ResourceExt;
use kube::api::DynamicObject;

use crate::api::ResourceStatus;

/// Replaces inventory entries by identity, adding new ones.
pub(super) fn merge_inventory(inventory: &mut Vec<ResourceStatus>, new: &[ResourceStatus]) {
    for entry in new {
        match inventory.iter_mut().find(|r| identity(r) == identity(entry)) {
            Some(existing) => *existing = entry.clone(),
            None => inventory.push(entry.clone()),
        }
    }
}

pub(super) type Identity = (String, String, String, String);

pub(super) fn identity(r: &ResourceStatus) -> Identity {
    (r.group.clone(), r.kind.clone(), r.namespace.clone(), r.name.clone())
}

pub(super) fn object_identity(o: &DynamicObject) -> Identity {
    let (group, kind) = match &o.types {
        Some(t) => (t.api_version.rsplit_once('/').map(|(g, _)| g.to_string()).unwrap_or_default(), t.kind.clone()),
        None => Default::default(),
    };
    (group, kind, o.namespace().unwrap_or_default(), o.name_any())
}
