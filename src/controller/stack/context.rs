//! The ClusterStack controller's own state and its errors: the shared runtime, its backoff
//! counters, and what each stack's last poll gave (memory only: after a restart the first pass
//! subscribes again and the poller lists at once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::controller::runtime::backoff::Backoff;
use crate::controller::runtime::context::{Context, SourceLookupError};
use crate::controller::runtime::poller::SyncOutcome;
use crate::controller::runtime::watch::ClustersNotSynced;
use crate::source::ListedRelease;
use crate::util::lock;

use super::objects::{LastPoll, ObjectError};

/// What a stack's last poll gave: its time and trigger, and the outcome.
#[derive(Debug, Clone)]
pub struct StackPoll {
    pub last: LastPoll,
    pub listing: Result<Arc<Vec<ListedRelease>>, SyncOutcome>,
}

/// The ClusterStack controller's context.
pub struct StackContext {
    pub ctx: Arc<Context>,
    pub backoff: Backoff,
    polls: Mutex<HashMap<String, StackPoll>>,
}

impl StackContext {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { backoff: Backoff::new(ctx.settings.backoff, ctx.random.clone()), ctx, polls: Mutex::default() }
    }

    pub fn poll(&self, key: &str) -> Option<StackPoll> {
        lock(&self.polls).get(key).cloned()
    }

    pub fn set_poll(&self, key: &str, poll: StackPoll) {
        lock(&self.polls).insert(key.to_string(), poll);
    }

    pub fn forget_stack(&self, key: &str) {
        lock(&self.polls).remove(key);
    }
}

/// Why a pass over a ClusterStack failed; it is retried with per-object backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// The stack cannot be used as it is (a malformed `spec.source`, a stack not read from the
    /// API server).
    #[error("{0}")]
    Config(String),
    /// The Cluster index is not synced: planning now could delete a release in use.
    #[error(transparent)]
    ClustersNotSynced(#[from] ClustersNotSynced),
    /// The status could not be serialised.
    #[error("could not serialise the status: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl Error {
    /// The failure metric's `reason` label: the variant's name.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "Kube",
            Error::Config(_) => "Config",
            Error::ClustersNotSynced(_) => "ClustersNotSynced",
            Error::Serialize(_) => "Serialize",
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

impl From<ObjectError> for Error {
    fn from(e: ObjectError) -> Self {
        Error::Config(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metric_label_is_the_variant() {
        let api = kube::Error::Api(kube::core::Status::failure("boom", "InternalError").with_code(500).boxed());
        let bad_json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let cases = [
            (Error::Kube(api), "Kube"),
            (Error::Config("bad".into()), "Config"),
            (Error::ClustersNotSynced(ClustersNotSynced), "ClustersNotSynced"),
            (Error::Serialize(bad_json), "Serialize"),
        ];
        for (error, label) in cases {
            assert_eq!(error.metric_label(), label, "{error}");
            assert!(format!("{error:?}").starts_with(label), "the label names the variant: {error:?}");
        }
    }
}
