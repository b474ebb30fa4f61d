//! The decision of a pass over a Cluster, shared with `clusterstack plan --clusters`.

use crate::api::ClusterAddonStatus;

/// Whether a Cluster's addons would be (re-)applied, and why: the decision of a pass, for
/// `clusterstack plan --clusters`. `target_addon_version` is the addon version of the Cluster's
/// class (`None` when unknown, i.e. the release was not fetched).
pub fn addon_decision(
    class_tag: &str,
    status: Option<&ClusterAddonStatus>,
    target_addon_version: Option<&str>,
) -> (bool, String) {
    let applied = status.and_then(|s| s.release.as_deref());
    let applied_version = status.and_then(|s| s.addon_version.as_deref());
    match (applied, status.and_then(|s| s.target_release.as_deref())) {
        (_, Some(t)) if t == class_tag => (true, format!("the stages towards {t} are running")),
        (None, _) => (
            true,
            "first install: the AfterControlPlaneInitialized stages, once the control plane is initialised".into(),
        ),
        (Some(r), _) if r == class_tag => (false, format!("{r} is applied; only drift correction")),
        (Some(r), _) => match (applied_version, target_addon_version) {
            (Some(a), Some(t)) if a == t => {
                (false, format!("{r} -> {class_tag} keeps addon version {t}: nothing is sent"))
            }
            (Some(a), Some(t)) => (
                true,
                format!(
                    "{r} -> {class_tag} changes the addon version {a} -> {t}: BeforeClusterUpgrade, AfterClusterUpgrade, the rest, prune"
                ),
            ),
            (a, None) => (
                true,
                format!(
                    "{r} -> {class_tag}: unless its addon version is {} (pass --render to fetch the release and know)",
                    a.unwrap_or("unknown")
                ),
            ),
            (None, Some(t)) => {
                (true, format!("{r} -> {class_tag}: addon version {t}; the applied one is not recorded"))
            }
        },
    }
}

#[cfg(test)]
mod decision_tests {
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
}
