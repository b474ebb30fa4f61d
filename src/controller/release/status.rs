//! The ClusterStackRelease status, from the outcome of one reconcile pass.
//!
//! Pure: the reconciler reports which step it reached and what it observed;
//! this decides conditions, phase and `ready`. The inventory
//! (`status.inventory`, and `status.resources` for objects not synced) is carried
//! over unless the pass applied, so a failing download or render never loses what
//! must be deleted later.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::ClusterStackReleaseStatus;
use crate::apply::{Inventory, InventoryEntry};

use crate::api::conditions::{
    APPLIED, DOWNLOADED, FALSE, READY, RENDERED, TRUE, condition, progress_from_ready, reason, set_condition,
    set_progress,
};
use crate::controller::runtime::clusters::ClusterKey;
use crate::controller::{PHASE_APPLYING, PHASE_DELETING, PHASE_DONE, PHASE_DOWNLOADING, PHASE_FAILED, PHASE_PROVIDER};

/// How many failing objects a condition message names before summarising.
const MAX_NAMED: usize = 3;

/// Where a pass of the release controller got to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseStep {
    /// The release is being downloaded; `progress` is shown as is (e.g. `3 of 5 assets`).
    Downloading { progress: String },
    /// Downloading or verifying failed.
    DownloadFailed { message: String },
    /// The release's signatures do not satisfy the stack's policy (the reason names what failed).
    SignatureFailed { reason: crate::source::verify::FailureReason, message: String },
    /// `metadata.yaml` is missing or invalid.
    InvalidMetadata { message: String },
    /// The provider-specific gate (node images) is working.
    ProviderWork { message: String },
    /// The cluster-class bundle failed to render.
    RenderFailed { message: String },
    /// The rendered objects were applied, with these results.
    Applied { inventory: Inventory },
    /// The render has more objects than the operator allows per release: nothing was applied.
    TooManyObjects { count: usize, cap: usize },
    /// Deletion waits until these Clusters stop using the ClusterClass.
    WaitingForClusters { class: String, clusters: Vec<ClusterKey> },
    /// Deleting the applied objects; `message` says what is left or failed.
    Deleting { message: String },
}

/// What a pass observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseObservation {
    pub step: ReleaseStep,
    /// `versions.kubernetes` of `metadata.yaml`, once read.
    pub kubernetes_version: Option<String>,
    pub generation: Option<i64>,
}

fn object_name(e: &InventoryEntry) -> String {
    let k = &e.key;
    let ns = if k.namespace.is_empty() { String::new() } else { format!("{}/", k.namespace) };
    format!("{} {ns}{}", k.kind, k.name)
}

/// `(all synced, message)` for a set of applied objects.
pub fn summarise(inventory: &Inventory) -> (bool, String) {
    let failed: Vec<&InventoryEntry> = inventory.entries.iter().filter(|e| !e.synced).collect();
    if failed.is_empty() {
        return (true, format!("{} object(s) synced", inventory.len()));
    }
    let mut named: Vec<String> = failed
        .iter()
        .take(MAX_NAMED)
        .map(|e| if e.error.is_empty() { object_name(e) } else { format!("{}: {}", object_name(e), e.error) })
        .collect();
    if failed.len() > MAX_NAMED {
        named.push(format!("and {} more", failed.len() - MAX_NAMED));
    }
    (false, format!("{} of {} object(s) not synced: {}", failed.len(), inventory.len(), named.join("; ")))
}

/// The `Ready` message of a release refused for its size.
pub fn too_many_objects_message(count: usize, cap: usize) -> String {
    crate::controller::runtime::context::too_many_objects_message("the release", count, cap)
}

/// Builds the status of a ClusterStackRelease after a pass.
pub fn build_release_status(
    current: Option<&ClusterStackReleaseStatus>,
    obs: &ReleaseObservation,
    now: &Time,
) -> ClusterStackReleaseStatus {
    let g = obs.generation;
    let mut status = current.cloned().unwrap_or_default();
    if let Some(k) = &obs.kubernetes_version {
        status.kubernetes_version = k.clone();
    }
    status.observed_generation = g;
    let conds = &mut status.conditions;
    let mut set = |t: &str, s: &str, r: &str, m: &str| {
        set_condition(conds, condition(t, s, r, m, g), now);
    };
    let (phase, ready) = match &obs.step {
        ReleaseStep::Downloading { progress } => {
            set(DOWNLOADED, FALSE, reason::DOWNLOADING, progress);
            set(READY, FALSE, reason::DOWNLOADING, &format!("downloading release assets: {progress}"));
            (PHASE_DOWNLOADING, false)
        }
        ReleaseStep::DownloadFailed { message } => {
            set(DOWNLOADED, FALSE, reason::DOWNLOAD_FAILED, message);
            set(READY, FALSE, reason::DOWNLOAD_FAILED, message);
            (PHASE_FAILED, false)
        }
        ReleaseStep::SignatureFailed { reason: why, message } => {
            let message = format!("signature check failed: {message}");
            set(DOWNLOADED, FALSE, why.as_str(), &message);
            set(READY, FALSE, why.as_str(), &message);
            (PHASE_FAILED, false)
        }
        ReleaseStep::InvalidMetadata { message } => {
            set(DOWNLOADED, TRUE, reason::SUCCEEDED, "");
            set(RENDERED, FALSE, reason::INVALID_METADATA, message);
            set(READY, FALSE, reason::INVALID_METADATA, message);
            (PHASE_FAILED, false)
        }
        ReleaseStep::ProviderWork { message } => {
            set(DOWNLOADED, TRUE, reason::SUCCEEDED, "");
            set(READY, FALSE, reason::PROGRESSING, message);
            (PHASE_PROVIDER, false)
        }
        ReleaseStep::RenderFailed { message } => {
            set(DOWNLOADED, TRUE, reason::SUCCEEDED, "");
            set(RENDERED, FALSE, reason::RENDER_FAILED, message);
            set(READY, FALSE, reason::RENDER_FAILED, message);
            (PHASE_FAILED, false)
        }
        ReleaseStep::TooManyObjects { count, cap } => {
            let message = too_many_objects_message(*count, *cap);
            set(DOWNLOADED, TRUE, reason::SUCCEEDED, "");
            set(RENDERED, TRUE, reason::SUCCEEDED, "");
            set(APPLIED, FALSE, reason::TOO_MANY_OBJECTS, &message);
            set(READY, FALSE, reason::TOO_MANY_OBJECTS, &message);
            (PHASE_FAILED, false)
        }
        ReleaseStep::Applied { inventory } => {
            set(DOWNLOADED, TRUE, reason::SUCCEEDED, "");
            set(RENDERED, TRUE, reason::SUCCEEDED, "");
            let (all_synced, message) = summarise(inventory);
            (status.inventory, status.resources) = crate::controller::inventory::to_release_status(inventory);
            if all_synced {
                set(APPLIED, TRUE, reason::SUCCEEDED, &message);
                set(READY, TRUE, reason::SUCCEEDED, "");
                (PHASE_DONE, true)
            } else {
                set(APPLIED, FALSE, reason::APPLY_FAILED, &message);
                set(READY, FALSE, reason::APPLY_FAILED, &message);
                (PHASE_APPLYING, false)
            }
        }
        ReleaseStep::WaitingForClusters { class, clusters } => {
            let names: Vec<String> = clusters.iter().map(ToString::to_string).collect();
            let message = format!("waiting to delete: ClusterClass {class} is used by Cluster {}", names.join(", "));
            set(READY, FALSE, reason::IN_USE, &message);
            (PHASE_DELETING, false)
        }
        ReleaseStep::Deleting { message } => {
            set(READY, FALSE, reason::DELETING, message);
            (PHASE_DELETING, false)
        }
    };
    // kstatus: a bad release (its metadata, its templates) cannot progress until the release or
    // the source changes; everything else not ready is work in progress, retried.
    let progress = progress_from_ready(&status.conditions, RELEASE_STALLED_REASONS);
    set_progress(&mut status.conditions, progress, g, now);
    status.phase = phase.to_string();
    status.ready = ready;
    status
}

/// `Ready` reasons of a ClusterStackRelease that mean `Stalled`.
pub const RELEASE_STALLED_REASONS: &[&str] =
    &[reason::INVALID_METADATA, reason::RENDER_FAILED, reason::TOO_MANY_OBJECTS];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::conditions::{find, is_true};

    fn time(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn res(kind: &str, name: &str, ok: bool, error: &str) -> InventoryEntry {
        InventoryEntry {
            key: crate::apply::ObjectKey {
                group: "cluster.x-k8s.io".into(),
                version: "v1beta1".into(),
                kind: kind.into(),
                namespace: "stacks".into(),
                name: name.into(),
            },
            synced: ok,
            error: error.into(),
            resource_version: String::new(),
        }
    }

    fn inv(entries: Vec<InventoryEntry>) -> Inventory {
        Inventory { entries }
    }

    fn obs(step: ReleaseStep) -> ReleaseObservation {
        ReleaseObservation { step, kubernetes_version: None, generation: Some(1) }
    }

    #[test]
    fn kstatus_reconciling_while_working_stalled_on_a_bad_release_neither_when_ready() {
        use crate::api::conditions::{RECONCILING, STALLED};
        let now = time("2026-01-01T00:00:00Z");
        let s = build_release_status(None, &obs(ReleaseStep::Downloading { progress: "1 of 3 assets".into() }), &now);
        assert!(is_true(&s.conditions, RECONCILING) && find(&s.conditions, STALLED).is_none());
        assert_eq!(find(&s.conditions, RECONCILING).unwrap().reason, reason::DOWNLOADING);
        let s = build_release_status(Some(&s), &obs(ReleaseStep::RenderFailed { message: "line 3".into() }), &now);
        assert!(is_true(&s.conditions, STALLED) && find(&s.conditions, RECONCILING).is_none());
        assert_eq!(find(&s.conditions, STALLED).unwrap().message, "line 3");
        let failing = obs(ReleaseStep::Applied { inventory: inv(vec![res("ClusterClass", "c", false, "403")]) });
        let s = build_release_status(Some(&s), &failing, &now);
        assert!(is_true(&s.conditions, RECONCILING) && find(&s.conditions, STALLED).is_none());
        let done = obs(ReleaseStep::Applied { inventory: inv(vec![res("ClusterClass", "c", true, "")]) });
        let s = build_release_status(Some(&s), &done, &now);
        assert!(find(&s.conditions, RECONCILING).is_none() && find(&s.conditions, STALLED).is_none());
        assert!(is_true(&s.conditions, READY));
        assert_eq!(s.observed_generation, Some(1));
    }

    #[test]
    fn applied_and_all_synced_is_ready_and_done() {
        let now = time("2026-01-01T00:00:00Z");
        let o = ReleaseObservation {
            kubernetes_version: Some("v1.27.5".into()),
            ..obs(ReleaseStep::Applied { inventory: inv(vec![res("ClusterClass", "c", true, "")]) })
        };
        let s = build_release_status(None, &o, &now);
        assert!(s.ready);
        assert_eq!(s.phase, PHASE_DONE);
        assert_eq!(s.kubernetes_version, "v1.27.5");
        for t in [DOWNLOADED, RENDERED, APPLIED, READY] {
            assert!(is_true(&s.conditions, t), "{t}");
        }
        assert_eq!(find(&s.conditions, APPLIED).unwrap().message, "1 object(s) synced");
    }

    #[test]
    fn a_failed_or_missing_object_makes_it_not_ready_and_is_named() {
        let now = time("2026-01-01T00:00:00Z");
        let ready = build_release_status(
            None,
            &obs(ReleaseStep::Applied { inventory: inv(vec![res("ClusterClass", "c", true, "")]) }),
            &now,
        );
        let resources =
            vec![res("ClusterClass", "c", true, ""), res("DockerMachineTemplate", "m", false, "object disappeared")];
        let s = build_release_status(
            Some(&ready),
            &obs(ReleaseStep::Applied { inventory: inv(resources) }),
            &time("2026-01-02T00:00:00Z"),
        );
        assert!(!s.ready);
        let c = find(&s.conditions, READY).unwrap();
        assert_eq!(c.reason, reason::APPLY_FAILED);
        assert_eq!(c.message, "1 of 2 object(s) not synced: DockerMachineTemplate stacks/m: object disappeared");
        assert_eq!(c.last_transition_time, Some(time("2026-01-02T00:00:00Z")));
    }

    #[test]
    fn many_failures_are_summarised() {
        let resources: Vec<_> = (0..5).map(|i| res("X", &format!("o{i}"), false, "")).collect();
        let (ok, msg) = summarise(&inv(resources));
        assert!(!ok);
        assert!(
            msg.starts_with("5 of 5 object(s) not synced: X stacks/o0; X stacks/o1; X stacks/o2; and 2 more"),
            "{msg}"
        );
    }

    #[test]
    fn failures_before_apply_keep_the_inventory() {
        let now = time("2026-01-01T00:00:00Z");
        let applied = build_release_status(
            None,
            &ReleaseObservation {
                kubernetes_version: Some("v1.27.5".into()),
                ..obs(ReleaseStep::Applied { inventory: inv(vec![res("ClusterClass", "c", true, "")]) })
            },
            &now,
        );
        for step in [
            ReleaseStep::DownloadFailed { message: "asset x: sha256 mismatch".into() },
            ReleaseStep::InvalidMetadata { message: "metadata.yaml: missing versions".into() },
            ReleaseStep::RenderFailed { message: "template error".into() },
            ReleaseStep::Downloading { progress: "1 of 4 assets".into() },
            ReleaseStep::Deleting { message: "2 objects left".into() },
            ReleaseStep::TooManyObjects { count: 25_000, cap: 5000 },
        ] {
            let s = build_release_status(Some(&applied), &obs(step.clone()), &now);
            assert_eq!(s.resources, applied.resources, "{step:?}");
            assert_eq!(s.inventory, applied.inventory, "{step:?}");
            assert_eq!(s.kubernetes_version, "v1.27.5");
            assert!(!s.ready, "{step:?}");
        }
    }

    #[test]
    fn each_failure_has_its_reason_and_phase() {
        let now = time("2026-01-01T00:00:00Z");
        let cases = [
            (ReleaseStep::Downloading { progress: "p".into() }, DOWNLOADED, reason::DOWNLOADING, PHASE_DOWNLOADING),
            (ReleaseStep::DownloadFailed { message: "m".into() }, DOWNLOADED, reason::DOWNLOAD_FAILED, PHASE_FAILED),
            (ReleaseStep::InvalidMetadata { message: "m".into() }, RENDERED, reason::INVALID_METADATA, PHASE_FAILED),
            (ReleaseStep::RenderFailed { message: "m".into() }, RENDERED, reason::RENDER_FAILED, PHASE_FAILED),
            (ReleaseStep::ProviderWork { message: "m".into() }, READY, reason::PROGRESSING, PHASE_PROVIDER),
            (ReleaseStep::TooManyObjects { count: 9, cap: 8 }, READY, reason::TOO_MANY_OBJECTS, PHASE_FAILED),
        ];
        for (step, cond, why, phase) in cases {
            let s = build_release_status(None, &obs(step.clone()), &now);
            assert_eq!(find(&s.conditions, cond).unwrap().reason, why, "{step:?}");
            assert_eq!(find(&s.conditions, cond).unwrap().status, FALSE);
            assert!(!s.ready);
            assert_eq!(s.phase, phase, "{step:?}");
        }
    }

    #[test]
    fn deletion_waiting_names_the_clusters() {
        let now = time("2026-01-01T00:00:00Z");
        let step = ReleaseStep::WaitingForClusters {
            class: "docker-ferrol-1-27-v2".into(),
            clusters: vec![
                ClusterKey { namespace: "a".into(), name: "c1".into() },
                ClusterKey { namespace: "b".into(), name: "c2".into() },
            ],
        };
        let s = build_release_status(None, &obs(step), &now);
        let c = find(&s.conditions, READY).unwrap();
        assert_eq!(c.reason, reason::IN_USE);
        assert_eq!(c.message, "waiting to delete: ClusterClass docker-ferrol-1-27-v2 is used by Cluster a/c1, b/c2");
        assert_eq!(s.phase, PHASE_DELETING);
    }

    #[test]
    fn an_unchanged_pass_builds_an_equal_status() {
        let o = obs(ReleaseStep::Applied { inventory: inv(vec![res("ClusterClass", "c", false, "conflict")]) });
        let first = build_release_status(None, &o, &time("2026-01-01T00:00:00Z"));
        let second = build_release_status(Some(&first), &o, &time("2026-01-05T00:00:00Z"));
        assert_eq!(first, second);
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;
    use crate::api::conditions::{STALLED, find, is_true};

    #[test]
    fn too_many_objects_names_the_count_and_the_cap_and_stalls() {
        let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let o = ReleaseObservation {
            step: ReleaseStep::TooManyObjects { count: 25_000, cap: 5000 },
            kubernetes_version: None,
            generation: Some(1),
        };
        let s = build_release_status(None, &o, &now);
        let ready = find(&s.conditions, READY).unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), (FALSE, reason::TOO_MANY_OBJECTS));
        assert!(ready.message.contains("25000") && ready.message.contains("5000"), "{}", ready.message);
        assert!(ready.message.contains("--max-objects-per-release"), "{}", ready.message);
        assert!(is_true(&s.conditions, STALLED));
        assert!(s.inventory.is_empty() && s.resources.is_empty());
    }
}
