//! Delete: removes objects a release applied, one at a time in the order given, and only those
//! that still carry the release's labels (with the uid as a precondition, so a replacement
//! created meanwhile is never touched). An object already gone counts as success. Pruning is a
//! delete of what [`super::stale`] found. [`Applier::delete_labelled`] finds by label what an
//! inventory missed, and deletes only what our field manager applied.

use std::collections::HashSet;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, GroupVersionKind, ListParams, Preconditions};

use super::inventory::{Action, Change, ChangeSet, Identity, Inventory, ObjectKey};
use super::{Applier, RELEASE_LABEL, RELEASE_NAMESPACE_LABEL, ReleaseOwner, describe};
use crate::util::is_not_found;

impl Applier {
    /// Deletes the stale objects of a release (from [`super::stale`], in that order). A failure
    /// is recorded as `pruning failed: …`, and [`Inventory::record`] keeps the object so that the
    /// next pass tries again.
    pub async fn prune(&self, stale: &[ObjectKey], owner: &ReleaseOwner) -> ChangeSet {
        let mut set = self.delete_each(stale, owner).await;
        for change in set.changes.iter_mut().filter(|c| c.action == Action::Failed) {
            change.error = format!("pruning failed: {}", change.error);
        }
        tracing::debug!(release = %owner.release, pruned = set.removed().len(), failed = set.failed(), "pruned stale objects");
        set
    }

    /// Deletes everything `inventory` lists, in reverse order (the reverse of the apply order).
    pub async fn delete_all(&self, inventory: &Inventory, owner: &ReleaseOwner) -> ChangeSet {
        let keys: Vec<ObjectKey> = inventory.entries.iter().rev().map(|e| e.key.clone()).collect();
        self.delete_each(&keys, owner).await
    }

    /// Deletes the objects of `kinds` (every namespace) that carry the owner's labels and were
    /// applied by our field manager, except those in `done`: what a release applied that its
    /// inventory does not list (a status an older version wrote, which could not hold it or
    /// was written after the apply). Every listed kind costs one cluster-wide list, so a caller
    /// whose inventory is known complete does not call this.
    /// A kind that cannot be listed is a failed change naming it, so the caller tries again.
    pub async fn delete_labelled(
        &self,
        kinds: &[GroupVersionKind],
        owner: &ReleaseOwner,
        done: &HashSet<Identity>,
    ) -> ChangeSet {
        let selector = format!("{RELEASE_LABEL}={},{RELEASE_NAMESPACE_LABEL}={}", owner.release, owner.namespace);
        let mut found = Vec::new();
        let mut set = ChangeSet::default();
        for gvk in kinds {
            let resolved = match self.discovery.resolve(gvk).await {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(e) => {
                    let key = kind_key(gvk);
                    set.changes.push(Change::failed(key, format!("discovery failed: {}", describe(&e))));
                    continue;
                }
            };
            let api: Api<kube::api::DynamicObject> = Api::all_with(self.client.clone(), &resolved.resource);
            let listed = match api.list_metadata(&ListParams::default().labels(&selector)).await {
                Ok(l) => l,
                Err(e) => {
                    let key = kind_key(gvk);
                    set.changes.push(Change::failed(key, format!("listing by label failed: {}", describe(&e))));
                    continue;
                }
            };
            for meta in listed.items {
                let key = ObjectKey {
                    group: gvk.group.clone(),
                    version: gvk.version.clone(),
                    kind: gvk.kind.clone(),
                    namespace: meta.namespace().unwrap_or_default(),
                    name: meta.name_any(),
                };
                // Labels can be copied by anyone: only what our own applies wrote is ours.
                let ours = owner.owns(meta.labels())
                    && meta.managed_fields().iter().any(|m| m.manager.as_deref() == Some(self.field_manager));
                if !ours {
                    tracing::info!(object = %key, release = %owner.release, "not deleting an object labelled for the release that our field manager did not apply");
                } else if !done.contains(&key.identity()) {
                    found.push(key);
                }
            }
        }
        if !found.is_empty() {
            tracing::info!(release = %owner.release, objects = found.len(), "deleting objects the inventory did not list, found by label");
        }
        set.changes.extend(self.delete_each(&found, owner).await.changes);
        set
    }

    async fn delete_each(&self, keys: &[ObjectKey], owner: &ReleaseOwner) -> ChangeSet {
        let mut set = ChangeSet { changes: Vec::with_capacity(keys.len()) };
        for key in keys {
            let change = match self.delete_owned(key, owner).await {
                Ok(action) => {
                    Change { key: key.clone(), action, error: String::new(), resource_version: String::new() }
                }
                Err(error) => {
                    tracing::warn!(object = %key, %error, release = %owner.release, "deleting an object failed");
                    Change::failed(key.clone(), error)
                }
            };
            set.changes.push(change);
        }
        set
    }

    /// Deletes one object if it still carries our labels: [`Action::Deleted`], [`Action::Gone`]
    /// or [`Action::Skipped`] (not ours); the error otherwise.
    async fn delete_owned(&self, key: &ObjectKey, owner: &ReleaseOwner) -> Result<Action, String> {
        let resolved = match self.discovery.resolve(&key.gvk()).await {
            Ok(Some(r)) => r,
            // The kind is gone (its CRD was deleted), and so are its objects.
            Ok(None) => return Ok(Action::Gone),
            Err(e) => return Err(format!("discovery failed: {}", describe(&e))),
        };
        let api = self.api(&resolved, &key.namespace);
        let current = match api.get_opt(&key.name).await {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(Action::Gone),
            Err(e) => return Err(format!("reading it failed: {}", describe(&e))),
        };
        if !owner.owns(current.labels()) {
            tracing::info!(object = %key, release = %owner.release, "not deleting an object without our release labels");
            return Ok(Action::Skipped);
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: current.uid(), resource_version: None }),
            ..DeleteParams::background()
        };
        match api.delete(&key.name, &params).await {
            Ok(_) => {
                tracing::info!(object = %key, release = %owner.release, "deleted");
                Ok(Action::Deleted)
            }
            Err(e) if is_not_found(&e) => Ok(Action::Gone),
            Err(e) => Err(format!("delete failed: {}", describe(&e))),
        }
    }
}

/// The key naming a whole kind in a failed change (no object name).
fn kind_key(gvk: &GroupVersionKind) -> ObjectKey {
    ObjectKey {
        group: gvk.group.clone(),
        version: gvk.version.clone(),
        kind: gvk.kind.clone(),
        namespace: String::new(),
        name: String::new(),
    }
}
