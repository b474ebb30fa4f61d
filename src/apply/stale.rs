//! What is stale: the objects a previous inventory lists and a new result no longer has. Pure;
//! the caller prunes them with [`super::Applier::prune`].

use std::collections::HashSet;

use super::inventory::{Identity, Inventory, ObjectKey};
use super::{ApplyError, ReleaseOwner};

/// What an empty new result means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenEmpty {
    /// Most likely a broken render: prune nothing and fail with [`ApplyError::EmptyRender`].
    Refuse,
    /// The owner really has nothing left (an addon version without addons).
    Prune,
}

/// The objects of `previous` whose identity (any API version) is not in `keep`, in reverse
/// inventory order (the order to delete them in).
///
/// `keep` is what the new result has: usually [`super::ChangeSet::identities`] of the apply (the
/// objects with the namespace they were applied in, failed ones included, so a failing apply
/// never deletes its object). With `keep` empty and `previous` not, [`WhenEmpty::Refuse`] makes
/// this an error instead of pruning everything.
pub fn stale(
    previous: &Inventory,
    keep: &HashSet<Identity>,
    when_empty: WhenEmpty,
    owner: &ReleaseOwner,
) -> Result<Vec<ObjectKey>, ApplyError> {
    if keep.is_empty() && !previous.is_empty() && when_empty == WhenEmpty::Refuse {
        return Err(ApplyError::EmptyRender { release: owner.release.clone(), previous: previous.len() });
    }
    Ok(previous.entries.iter().rev().filter(|e| !keep.contains(&e.key.identity())).map(|e| e.key.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::super::inventory::InventoryEntry;
    use super::*;

    fn entry(kind: &str, version: &str, name: &str) -> InventoryEntry {
        InventoryEntry {
            key: ObjectKey {
                group: "example.com".into(),
                version: version.into(),
                kind: kind.into(),
                namespace: "ns".into(),
                name: name.into(),
            },
            synced: true,
            error: String::new(),
            resource_version: "1".into(),
        }
    }

    #[test]
    fn stale_is_what_the_new_result_dropped_in_reverse_order() {
        let owner = ReleaseOwner::new("r", "ns");
        let previous = Inventory {
            entries: vec![entry("Widget", "v1", "a"), entry("Widget", "v1", "b"), entry("Gadget", "v1", "c")],
        };
        // "a" moved to v2: the same object, not stale.
        let keep: HashSet<Identity> = [entry("Widget", "v2", "a").key.identity()].into();
        let stale = stale(&previous, &keep, WhenEmpty::Refuse, &owner).unwrap();
        assert_eq!(stale.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["c", "b"]);
    }

    #[test]
    fn an_empty_result_prunes_only_when_allowed() {
        let owner = ReleaseOwner::new("r", "ns");
        let previous = Inventory { entries: vec![entry("Widget", "v1", "a")] };
        let err = stale(&previous, &HashSet::new(), WhenEmpty::Refuse, &owner).unwrap_err();
        assert!(matches!(err, ApplyError::EmptyRender { previous: 1, .. }), "{err}");
        assert_eq!(stale(&previous, &HashSet::new(), WhenEmpty::Prune, &owner).unwrap().len(), 1);
        // Nothing before, nothing now: nothing to refuse.
        assert!(stale(&Inventory::default(), &HashSet::new(), WhenEmpty::Refuse, &owner).unwrap().is_empty());
    }
}
