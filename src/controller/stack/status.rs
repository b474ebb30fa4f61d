//! The ClusterStack status, derived from the plan and the releases' real
//! conditions, and the test that keeps unchanged passes from writing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{ClusterStackRelease, ClusterStackReleaseSummary, ClusterStackStatus, Condition};
use crate::release::ReleaseId;

use super::keep::{Plan, version_order};
use crate::api::conditions::{self, FALSE, READY, RELEASES_SYNCED, TRUE, condition, reason, set_condition};
use crate::controller::runtime::poller::SyncOutcome;
use crate::controller::{PHASE_DELETING, PHASE_PENDING};

/// Everything a ClusterStack status is built from.
#[derive(Debug, Clone, Copy)]
pub struct StatusInput<'a> {
    /// The plan of this pass; `None` when none was made (suspended).
    pub plan: Option<&'a Plan>,
    /// The existing ClusterStackReleases of the stack.
    pub releases: &'a [ClusterStackRelease],
    pub sync: &'a SyncOutcome,
    /// `metadata.generation` of the ClusterStack.
    pub generation: Option<i64>,
    /// The time stamped on conditions whose status changes.
    pub now: &'a Time,
}

/// The phase of a release for the summary: `deleting` while it is being
/// deleted, else its own `status.phase`, else `pending`.
pub fn release_phase(release: &ClusterStackRelease) -> &str {
    if release.metadata.deletion_timestamp.is_some() {
        return PHASE_DELETING;
    }
    match release.status.as_ref().map(|s| s.phase.as_str()) {
        Some(phase) if !phase.is_empty() => phase,
        _ => PHASE_PENDING,
    }
}

fn release_ready(release: &ClusterStackRelease) -> bool {
    release.status.as_ref().is_some_and(|s| s.ready)
}

/// The message of the release's `Ready` condition when it is not ready.
fn release_message(release: &ClusterStackRelease) -> String {
    if release_ready(release) {
        return String::new();
    }
    release
        .status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, READY))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn release_id(release: &ClusterStackRelease) -> Option<ReleaseId> {
    release.metadata.name.as_deref().and_then(|n| ReleaseId::from_tag(n).ok())
}

/// Releases sorted by version (unparsable names last, by name).
fn sorted(releases: &[ClusterStackRelease]) -> Vec<(&ClusterStackRelease, Option<ReleaseId>)> {
    let mut out: Vec<_> = releases.iter().map(|r| (r, release_id(r))).collect();
    out.sort_by(|(ra, a), (rb, b)| match (a, b) {
        (Some(a), Some(b)) => version_order(a, b),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => ra.metadata.name.cmp(&rb.metadata.name),
    });
    out
}

/// Builds the status from this pass's observations. `current` provides the
/// conditions' transition times and, when the source could not be listed,
/// the last known `latestRelease`.
pub fn build_status(current: Option<&ClusterStackStatus>, input: StatusInput<'_>) -> ClusterStackStatus {
    let releases = sorted(input.releases);
    let summary: Vec<ClusterStackReleaseSummary> = releases
        .iter()
        .map(|(r, _)| ClusterStackReleaseSummary {
            name: r.metadata.name.clone().unwrap_or_default(),
            ready: release_ready(r),
            phase: release_phase(r).to_string(),
            message: release_message(r),
        })
        .collect();
    let usable: Vec<String> = releases
        .iter()
        .filter(|(r, _)| release_ready(r) && r.metadata.deletion_timestamp.is_none())
        .filter_map(|(_, id)| id.as_ref().map(|id| id.version.dotted()))
        .collect();

    let latest_release = match input.plan {
        Some(plan) if plan.source_listed => plan.latest.as_ref().map(ReleaseId::tag).unwrap_or_default(),
        _ => current.map(|c| c.latest_release.clone()).unwrap_or_default(),
    };

    let mut conds = current.map(|c| c.conditions.clone()).unwrap_or_default();
    set_condition(&mut conds, synced_condition(&input), input.now);
    set_condition(&mut conds, ready_condition(&input), input.now);
    let progress = stack_progress(&input, &conds);
    conditions::set_progress(&mut conds, progress, input.generation, input.now);

    ClusterStackStatus {
        conditions: conds,
        summary,
        usable_versions: usable.join(", "),
        latest_release,
        observed_generation: input.generation,
    }
}

fn synced_condition(input: &StatusInput<'_>) -> Condition {
    let warnings = input
        .plan
        .map(|p| p.warnings.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
        .unwrap_or_default();
    let with_warnings = |msg: String| if warnings.is_empty() { msg } else { format!("{msg}; {warnings}") };
    let (status, why, message) = match input.sync {
        SyncOutcome::Listed => {
            let msg = match input.plan {
                Some(p) => format!("{} release(s) kept", p.keep.len()),
                None => String::new(),
            };
            (TRUE, reason::SYNCED, with_warnings(msg))
        }
        SyncOutcome::Unavailable { message, retry_at } => {
            let retry = retry_at.map(|t| format!("; retrying at {t}")).unwrap_or_default();
            (FALSE, reason::SOURCE_UNAVAILABLE, with_warnings(format!("{message}; nothing was deleted{retry}")))
        }
        SyncOutcome::RateLimited { until } => (
            FALSE,
            reason::RATE_LIMITED,
            with_warnings(format!("the source's rate limit is exhausted; nothing was deleted; retrying at {until}")),
        ),
        SyncOutcome::Suspended => {
            (FALSE, reason::SUSPENDED, "spec.suspend is true: no polling, no release created or deleted".to_string())
        }
    };
    condition(RELEASES_SYNCED, status, why, message, input.generation)
}

fn ready_condition(input: &StatusInput<'_>) -> Condition {
    let by_tag = |tag: &str| input.releases.iter().find(|r| r.metadata.name.as_deref() == Some(tag));
    // The kept releases when a plan exists; else the releases that exist.
    let wanted: Vec<String> = match input.plan {
        Some(plan) => plan.keep.keys().cloned().collect(),
        None => sorted(input.releases).iter().filter_map(|(r, _)| r.metadata.name.clone()).collect(),
    };
    if wanted.is_empty() {
        return condition(READY, FALSE, reason::NO_RELEASES, "no release matches the spec", input.generation);
    }
    let mut problems = Vec::new();
    for tag in &wanted {
        match by_tag(tag) {
            None => {
                // Kept but neither existing nor to be created: the source does not publish it.
                let unpublished =
                    input.plan.is_some_and(|p| p.source_listed && !p.create.iter().any(|id| id.tag() == *tag));
                problems.push(if unpublished {
                    format!("{tag}: not published by the source")
                } else {
                    format!("{tag}: not created yet")
                });
            }
            Some(r) if !release_ready(r) => {
                let msg = release_message(r);
                let phase = release_phase(r);
                // A message that already names the phase ("downloading release assets: 6
                // asset(s)...") is not prefixed with it again.
                problems.push(if msg.is_empty() {
                    format!("{tag}: {phase}")
                } else if msg.starts_with(phase) {
                    format!("{tag}: {msg}")
                } else {
                    format!("{tag}: {phase}: {msg}")
                });
            }
            Some(_) => {}
        }
    }
    if problems.is_empty() {
        condition(READY, TRUE, reason::ALL_RELEASES_READY, "", input.generation)
    } else {
        condition(READY, FALSE, reason::RELEASES_NOT_READY, problems.join("; "), input.generation)
    }
}

/// kstatus for a ClusterStack: done when ready or suspended (nothing is being worked on);
/// stalled when nothing matches the spec or a kept release is itself stalled (a bad release
/// needs a new one); reconciling otherwise (releases on their way, the source retried).
fn stack_progress(input: &StatusInput<'_>, conds: &[Condition]) -> conditions::Progress {
    use conditions::Progress;
    if matches!(input.sync, SyncOutcome::Suspended) {
        return Progress::Done;
    }
    let progress = conditions::progress_from_ready(conds, &[reason::NO_RELEASES]);
    if !matches!(progress, Progress::Reconciling { .. }) {
        return progress;
    }
    let kept = |r: &&ClusterStackRelease| {
        let name = r.metadata.name.as_deref().unwrap_or_default();
        input.plan.is_none_or(|p| p.keep.contains_key(name)) && r.metadata.deletion_timestamp.is_none()
    };
    let stalled: Vec<String> = input
        .releases
        .iter()
        .filter(kept)
        .filter_map(|r| {
            let c = conditions::find(r.status.as_ref()?.conditions.as_slice(), conditions::STALLED)?;
            (c.status == TRUE).then(|| format!("{}: {}", r.metadata.name.as_deref().unwrap_or_default(), c.message))
        })
        .collect();
    if stalled.is_empty() {
        progress
    } else {
        Progress::Stalled { reason: reason::RELEASE_STALLED.into(), message: stalled.join("; ") }
    }
}

/// Whether `new` differs from the status on the object; an unchanged pass
/// writes nothing.
pub fn status_changed(current: Option<&ClusterStackStatus>, new: &ClusterStackStatus) -> bool {
    current != Some(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterStackReleaseSpec, ClusterStackReleaseStatus};
    use crate::controller::stack::keep::{KeepReason, KeptRelease};
    use crate::controller::{PHASE_APPLYING, PHASE_DONE, PHASE_DOWNLOADING, PHASE_FAILED};

    fn time(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn release(name: &str, ready: bool, phase: &str, ready_msg: &str) -> ClusterStackRelease {
        let mut r = ClusterStackRelease::new(name, ClusterStackReleaseSpec::default());
        let mut conds = vec![];
        let (status, why) = if ready { (TRUE, reason::SUCCEEDED) } else { (FALSE, reason::APPLY_FAILED) };
        set_condition(&mut conds, condition(READY, status, why, ready_msg, None), &time("2026-01-01T00:00:00Z"));
        r.status =
            Some(ClusterStackReleaseStatus { ready, phase: phase.into(), conditions: conds, ..Default::default() });
        r
    }

    fn plan_keeping(tags: &[&str], latest: Option<&str>) -> Plan {
        Plan {
            keep: tags
                .iter()
                .map(|t| {
                    (
                        t.to_string(),
                        KeptRelease { id: ReleaseId::from_tag(t).unwrap(), reasons: vec![KeepReason::Pinned] },
                    )
                })
                .collect(),
            latest: latest.map(|t| ReleaseId::from_tag(t).unwrap()),
            source_listed: true,
            ..Plan::default()
        }
    }

    fn input<'a>(
        plan: Option<&'a Plan>,
        releases: &'a [ClusterStackRelease],
        sync: &'a SyncOutcome,
        now: &'a Time,
    ) -> StatusInput<'a> {
        StatusInput { plan, releases, sync, generation: Some(3), now }
    }

    #[test]
    fn usable_versions_and_summary_follow_the_releases_real_state() {
        let releases = [
            release("docker-ferrol-1-27-v10", true, PHASE_DONE, ""),
            release("docker-ferrol-1-27-v9", true, PHASE_DONE, ""),
            release("docker-ferrol-1-27-v11", false, PHASE_APPLYING, "2 objects not synced"),
        ];
        let plan = plan_keeping(
            &["docker-ferrol-1-27-v9", "docker-ferrol-1-27-v10", "docker-ferrol-1-27-v11"],
            Some("docker-ferrol-1-27-v11"),
        );
        let now = time("2026-05-01T00:00:00Z");
        let s = build_status(None, input(Some(&plan), &releases, &SyncOutcome::Listed, &now));
        assert_eq!(s.usable_versions, "v9, v10");
        assert_eq!(s.latest_release, "docker-ferrol-1-27-v11");
        assert_eq!(s.observed_generation, Some(3));
        let names: Vec<&str> = s.summary.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["docker-ferrol-1-27-v9", "docker-ferrol-1-27-v10", "docker-ferrol-1-27-v11"]);
        assert_eq!(s.summary[2].phase, PHASE_APPLYING);
        assert_eq!(s.summary[2].message, "2 objects not synced");
        assert!(!s.summary[2].ready);
        assert!(s.summary[0].ready && s.summary[0].message.is_empty());
        let ready = conditions::find(&s.conditions, READY).unwrap();
        assert_eq!(ready.status, FALSE);
        assert_eq!(ready.reason, reason::RELEASES_NOT_READY);
        assert!(
            ready.message.contains("docker-ferrol-1-27-v11: applying objects: 2 objects not synced"),
            "{}",
            ready.message
        );
        let synced = conditions::find(&s.conditions, RELEASES_SYNCED).unwrap();
        assert_eq!((synced.status.as_str(), synced.reason.as_str()), (TRUE, reason::SYNCED));
    }

    #[test]
    fn ready_when_every_kept_release_is_ready_and_missing_ones_are_named() {
        let releases = [release("docker-ferrol-1-27-v1", true, PHASE_DONE, "")];
        let now = time("2026-05-01T00:00:00Z");
        let plan = plan_keeping(&["docker-ferrol-1-27-v1"], None);
        let s = build_status(None, input(Some(&plan), &releases, &SyncOutcome::Listed, &now));
        assert!(conditions::is_true(&s.conditions, READY));
        let mut plan = plan_keeping(&["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"], None);
        plan.create = vec![ReleaseId::from_tag("docker-ferrol-1-27-v2").unwrap()];
        let s = build_status(None, input(Some(&plan), &releases, &SyncOutcome::Listed, &now));
        let ready = conditions::find(&s.conditions, READY).unwrap();
        assert_eq!(ready.status, FALSE);
        assert!(ready.message.contains("docker-ferrol-1-27-v2: not created yet"), "{}", ready.message);
        assert!(ready.message.contains("docker-ferrol-1-27-v3: not published by the source"), "{}", ready.message);
        assert!(!ready.message.contains("docker-ferrol-1-27-v1"), "{}", ready.message);
        let empty = Plan { source_listed: true, ..Plan::default() };
        let s = build_status(None, input(Some(&empty), &[], &SyncOutcome::Listed, &now));
        assert_eq!(conditions::find(&s.conditions, READY).unwrap().reason, reason::NO_RELEASES);
    }

    #[test]
    fn source_down_keeps_the_last_latest_and_says_why_and_when() {
        let now = time("2026-05-01T00:00:00Z");
        let releases = [release("docker-ferrol-1-27-v1", true, PHASE_DONE, "")];
        let first = build_status(
            None,
            input(
                Some(&plan_keeping(&["docker-ferrol-1-27-v1"], Some("docker-ferrol-1-27-v1"))),
                &releases,
                &SyncOutcome::Listed,
                &now,
            ),
        );
        let down = Plan { source_listed: false, ..plan_keeping(&["docker-ferrol-1-27-v1"], None) };
        let sync = SyncOutcome::Unavailable {
            message: "github:o/r is unavailable: connection refused".into(),
            retry_at: Some("2026-05-01T00:05:00Z".parse().unwrap()),
        };
        let s = build_status(Some(&first), input(Some(&down), &releases, &sync, &now));
        assert_eq!(s.latest_release, "docker-ferrol-1-27-v1");
        let c = conditions::find(&s.conditions, RELEASES_SYNCED).unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str()), (FALSE, reason::SOURCE_UNAVAILABLE));
        assert!(c.message.contains("connection refused"));
        assert!(c.message.contains("nothing was deleted"));
        assert!(c.message.contains("2026-05-01T00:05:00Z"));
        // Releases still usable: Ready stays true.
        assert!(conditions::is_true(&s.conditions, READY));

        let limited = SyncOutcome::RateLimited { until: "2026-05-01T01:00:00Z".parse().unwrap() };
        let s = build_status(Some(&first), input(Some(&down), &releases, &limited, &now));
        let c = conditions::find(&s.conditions, RELEASES_SYNCED).unwrap();
        assert_eq!(c.reason, reason::RATE_LIMITED);
        assert!(c.message.contains("2026-05-01T01:00:00Z"));
    }

    #[test]
    fn suspended_is_reported_and_ready_comes_from_existing_releases() {
        let now = time("2026-05-01T00:00:00Z");
        let releases = [
            release("docker-ferrol-1-27-v1", true, PHASE_DONE, ""),
            release("docker-ferrol-1-27-v2", false, PHASE_DOWNLOADING, ""),
        ];
        let s = build_status(None, input(None, &releases, &SyncOutcome::Suspended, &now));
        assert_eq!(conditions::find(&s.conditions, RELEASES_SYNCED).unwrap().reason, reason::SUSPENDED);
        let ready = conditions::find(&s.conditions, READY).unwrap();
        assert_eq!(ready.status, FALSE);
        assert!(ready.message.contains("docker-ferrol-1-27-v2: downloading release assets"));
    }

    #[test]
    fn plan_warnings_reach_the_synced_condition() {
        let now = time("2026-05-01T00:00:00Z");
        let mut plan = plan_keeping(&[], None);
        plan.warnings.push(crate::controller::stack::keep::PlanWarning::PinnedNotListed { version: "v7".into() });
        let s = build_status(None, input(Some(&plan), &[], &SyncOutcome::Listed, &now));
        assert!(conditions::find(&s.conditions, RELEASES_SYNCED).unwrap().message.contains("pinned version v7"));
    }

    #[test]
    fn deleting_and_unreported_releases_have_their_phase_and_are_not_usable() {
        let mut gone = release("docker-ferrol-1-27-v1", true, PHASE_DONE, "");
        gone.metadata.deletion_timestamp = Some(time("2026-01-02T00:00:00Z"));
        let fresh = ClusterStackRelease::new("docker-ferrol-1-27-v2", ClusterStackReleaseSpec::default());
        assert_eq!(release_phase(&gone), PHASE_DELETING);
        assert_eq!(release_phase(&fresh), PHASE_PENDING);
        let now = time("2026-05-01T00:00:00Z");
        let s = build_status(None, input(None, &[gone, fresh], &SyncOutcome::Listed, &now));
        assert_eq!(s.usable_versions, "");
    }

    #[test]
    fn kstatus_reconciling_stalled_and_done_follow_the_releases() {
        use conditions::{RECONCILING, STALLED, find, is_true};
        let now = time("2026-05-01T00:00:00Z");
        let plan = plan_keeping(&["docker-ferrol-1-27-v1"], Some("docker-ferrol-1-27-v1"));
        let working = [release("docker-ferrol-1-27-v1", false, PHASE_APPLYING, "waiting")];
        let s = build_status(None, input(Some(&plan), &working, &SyncOutcome::Listed, &now));
        assert!(is_true(&s.conditions, RECONCILING) && find(&s.conditions, STALLED).is_none());
        assert_eq!(find(&s.conditions, RECONCILING).unwrap().reason, reason::RELEASES_NOT_READY);
        // A kept release that is stalled stalls the stack, naming it.
        let mut bad = release("docker-ferrol-1-27-v1", false, PHASE_FAILED, "line 3");
        if let Some(st) = bad.status.as_mut() {
            set_condition(
                &mut st.conditions,
                condition(conditions::STALLED, TRUE, reason::RENDER_FAILED, "line 3", None),
                &now,
            );
        }
        let s = build_status(Some(&s), input(Some(&plan), &[bad], &SyncOutcome::Listed, &now));
        let stalled = find(&s.conditions, STALLED).unwrap();
        assert_eq!(
            (stalled.reason.as_str(), stalled.message.as_str()),
            (reason::RELEASE_STALLED, "docker-ferrol-1-27-v1: line 3")
        );
        assert!(find(&s.conditions, RECONCILING).is_none());
        // Nothing matches the spec: stalled.
        let empty = plan_keeping(&[], None);
        let s = build_status(Some(&s), input(Some(&empty), &[], &SyncOutcome::Listed, &now));
        assert_eq!(find(&s.conditions, STALLED).unwrap().reason, reason::NO_RELEASES);
        // Ready, or suspended: neither.
        let ready = [release("docker-ferrol-1-27-v1", true, PHASE_DONE, "")];
        let s = build_status(Some(&s), input(Some(&plan), &ready, &SyncOutcome::Listed, &now));
        assert!(find(&s.conditions, STALLED).is_none() && find(&s.conditions, RECONCILING).is_none());
        let s = build_status(Some(&s), input(None, &working, &SyncOutcome::Suspended, &now));
        assert!(find(&s.conditions, STALLED).is_none() && find(&s.conditions, RECONCILING).is_none());
    }

    #[test]
    fn an_unchanged_pass_produces_an_equal_status_and_writes_nothing() {
        let releases = [release("docker-ferrol-1-27-v1", false, PHASE_APPLYING, "waiting")];
        let plan = plan_keeping(&["docker-ferrol-1-27-v1"], Some("docker-ferrol-1-27-v1"));
        let first =
            build_status(None, input(Some(&plan), &releases, &SyncOutcome::Listed, &time("2026-05-01T00:00:00Z")));
        assert!(status_changed(None, &first));
        let second = build_status(
            Some(&first),
            input(Some(&plan), &releases, &SyncOutcome::Listed, &time("2026-05-02T00:00:00Z")),
        );
        assert!(!status_changed(Some(&first), &second));
        // A real change is seen, and only the changed condition gets the new time.
        let ready = [release("docker-ferrol-1-27-v1", true, PHASE_DONE, "")];
        let third = build_status(
            Some(&second),
            input(Some(&plan), &ready, &SyncOutcome::Listed, &time("2026-05-03T00:00:00Z")),
        );
        assert!(status_changed(Some(&second), &third));
        let t = |s: &ClusterStackStatus, ty: &str| {
            conditions::find(&s.conditions, ty).unwrap().last_transition_time.clone()
        };
        assert_eq!(t(&third, READY), Some(time("2026-05-03T00:00:00Z")));
        assert_eq!(t(&third, RELEASES_SYNCED), Some(time("2026-05-01T00:00:00Z")));
    }
}
