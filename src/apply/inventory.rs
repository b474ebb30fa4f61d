//! The engine's own record types, independent of any CRD: [`ObjectKey`] names an object,
//! a [`ChangeSet`] says what one call (apply, prune, delete) did to each object, and an
//! [`Inventory`] is what a release has applied, carried from one pass to the next.
//!
//! The controllers convert an [`Inventory`] to and from their status types at their edge
//! (`status.resources`), so the engine never sees a CRD.

use std::collections::{HashMap, HashSet};
use std::fmt;

use kube::ResourceExt;
use kube::api::{DynamicObject, GroupVersionKind};

/// Identity of an applied object, with the API version it was applied as.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// API group, empty for the core group.
    pub group: String,
    /// API version without the group.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// What makes an object the same object across API versions: group, kind, namespace, name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// API group, empty for the core group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of an object as written (its namespace as written, empty when it names none;
    /// an object without `apiVersion` or `kind` gets empty parts).
    pub fn of(obj: &DynamicObject) -> Self {
        let (group, version, kind) = match &obj.types {
            Some(t) => {
                let (g, v) = match t.api_version.rsplit_once('/') {
                    Some((g, v)) => (g.to_string(), v.to_string()),
                    None => (String::new(), t.api_version.clone()),
                };
                (g, v, t.kind.clone())
            }
            None => Default::default(),
        };
        ObjectKey { group, version, kind, namespace: obj.namespace().unwrap_or_default(), name: obj.name_any() }
    }

    /// The identity that survives a version change.
    pub fn identity(&self) -> Identity {
        Identity {
            group: self.group.clone(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    pub(super) fn gvk(&self) -> GroupVersionKind {
        GroupVersionKind::gvk(&self.group, &self.version, &self.kind)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gv = if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) };
        if self.namespace.is_empty() {
            write!(f, "{gv} {} {}", self.kind, self.name)
        } else {
            write!(f, "{gv} {} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// What a call did to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Applied, and new to the inventory (created, or adopted from an earlier owner).
    Created,
    /// Applied, and the apply changed it: drift corrected, or a changed desired state.
    Configured,
    /// Applied, and nothing changed.
    Unchanged,
    /// Deleted (or marked for deletion when it has finalizers).
    Deleted,
    /// Already gone when it was to be deleted.
    Gone,
    /// Left alone: it no longer carries the release's labels.
    Skipped,
    /// The call failed for this object; [`Change::error`] says why.
    Failed,
}

impl Action {
    /// Whether the object is on the cluster as applied after the call.
    pub fn is_applied(self) -> bool {
        matches!(self, Action::Created | Action::Configured | Action::Unchanged)
    }

    /// Whether the object is no longer the release's after the call (deleted, gone, or no
    /// longer carrying its labels).
    pub fn is_released(self) -> bool {
        matches!(self, Action::Deleted | Action::Gone | Action::Skipped)
    }
}

/// One object's result in a [`ChangeSet`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The object (namespaced objects with the namespace they were applied in).
    pub key: ObjectKey,
    /// What was done.
    pub action: Action,
    /// Why the call failed for this object; empty unless [`Action::Failed`].
    pub error: String,
    /// The object's `resourceVersion` after an apply; empty otherwise.
    pub resource_version: String,
}

impl Change {
    pub(super) fn failed(key: ObjectKey, error: String) -> Self {
        Self { key, action: Action::Failed, error, resource_version: String::new() }
    }
}

/// The result of one call on a set of objects, in the order they were handled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// One entry per object.
    pub changes: Vec<Change>,
}

impl ChangeSet {
    /// The keys of the objects that got `action`.
    pub fn with(&self, action: Action) -> Vec<ObjectKey> {
        self.changes.iter().filter(|c| c.action == action).map(|c| c.key.clone()).collect()
    }

    /// The keys of the objects no longer on the cluster: deleted or already gone.
    pub fn removed(&self) -> Vec<ObjectKey> {
        self.changes
            .iter()
            .filter(|c| matches!(c.action, Action::Deleted | Action::Gone))
            .map(|c| c.key.clone())
            .collect()
    }

    /// The entries that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.action == Action::Failed)
    }

    /// How many entries failed.
    pub fn failed(&self) -> usize {
        self.failures().count()
    }

    /// Whether nothing failed.
    pub fn all_ok(&self) -> bool {
        self.failed() == 0
    }

    /// The identities of every entry, failed ones included (a failed apply is still wanted).
    pub fn identities(&self) -> HashSet<Identity> {
        self.changes.iter().map(|c| c.key.identity()).collect()
    }
}

/// One object a release has applied, or tried to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryEntry {
    /// The object.
    pub key: ObjectKey,
    /// Whether the last call left the object as applied.
    pub synced: bool,
    /// Why it is not synced; empty when it is.
    pub error: String,
    /// Its `resourceVersion` after our last apply: an apply answering another version changed
    /// it. Only a synced entry's counts.
    pub resource_version: String,
}

/// What a release has applied: the previous pass's record, read by the next apply (for the
/// resourceVersions it recorded) and by [`super::stale`] (for what the new result dropped).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// The entries, in apply order.
    pub entries: Vec<InventoryEntry>,
}

impl Inventory {
    /// The inventory a first call leaves: its entries in order.
    pub fn from_changes(changes: &ChangeSet) -> Self {
        let mut inventory = Self::default();
        inventory.record(changes);
        inventory
    }

    /// Records what a call did: applied objects (failed or not) are added or replaced by
    /// identity; objects deleted, gone or no longer ours leave; an object whose delete failed
    /// stays with the error, so the next pass tries again.
    pub fn record(&mut self, changes: &ChangeSet) {
        // By identity through an index: a release of a few thousand objects stays linear.
        let mut slots: Vec<Option<InventoryEntry>> = std::mem::take(&mut self.entries).into_iter().map(Some).collect();
        let mut index: HashMap<Identity, usize> =
            slots.iter().enumerate().filter_map(|(i, e)| e.as_ref().map(|e| (e.key.identity(), i))).collect();
        for change in &changes.changes {
            let identity = change.key.identity();
            if change.action.is_released() {
                if let Some(i) = index.remove(&identity) {
                    slots[i] = None;
                }
                continue;
            }
            let entry = InventoryEntry {
                key: change.key.clone(),
                synced: change.action != Action::Failed,
                error: change.error.clone(),
                resource_version: change.resource_version.clone(),
            };
            match index.get(&identity) {
                Some(&i) => slots[i] = Some(entry),
                None => {
                    index.insert(identity, slots.len());
                    slots.push(Some(entry));
                }
            }
        }
        self.entries = slots.into_iter().flatten().collect();
    }

    /// Whether the inventory lists nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many objects it lists.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entries whose identity is in `identities`, in order.
    pub fn only(&self, identities: &HashSet<Identity>) -> Inventory {
        Inventory { entries: self.entries.iter().filter(|e| identities.contains(&e.key.identity())).cloned().collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn change(name: &str, action: Action) -> Change {
        let error = if action == Action::Failed { "boom".to_string() } else { String::new() };
        Change { key: key(name), action, error, resource_version: "1".into() }
    }

    #[test]
    fn of_splits_api_version() {
        let obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "ClusterClass",
            "metadata": {"name": "c", "namespace": "ns"}
        }))
        .unwrap();
        let k = ObjectKey::of(&obj);
        assert_eq!(
            (k.group.as_str(), k.version.as_str(), k.kind.as_str()),
            ("cluster.x-k8s.io", "v1beta1", "ClusterClass")
        );
        assert_eq!(k.to_string(), "cluster.x-k8s.io/v1beta1 ClusterClass ns/c");
        let core: DynamicObject = serde_json::from_value(
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        )
        .unwrap();
        let k = ObjectKey::of(&core);
        assert_eq!((k.group.as_str(), k.version.as_str()), ("", "v1"));
    }

    #[test]
    fn record_replaces_by_identity_and_drops_what_left() {
        let mut inventory = Inventory::from_changes(&ChangeSet {
            changes: vec![change("a", Action::Created), change("b", Action::Failed)],
        });
        assert_eq!(inventory.len(), 2);
        assert!(inventory.entries[0].synced && !inventory.entries[1].synced);
        // Another API version of "a" is the same object.
        let mut a2 = change("a", Action::Configured);
        a2.key.version = "v2".into();
        inventory.record(&ChangeSet {
            changes: vec![a2, change("b", Action::Deleted), change("c", Action::Failed), change("d", Action::Gone)],
        });
        let names: Vec<(&str, &str, bool)> =
            inventory.entries.iter().map(|e| (e.key.name.as_str(), e.key.version.as_str(), e.synced)).collect();
        assert_eq!(names, [("a", "v2", true), ("c", "v1", false)]);
        inventory.record(&ChangeSet { changes: vec![change("a", Action::Skipped)] });
        assert_eq!(inventory.entries.iter().map(|e| e.key.name.as_str()).collect::<Vec<_>>(), ["c"]);
    }

    #[test]
    fn change_set_groups_by_action() {
        let set = ChangeSet {
            changes: vec![
                change("a", Action::Deleted),
                change("b", Action::Gone),
                change("c", Action::Skipped),
                change("d", Action::Failed),
            ],
        };
        assert_eq!(set.removed().iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(set.with(Action::Skipped), [key("c")]);
        assert_eq!(set.failed(), 1);
        assert!(!set.all_ok());
        assert_eq!(set.identities().len(), 4);
    }
}
