//! What a pass over a Cluster's addons does, decided from the ClusterAddon's status and the
//! class's release alone. Pure, and the one decision both the controller and
//! `clusterstack plan --clusters` use.
//!
//! The addons follow the **addon version** of the Cluster's class (`metadata.yaml`'s
//! `clusterAddon` component), not the stack version: a new stack version with the same addon
//! version sends nothing.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::ClusterAddonStatus;

use super::stages::{AFTER_CLUSTER_UPGRADE, AFTER_CONTROL_PLANE_INITIALIZED, BEFORE_CLUSTER_UPGRADE};

/// The stages of a first install.
pub const FIRST_INSTALL_HOOKS: &[&str] = &[AFTER_CONTROL_PLANE_INITIALIZED];
/// The stages of a move to another addon version.
pub const UPGRADE_HOOKS: &[&str] = &[BEFORE_CLUSTER_UPGRADE, AFTER_CLUSTER_UPGRADE];

/// What a pass does, once the control plane is initialised or something was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<'a> {
    /// Nothing applied yet: start the `AfterControlPlaneInitialized` stages.
    FirstInstall,
    /// The Cluster moved to a release with another addon version: start `BeforeClusterUpgrade`
    /// and `AfterClusterUpgrade`, then apply the rest and prune what the new version dropped.
    Upgrade { from: &'a str, from_version: Option<&'a str>, to_version: &'a str },
    /// The Cluster moved to a release with the same addon version: record it, send nothing.
    SameAddonVersion { from: &'a str, version: &'a str },
    /// The Cluster moved to another release whose addon version is not known (the plan without
    /// the release fetched; the controller always knows it).
    UnknownAddonVersion { from: &'a str, applied_version: Option<&'a str> },
    /// Stages towards `target` are running: go on with them.
    ContinueStages { target: &'a str },
    /// The class's release is applied: re-apply everything when drift correction is due.
    InPlace { drift_due: bool },
}

impl Decision<'_> {
    /// The hooks whose stages a new run starts with; `None` when no run starts.
    pub fn hooks(&self) -> Option<&'static [&'static str]> {
        match self {
            Decision::FirstInstall => Some(FIRST_INSTALL_HOOKS),
            Decision::Upgrade { .. } => Some(UPGRADE_HOOKS),
            _ => None,
        }
    }

    /// Whether the pass sends addons into the workload cluster.
    pub fn sends(&self) -> bool {
        match self {
            Decision::SameAddonVersion { .. } => false,
            Decision::InPlace { drift_due } => *drift_due,
            _ => true,
        }
    }

    /// Why, in words (`plan --clusters` prints it).
    pub fn explain(&self, class_tag: &str) -> String {
        match self {
            Decision::FirstInstall => {
                "first install: the AfterControlPlaneInitialized stages, once the control plane is initialised".into()
            }
            Decision::ContinueStages { target } => format!("the stages towards {target} are running"),
            Decision::InPlace { .. } => format!("{class_tag} is applied; only drift correction"),
            Decision::SameAddonVersion { from, version } => {
                format!("{from} -> {class_tag} keeps addon version {version}: nothing is sent")
            }
            Decision::Upgrade { from, from_version: Some(a), to_version } => format!(
                "{from} -> {class_tag} changes the addon version {a} -> {to_version}: BeforeClusterUpgrade, AfterClusterUpgrade, the rest, prune"
            ),
            Decision::Upgrade { from, from_version: None, to_version } => {
                format!("{from} -> {class_tag}: addon version {to_version}; the applied one is not recorded")
            }
            Decision::UnknownAddonVersion { from, applied_version } => format!(
                "{from} -> {class_tag}: unless its addon version is {} (pass --render to fetch the release and know)",
                applied_version.unwrap_or("unknown")
            ),
        }
    }
}

/// Whether a pass only waits: the control plane is not initialised and nothing was applied yet
/// (the Cluster's watch brings the change).
pub fn waits_for_control_plane(control_plane_initialized: bool, status: Option<&ClusterAddonStatus>) -> bool {
    !control_plane_initialized && status.and_then(|s| s.release.as_ref()).is_none()
}

/// The decision of a pass over a Cluster of class `class_tag`. `addon_version` is that
/// release's addon version (`None`: not known); `drift_due` whether the last full apply is a
/// resync interval old.
pub fn decide<'a>(
    class_tag: &'a str,
    status: Option<&'a ClusterAddonStatus>,
    addon_version: Option<&'a str>,
    drift_due: bool,
) -> Decision<'a> {
    let applied = status.and_then(|s| s.release.as_deref());
    let target = status.and_then(|s| s.target_release.as_deref());
    let in_place = applied == Some(class_tag);
    let working = target == Some(class_tag);
    if !in_place && !working {
        let Some(from) = applied else { return Decision::FirstInstall };
        let from_version = status.and_then(|s| s.addon_version.as_deref());
        return match (from_version, addon_version) {
            (Some(a), Some(t)) if a == t => Decision::SameAddonVersion { from, version: t },
            (_, Some(to_version)) => Decision::Upgrade { from, from_version, to_version },
            (applied_version, None) => Decision::UnknownAddonVersion { from, applied_version },
        };
    }
    // A run in progress goes on, even one towards another release than the class's (the
    // Cluster moved back mid-run): its stages are in status.
    match target {
        Some(target) => Decision::ContinueStages { target },
        None => Decision::InPlace { drift_due },
    }
}

/// Whether drift correction is due: never applied in full by this process, or a resync interval
/// ago.
pub fn drift_due(synced_at: Option<Timestamp>, now: Timestamp, resync: Duration) -> bool {
    synced_at.is_none_or(|t| now.duration_since(t).unsigned_abs() >= resync)
}

/// Whether a Cluster's addons would be (re-)applied, and why: [`decide`] as
/// `clusterstack plan --clusters` shows it. `target_addon_version` is the addon version of the
/// Cluster's class (`None` when unknown, i.e. the release was not fetched).
pub fn addon_decision(
    class_tag: &str,
    status: Option<&ClusterAddonStatus>,
    target_addon_version: Option<&str>,
) -> (bool, String) {
    // The plan cannot know when this process last corrected drift: it says drift correction only.
    let decision = decide(class_tag, status, target_addon_version, false);
    (decision.sends(), decision.explain(class_tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(release: &str, version: &str) -> ClusterAddonStatus {
        ClusterAddonStatus { release: Some(release.into()), addon_version: Some(version.into()), ..Default::default() }
    }

    #[test]
    fn the_decision_follows_the_addon_version_not_the_stack_version() {
        assert!(addon_decision("s-v1", None, None).0);
        assert!(!addon_decision("s-v2", Some(&status("s-v2", "v2")), Some("v2")).0);
        let (again, why) = addon_decision("s-v3", Some(&status("s-v2", "v2")), Some("v2"));
        assert!(!again, "{why}");
        let (again, why) = addon_decision("s-v2", Some(&status("s-v1", "v1")), Some("v2"));
        assert!(again && why.contains("v1 -> v2"), "{why}");
        assert!(addon_decision("s-v2", Some(&status("s-v1", "v1")), None).1.contains("--render"));
    }

    #[test]
    fn every_state_has_its_decision() {
        let running = |release: Option<&str>, target: &str| ClusterAddonStatus {
            release: release.map(Into::into),
            addon_version: release.map(|_| "v1".into()),
            target_release: Some(target.into()),
            ..Default::default()
        };
        let unrecorded = ClusterAddonStatus { release: Some("s-v1".into()), ..Default::default() };
        // (case, class, status, the release's addon version, drift due, decision)
        type Case<'a> = (&'a str, &'a str, Option<ClusterAddonStatus>, Option<&'a str>, bool, Decision<'a>);
        let cases: Vec<Case<'_>> = vec![
            ("nothing yet", "s-v1", None, Some("v1"), false, Decision::FirstInstall),
            ("empty status", "s-v1", Some(ClusterAddonStatus::default()), Some("v1"), false, Decision::FirstInstall),
            (
                "first run going",
                "s-v1",
                Some(running(None, "s-v1")),
                Some("v1"),
                false,
                Decision::ContinueStages { target: "s-v1" },
            ),
            (
                "first run elsewhere, class moved",
                "s-v2",
                Some(running(None, "s-v1")),
                Some("v2"),
                false,
                Decision::FirstInstall,
            ),
            (
                "in place, not due",
                "s-v1",
                Some(status("s-v1", "v1")),
                Some("v1"),
                false,
                Decision::InPlace { drift_due: false },
            ),
            (
                "in place, due",
                "s-v1",
                Some(status("s-v1", "v1")),
                Some("v1"),
                true,
                Decision::InPlace { drift_due: true },
            ),
            (
                "same addon version",
                "s-v2",
                Some(status("s-v1", "v1")),
                Some("v1"),
                false,
                Decision::SameAddonVersion { from: "s-v1", version: "v1" },
            ),
            (
                "new addon version",
                "s-v2",
                Some(status("s-v1", "v1")),
                Some("v2"),
                false,
                Decision::Upgrade { from: "s-v1", from_version: Some("v1"), to_version: "v2" },
            ),
            (
                "applied version not recorded",
                "s-v2",
                Some(unrecorded.clone()),
                Some("v1"),
                false,
                Decision::Upgrade { from: "s-v1", from_version: None, to_version: "v1" },
            ),
            (
                "version unknown",
                "s-v2",
                Some(status("s-v1", "v1")),
                None,
                false,
                Decision::UnknownAddonVersion { from: "s-v1", applied_version: Some("v1") },
            ),
            (
                "upgrade running",
                "s-v2",
                Some(running(Some("s-v1"), "s-v2")),
                Some("v2"),
                false,
                Decision::ContinueStages { target: "s-v2" },
            ),
            (
                "moved back mid-run",
                "s-v1",
                Some(running(Some("s-v1"), "s-v2")),
                Some("v1"),
                true,
                Decision::ContinueStages { target: "s-v2" },
            ),
        ];
        for (name, tag, status, version, due, want) in &cases {
            assert_eq!(&decide(tag, status.as_ref(), *version, *due), want, "{name}");
        }
    }

    #[test]
    fn hooks_and_sending_follow_the_decision() {
        assert_eq!(Decision::FirstInstall.hooks(), Some(FIRST_INSTALL_HOOKS));
        let upgrade = Decision::Upgrade { from: "a", from_version: None, to_version: "v2" };
        assert_eq!(upgrade.hooks(), Some(UPGRADE_HOOKS));
        assert!(upgrade.sends());
        assert_eq!(Decision::ContinueStages { target: "a" }.hooks(), None);
        assert!(!Decision::SameAddonVersion { from: "a", version: "v1" }.sends());
        assert!(!Decision::InPlace { drift_due: false }.sends());
        assert!(Decision::InPlace { drift_due: true }.sends());
    }

    #[test]
    fn the_control_plane_gates_only_a_first_install() {
        assert!(waits_for_control_plane(false, None));
        assert!(waits_for_control_plane(false, Some(&ClusterAddonStatus::default())));
        assert!(!waits_for_control_plane(true, None));
        assert!(!waits_for_control_plane(false, Some(&status("s-v1", "v1"))), "applied once: never waits again");
    }

    #[test]
    fn drift_correction_is_due_once_per_resync_interval() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        let resync = Duration::from_secs(600);
        assert!(drift_due(None, at("2026-01-01T00:00:00Z"), resync));
        assert!(!drift_due(Some(at("2026-01-01T00:00:00Z")), at("2026-01-01T00:09:59Z"), resync));
        assert!(drift_due(Some(at("2026-01-01T00:00:00Z")), at("2026-01-01T00:10:00Z"), resync));
    }
}
