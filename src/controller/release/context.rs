//! The ClusterStackRelease controller's own state and its errors: the shared runtime, its
//! backoff counters, the node-image gate, the download tasks and the memos of good passes.
//! Memory only: a lost download task is started again by the next pass, a lost memo costs one
//! re-apply.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio::time::{Duration, Instant};

use crate::controller::runtime::backoff::Backoff;
use crate::controller::runtime::context::{Context, SourceLookupError};
use crate::controller::runtime::watch::ClustersNotSynced;
use crate::provider::Gate;
use crate::util::lock;

use super::memo::Memos;

/// The state of a background download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownloadState {
    /// Running; the text says how far.
    Running(String),
    /// Failed with this message; the next reconcile reports it and may try again.
    Failed(String),
    /// Downloaded, and refused by the signature policy.
    Refused(crate::source::verify::Failure),
    /// In the cache.
    Done,
}

/// The ClusterStackRelease controller's context.
pub struct ReleaseContext {
    pub ctx: Arc<Context>,
    pub backoff: Backoff,
    /// The node-image gate between reading `metadata.yaml` and rendering.
    pub gate: Gate,
    /// What the last good pass over each release was, to skip triggers that change nothing.
    pub memos: Arc<Memos>,
    /// Bounds the downloads running at once.
    pub download_slots: Arc<Semaphore>,
    downloads: Mutex<HashMap<String, DownloadState>>,
    holds: RetryHolds,
}

/// When a release whose last pass failed may be tried again, and for which state of it.
#[derive(Debug, Clone, Copy)]
struct RetryAt {
    generation: Option<i64>,
    deleting: bool,
    at: Instant,
}

/// Per release: the retry time of its last failed pass (tokio's clock, so tests can pause it).
#[derive(Debug, Default)]
pub struct RetryHolds(Mutex<HashMap<String, RetryAt>>);

impl RetryHolds {
    /// Holds the release (in this state) back for `delay`.
    pub fn hold(&self, key: &str, generation: Option<i64>, deleting: bool, delay: Duration) {
        lock(&self.0).insert(key.to_string(), RetryAt { generation, deleting, at: Instant::now() + delay });
    }

    /// Lets the release go.
    pub fn release(&self, key: &str) {
        lock(&self.0).remove(key);
    }

    /// How long the release in this state must still wait; `None`: it may be worked on now.
    pub fn wait_left(&self, key: &str, generation: Option<i64>, deleting: bool) -> Option<Duration> {
        let holds = lock(&self.0);
        let r = holds.get(key).filter(|r| r.generation == generation && r.deleting == deleting)?;
        r.at.checked_duration_since(Instant::now()).filter(|left| !left.is_zero())
    }
}

impl ReleaseContext {
    /// The controller's context; an applied object changed by someone else (seen by the watches)
    /// makes it forget the release's memo.
    pub fn new(ctx: Arc<Context>) -> Self {
        let memos = Arc::new(Memos::default());
        let forget = memos.clone();
        ctx.watches.on_release_changed(move |key| forget.forget(key));
        Self {
            backoff: Backoff::new(ctx.settings.backoff, ctx.random.clone()),
            gate: Gate::new(ctx.settings.providers.clone(), ctx.settings.gate.clone()),
            download_slots: Arc::new(Semaphore::new(usize::from(ctx.settings.concurrency.max(1)))),
            memos,
            downloads: Mutex::default(),
            holds: RetryHolds::default(),
            ctx,
        }
    }

    pub fn download(&self, key: &str) -> Option<DownloadState> {
        lock(&self.downloads).get(key).cloned()
    }

    pub fn set_download(&self, key: &str, state: DownloadState) {
        lock(&self.downloads).insert(key.to_string(), state);
    }

    pub fn clear_download(&self, key: &str) {
        lock(&self.downloads).remove(key);
    }

    /// Records a failed pass over a release (at `generation`, deleting or not): the delay of the
    /// next attempt, exponential in the failures in a row (capped, jittered). Until then
    /// [`ReleaseContext::wait_left`] holds back the triggers that change nothing (our own status
    /// writes, watch events of its objects), so a broken release is not retried in a hot loop.
    pub fn failed(&self, key: &str, generation: Option<i64>, deleting: bool) -> Duration {
        let delay = self.backoff.failure(key);
        self.holds.hold(key, generation, deleting, delay);
        delay
    }

    /// A pass succeeded: the next failure starts from the base delay again.
    pub fn succeeded(&self, key: &str) {
        self.backoff.success(key);
        self.holds.release(key);
    }

    /// How long the release must still wait after a failure; `None` when it may be worked on
    /// now: no failure pending, the backoff elapsed, or the release changed since (a new
    /// generation, or it is being deleted).
    pub fn wait_left(&self, key: &str, generation: Option<i64>, deleting: bool) -> Option<Duration> {
        self.holds.wait_left(key, generation, deleting)
    }
}

/// Why a pass over a ClusterStackRelease failed; it is retried with per-object backoff. (A
/// failed download, render or apply of some objects is not an error: it is reported in the
/// status and counted under the condition's reason.)
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// Applying the rendered objects failed as a whole (discovery, an empty render).
    #[error(transparent)]
    Apply(#[from] crate::apply::ApplyError),
    /// The release cannot be used as it is (e.g. its stack's malformed `spec.source`).
    #[error("{0}")]
    Config(String),
    /// The Cluster index is not synced: a release in use could be deleted.
    #[error(transparent)]
    ClustersNotSynced(#[from] ClustersNotSynced),
    /// The status could not be serialised.
    #[error("could not serialise the status: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The render task failed.
    #[error("background task failed: {0}")]
    Task(String),
}

impl Error {
    /// The failure metric's `reason` label: the variant's name.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "Kube",
            Error::Apply(_) => "Apply",
            Error::Config(_) => "Config",
            Error::ClustersNotSynced(_) => "ClustersNotSynced",
            Error::Serialize(_) => "Serialize",
            Error::Task(_) => "Task",
        }
    }
}

impl From<SourceLookupError> for Error {
    fn from(e: SourceLookupError) -> Self {
        match e {
            SourceLookupError::Kube(e) => Error::Kube(e),
            SourceLookupError::Config(m) => Error::Config(m),
            SourceLookupError::Refused(r) => Error::Config(r.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_held_release_waits_out_its_backoff_unless_it_changed() {
        let holds = RetryHolds::default();
        assert_eq!(holds.wait_left("ns/r", Some(1), false), None, "nothing failed yet");
        holds.hold("ns/r", Some(1), false, Duration::from_secs(10));
        assert_eq!(holds.wait_left("ns/r", Some(1), false), Some(Duration::from_secs(10)));
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(holds.wait_left("ns/r", Some(1), false), Some(Duration::from_secs(6)));
        // A new generation, or a deletion, is worked on at once; other releases are not held.
        assert_eq!(holds.wait_left("ns/r", Some(2), false), None);
        assert_eq!(holds.wait_left("ns/r", Some(1), true), None);
        assert_eq!(holds.wait_left("ns/other", Some(1), false), None);
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(holds.wait_left("ns/r", Some(1), false), None, "the backoff elapsed");
        holds.hold("ns/r", Some(1), false, Duration::from_secs(10));
        holds.release("ns/r");
        assert_eq!(holds.wait_left("ns/r", Some(1), false), None, "a success lets it go");
    }

    #[test]
    fn the_metric_label_is_the_variant() {
        let api = || kube::Error::Api(kube::core::Status::failure("boom", "InternalError").with_code(500).boxed());
        let bad_json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let cases = [
            (Error::Kube(api()), "Kube"),
            (Error::Apply(crate::apply::ApplyError::Discovery(api())), "Apply"),
            (Error::Config("bad".into()), "Config"),
            (Error::ClustersNotSynced(ClustersNotSynced), "ClustersNotSynced"),
            (Error::Serialize(bad_json), "Serialize"),
            (Error::Task("panicked".into()), "Task"),
        ];
        for (error, label) in cases {
            assert_eq!(error.metric_label(), label, "{error}");
            assert!(format!("{error:?}").starts_with(label), "the label names the variant: {error:?}");
        }
    }
}
