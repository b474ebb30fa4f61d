//! Setting conditions deterministically.
//!
//! A condition's `lastTransitionTime` changes only when its status changes, and
//! conditions are kept ordered by type, so a pass that observes nothing new
//! produces a byte-identical status and writes nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::Condition;

/// Condition type: the object is usable.
pub const READY: &str = "Ready";
/// Condition type (ClusterStack): the set of ClusterStackReleases matches the keep set.
pub const RELEASES_SYNCED: &str = "ReleasesSynced";
/// Condition type (ClusterStackRelease): the release is in the verified cache.
pub const DOWNLOADED: &str = "Downloaded";
/// Condition type (ClusterStackRelease): the cluster-class bundle rendered.
pub const RENDERED: &str = "Rendered";
/// Condition type (ClusterStackRelease): every rendered object was applied.
pub const APPLIED: &str = "Applied";

/// Condition type (kstatus): the controller is working towards the desired state. Present and
/// `True` only while work is in progress; removed when done or stalled.
pub const RECONCILING: &str = "Reconciling";
/// Condition type (kstatus): the controller cannot make progress without a change (to the
/// spec, the release, or the environment). Present and `True` only then.
pub const STALLED: &str = "Stalled";

/// Condition status values.
pub const TRUE: &str = "True";
/// Condition status `False`.
pub const FALSE: &str = "False";
/// Condition status `Unknown`.
pub const UNKNOWN: &str = "Unknown";

/// Reasons, CamelCase as Kubernetes expects.
pub mod reason {
    /// The source listed its releases and the release objects match the keep set.
    pub const SYNCED: &str = "Synced";
    /// The source could not be reached or answered with an error; nothing was deleted.
    pub const SOURCE_UNAVAILABLE: &str = "SourceUnavailable";
    /// The source's rate limit is exhausted; nothing was deleted.
    pub const RATE_LIMITED: &str = "RateLimited";
    /// `spec.suspend` is true: nothing is changed.
    pub const SUSPENDED: &str = "Suspended";
    /// Every kept release is ready.
    pub const ALL_RELEASES_READY: &str = "AllReleasesReady";
    /// Some kept release is missing or not ready yet.
    pub const RELEASES_NOT_READY: &str = "ReleasesNotReady";
    /// The keep set is empty: nothing matches the spec.
    pub const NO_RELEASES: &str = "NoReleases";
    /// The release is being downloaded into the cache.
    pub const DOWNLOADING: &str = "Downloading";
    /// The release's assets failed verification or could not be fetched.
    pub const DOWNLOAD_FAILED: &str = "DownloadFailed";
    /// The release's `metadata.yaml` is missing or invalid.
    pub const INVALID_METADATA: &str = "InvalidMetadata";
    /// The cluster-class bundle failed to render.
    pub const RENDER_FAILED: &str = "RenderFailed";
    /// Some object failed to apply or went missing.
    pub const APPLY_FAILED: &str = "ApplyFailed";
    /// The release renders more objects than `--max-objects-per-release` allows; nothing applied.
    pub const TOO_MANY_OBJECTS: &str = "TooManyObjects";
    /// Work in progress.
    pub const PROGRESSING: &str = "Progressing";
    /// The step succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    /// Deletion waits for Clusters still using the ClusterClass.
    pub const IN_USE: &str = "InUse";
    /// Deleting what the release applied.
    pub const DELETING: &str = "Deleting";
    /// (ClusterStack `Stalled`) a kept release cannot progress without a change.
    pub const RELEASE_STALLED: &str = "ReleaseStalled";
}

/// Builds a condition without a transition time; [`set_condition`] fills it in.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        last_transition_time: None,
        observed_generation: generation,
        severity: None,
    }
}

/// Sets `new` in `conditions`, replacing the condition of the same type.
///
/// The `lastTransitionTime` of the existing condition is kept when the status
/// did not change (reason and message may); otherwise it becomes `now`. The
/// list stays sorted by type. Returns whether anything changed.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition, now: &Time) -> bool {
    let existing = conditions.iter().position(|c| c.type_ == new.type_);
    new.last_transition_time = match existing.map(|i| &conditions[i]) {
        Some(old) if old.status == new.status && old.last_transition_time.is_some() => old.last_transition_time.clone(),
        _ => Some(now.clone()),
    };
    new.severity = None;
    let changed = match existing {
        Some(i) if conditions[i] == new => false,
        Some(i) => {
            conditions[i] = new;
            true
        }
        None => {
            conditions.push(new);
            true
        }
    };
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    changed
}

/// Where an object stands, in the terms of kstatus (`sigs.k8s.io/cli-utils/pkg/kstatus`), which
/// `kubectl wait`, Flux and Argo CD read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Nothing left to do: neither `Reconciling` nor `Stalled` is present.
    Done,
    /// Work is under way: `Reconciling` is `True` with this reason and message.
    Reconciling { reason: String, message: String },
    /// No progress is possible without a change: `Stalled` is `True` with this reason and message.
    Stalled { reason: String, message: String },
}

/// The progress implied by the `Ready` condition already set: done when it is `True`, stalled
/// when its reason is one of `stalled_reasons`, reconciling otherwise (with Ready's reason and
/// message, so the two never disagree).
pub fn progress_from_ready(conditions: &[Condition], stalled_reasons: &[&str]) -> Progress {
    match find(conditions, READY) {
        Some(c) if c.status == TRUE => Progress::Done,
        Some(c) if stalled_reasons.contains(&c.reason.as_str()) => {
            Progress::Stalled { reason: c.reason.clone(), message: c.message.clone() }
        }
        Some(c) => Progress::Reconciling { reason: c.reason.clone(), message: c.message.clone() },
        None => Progress::Reconciling { reason: reason::PROGRESSING.into(), message: String::new() },
    }
}

/// Sets the kstatus conditions for `progress`: at most one of `Reconciling` and `Stalled`, and
/// only when `True` (kstatus reads an absent abnormal-true condition as `False`). Deterministic as
/// [`set_condition`] is; returns whether anything changed.
pub fn set_progress(conditions: &mut Vec<Condition>, progress: Progress, generation: Option<i64>, now: &Time) -> bool {
    let (keep, set) = match progress {
        Progress::Done => (None, None),
        Progress::Reconciling { reason, message } => {
            (Some(RECONCILING), Some(condition(RECONCILING, TRUE, &reason, message, generation)))
        }
        Progress::Stalled { reason, message } => {
            (Some(STALLED), Some(condition(STALLED, TRUE, &reason, message, generation)))
        }
    };
    let before = conditions.len();
    conditions.retain(|c| !(c.type_ == RECONCILING || c.type_ == STALLED) || Some(c.type_.as_str()) == keep);
    let mut changed = conditions.len() != before;
    if let Some(c) = set {
        changed |= set_condition(conditions, c, now);
    }
    changed
}

/// The condition of the given type, if set.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of the given type is `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == TRUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kstatus_conditions_follow_ready_and_never_coexist() {
        let t0 = time("2026-01-01T00:00:00Z");
        let t1 = time("2026-01-01T00:05:00Z");
        let mut conds = vec![];
        set_condition(&mut conds, condition(READY, FALSE, reason::DOWNLOADING, "1 of 2", Some(1)), &t0);
        let p = progress_from_ready(&conds, &[reason::RENDER_FAILED]);
        assert_eq!(p, Progress::Reconciling { reason: reason::DOWNLOADING.into(), message: "1 of 2".into() });
        assert!(set_progress(&mut conds, p.clone(), Some(1), &t0));
        assert!(is_true(&conds, RECONCILING) && find(&conds, STALLED).is_none());
        // The same again: no change, no new time.
        assert!(!set_progress(&mut conds, p, Some(1), &t1));
        assert_eq!(find(&conds, RECONCILING).unwrap().last_transition_time, Some(t0.clone()));
        // Stalled replaces Reconciling.
        set_condition(&mut conds, condition(READY, FALSE, reason::RENDER_FAILED, "bad", Some(1)), &t1);
        let p = progress_from_ready(&conds, &[reason::RENDER_FAILED]);
        assert_eq!(p, Progress::Stalled { reason: reason::RENDER_FAILED.into(), message: "bad".into() });
        assert!(set_progress(&mut conds, p, Some(1), &t1));
        assert!(is_true(&conds, STALLED) && find(&conds, RECONCILING).is_none());
        // Ready: both gone.
        set_condition(&mut conds, condition(READY, TRUE, reason::SUCCEEDED, "", Some(1)), &t1);
        assert_eq!(progress_from_ready(&conds, &[]), Progress::Done);
        assert!(set_progress(&mut conds, Progress::Done, Some(1), &t1));
        assert_eq!(conds.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), vec![READY]);
        assert!(!set_progress(&mut conds, Progress::Done, Some(1), &t1));
    }

    fn time(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn adds_a_new_condition_with_now() {
        let mut conds = vec![];
        let changed = set_condition(
            &mut conds,
            condition(READY, TRUE, reason::SUCCEEDED, "ok", Some(1)),
            &time("2026-01-01T00:00:00Z"),
        );
        assert!(changed);
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].last_transition_time, Some(time("2026-01-01T00:00:00Z")));
        assert_eq!(conds[0].observed_generation, Some(1));
    }

    #[test]
    fn same_status_keeps_transition_time_and_reports_no_change() {
        let mut conds = vec![];
        set_condition(
            &mut conds,
            condition(READY, TRUE, reason::SUCCEEDED, "ok", Some(1)),
            &time("2026-01-01T00:00:00Z"),
        );
        let before = conds.clone();
        let changed = set_condition(
            &mut conds,
            condition(READY, TRUE, reason::SUCCEEDED, "ok", Some(1)),
            &time("2026-02-01T00:00:00Z"),
        );
        assert!(!changed);
        assert_eq!(conds, before);
    }

    #[test]
    fn new_message_with_same_status_changes_but_keeps_time() {
        let mut conds = vec![];
        set_condition(
            &mut conds,
            condition(READY, FALSE, reason::PROGRESSING, "1 of 3", None),
            &time("2026-01-01T00:00:00Z"),
        );
        let changed = set_condition(
            &mut conds,
            condition(READY, FALSE, reason::PROGRESSING, "2 of 3", None),
            &time("2026-02-01T00:00:00Z"),
        );
        assert!(changed);
        assert_eq!(conds[0].message, "2 of 3");
        assert_eq!(conds[0].last_transition_time, Some(time("2026-01-01T00:00:00Z")));
    }

    #[test]
    fn status_change_moves_transition_time() {
        let mut conds = vec![];
        set_condition(
            &mut conds,
            condition(READY, FALSE, reason::PROGRESSING, "", None),
            &time("2026-01-01T00:00:00Z"),
        );
        assert!(set_condition(
            &mut conds,
            condition(READY, TRUE, reason::SUCCEEDED, "", None),
            &time("2026-02-01T00:00:00Z")
        ));
        assert_eq!(conds[0].last_transition_time, Some(time("2026-02-01T00:00:00Z")));
        assert_eq!(conds[0].status, TRUE);
    }

    #[test]
    fn conditions_are_sorted_by_type_whatever_the_insertion_order() {
        let now = time("2026-01-01T00:00:00Z");
        let mut a = vec![];
        let mut b = vec![];
        for t in [READY, APPLIED, DOWNLOADED, RENDERED] {
            set_condition(&mut a, condition(t, TRUE, reason::SUCCEEDED, "", None), &now);
        }
        for t in [RENDERED, DOWNLOADED, READY, APPLIED] {
            set_condition(&mut b, condition(t, TRUE, reason::SUCCEEDED, "", None), &now);
        }
        assert_eq!(a, b);
        let types: Vec<&str> = a.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, [APPLIED, DOWNLOADED, READY, RENDERED]);
    }

    #[test]
    fn a_go_operator_condition_loses_its_severity_and_missing_time_is_filled() {
        let mut conds = vec![Condition { severity: Some("Info".into()), ..condition(READY, TRUE, "", "", None) }];
        let now = time("2026-03-01T00:00:00Z");
        assert!(set_condition(&mut conds, condition(READY, TRUE, "", "", None), &now));
        assert_eq!(conds[0].severity, None);
        assert_eq!(conds[0].last_transition_time, Some(now));
    }

    #[test]
    fn helpers_find_and_is_true() {
        let now = time("2026-01-01T00:00:00Z");
        let mut conds = vec![];
        set_condition(&mut conds, condition(READY, FALSE, reason::APPLY_FAILED, "x", None), &now);
        set_condition(&mut conds, condition(APPLIED, TRUE, reason::SUCCEEDED, "", None), &now);
        assert!(!is_true(&conds, READY));
        assert!(is_true(&conds, APPLIED));
        assert!(!is_true(&conds, RENDERED));
        assert_eq!(find(&conds, READY).map(|c| c.reason.as_str()), Some(reason::APPLY_FAILED));
    }
}
