//! The operator's controllers: their pure logic, apart from I/O.
//!
//! - [`keep`]: which ClusterStackReleases a ClusterStack keeps, creates, deletes;
//! - [`clusters`]: which releases the CAPI Clusters use;
//! - [`crate::api::conditions`], [`status`] and [`release_status`]: deterministic status, written only on change;
//! - [`backoff`]: per-object exponential backoff and jittered polling;
//! - [`metrics`] and [`serve`]: the Prometheus metrics, `/metrics`, `/healthz`, `/readyz`;
//! - [`objects`]: the ClusterStackRelease objects a stack owns, and when to poll;
//! - [`config`]: the `clusterstack operator` settings;
//! - [`events`]: Kubernetes Events, a repeated one counted on the first (series);
//! - [`inventory`]: the apply engine's inventory to and from `status.resources`.
//!
//! The I/O around them: [`context`] (shared state), [`stack`] and [`release`] (the two
//! reconcilers) and [`run`] (the whole operator process, as a library function).
//!
//! `docs/DESIGN.md` describes both reconcile loops.

pub mod addon;
pub mod backoff;
pub mod cache_gc;
pub mod clusters;

pub mod config;
pub mod context;
pub mod events;
pub mod inventory;
pub mod keep;
pub mod metrics;
pub mod objects;
pub mod poller;
pub mod release;
pub mod release_status;
pub mod rollout;
pub mod run;
pub mod serve;
pub mod stack;
pub mod status;
pub mod watch;

/// The field manager of every server-side apply the operator makes: the apply engine's, so
/// there is one field manager of our own.
pub const FIELD_MANAGER: &str = crate::apply::FIELD_MANAGER;
/// The finalizer on ClusterStackReleases: applied objects are removed first.
pub const RELEASE_FINALIZER: &str = "clusterstack.x-k8s.io/release-cleanup";
/// Setting this annotation on a ClusterStack to a new value forces an immediate poll.
pub const RECONCILE_REQUESTED_AT: &str = "clusterstack.x-k8s.io/reconcile-requested-at";

/// Why a reconcile pass failed; the pass is retried with per-object backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A request to the API server failed.
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// Applying the rendered objects failed as a whole.
    #[error(transparent)]
    Apply(#[from] crate::apply::ApplyError),
    /// The object's configuration cannot be used (e.g. a malformed `spec.source`).
    #[error("{0}")]
    Config(String),
    /// A status could not be serialised.
    #[error("could not serialise the status: {0}")]
    Serialize(#[from] serde_json::Error),
    /// A background task failed.
    #[error("background task failed: {0}")]
    Task(String),
}

impl ReconcileError {
    /// A bounded label for the failure metric.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Kube(_) => "KubeError",
            ReconcileError::Apply(_) => crate::api::conditions::reason::APPLY_FAILED,
            ReconcileError::Config(_) => "InvalidConfig",
            ReconcileError::Serialize(_) => "SerializeFailed",
            ReconcileError::Task(_) => "TaskFailed",
        }
    }
}

/// Whether an API error is 404 Not Found.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// A JSON merge patch that turns `old` into `new` under `status`: fields `new` omits (empty
/// values are not serialised) are set to `null`, or a merge patch would keep their old value.
pub fn status_patch<T: serde::Serialize>(old: Option<&T>, new: &T) -> Result<serde_json::Value, serde_json::Error> {
    let mut body = serde_json::to_value(new)?;
    if let (Some(old), serde_json::Value::Object(fields)) = (old.map(serde_json::to_value).transpose()?, &mut body)
        && let serde_json::Value::Object(old_fields) = old
    {
        for k in old_fields.keys() {
            fields.entry(k.clone()).or_insert(serde_json::Value::Null);
        }
    }
    Ok(serde_json::json!({ "status": body }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ClusterStackStatus;

    #[test]
    fn status_patch_clears_fields_the_new_status_omits() {
        let old = ClusterStackStatus {
            latest_release: "docker-ferrol-1-27-v3".into(),
            usable_versions: "v3".into(),
            ..Default::default()
        };
        let new = ClusterStackStatus { usable_versions: "v2, v3".into(), ..Default::default() };
        let patch = status_patch(Some(&old), &new).unwrap();
        assert_eq!(patch["status"]["usableVersions"], "v2, v3");
        // Without the explicit null a merge patch would keep the old latest release.
        assert!(patch["status"].get("latestRelease").is_some_and(serde_json::Value::is_null), "{patch}");
        assert!(patch["status"].get("conditions").is_none(), "absent before and after: {patch}");
    }

    #[test]
    fn status_patch_without_an_old_status_is_the_new_one() {
        let new = ClusterStackStatus { observed_generation: Some(2), ..Default::default() };
        let patch = status_patch(None, &new).unwrap();
        assert_eq!(patch, serde_json::json!({"status": {"observedGeneration": 2}}));
    }

    #[test]
    fn one_field_manager() {
        assert_eq!(FIELD_MANAGER, crate::apply::FIELD_MANAGER);
    }

    #[test]
    fn not_found_is_recognised() {
        let e = kube::Error::Api(kube::core::Status::failure("gone", "NotFound").with_code(404).boxed());
        assert!(is_not_found(&e));
        let e = kube::Error::Api(kube::core::Status::failure("conflict", "Conflict").with_code(409).boxed());
        assert!(!is_not_found(&e));
    }
}
