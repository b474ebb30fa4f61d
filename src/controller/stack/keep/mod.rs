//! The keep-set planner of the ClusterStack controller: which releases to
//! keep, create and delete. Pure: everything it needs is passed in.
//!
//! Rules (see `docs/DESIGN.md`):
//! - A release *matches* a ClusterStack when provider, name and Kubernetes
//!   minor are equal and its version fits the channel: `stable` takes only
//!   `vN`, `custom` only non-stable `vN-<channel>.<id>`, a named channel (`ttl`)
//!   only `vN-<name>.<id>`.
//! - Kept: every pinned `spec.versions` entry; the latest matching release
//!   when `autoSubscribe`; the latest ready existing release; every release
//!   whose ClusterClass (in the stack's namespace) a Cluster uses.
//! - "Latest" is the highest stable version, compared numerically; in a named
//!   channel the highest `vN`, then the highest numeric id (`v0-ttl.<unix time>`:
//!   the newest build). The `custom` channel has no latest: hash versions and
//!   versions of different channels have no order, so it keeps only pinned and
//!   in-use releases (`autoSubscribe` has no effect there). A development build
//!   (`v0-ttl.*`) is thus never auto-subscribed unless the stack asks for `ttl`.
//! - Created: kept releases the source listed that do not exist yet. When the
//!   source could not be listed nothing is created and nothing is deleted.
//! - Deleted: existing releases outside the keep set, only after a
//!   successful listing, never one a Cluster uses, never one whose name is not
//!   a release of this stack.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::api::{Channel, ClusterStack};
use crate::release::{KubernetesMinor, ReleaseId, StackVersion};

use crate::controller::runtime::clusters::{ClassUsage, ClusterKey};

/// The most `spec.versions` entries a stack may pin; the rest are ignored with a warning. Each
/// pinned release is an object, a download and a line of status: 10,000 pins made a 1 MB status.
pub const MAX_PINNED_VERSIONS: usize = 100;

/// The longest part of a `spec.versions` entry quoted in a message.
const MAX_QUOTED_ENTRY: usize = 64;

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
    /// More `spec.versions` entries than [`MAX_PINNED_VERSIONS`]: the rest are ignored.
    TooManyPinned { given: usize, cap: usize },
    /// A kept release's name is taken by a ClusterStackRelease another ClusterStack of the
    /// namespace controls (the same provider, name and Kubernetes version): left to it.
    NameTaken { release: String, owner: String },
}

/// `entry`, cut to [`MAX_QUOTED_ENTRY`] characters.
fn quoted(entry: &str) -> String {
    match entry.char_indices().nth(MAX_QUOTED_ENTRY) {
        Some((at, _)) => format!("{:?}…", &entry[..at]),
        None => format!("{entry:?}"),
    }
}

impl fmt::Display for PlanWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanWarning::BadKubernetesVersion { value, reason } => {
                write!(f, "spec.kubernetesVersion {value:?} is not usable ({reason}); no release can match")
            }
            PlanWarning::MalformedVersion { entry, .. } if entry.chars().count() > MAX_QUOTED_ENTRY => {
                write!(f, "spec.versions entry {} is ignored: too long for a version", quoted(entry))
            }
            PlanWarning::MalformedVersion { entry, reason } => {
                write!(f, "spec.versions entry {entry:?} is ignored: {reason}")
            }
            PlanWarning::PinnedWrongChannel { entry, channel } => {
                let entry = quoted(entry);
                write!(f, "spec.versions entry {entry} is ignored: it is not a version of the {channel} channel")
            }
            PlanWarning::PinnedNotListed { version } => {
                write!(f, "pinned version {version} is not published by the source")
            }
            PlanWarning::ForeignRelease { name } => {
                write!(f, "ClusterStackRelease {name} is not a release of this stack; left alone")
            }
            PlanWarning::TooManyPinned { given, cap } => write!(
                f,
                "spec.versions has {given} entries: only the first {cap} are pinned (the cap on pinned versions), the rest are ignored"
            ),
            PlanWarning::NameTaken { release, owner } => write!(
                f,
                "ClusterStackRelease {release} belongs to ClusterStack {owner} of this namespace (the same provider, name and Kubernetes version); not created, left to it"
            ),
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
    /// The latest matching release the source lists (none in the `custom` channel).
    pub latest: Option<ReleaseId>,
    /// The newest ready existing release (none in the `custom` channel).
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

pub use crate::controller::runtime::holds::RolloutHold;

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
    let in_channel = |v: &StackVersion| spec.channel.admits(v);

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

    // Pinned versions, at most MAX_PINNED_VERSIONS.
    if spec.versions.len() > MAX_PINNED_VERSIONS {
        out.warnings.push(PlanWarning::TooManyPinned { given: spec.versions.len(), cap: MAX_PINNED_VERSIONS });
    }
    for entry in spec.versions.iter().take(MAX_PINNED_VERSIONS) {
        let version = match entry.parse::<StackVersion>() {
            Ok(v) => v,
            Err(e) => {
                out.warnings.push(PlanWarning::MalformedVersion { entry: entry.clone(), reason: e.to_string() });
                continue;
            }
        };
        if !in_channel(&version) {
            out.warnings.push(PlanWarning::PinnedWrongChannel { entry: entry.clone(), channel: spec.channel.clone() });
            continue;
        }
        let Some(k) = kubernetes else { continue };
        let Ok(id) = ReleaseId::new(&spec.provider, &spec.name, k, version) else {
            // Provider or name unusable: the CRD's schema prevents it; nothing can match.
            continue;
        };
        if listed.is_some() && !matching.contains_key(&id.tag()) {
            out.warnings.push(PlanWarning::PinnedNotListed { version: id.version.dotted() });
            if !existing_ids.contains_key(&id.tag()) {
                // Nothing to create and nothing to protect: not counted as kept.
                continue;
            }
        }
        add(&id, KeepReason::Pinned);
    }

    // Latest: the newest in the channel's order (`custom` versions have none).
    out.latest = spec.channel.newest(matching.values(), |id| &id.version).cloned();
    out.latest_ready = spec
        .channel
        .newest(existing_ids.values().filter(|(_, ready)| *ready).map(|(id, _)| id), |id| &id.version)
        .cloned();
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
mod tests;
