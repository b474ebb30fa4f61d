//! The rollout's pure decision: from the rollout (spec and status, its only memory), the Clusters,
//! the stack's releases and the time, the next status, the moves to make and the events to send.
//! No I/O: the reconcile gathers the inputs and carries out [`Actions`], the `plan` command shows
//! them offline. The rules are in `docs/DESIGN.md` ("Rollout loop").

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::conditions::{FALSE, TRUE};
use crate::api::{
    ClassVersion, ClusterStackRollout, ClusterStackRolloutStatus, ClusterStackSpec, RETRY_REQUESTED_AT, RollbackPolicy,
    RolloutClusterStatus,
};
use crate::controller::runtime::clusters::{CapiCluster, CapiVersion, ClusterKey};
use crate::release::KubernetesVersion;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::class::{self, ClassShape, Classes};
use super::conclude::{Progress, conclude, set_conditions};
use super::variables::Checker;
use super::view::{AddonView, ReleaseView};
use super::window::{self, WindowState};
use super::{rules, selector};

/// Cluster states in status.
pub mod state {
    pub const PENDING: &str = "Pending";
    pub const MOVING: &str = "Moving";
    pub const HEALTHY: &str = "Healthy";
    pub const FAILED: &str = "Failed";
    pub const ROLLED_BACK: &str = "RolledBack";
    pub const INCOMPATIBLE: &str = "Incompatible";
    pub const ALL: [&str; 6] = [PENDING, MOVING, HEALTHY, FAILED, ROLLED_BACK, INCOMPATIBLE];
}

/// Rollout phases in status.
pub mod phase {
    pub const IDLE: &str = "Idle";
    pub const WAITING: &str = "Waiting";
    pub const PROGRESSING: &str = "Progressing";
    pub const PAUSED: &str = "Paused";
    pub const HALTED: &str = "Halted";
    pub const SUCCEEDED: &str = "Succeeded";
}

/// Condition types of a rollout (besides `Ready`).
pub const PROGRESSING: &str = "Progressing";
pub const HALTED: &str = "Halted";

/// The default `progressDeadline`.
pub const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(30 * 60);
/// The name of the one wave of a rollout without `waves`.
pub const DEFAULT_WAVE: &str = "all";

/// One Cluster and its ClusterAddon.
#[derive(Debug, Clone, Copy)]
pub struct ClusterInput<'a> {
    pub cluster: &'a CapiCluster,
    pub addon: Option<&'a AddonView>,
}

/// The stack and its releases.
#[derive(Debug, Clone, Copy)]
pub struct Releases<'a> {
    /// The ClusterStack's spec; `None` when it does not exist.
    pub stack: Option<&'a ClusterStackSpec>,
    pub releases: &'a [ReleaseView],
    /// The ClusterClasses of the namespace by name, as far as they were read: the target's
    /// (nothing is moved while it is unknown) and those the Clusters are on. A name missing here
    /// was not read (its checks are skipped); `None`: read and not found.
    pub classes: &'a Classes,
}

/// A server-side apply of a Cluster's class (and version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub cluster: ClusterKey,
    pub capi: CapiVersion,
    pub class: String,
    /// `spec.topology.version` to set; `None`: leave it.
    pub version: Option<String>,
    /// Moving back to `from`.
    pub rollback: bool,
}

/// An Event to publish on the rollout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// What to do next.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Actions {
    /// The status to write (before the moves) when it differs from the current one.
    pub status: ClusterStackRolloutStatus,
    pub moves: Vec<Move>,
    pub events: Vec<Note>,
    /// Look again after this long at the latest (watch events may come sooner).
    pub requeue_after: Option<Duration>,
}

/// Decides the next step of `rollout` (see the module doc and `docs/DESIGN.md`).
pub fn decide(
    rollout: &ClusterStackRollout,
    clusters: &[ClusterInput<'_>],
    releases: &Releases<'_>,
    now: Timestamp,
) -> Actions {
    let spec = &rollout.spec;
    // Times in status have whole seconds: stamps round up, so that a soak or a deadline read
    // back from status is never shorter than asked.
    let time = Time(ceil_second(now));
    let mut st = rollout.status.clone().unwrap_or_default();
    st.observed_generation = rollout.metadata.generation;
    let mut out = Actions::default();
    let generation = rollout.metadata.generation;
    let note = |out: &mut Actions, warning: bool, reason: &'static str, message: String| {
        out.events.push(Note { warning, reason, message });
    };

    // A new `retry-requested-at` value: the halted target may be tried again.
    if let Some(retry) = rollout.metadata.annotations.as_ref().and_then(|a| a.get(RETRY_REQUESTED_AT))
        && st.retry_requested_at.as_deref() != Some(retry.as_str())
    {
        st.retry_requested_at = Some(retry.clone());
        if st.failed_targets.contains(&st.target) {
            st.failed_targets.retain(|t| t != &st.target);
            let on: BTreeMap<ClusterKey, String> =
                clusters.iter().filter_map(|c| Some((c.cluster.key(), c.cluster.class()?.0.to_string()))).collect();
            for e in &mut st.clusters {
                let key = ClusterKey { namespace: e.namespace.clone(), name: e.name.clone() };
                let on_target = e.to.as_ref().is_some_and(|to| on.get(&key) == Some(&to.class));
                match e.state.as_str() {
                    // Still on the target: its health is judged again from now.
                    state::FAILED if on_target => {
                        e.state = state::MOVING.into();
                        e.moved_at = Some(time.clone());
                        e.failed_at = None;
                        e.message = "retry requested: checking health again".into();
                    }
                    state::FAILED | state::ROLLED_BACK => reset(e),
                    _ => {}
                }
            }
            st.soak_started_at = None;
            note(&mut out, false, "RetryRequested", format!("retrying {}", st.target));
        }
    }

    let Some(stack) = releases.stack else {
        st.phase = phase::HALTED.into();
        let message = format!("ClusterStack {} does not exist", spec.cluster_stack_ref.name);
        set_conditions(
            &mut st,
            &time,
            generation,
            (FALSE, "ClusterStackNotFound", &message),
            (FALSE, "ClusterStackNotFound"),
            (TRUE, "ClusterStackNotFound", &message),
        );
        if rollout.status.as_ref().is_none_or(|s| s.phase != phase::HALTED) {
            note(&mut out, true, "Halted", message);
        }
        return finish(st, out);
    };
    if let Err(message) = rules::validate_spec(rollout) {
        st.phase = phase::WAITING.into();
        set_conditions(
            &mut st,
            &time,
            generation,
            (FALSE, "InvalidSpec", &message),
            (FALSE, "InvalidSpec"),
            (FALSE, "InvalidSpec", ""),
        );
        if rollout.status.as_ref().is_none_or(|s| !s.conditions.iter().any(|c| c.reason == "InvalidSpec")) {
            note(&mut out, true, "InvalidSpec", message);
        }
        return finish(st, out);
    }

    // The target: a newer release starts a new rollout, but not while Clusters are moving.
    let resolved = match rules::resolve_target(&spec.target, stack, releases.releases) {
        Ok(r) => r,
        Err(message) => {
            st.phase = phase::WAITING.into();
            set_conditions(
                &mut st,
                &time,
                generation,
                (FALSE, "NoTarget", &message),
                (FALSE, "NoTarget"),
                (FALSE, "NoTarget", ""),
            );
            return finish(st, out);
        }
    };
    let moving_now = st.clusters.iter().any(|e| e.state == state::MOVING);
    let current = releases.releases.iter().find(|r| r.id.tag() == st.target);
    let (target, superseded) = match current {
        Some(cur) if cur.id != resolved.id && moving_now => (cur, true),
        _ => (resolved, false),
    };
    let target_tag = target.id.tag();
    let target_class = target.id.class_name();
    if st.target != target_tag {
        if !st.target.is_empty() {
            note(&mut out, false, "NewTarget", format!("{target_tag} replaces {} as the target", st.target));
        }
        st.target = target_tag.clone();
        st.clusters.clear();
        st.current_wave.clear();
        st.soak_started_at = None;
    }
    let halted = st.failed_targets.contains(&target_tag);

    // The Clusters following the rollout: on a class of the stack (in its namespace), selected,
    // in a wave.
    let namespace = rollout.metadata.namespace.as_deref().unwrap_or_default();
    let waves: Vec<(&str, Option<&LabelSelector>, Option<&IntOrString>)> = if spec.waves.is_empty() {
        vec![(DEFAULT_WAVE, None, None)]
    } else {
        spec.waves.iter().map(|w| (w.name.as_str(), w.cluster_selector.as_ref(), w.max_concurrent.as_ref())).collect()
    };
    let mut members: BTreeMap<ClusterKey, (&ClusterInput<'_>, usize)> = BTreeMap::new();
    for input in clusters {
        let c = input.cluster;
        let (Some(id), Some((_, class_ns))) = (c.release(), c.class()) else { continue };
        if class_ns != namespace || !rules::stack_release(stack, &id) {
            continue;
        }
        let labels = c.metadata.labels.as_ref();
        if !selector::matches(spec.cluster_selector.as_ref(), labels) {
            continue;
        }
        if let Some(w) = waves.iter().position(|(_, sel, _)| selector::matches(*sel, labels)) {
            members.insert(c.key(), (input, w));
        }
    }

    let target_shape: Option<&ClassShape> = releases.classes.get(&target_class).and_then(Option::as_ref);
    let checker = target_shape.map(|shape| Checker::new(&shape.variables));
    let health_check = spec.health_check.as_ref().and_then(|h| cel::Program::compile(&h.expression).ok());
    let deadline = spec
        .progress_deadline
        .as_deref()
        .and_then(|d| rules::parse_duration(d).ok())
        .unwrap_or(DEFAULT_PROGRESS_DEADLINE);
    let soak = spec.soak_time.as_deref().and_then(|d| rules::parse_duration(d).ok()).unwrap_or_default();
    let marker = waves.iter().position(|(n, _, _)| *n == st.current_wave).unwrap_or(0);
    let soaking_marker = st.soak_started_at.is_some();

    // Entries: one per member, sorted; the status keeps what was decided before.
    let mut old: BTreeMap<ClusterKey, RolloutClusterStatus> = std::mem::take(&mut st.clusters)
        .into_iter()
        .map(|e| (ClusterKey { namespace: e.namespace.clone(), name: e.name.clone() }, e))
        .collect();
    let mut rollbacks_pending: Vec<usize> = vec![];
    let mut reissue: Vec<usize> = vec![];
    for (key, (input, w)) in &members {
        let c = input.cluster;
        let on_target = c.release().as_ref() == Some(&target.id);
        let mut e = old.remove(key).unwrap_or_else(|| RolloutClusterStatus {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            state: if on_target { state::HEALTHY.into() } else { state::PENDING.into() },
            message: if on_target { "already on the target".into() } else { String::new() },
            ..Default::default()
        });
        e.wave = waves[*w].0.to_string();
        match e.state.as_str() {
            state::PENDING | state::INCOMPATIBLE if on_target => {
                e.state = state::HEALTHY.into();
                e.message = "already on the target".into();
            }
            state::PENDING | state::INCOMPATIBLE => {
                let verdict = match (target_shape, checker.as_ref()) {
                    (Some(shape), Some(checker)) => {
                        compatible(c, target, (&target_class, shape), releases.classes, checker)
                    }
                    _ => Ok(()),
                };
                let was = e.state.clone();
                match verdict {
                    Ok(()) => {
                        e.state = state::PENDING.into();
                        e.message = if checker.is_some() {
                            String::new()
                        } else {
                            format!("waiting for ClusterClass {target_class}")
                        };
                    }
                    Err(why) => {
                        if was != state::INCOMPATIBLE || e.message != why {
                            note(&mut out, true, "Incompatible", format!("Cluster {key} is not moved: {why}"));
                        }
                        e.state = state::INCOMPATIBLE.into();
                        e.message = why;
                    }
                }
            }
            state::MOVING if !on_target => {
                // The status was written, the move not (yet) seen: it is made (again).
                if e.to.as_ref().is_some_and(|to| to.class == target_class) {
                    reissue.push(st.clusters.len());
                } else {
                    reset(&mut e);
                }
            }
            state::MOVING => match rules::health(input, &target_tag, health_check.as_ref()) {
                Ok(()) => {
                    e.state = state::HEALTHY.into();
                    e.healthy_at = Some(time.clone());
                    e.message = String::new();
                }
                Err(why) if rules::since(now, e.moved_at.as_ref()) >= deadline => {
                    e.state = state::FAILED.into();
                    e.failed_at = Some(time.clone());
                    e.message =
                        format!("not healthy within progressDeadline {}: {why}", humantime::format_duration(deadline));
                    note(&mut out, true, "ClusterFailed", format!("Cluster {key}: {}", e.message));
                }
                Err(why) => e.message = why,
            },
            state::HEALTHY if e.from.is_some() && soaking_marker && *w == marker && on_target => {
                if let Err(why) = rules::health(input, &target_tag, health_check.as_ref()) {
                    e.state = state::FAILED.into();
                    e.failed_at = Some(time.clone());
                    e.message = format!("unhealthy again during the soak of wave {}: {why}", e.wave);
                    note(&mut out, true, "ClusterFailed", format!("Cluster {key}: {}", e.message));
                }
            }
            state::ROLLED_BACK
                if e.from.as_ref().is_some_and(|from| c.class().map(|(n, _)| n) != Some(from.class.as_str())) =>
            {
                rollbacks_pending.push(st.clusters.len());
            }
            _ => {}
        }
        st.clusters.push(e);
    }
    for (key, e) in old {
        if e.state == state::MOVING || e.state == state::PENDING {
            note(
                &mut out,
                false,
                "ClusterDropped",
                format!("Cluster {key} left the rollout (deleted or no longer selected)"),
            );
        }
    }
    let failed = st.clusters.iter().filter(|e| e.failed_at.is_some()).count();
    st.failed = u32::try_from(failed).unwrap_or(u32::MAX);

    // The wave to work on: the first with Clusters still to move or moving. The marker wave
    // (status.currentWave) soaks once wholly healthy before the marker moves on.
    let open = |w: usize, st: &ClusterStackRolloutStatus| {
        st.clusters.iter().any(|e| e.wave == waves[w].0 && (e.state == state::PENDING || e.state == state::MOVING))
    };
    let moved_in =
        |w: usize, st: &ClusterStackRolloutStatus| st.clusters.iter().any(|e| e.wave == waves[w].0 && e.from.is_some());
    let mut work = (0..waves.len()).find(|w| open(*w, &st));
    let mut soak_wait: Option<Duration> = None;
    let mut marker = marker;
    let halting = !halted && failed > spec.failure_policy.max_failures as usize;
    if work.is_none_or(|w| w > marker) && !halted && !halting {
        if soak > Duration::ZERO && moved_in(marker, &st) {
            let started = st.soak_started_at.get_or_insert_with(|| time.clone()).clone();
            let elapsed = rules::since(now, Some(&started));
            if elapsed < soak {
                soak_wait = Some(soak - elapsed);
            }
        }
        if soak_wait.is_none()
            && let Some(w) = work
        {
            marker = w;
            st.soak_started_at = None;
        }
    }
    if soak_wait.is_some() {
        work = None;
    }
    st.current_wave = waves[marker].0.to_string();

    // Halt: more failures than allowed. The current wave's moved Clusters go back to `from`.
    let mut halted = halted;
    if halting {
        halted = true;
        st.failed_targets.push(target_tag.clone());
        let names: Vec<String> = st
            .clusters
            .iter()
            .filter(|e| e.failed_at.is_some())
            .map(|e| format!("{}/{}", e.namespace, e.name))
            .collect();
        note(
            &mut out,
            true,
            "Halted",
            format!(
                "halted {target_tag}: {failed} Cluster(s) failed (maxFailures {}): {}",
                spec.failure_policy.max_failures,
                names.join(", ")
            ),
        );
        if spec.failure_policy.rollback == RollbackPolicy::Automatic {
            let current_waves = [waves[marker].0, work.map_or(waves[marker].0, |w| waves[w].0)];
            for (i, e) in st.clusters.iter_mut().enumerate() {
                let (Some(from), Some(to)) = (e.from.clone(), e.to.clone()) else { continue };
                if !current_waves.contains(&e.wave.as_str())
                    || ![state::MOVING, state::HEALTHY, state::FAILED].contains(&e.state.as_str())
                {
                    continue;
                }
                let key = ClusterKey { namespace: e.namespace.clone(), name: e.name.clone() };
                let now_class = members.get(&key).and_then(|(c, _)| c.cluster.class().map(|(n, _)| n.to_string()));
                if now_class.as_deref() == Some(from.class.as_str()) {
                    // The move never landed: nothing to undo.
                    reset(e);
                    continue;
                }
                if raised(&from.version, &to.version) {
                    e.state = state::FAILED.into();
                    e.message = format!(
                        "rollback impossible: Kubernetes version was raised from {} to {}",
                        from.version, to.version
                    );
                    note(&mut out, true, "RollbackImpossible", format!("Cluster {key}: {}", e.message));
                } else {
                    e.state = state::ROLLED_BACK.into();
                    e.message = format!("rolled back to {}: {target_tag} halted", from.class);
                    note(
                        &mut out,
                        true,
                        "RolledBack",
                        format!("rolling Cluster {key} back from {} to {}", to.class, from.class),
                    );
                    rollbacks_pending.push(i);
                }
            }
        }
    }

    // Moves. Roll backs go on while halted (not while paused); forward moves only when nothing stops them.
    let paused = spec.paused;
    if !paused {
        for &i in &rollbacks_pending {
            let e = &st.clusters[i];
            let key = ClusterKey { namespace: e.namespace.clone(), name: e.name.clone() };
            if let (Some(from), Some((input, _))) = (&e.from, members.get(&key)) {
                out.moves.push(Move {
                    cluster: key,
                    capi: input.cluster.version,
                    class: from.class.clone(),
                    version: None,
                    rollback: true,
                });
            }
        }
    }
    let window = window::state(&spec.maintenance_windows, now);
    let may_move = !paused && !halted && !superseded && window == WindowState::Open && checker.is_some();
    if may_move {
        for &i in &reissue {
            let e = &st.clusters[i];
            let key = ClusterKey { namespace: e.namespace.clone(), name: e.name.clone() };
            if let (Some(to), Some((input, _))) = (&e.to, members.get(&key)) {
                let version = (!to.version.is_empty() && to.version != input.cluster.kubernetes_version())
                    .then(|| to.version.clone());
                out.moves.push(Move {
                    cluster: key,
                    capi: input.cluster.version,
                    class: to.class.clone(),
                    version,
                    rollback: false,
                });
            }
        }
        if let Some(w) = work {
            let size = st.clusters.iter().filter(|e| e.wave == waves[w].0).count();
            let limit = rules::max_concurrent(waves[w].2, size);
            let mut moving = st.clusters.iter().filter(|e| e.state == state::MOVING).count();
            for e in st.clusters.iter_mut().filter(|e| e.wave == waves[w].0 && e.state == state::PENDING) {
                if moving >= limit {
                    break;
                }
                let key = ClusterKey { namespace: e.namespace.clone(), name: e.name.clone() };
                let Some((input, _)) = members.get(&key) else { continue };
                let c = input.cluster;
                let Some((class, _)) = c.class() else { continue };
                let current_version = c.kubernetes_version().to_string();
                let new_version = if target.kubernetes_version.is_empty() {
                    current_version.clone()
                } else {
                    target.kubernetes_version.clone()
                };
                e.state = state::MOVING.into();
                e.from = Some(ClassVersion { class: class.to_string(), version: current_version.clone() });
                e.to = Some(ClassVersion { class: target_class.clone(), version: new_version.clone() });
                e.moved_at = Some(time.clone());
                e.healthy_at = None;
                e.failed_at = None;
                e.message = String::new();
                note(
                    &mut out,
                    false,
                    "Moving",
                    format!(
                        "moving Cluster {key} from {class} to {target_class}{}",
                        if new_version != current_version {
                            format!(" and Kubernetes {current_version} to {new_version}")
                        } else {
                            String::new()
                        }
                    ),
                );
                out.moves.push(Move {
                    cluster: key,
                    capi: c.version,
                    class: target_class.clone(),
                    version: (new_version != current_version).then_some(new_version),
                    rollback: false,
                });
                moving += 1;
            }
        }
    }

    // Phase, conditions, counters, when to look again.
    let previous_phase = rollout.status.as_ref().map(|s| s.phase.clone()).unwrap_or_default();
    let progress = Progress {
        halted,
        paused,
        work: work.map(|w| waves[w].0),
        soak_wait,
        superseded_by: superseded.then(|| resolved.id.tag()),
        window: &window,
        deadline,
        previous_phase: &previous_phase,
        target_tag: &target_tag,
    };
    out.requeue_after = conclude(&mut st, &progress, &time, generation, now, &mut out.events);
    finish(st, out)
}

fn ceil_second(t: Timestamp) -> Timestamp {
    if t.subsec_nanosecond() == 0 {
        return t;
    }
    Timestamp::from_second(t.as_second().saturating_add(1)).unwrap_or(t)
}

fn finish(st: ClusterStackRolloutStatus, mut out: Actions) -> Actions {
    out.status = st;
    out
}

/// Back to `Pending`, forgetting the move.
fn reset(e: &mut RolloutClusterStatus) {
    e.state = state::PENDING.into();
    e.from = None;
    e.to = None;
    e.moved_at = None;
    e.healthy_at = None;
    e.failed_at = None;
    e.message = String::new();
}

/// Whether `to` is a higher Kubernetes version than `from` (CAPI cannot lower it again).
fn raised(from: &str, to: &str) -> bool {
    match (from.parse::<KubernetesVersion>(), to.parse::<KubernetesVersion>()) {
        (Ok(f), Ok(t)) => t.precedence() > f.precedence(),
        _ => from != to && !to.is_empty(),
    }
}

/// Whether Cluster API would let the Cluster move to the target (see [`class`]): the variables,
/// its version rules, the worker classes it uses, the two classes' compatibility. The
/// reason reads "FROM to TO: Cluster API would refuse it: FIELD: RULE", in CAPI's words.
fn compatible(
    c: &CapiCluster,
    target: &ReleaseView,
    (class, shape): (&str, &ClassShape),
    classes: &Classes,
    checker: &Checker<'_>,
) -> Result<(), String> {
    let current = c.class().map(|(name, _)| name).unwrap_or_default();
    let have = c.kubernetes_version();
    // The version the Cluster will have: the target's, or its own if the target names none.
    let will_have = if target.kubernetes_version.is_empty() { have } else { target.kubernetes_version.as_str() };
    // CAPI's defaulting webhook checks the variables first and answers with those alone.
    let verdict = checker
        .check(class, c.variables())
        .and_then(|()| class::version_allowed(have, will_have, shape))
        .and_then(|()| class::workers_defined(c, shape, class))
        .and_then(|()| match classes.get(current) {
            Some(Some(current_shape)) if current != class => class::classes_compatible(current_shape, shape),
            Some(None) => Err(class::Refusal {
                field: "spec.topology.classRef".into(),
                message: format!(
                    "valid ClusterClass with name {current:?} could not be retrieved, change from class {current:?} to class {class:?} cannot be validated"
                ),
            }),
            _ => Ok(()),
        });
    verdict.map_err(|r| format!("{current} to {class}: {r}"))
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
