//! The node-image gate: picks the plug-in, bounds the call, applies the deadline, and turns the
//! answer into the `NodeImagesReady` condition and `status.nodeImages`.
//!
//! The deadline is measured from the `lastTransitionTime` of a `NodeImagesReady` condition that
//! is `False`: the time the gate started waiting (or the images stopped being ready). It lives in
//! the status, so a restart neither resets nor forgets it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Cleanup, NODE_IMAGES_READY, NodeImageProvider, Progress, ProviderError, ProviderRegistry, ReleaseContext};
use super::{Report, reason};
use crate::api::conditions::{FALSE, TRUE, condition, find, set_condition};
use crate::api::{ClusterStackReleaseStatus, Condition, NodeImageStatus};

/// How long a gate may wait for node images before its condition says it timed out.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(3600);

/// Settings of the gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateConfig {
    /// After how long without ready images the condition says `TimedOut` (default 1 h).
    pub deadline: Duration,
    /// The longest a plug-in's `ensure` or `cleanup` may take before the reconcile moves on
    /// (default 10 s); a plug-in should answer far sooner.
    pub call_timeout: Duration,
    /// When to ask a plug-in again after a retryable failure (default 1 min).
    pub retry_after: Duration,
    /// When to ask again once ready, so a regression is noticed (default 5 min).
    pub ready_recheck: Duration,
}

impl Default for GateConfig {
    fn default() -> Self {
        Self {
            deadline: DEFAULT_DEADLINE,
            call_timeout: Duration::from_secs(10),
            retry_after: Duration::from_secs(60),
            ready_recheck: Duration::from_secs(300),
        }
    }
}

/// Which plug-in gates a release; see [`ProviderRegistry::select`].
#[derive(Clone)]
pub enum Selection {
    /// No gate: the release goes straight on to rendering.
    NoGate {
        /// Why, for logs.
        why: String,
    },
    /// This plug-in gates the release.
    Plugin(Arc<dyn NodeImageProvider>),
}

impl std::fmt::Debug for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selection::NoGate { why } => f.debug_struct("NoGate").field("why", why).finish(),
            Selection::Plugin(p) => f.debug_tuple("Plugin").field(&p.name()).finish(),
        }
    }
}

/// Where the gate stands after a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateState {
    /// The release has no gate.
    NoGate,
    /// The node images are ready: go on.
    Passed,
    /// The plug-in is working.
    Waiting,
    /// The plug-in failed.
    Failed {
        /// Whether it will be asked again.
        retryable: bool,
    },
    /// The deadline passed without ready images (the plug-in is still asked).
    TimedOut,
}

/// What one pass of the gate decided, and what to write into the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateOutcome {
    /// Where the gate stands.
    pub state: GateState,
    /// The `NodeImagesReady` condition to set; `None` when there is no gate (the condition is removed).
    pub condition: Option<Condition>,
    /// The per-image list for `status.nodeImages`.
    pub images: Vec<NodeImageStatus>,
    /// A one-line summary, for the release's `Ready` condition while the gate holds it back.
    pub message: String,
    /// When to reconcile again (`None`: only on a change of the release).
    pub requeue_after: Option<Duration>,
}

impl GateOutcome {
    /// Whether the release may go on to rendering and applying.
    pub fn passed(&self) -> bool {
        matches!(self.state, GateState::NoGate | GateState::Passed)
    }

    fn no_gate(why: &str) -> Self {
        Self {
            state: GateState::NoGate,
            condition: None,
            images: Vec::new(),
            message: format!("no node-image gate: {why}"),
            requeue_after: None,
        }
    }

    /// Writes the outcome into a ClusterStackRelease status: sets (or, without a gate, removes)
    /// the `NodeImagesReady` condition and replaces `nodeImages`. The condition's transition time
    /// moves only when its status changes, which keeps the deadline's start. Returns whether
    /// anything changed.
    pub fn record(&self, status: &mut ClusterStackReleaseStatus, now: &Time) -> bool {
        let mut changed = false;
        match &self.condition {
            Some(c) => changed |= set_condition(&mut status.conditions, c.clone(), now),
            None => {
                let before = status.conditions.len();
                status.conditions.retain(|c| c.type_ != NODE_IMAGES_READY);
                changed |= status.conditions.len() != before;
            }
        }
        if status.node_images != self.images {
            status.node_images = self.images.clone();
            changed = true;
        }
        changed
    }
}

/// When the gate started waiting, from the current `NodeImagesReady` condition.
fn waiting_since(conditions: &[Condition]) -> Option<jiff::Timestamp> {
    find(conditions, NODE_IMAGES_READY)
        .filter(|c| c.status == FALSE)
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// The pure decision: from a plug-in's answer (or error), the current conditions and the time,
/// what the gate says. `generation` goes into the condition's `observedGeneration`.
pub fn decide(
    answer: Result<Report, ProviderError>,
    plugin: &str,
    conditions: &[Condition],
    now: &Time,
    generation: Option<i64>,
    config: &GateConfig,
) -> GateOutcome {
    let report = answer.unwrap_or_else(|e| {
        Report::new(Progress::Failed { reason: format!("provider plug-in {plugin}: {e}"), retryable: true })
    });
    let images = report.images;
    let make = |state, status: &str, reason: &str, message: String, requeue_after| GateOutcome {
        state,
        condition: Some(condition(NODE_IMAGES_READY, status, reason, message.clone(), generation)),
        images: images.clone(),
        message,
        requeue_after,
    };
    let (state, reason_, message, recheck_after) = match report.progress {
        Progress::Ready => {
            let message = if images.is_empty() {
                format!("provider plug-in {plugin}: ready")
            } else {
                format!("{} node image(s) ready", images.len())
            };
            return make(GateState::Passed, TRUE, reason::READY, message, Some(config.ready_recheck));
        }
        // Only a change can fix it, so there is nothing to wait for and no deadline.
        Progress::Failed { reason: why, retryable: false } => {
            return make(GateState::Failed { retryable: false }, FALSE, reason::FAILED_PERMANENTLY, why, None);
        }
        Progress::InProgress { message, recheck_after } => {
            (GateState::Waiting, reason::PROGRESSING, message, recheck_after)
        }
        Progress::Failed { reason: why, retryable: true } => {
            (GateState::Failed { retryable: true }, reason::FAILED, why, config.retry_after)
        }
    };

    // Not ready: has the deadline passed since the gate started waiting?
    let since = waiting_since(conditions).unwrap_or(now.0);
    let waited = Duration::try_from(now.0.duration_since(since)).unwrap_or(Duration::ZERO);
    if waited >= config.deadline {
        let deadline = humantime::format_duration(config.deadline);
        return make(
            GateState::TimedOut,
            FALSE,
            reason::TIMED_OUT,
            format!("node images not ready after {deadline}: {message}"),
            Some(recheck_after.max(config.retry_after)),
        );
    }
    make(state, FALSE, reason_, message, Some(recheck_after))
}

/// The gate the release controller calls: a registry and its settings.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    /// The plug-ins.
    pub registry: ProviderRegistry,
    /// The settings.
    pub config: GateConfig,
}

impl Gate {
    /// A gate over a registry.
    pub fn new(registry: ProviderRegistry, config: GateConfig) -> Self {
        Self { registry, config }
    }

    /// One pass of the gate for a release that is not being deleted: selects the plug-in (see
    /// [`ProviderRegistry::select`]; the provider template is `ctx.provider_ref`), asks it, and
    /// decides with [`decide`]. `current` is the release's status as read (the gate's memory);
    /// `generation` its `metadata.generation`. Never fails: errors become a retryable failure in
    /// the outcome.
    pub async fn check(
        &self,
        ctx: &ReleaseContext,
        no_provider: bool,
        current: Option<&ClusterStackReleaseStatus>,
        generation: Option<i64>,
        now: &Time,
    ) -> GateOutcome {
        let plugin = match self.registry.select(&ctx.release.provider, no_provider, ctx.provider_ref.is_some()) {
            Selection::NoGate { why } => {
                tracing::debug!(release = %ctx.key(), %why, "no node-image gate");
                return GateOutcome::no_gate(&why);
            }
            Selection::Plugin(p) => p,
        };
        let name = plugin.name().to_string();
        let answer = match tokio::time::timeout(self.config.call_timeout, plugin.ensure(ctx)).await {
            Ok(answer) => answer,
            Err(_) => Ok(Report::new(Progress::InProgress {
                message: format!(
                    "provider plug-in {name} did not answer within {}",
                    humantime::format_duration(self.config.call_timeout)
                ),
                recheck_after: self.config.retry_after,
            })
            .with_images(ctx.previous.clone())),
        };
        let conditions = current.map(|s| s.conditions.as_slice()).unwrap_or_default();
        let mut outcome = decide(answer, &name, conditions, now, generation, &self.config);
        if plugin.watched() && outcome.state == GateState::Passed {
            // A regression arrives through the watch of the provider objects.
            outcome.requeue_after = None;
        }
        // One info line per decision that changes something a user sees; the rest at debug.
        let before = find(conditions, NODE_IMAGES_READY).map(|c| (c.status.as_str(), c.reason.as_str()));
        let after = outcome.condition.as_ref().map(|c| (c.status.as_str(), c.reason.as_str()));
        if before != after {
            tracing::info!(
                release = %ctx.key(),
                plugin = %name,
                state = ?outcome.state,
                message = %outcome.message,
                "node-image gate changed"
            );
        } else {
            tracing::debug!(release = %ctx.key(), plugin = %name, state = ?outcome.state, message = %outcome.message, "node-image gate");
        }
        outcome
    }

    /// Asks the release's plug-in to clean up (the release is being deleted). `Done` when there is
    /// no gate; an error or a call past [`GateConfig::call_timeout`] is `InProgress`.
    pub async fn cleanup(&self, ctx: &ReleaseContext, no_provider: bool) -> Cleanup {
        let plugin = match self.registry.select(&ctx.release.provider, no_provider, ctx.provider_ref.is_some()) {
            Selection::NoGate { .. } => return Cleanup::Done,
            Selection::Plugin(p) => p,
        };
        let retry = self.config.retry_after;
        match tokio::time::timeout(self.config.call_timeout, plugin.cleanup(ctx)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tracing::warn!(release = %ctx.key(), plugin = plugin.name(), error = %e, "node-image cleanup failed");
                Cleanup::InProgress {
                    message: format!("provider plug-in {}: {e}", plugin.name()),
                    recheck_after: retry,
                }
            }
            Err(_) => Cleanup::InProgress {
                message: format!("provider plug-in {} is still cleaning up", plugin.name()),
                recheck_after: retry,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn in_progress(m: &str) -> Result<Report, ProviderError> {
        Ok(Report::new(Progress::InProgress { message: m.into(), recheck_after: Duration::from_secs(7) }))
    }

    #[test]
    fn ready_passes_with_true_condition_and_recheck() {
        let cfg = GateConfig::default();
        let images = vec![NodeImageStatus { name: "a".into(), ready: true, message: String::new() }];
        let out = decide(
            Ok(Report::new(Progress::Ready).with_images(images.clone())),
            "docker",
            &[],
            &time("2026-01-01T00:00:00Z"),
            Some(2),
            &cfg,
        );
        assert!(out.passed());
        assert_eq!(out.images, images);
        let c = out.condition.unwrap();
        assert_eq!((c.status.as_str(), c.reason.as_str(), c.observed_generation), (TRUE, reason::READY, Some(2)));
        assert_eq!(out.requeue_after, Some(cfg.ready_recheck));
    }

    #[test]
    fn in_progress_before_deadline_waits_and_after_it_times_out() {
        let cfg = GateConfig { deadline: Duration::from_secs(3600), ..Default::default() };
        let start = time("2026-01-01T00:00:00Z");
        let first = decide(in_progress("building"), "p", &[], &start, None, &cfg);
        assert_eq!(first.state, GateState::Waiting);
        assert_eq!(first.requeue_after, Some(Duration::from_secs(7)));
        let mut status = ClusterStackReleaseStatus::default();
        first.record(&mut status, &start);

        let later = time("2026-01-01T00:59:59Z");
        let out = decide(in_progress("building"), "p", &status.conditions, &later, None, &cfg);
        assert_eq!(out.state, GateState::Waiting);

        let past = time("2026-01-01T01:00:00Z");
        let out = decide(in_progress("building"), "p", &status.conditions, &past, None, &cfg);
        assert_eq!(out.state, GateState::TimedOut);
        let c = out.condition.clone().unwrap();
        assert_eq!(c.reason, reason::TIMED_OUT);
        assert!(c.message.contains("1h") && c.message.contains("building"), "{}", c.message);
        // Recording the timeout keeps the start, so it stays timed out.
        assert!(out.record(&mut status, &past));
        assert_eq!(status.conditions[0].last_transition_time, Some(start));
    }

    #[test]
    fn a_retryable_failure_also_times_out() {
        let cfg = GateConfig { deadline: Duration::from_secs(600), ..Default::default() };
        let fail = || Ok(Report::new(Progress::Failed { reason: "registry down".into(), retryable: true }));
        let mut status = ClusterStackReleaseStatus::default();
        let t0 = time("2026-01-01T00:00:00Z");
        decide(fail(), "p", &[], &t0, None, &cfg).record(&mut status, &t0);
        let out = decide(fail(), "p", &status.conditions, &time("2026-01-01T00:10:00Z"), None, &cfg);
        assert_eq!(out.state, GateState::TimedOut);
        assert_eq!(out.message, "node images not ready after 10m: registry down");
        assert_eq!(out.requeue_after, Some(cfg.retry_after));
    }

    #[test]
    fn a_ready_condition_does_not_start_the_clock() {
        let cfg = GateConfig { deadline: Duration::from_secs(60), ..Default::default() };
        let mut status = ClusterStackReleaseStatus::default();
        let t0 = time("2026-01-01T00:00:00Z");
        decide(Ok(Report::new(Progress::Ready)), "p", &[], &t0, None, &cfg).record(&mut status, &t0);
        // A day later the images regress: the clock starts now, not at the old transition.
        let t1 = time("2026-01-02T00:00:00Z");
        let out = decide(in_progress("rebuilding"), "p", &status.conditions, &t1, None, &cfg);
        assert_eq!(out.state, GateState::Waiting);
    }

    #[test]
    fn failures_retryable_or_not_and_errors() {
        let cfg = GateConfig::default();
        let now = time("2026-01-01T00:00:00Z");
        let out = decide(
            Ok(Report::new(Progress::Failed { reason: "bad file".into(), retryable: false })),
            "p",
            &[],
            &now,
            None,
            &cfg,
        );
        assert_eq!(out.state, GateState::Failed { retryable: false });
        assert_eq!(out.requeue_after, None);
        assert_eq!(out.condition.unwrap().reason, reason::FAILED_PERMANENTLY);

        let out = decide(Err(ProviderError::Other("registry down".into())), "docker", &[], &now, None, &cfg);
        assert_eq!(out.state, GateState::Failed { retryable: true });
        assert_eq!(out.requeue_after, Some(cfg.retry_after));
        assert!(out.message.contains("docker") && out.message.contains("registry down"), "{}", out.message);
        assert!(!out.passed());
    }

    #[test]
    fn no_gate_removes_condition_and_images() {
        let now = time("2026-01-01T00:00:00Z");
        let mut status = ClusterStackReleaseStatus::default();
        let out = decide(in_progress("x"), "p", &[], &now, None, &GateConfig::default());
        out.record(&mut status, &now);
        status.node_images = vec![NodeImageStatus { name: "a".into(), ready: false, message: String::new() }];
        let none = GateOutcome::no_gate("noProvider is set");
        assert!(none.passed());
        assert!(none.record(&mut status, &now));
        assert!(status.conditions.is_empty() && status.node_images.is_empty());
        assert!(!none.record(&mut status, &now), "a second record changes nothing");
    }
}
