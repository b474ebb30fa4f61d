//! The last step of the rollout's decision: from what the earlier steps found (halted, paused,
//! the wave with work, a soak, the maintenance window), the phase, the `Ready`, `Progressing` and
//! `Halted` conditions, the counters, and when to look again. Pure.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::conditions::{self, FALSE, TRUE};
use crate::api::{ClusterStackRolloutStatus, RETRY_REQUESTED_AT};

use super::decide::{HALTED, Note, PROGRESSING, phase, state};
use super::rules;
use super::window::WindowState;

/// How often a progressing rollout looks again when no watch event comes.
const RECHECK: Duration = Duration::from_secs(60);

/// What the earlier steps of the decision found.
pub(super) struct Progress<'a> {
    pub halted: bool,
    pub paused: bool,
    /// The wave with Clusters still to move or moving (none while soaking).
    pub work: Option<&'a str>,
    /// How long the marker wave still soaks.
    pub soak_wait: Option<Duration>,
    /// The newer release waiting for the target's moving Clusters, if any.
    pub superseded_by: Option<String>,
    pub window: &'a WindowState,
    pub deadline: Duration,
    pub previous_phase: &'a str,
    pub target_tag: &'a str,
}

/// Sets the phase, conditions and counters of `st`; returns when to look again at the latest.
pub(super) fn conclude(
    st: &mut ClusterStackRolloutStatus,
    p: &Progress<'_>,
    time: &Time,
    generation: Option<i64>,
    now: Timestamp,
    events: &mut Vec<Note>,
) -> Option<Duration> {
    let target_tag = p.target_tag;
    let healthy = st.clusters.iter().filter(|e| e.state == state::HEALTHY).count();
    st.healthy = format!("{healthy}/{}", st.clusters.len());
    let moving = st.clusters.iter().filter(|e| e.state == state::MOVING).count();
    let mut requeue: Vec<Duration> = vec![];
    if p.halted {
        st.phase = phase::HALTED.into();
        let failed_names: Vec<String> = st
            .clusters
            .iter()
            .filter(|e| e.failed_at.is_some())
            .map(|e| format!("{}/{}", e.namespace, e.name))
            .collect();
        let message = format!(
            "{target_tag} halted: {} failed ({}); set annotation {RETRY_REQUESTED_AT} to a new value to retry",
            failed_names.len(),
            failed_names.join(", ")
        );
        set_conditions(
            st,
            &time,
            generation,
            (FALSE, "Halted", &message),
            (FALSE, "Halted"),
            (TRUE, "FailureLimitExceeded", &message),
        );
    } else if st.clusters.is_empty() {
        st.phase = phase::IDLE.into();
        set_conditions(
            st,
            &time,
            generation,
            (TRUE, "NoClusters", "no Cluster follows this rollout"),
            (FALSE, "NoClusters"),
            (FALSE, "NotHalted", ""),
        );
    } else if p.paused {
        st.phase = phase::PAUSED.into();
        set_conditions(
            st,
            &time,
            generation,
            (FALSE, "Paused", "spec.paused is true"),
            (FALSE, "Paused"),
            (FALSE, "NotHalted", ""),
        );
    } else if p.work.is_none() && p.soak_wait.is_none() && moving == 0 {
        st.phase = phase::SUCCEEDED.into();
        let incompatible = st.clusters.iter().filter(|e| e.state == state::INCOMPATIBLE).count();
        let message = if incompatible > 0 {
            format!("{healthy} Clusters on {target_tag}; {incompatible} incompatible, not moved")
        } else {
            format!("{healthy} Clusters on {target_tag}")
        };
        set_conditions(
            st,
            &time,
            generation,
            (TRUE, "Succeeded", &message),
            (FALSE, "Succeeded"),
            (FALSE, "NotHalted", ""),
        );
        if p.previous_phase != phase::SUCCEEDED {
            events.push(Note {
                warning: false,
                reason: "Succeeded",
                message: format!("rollout of {target_tag} succeeded: {message}"),
            });
        }
    } else if let (WindowState::ClosedUntil(next), 0) = (p.window, moving) {
        st.phase = phase::WAITING.into();
        let message = match next {
            Some(t) => format!("outside the maintenance windows; the next opens at {t}"),
            None => "no maintenance window opens within a week".to_string(),
        };
        if let Some(t) = next {
            requeue.push(t.duration_since(now).unsigned_abs());
        }
        set_conditions(
            st,
            &time,
            generation,
            (FALSE, "MaintenanceWindowClosed", &message),
            (FALSE, "MaintenanceWindowClosed"),
            (FALSE, "NotHalted", ""),
        );
    } else {
        st.phase = phase::PROGRESSING.into();
        let message = match p.soak_wait {
            Some(left) => format!(
                "wave {} is healthy; soaking for {} more",
                st.current_wave,
                humantime::format_duration(Duration::from_secs(left.as_secs()))
            ),
            None if p.superseded_by.is_some() => format!(
                "{} waits for the {moving} moving Cluster(s) of {target_tag}",
                p.superseded_by.as_deref().unwrap_or_default()
            ),
            None => format!(
                "wave {}: {moving} moving, {healthy}/{} healthy",
                p.work.unwrap_or(&st.current_wave),
                st.clusters.len()
            ),
        };
        set_conditions(
            st,
            &time,
            generation,
            (FALSE, "Progressing", &message),
            (TRUE, "Progressing"),
            (FALSE, "NotHalted", ""),
        );
    }
    if let Some(left) = p.soak_wait {
        requeue.push(left);
    }
    for e in st.clusters.iter().filter(|e| e.state == state::MOVING) {
        requeue.push(p.deadline.saturating_sub(rules::since(now, e.moved_at.as_ref())));
    }
    if st.phase == phase::PROGRESSING {
        requeue.push(RECHECK);
    }
    requeue.into_iter().min().map(|d| d.max(Duration::from_millis(10)))
}

/// Sets `Ready`, `Progressing` and `Halted`.
pub(super) fn set_conditions(
    st: &mut ClusterStackRolloutStatus,
    time: &Time,
    generation: Option<i64>,
    ready: (&str, &str, &str),
    progressing: (&str, &str),
    halted: (&str, &str, &str),
) {
    let message = ready.2.to_string();
    conditions::set_condition(
        &mut st.conditions,
        conditions::condition(conditions::READY, ready.0, ready.1, message.clone(), generation),
        time,
    );
    let progressing_message = if progressing.0 == TRUE { message } else { String::new() };
    conditions::set_condition(
        &mut st.conditions,
        conditions::condition(PROGRESSING, progressing.0, progressing.1, progressing_message, generation),
        time,
    );
    conditions::set_condition(
        &mut st.conditions,
        conditions::condition(HALTED, halted.0, halted.1, halted.2, generation),
        time,
    );
}
