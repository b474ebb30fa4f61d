//! The keep-set planner of the ClusterStack controller: which releases to
//! keep, create and delete. Pure: everything it needs is passed in.
//!
//! Rules (see `docs/DESIGN.md`):
//! - A release *matches* a ClusterStack when provider, name and Kubernetes
//!   minor are equal and its version fits the channel: `stable` takes only
//!   `vN`, `custom` only non-stable `vN-<channel>.<id>`.
//! - Kept: every pinned `spec.versions` entry; the latest matching release
//!   when `autoSubscribe`; the latest ready existing release; every release
//!   whose ClusterClass (in the stack's namespace) a Cluster uses.
//! - "Latest" is the highest stable version, compared numerically. The
//!   `custom` channel has no latest: hash versions have no order, so it keeps
//!   only pinned and in-use releases (`autoSubscribe` has no effect there).
//! - Created: kept releases the source listed that do not exist yet. When the
//!   source could not be listed nothing is created and nothing is deleted.
//! - Deleted: existing releases outside the keep set, only after a
//!   successful listing, never one a Cluster uses, never one whose name is not
//!   a release of this stack.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::{Channel, ClusterStack};
use crate::release::{KubernetesMinor, ReleaseId, StackVersion};

use super::clusters::{ClassUsage, ClusterKey};

/// An existing ClusterStackRelease of the stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExistingRelease {
    /// Object name (tag form).
    pub name: String,
    /// `status.ready`.
    pub ready: bool,
}

/// Why a release is kept.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeepReason {
    /// Listed in `spec.versions`.
    Pinned,
    /// The latest matching release, kept because of `autoSubscribe`.
    Latest,
    /// The newest release that is ready.
    LatestReady,
    /// Its ClusterClass is used by these Clusters.
    InUse { clusters: Vec<ClusterKey> },
    /// The way back of these ClusterStackRollouts (not `Succeeded`): a roll back needs its class.
    RolloutFrom { rollouts: Vec<String> },
}

impl fmt::Display for KeepReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepReason::Pinned => f.write_str("pinned in spec.versions"),
            KeepReason::Latest => f.write_str("latest release"),
            KeepReason::LatestReady => f.write_str("latest ready release"),
            KeepReason::InUse { clusters } => {
                let names: Vec<String> = clusters.iter().map(ToString::to_string).collect();
                write!(f, "used by Cluster {}", names.join(", "))
            }
            KeepReason::RolloutFrom { rollouts } => {
                write!(f, "the way back of ClusterStackRollout {}", rollouts.join(", "))
            }
        }
    }
}

/// Something the user should know; never fatal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanWarning {
    /// `spec.kubernetesVersion` does not parse; nothing can match.
    BadKubernetesVersion { value: String, reason: String },
    /// A `spec.versions` entry is not a version in dot form.
    MalformedVersion { entry: String, reason: String },
    /// A `spec.versions` entry does not belong to the stack's channel.
    PinnedWrongChannel { entry: String, channel: Channel },
    /// A pinned version the source does not list.
    PinnedNotListed { version: String },
    /// An existing ClusterStackRelease whose name is not a release of this
    /// stack; it is left alone.
    ForeignRelease { name: String },
}

impl fmt::Display for PlanWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanWarning::BadKubernetesVersion { value, reason } => {
                write!(f, "spec.kubernetesVersion {value:?} is not usable ({reason}); no release can match")
            }
            PlanWarning::MalformedVersion { entry, reason } => {
                write!(f, "spec.versions entry {entry:?} is ignored: {reason}")
            }
            PlanWarning::PinnedWrongChannel { entry, channel } => {
                write!(f, "spec.versions entry {entry:?} is ignored: it is not a version of the {channel} channel")
            }
            PlanWarning::PinnedNotListed { version } => {
                write!(f, "pinned version {version} is not published by the source")
            }
            PlanWarning::ForeignRelease { name } => {
                write!(f, "ClusterStackRelease {name} is not a release of this stack; left alone")
            }
        }
    }
}

/// What the ClusterStack controller should do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Every release to keep (by tag), with its reasons, sorted.
    pub keep: BTreeMap<String, KeptRelease>,
    /// Releases to create (listed, kept, not existing), by version order.
    pub create: Vec<ReleaseId>,
    /// Names of ClusterStackReleases to delete.
    pub delete: Vec<String>,
    /// The latest matching release the source lists (stable channel only).
    pub latest: Option<ReleaseId>,
    /// The newest ready existing release (stable channel only).
    pub latest_ready: Option<ReleaseId>,
    /// Whether the source listing was available.
    pub source_listed: bool,
    /// Problems to report, never fatal.
    pub warnings: Vec<PlanWarning>,
}

/// One release of the keep set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRelease {
    pub id: ReleaseId,
    /// Why, sorted, no duplicates.
    pub reasons: Vec<KeepReason>,
}

impl Plan {
    /// Whether the release with this tag is kept.
    pub fn keeps(&self, tag: &str) -> bool {
        self.keep.contains_key(tag)
    }
}

/// Computes the plan.
///
/// `listed`: the releases the source listed (any stack; others are filtered
/// out), or `None` when the source could not be listed. `existing`: the
/// ClusterStackReleases owned by this stack. `usages`: the class usages of
/// every Cluster in the cluster.
pub fn plan(
    stack: &ClusterStack,
    listed: Option<&[ReleaseId]>,
    existing: &[ExistingRelease],
    usages: &[ClassUsage],
) -> Plan {
    plan_with_holds(stack, listed, existing, usages, &[])
}

/// A release a ClusterStackRollout that is not `Succeeded` may move Clusters back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutHold {
    /// The rollout's name (same namespace as the stack).
    pub rollout: String,
    /// The `from` class of one of its Clusters.
    pub release: ReleaseId,
}

/// [`plan`], also keeping the releases rollouts may roll back to (`holds`).
pub fn plan_with_holds(
    stack: &ClusterStack,
    listed: Option<&[ReleaseId]>,
    existing: &[ExistingRelease],
    usages: &[ClassUsage],
    holds: &[RolloutHold],
) -> Plan {
    let spec = &stack.spec;
    let namespace = stack.metadata.namespace.as_deref().unwrap_or_default();
    let mut out = Plan { source_listed: listed.is_some(), ..Plan::default() };

    let kubernetes = match spec.kubernetes_version.parse::<KubernetesMinor>() {
        Ok(k) => Some(k),
        Err(e) => {
            out.warnings.push(PlanWarning::BadKubernetesVersion {
                value: spec.kubernetes_version.clone(),
                reason: e.to_string(),
            });
            None
        }
    };
    let of_stack = |id: &ReleaseId| {
        kubernetes.is_some_and(|k| id.provider == spec.provider && id.name == spec.name && id.kubernetes == k)
    };
    let in_channel = |v: &StackVersion| match spec.channel {
        Channel::Stable => v.is_stable(),
        Channel::Custom => !v.is_stable(),
    };

    // Listed releases of this stack and channel, deduplicated.
    let matching: BTreeMap<String, ReleaseId> = listed
        .unwrap_or_default()
        .iter()
        .filter(|id| of_stack(id) && in_channel(&id.version))
        .map(|id| (id.tag(), id.clone()))
        .collect();

    // Existing releases, parsed; foreign names are reported and never touched.
    let mut existing_ids: BTreeMap<String, (ReleaseId, bool)> = BTreeMap::new();
    let mut foreign: BTreeSet<String> = BTreeSet::new();
    for e in existing {
        match ReleaseId::from_tag(&e.name) {
            Ok(id) if of_stack(&id) => {
                existing_ids.insert(e.name.clone(), (id, e.ready));
            }
            _ => {
                foreign.insert(e.name.clone());
                out.warnings.push(PlanWarning::ForeignRelease { name: e.name.clone() });
            }
        }
    }

    let mut keep: BTreeMap<String, KeptRelease> = BTreeMap::new();
    let mut add = |id: &ReleaseId, reason: KeepReason| {
        let kept = keep.entry(id.tag()).or_insert_with(|| KeptRelease { id: id.clone(), reasons: vec![] });
        if !kept.reasons.contains(&reason) {
            kept.reasons.push(reason);
            kept.reasons.sort();
        }
    };

    // Pinned versions.
    for entry in &spec.versions {
        let version = match entry.parse::<StackVersion>() {
            Ok(v) => v,
            Err(e) => {
                out.warnings.push(PlanWarning::MalformedVersion { entry: entry.clone(), reason: e.to_string() });
                continue;
            }
        };
        if !in_channel(&version) {
            out.warnings.push(PlanWarning::PinnedWrongChannel { entry: entry.clone(), channel: spec.channel });
            continue;
        }
        let Some(k) = kubernetes else { continue };
        let Ok(id) = ReleaseId::new(&spec.provider, &spec.name, k, version) else {
            // Provider or name unusable: the CRD's schema prevents it; nothing can match.
            continue;
        };
        if listed.is_some() && !matching.contains_key(&id.tag()) {
            out.warnings.push(PlanWarning::PinnedNotListed { version: id.version.dotted() });
        }
        add(&id, KeepReason::Pinned);
    }

    // Latest (stable channel only; custom versions have no order).
    if spec.channel == Channel::Stable {
        out.latest = highest_stable(matching.values());
        out.latest_ready = highest_stable(existing_ids.values().filter(|(_, ready)| *ready).map(|(id, _)| id));
    }
    if spec.auto_subscribe
        && let Some(latest) = &out.latest
    {
        add(latest, KeepReason::Latest);
    }
    if let Some(ready) = &out.latest_ready {
        add(ready, KeepReason::LatestReady);
    }

    // In use, by identity, in this namespace; whatever the source says.
    // One pass over the usages (there may be thousands of Clusters).
    let mut used: BTreeMap<String, (&ReleaseId, BTreeSet<ClusterKey>)> = BTreeMap::new();
    for u in usages.iter().filter(|u| u.class_namespace == namespace && of_stack(&u.class)) {
        used.entry(u.class.tag()).or_insert_with(|| (&u.class, BTreeSet::new())).1.insert(u.cluster.clone());
    }
    for (id, clusters) in used.into_values() {
        add(id, KeepReason::InUse { clusters: clusters.into_iter().collect() });
    }
    let mut held: BTreeMap<String, (&ReleaseId, BTreeSet<String>)> = BTreeMap::new();
    for h in holds.iter().filter(|h| of_stack(&h.release)) {
        held.entry(h.release.tag()).or_insert_with(|| (&h.release, BTreeSet::new())).1.insert(h.rollout.clone());
    }
    for (id, rollouts) in held.into_values() {
        add(id, KeepReason::RolloutFrom { rollouts: rollouts.into_iter().collect() });
    }

    if listed.is_some() {
        let mut create: Vec<ReleaseId> = keep
            .values()
            .filter(|k| matching.contains_key(&k.id.tag()) && !existing_ids.contains_key(&k.id.tag()))
            .map(|k| k.id.clone())
            .collect();
        create.sort_by(version_order);
        out.create = create;
        out.delete = existing_ids.keys().filter(|name| !keep.contains_key(*name)).cloned().collect();
    }
    out.keep = keep;
    out
}

fn highest_stable<'a>(ids: impl Iterator<Item = &'a ReleaseId>) -> Option<ReleaseId> {
    ids.filter_map(|id| match id.version {
        StackVersion::Stable(n) => Some((n, id)),
        StackVersion::PreRelease { .. } => None,
    })
    .max_by_key(|(n, _)| *n)
    .map(|(_, id)| id.clone())
}

/// Stable versions numerically first, then non-stable ones by their dot form:
/// a total order for display and creation order.
pub fn version_order(a: &ReleaseId, b: &ReleaseId) -> std::cmp::Ordering {
    match (&a.version, &b.version) {
        (StackVersion::Stable(x), StackVersion::Stable(y)) => x.cmp(y),
        (StackVersion::Stable(_), _) => std::cmp::Ordering::Less,
        (_, StackVersion::Stable(_)) => std::cmp::Ordering::Greater,
        (x, y) => x.partial_cmp(y).unwrap_or_else(|| x.dotted().cmp(&y.dotted())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ClusterStackSpec;

    fn stack(channel: Channel, versions: &[&str], auto_subscribe: bool) -> ClusterStack {
        let mut cs = ClusterStack::new(
            "ferrol",
            ClusterStackSpec {
                provider: "docker".into(),
                name: "ferrol".into(),
                kubernetes_version: "1.27".into(),
                channel,
                versions: versions.iter().map(|s| s.to_string()).collect(),
                auto_subscribe,
                no_provider: false,
                provider_ref: None,
                source: None,
                poll_interval: None,
                suspend: false,
            },
        );
        cs.metadata.namespace = Some("stacks".into());
        cs
    }

    fn ids(tags: &[&str]) -> Vec<ReleaseId> {
        tags.iter().map(|t| ReleaseId::from_tag(t).unwrap()).collect()
    }

    fn existing(items: &[(&str, bool)]) -> Vec<ExistingRelease> {
        items.iter().map(|(n, r)| ExistingRelease { name: n.to_string(), ready: *r }).collect()
    }

    fn usage(ns: &str, cluster: &str, class: &str, class_ns: &str) -> ClassUsage {
        ClassUsage {
            cluster: ClusterKey { namespace: ns.into(), name: cluster.into() },
            class: ReleaseId::parse_any(class).unwrap(),
            class_namespace: class_ns.into(),
        }
    }

    fn tags(ids: &[ReleaseId]) -> Vec<String> {
        ids.iter().map(ReleaseId::tag).collect()
    }

    fn kept(plan: &Plan) -> Vec<&str> {
        plan.keep.keys().map(String::as_str).collect()
    }

    #[test]
    fn autosubscribe_keeps_and_creates_the_latest_numerically() {
        let listed = ids(&["docker-ferrol-1-27-v9", "docker-ferrol-1-27-v10", "docker-ferrol-1-27-v2"]);
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &[], &[]);
        assert_eq!(p.latest.as_ref().map(ReleaseId::tag).as_deref(), Some("docker-ferrol-1-27-v10"));
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v10"]);
        assert_eq!(p.keep["docker-ferrol-1-27-v10"].reasons, [KeepReason::Latest]);
        assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v10"]);
        assert!(p.delete.is_empty());
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn without_autosubscribe_latest_is_reported_but_not_kept() {
        let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2"]);
        let p = plan(&stack(Channel::Stable, &["v1"], false), Some(&listed), &[], &[]);
        assert_eq!(p.latest.as_ref().map(ReleaseId::tag).as_deref(), Some("docker-ferrol-1-27-v2"));
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v1"]);
        assert_eq!(p.keep["docker-ferrol-1-27-v1"].reasons, [KeepReason::Pinned]);
        assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v1"]);
    }

    #[test]
    fn other_stacks_minors_and_channels_never_match() {
        let listed = ids(&[
            "openstack-ferrol-1-27-v50",
            "docker-scs-1-27-v50",
            "docker-ferrol-1-28-v50",
            "docker-ferrol-1-27-v1-alpha-9",
            "docker-ferrol-1-27-v3",
        ]);
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &[], &[]);
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v3"]);
    }

    #[test]
    fn pinned_versions_are_kept_and_duplicates_merge_reasons() {
        let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
        let p = plan(&stack(Channel::Stable, &["v1", "v3", "v1"], true), Some(&listed), &[], &[]);
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v3"]);
        assert_eq!(p.keep["docker-ferrol-1-27-v3"].reasons, [KeepReason::Pinned, KeepReason::Latest]);
        assert_eq!(p.keep["docker-ferrol-1-27-v1"].reasons, [KeepReason::Pinned]);
        assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v3"]);
    }

    #[test]
    fn malformed_and_wrong_channel_entries_are_warnings_not_failures() {
        let listed = ids(&["docker-ferrol-1-27-v1"]);
        let p = plan(&stack(Channel::Stable, &["1", "v1-alpha-1", "v1-alpha.1", "v1"], true), Some(&listed), &[], &[]);
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v1"]);
        assert!(matches!(&p.warnings[0], PlanWarning::MalformedVersion { entry, .. } if entry == "1"));
        assert!(matches!(&p.warnings[1], PlanWarning::MalformedVersion { entry, .. } if entry == "v1-alpha-1"));
        assert!(matches!(&p.warnings[2], PlanWarning::PinnedWrongChannel { entry, .. } if entry == "v1-alpha.1"));
        assert_eq!(p.warnings.len(), 3);
        assert!(p.warnings[0].to_string().contains("\"1\""));
    }

    #[test]
    fn pinned_version_not_listed_is_a_warning_and_not_created() {
        let listed = ids(&["docker-ferrol-1-27-v1"]);
        let p = plan(&stack(Channel::Stable, &["v7"], false), Some(&listed), &[], &[]);
        assert_eq!(p.warnings, [PlanWarning::PinnedNotListed { version: "v7".into() }]);
        assert!(p.create.is_empty());
        // Kept all the same: an existing v7 must not be deleted because a listing lost it.
        let p = plan(
            &stack(Channel::Stable, &["v7"], false),
            Some(&listed),
            &existing(&[("docker-ferrol-1-27-v7", true)]),
            &[],
        );
        assert!(p.delete.is_empty());
    }

    #[test]
    fn existing_releases_outside_the_keep_set_are_deleted() {
        let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
        let ex = existing(&[
            ("docker-ferrol-1-27-v1", true),
            ("docker-ferrol-1-27-v2", false),
            ("docker-ferrol-1-27-v3", false),
        ]);
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[]);
        // v3 is latest, v1 latest ready, v2 neither.
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v3"]);
        assert_eq!(p.keep["docker-ferrol-1-27-v1"].reasons, [KeepReason::LatestReady]);
        assert_eq!(p.delete, ["docker-ferrol-1-27-v2"]);
        assert!(p.create.is_empty());
    }

    #[test]
    fn latest_ready_compares_numerically() {
        let listed = ids(&["docker-ferrol-1-27-v9", "docker-ferrol-1-27-v10", "docker-ferrol-1-27-v11"]);
        let ex = existing(&[
            ("docker-ferrol-1-27-v9", true),
            ("docker-ferrol-1-27-v10", true),
            ("docker-ferrol-1-27-v11", false),
        ]);
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[]);
        assert_eq!(p.latest_ready.as_ref().map(ReleaseId::tag).as_deref(), Some("docker-ferrol-1-27-v10"));
        assert_eq!(p.delete, ["docker-ferrol-1-27-v9"]);
    }

    #[test]
    fn source_down_deletes_and_creates_nothing() {
        let ex = existing(&[("docker-ferrol-1-27-v1", false), ("docker-ferrol-1-27-v2", false)]);
        let p = plan(&stack(Channel::Stable, &["v5"], true), None, &ex, &[]);
        assert!(!p.source_listed);
        assert!(p.delete.is_empty());
        assert!(p.create.is_empty());
        assert_eq!(p.latest, None);
        // No "not listed" warning when nothing could be listed.
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn an_empty_listing_is_a_listing_and_deletes() {
        let ex = existing(&[("docker-ferrol-1-27-v1", false)]);
        let p = plan(&stack(Channel::Stable, &[], true), Some(&[]), &ex, &[]);
        assert_eq!(p.delete, ["docker-ferrol-1-27-v1"]);
    }

    #[test]
    fn a_release_in_use_is_never_deleted_even_when_unlisted() {
        let listed = ids(&["docker-ferrol-1-27-v5"]);
        let ex = existing(&[("docker-ferrol-1-27-v1", false), ("docker-ferrol-1-27-v5", false)]);
        let usages = [
            usage("team-a", "c1", "docker-ferrol-1-27-v1", "stacks"),
            usage("stacks", "c2", "docker-ferrol-1-27-v1", "stacks"),
        ];
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &usages);
        assert!(p.delete.is_empty());
        let clusters = vec![
            ClusterKey { namespace: "stacks".into(), name: "c2".into() },
            ClusterKey { namespace: "team-a".into(), name: "c1".into() },
        ];
        assert_eq!(p.keep["docker-ferrol-1-27-v1"].reasons, [KeepReason::InUse { clusters }]);
        // Unlisted, so not re-created if it were missing.
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &[], &usages);
        assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v5"]);
    }

    #[test]
    fn usage_in_another_namespace_or_of_another_stack_does_not_keep() {
        let listed = ids(&["docker-ferrol-1-27-v5"]);
        let ex = existing(&[("docker-ferrol-1-27-v1", false), ("docker-ferrol-1-27-v5", false)]);
        let usages = [
            usage("team-a", "c1", "docker-ferrol-1-27-v1", "elsewhere"),
            usage("stacks", "c2", "docker-ferrol-1-28-v1", "stacks"),
        ];
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &usages);
        assert_eq!(p.delete, ["docker-ferrol-1-27-v1"]);
    }

    #[test]
    fn usage_by_dot_form_keeps_a_custom_release() {
        let listed = ids(&["docker-ferrol-1-27-v0-sha-abc", "docker-ferrol-1-27-v0-sha-def"]);
        let ex = existing(&[("docker-ferrol-1-27-v0-sha-abc", true), ("docker-ferrol-1-27-v0-sha-def", true)]);
        let usages = [usage("stacks", "c1", "docker-ferrol-1-27-v0-sha.abc", "stacks")];
        let p = plan(&stack(Channel::Custom, &[], true), Some(&listed), &ex, &usages);
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v0-sha-abc"]);
        assert_eq!(p.delete, ["docker-ferrol-1-27-v0-sha-def"]);
    }

    #[test]
    fn custom_channel_has_no_latest_and_keeps_pinned_only() {
        let listed = ids(&["docker-ferrol-1-27-v0-sha-abc", "docker-ferrol-1-27-v0-sha-def", "docker-ferrol-1-27-v4"]);
        let p = plan(&stack(Channel::Custom, &["v0-sha.def", "v4"], true), Some(&listed), &[], &[]);
        assert_eq!(p.latest, None);
        assert_eq!(p.latest_ready, None);
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v0-sha-def"]);
        assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v0-sha-def"]);
        assert!(matches!(&p.warnings[..], [PlanWarning::PinnedWrongChannel { entry, .. }] if entry == "v4"));
    }

    #[test]
    fn foreign_existing_releases_are_reported_and_left_alone() {
        let listed = ids(&["docker-ferrol-1-27-v1"]);
        let ex = existing(&[
            ("my-hand-made-release", false),
            ("docker-ferrol-1-28-v1", false),
            ("docker-ferrol-1-27-v1", true),
        ]);
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[]);
        assert!(p.delete.is_empty());
        assert_eq!(
            p.warnings,
            [
                PlanWarning::ForeignRelease { name: "my-hand-made-release".into() },
                PlanWarning::ForeignRelease { name: "docker-ferrol-1-28-v1".into() },
            ]
        );
    }

    #[test]
    fn existing_releases_are_not_created_again() {
        let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2"]);
        let ex = existing(&[("docker-ferrol-1-27-v2", false)]);
        let p = plan(&stack(Channel::Stable, &["v1"], true), Some(&listed), &ex, &[]);
        assert_eq!(tags(&p.create), ["docker-ferrol-1-27-v1"]);
    }

    #[test]
    fn bad_kubernetes_version_matches_nothing_and_deletes_nothing_foreign() {
        let mut cs = stack(Channel::Stable, &["v1"], true);
        cs.spec.kubernetes_version = "1.x".into();
        let listed = ids(&["docker-ferrol-1-27-v1"]);
        let p = plan(&cs, Some(&listed), &existing(&[("docker-ferrol-1-27-v1", true)]), &[]);
        assert!(p.keep.is_empty() && p.create.is_empty() && p.delete.is_empty());
        assert!(matches!(p.warnings[0], PlanWarning::BadKubernetesVersion { .. }));
    }

    #[test]
    fn version_order_is_numeric_then_non_stable() {
        let mut v = ids(&[
            "docker-ferrol-1-27-v0-sha-b",
            "docker-ferrol-1-27-v10",
            "docker-ferrol-1-27-v0-sha-a",
            "docker-ferrol-1-27-v9",
        ]);
        v.sort_by(version_order);
        assert_eq!(
            tags(&v),
            [
                "docker-ferrol-1-27-v9",
                "docker-ferrol-1-27-v10",
                "docker-ferrol-1-27-v0-sha-a",
                "docker-ferrol-1-27-v0-sha-b"
            ]
        );
    }

    mod invariants {
        use super::*;
        use proptest::prelude::*;

        // Versions v0..v11 of the stack (plus a few of another minor and two hashes),
        // so that listings, existing releases and usages overlap often.
        fn universe() -> Vec<ReleaseId> {
            let mut tags: Vec<String> = (0..12).map(|n| format!("docker-ferrol-1-27-v{n}")).collect();
            tags.extend(
                ["docker-ferrol-1-28-v3", "docker-ferrol-1-27-v0-sha-abc", "docker-ferrol-1-27-v0-sha-def"]
                    .map(String::from),
            );
            tags.iter().map(|t| ReleaseId::from_tag(t).unwrap()).collect()
        }

        fn pick(mask: u32) -> Vec<ReleaseId> {
            universe().into_iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, id)| id).collect()
        }

        proptest! {
            #[test]
            fn plan_invariants(
                listed_mask in any::<u32>(),
                source_up in any::<bool>(),
                existing_mask in any::<u32>(),
                ready_mask in any::<u32>(),
                used_mask in any::<u32>(),
                pinned in proptest::collection::vec(0u32..14, 0..3),
                custom in any::<bool>(),
                auto in any::<bool>(),
            ) {
                let listed = pick(listed_mask);
                let existing: Vec<ExistingRelease> = pick(existing_mask)
                    .iter()
                    .enumerate()
                    .map(|(i, id)| ExistingRelease { name: id.tag(), ready: ready_mask & (1 << i) != 0 })
                    .collect();
                let usages: Vec<ClassUsage> = pick(used_mask)
                    .iter()
                    .map(|id| ClassUsage {
                        cluster: ClusterKey { namespace: "team".into(), name: id.tag() },
                        class: id.clone(),
                        class_namespace: "stacks".into(),
                    })
                    .collect();
                let versions: Vec<String> = pinned.iter().map(|n| format!("v{n}")).collect();
                let versions: Vec<&str> = versions.iter().map(String::as_str).collect();
                let channel = if custom { Channel::Custom } else { Channel::Stable };
                let cs = stack(channel, &versions, auto);
                let p = plan(&cs, source_up.then_some(listed.as_slice()), &existing, &usages);

                let used: BTreeSet<String> = usages.iter().filter(|u| u.class.kubernetes.minor == 27).map(|u| u.class.tag()).collect();
                let existing_names: BTreeSet<String> = existing.iter().map(|e| e.name.clone()).collect();
                let listed_tags: BTreeSet<String> = listed.iter().map(ReleaseId::tag).collect();
                if !source_up {
                    prop_assert!(p.delete.is_empty() && p.create.is_empty());
                }
                for name in &p.delete {
                    prop_assert!(!used.contains(name), "deletes {} in use", name);
                    prop_assert!(existing_names.contains(name));
                    prop_assert!(!p.keeps(name));
                }
                for id in &p.create {
                    prop_assert!(listed_tags.contains(&id.tag()));
                    prop_assert!(!existing_names.contains(&id.tag()));
                    prop_assert!(p.keeps(&id.tag()));
                }
                for name in &used {
                    prop_assert!(p.keeps(name), "{} in use but not kept", name);
                }
                // Everything existing is either kept, deleted, or (source down / other minor) left alone.
                for name in &existing_names {
                    let left_alone = !source_up || name.contains("-1-28-");
                    prop_assert!(p.keeps(name) || p.delete.contains(name) || left_alone);
                }
                if let Some(latest) = &p.latest {
                    prop_assert!(!custom && source_up);
                    for id in &listed {
                        if let (StackVersion::Stable(n), StackVersion::Stable(l)) = (&id.version, &latest.version) {
                            prop_assert!(id.kubernetes.minor != 27 || n <= l);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_way_back_of_an_unfinished_rollout_is_kept() {
        let listed = ids(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
        let ex = existing(&[
            ("docker-ferrol-1-27-v1", true),
            ("docker-ferrol-1-27-v2", true),
            ("docker-ferrol-1-27-v3", true),
        ]);
        let hold = |tag: &str| RolloutHold { rollout: "ferrol".into(), release: ReleaseId::from_tag(tag).unwrap() };
        // No Cluster uses v2 any more (all moved to v3), but the rollout may still move them back.
        let holds = [hold("docker-ferrol-1-27-v2"), hold("docker-ferrol-1-27-v2"), hold("docker-ferrol-1-28-v1")];
        let p = plan_with_holds(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[], &holds);
        assert_eq!(kept(&p), ["docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
        assert_eq!(p.delete, ["docker-ferrol-1-27-v1"]);
        assert_eq!(
            p.keep["docker-ferrol-1-27-v2"].reasons,
            [KeepReason::RolloutFrom { rollouts: vec!["ferrol".into()] }]
        );
        assert_eq!(
            p.keep["docker-ferrol-1-27-v2"].reasons[0].to_string(),
            "the way back of ClusterStackRollout ferrol"
        );
        // Without the hold v2 goes.
        let p = plan(&stack(Channel::Stable, &[], true), Some(&listed), &ex, &[]);
        assert_eq!(p.delete, ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2"]);
    }
}
