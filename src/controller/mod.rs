//! The operator's controllers, one folder per kind of object reconciled, over a shared runtime.
//!
//! | folder | what it reconciles / holds |
//! |---|---|
//! | [`stack`] | ClusterStack: poll the source, keep the wanted releases ([`stack::keep`], the pure planner `plan` shares), status |
//! | [`release`] | ClusterStackRelease: download, node-image gate, render, apply with the inventory, delete |
//! | [`addon`] | ClusterAddon: per CAPI Cluster, the addons staged into its workload cluster ([`addon::decide`], shared with `plan --clusters`), the lifecycle hooks |
//! | [`runtime`] | what every controller runs on: the shared [`runtime::context::Context`], sources and pollers, watches, backoff, Events, metrics, HTTP endpoints, cache GC, settings, the CAPI Cluster view |
//! | [`inventory`] | the apply engine's inventory to and from `status.resources` (the controllers' edge of [`crate::apply`]) |
//! | [`rollout`] | ClusterStackRollout: moves a stack's Clusters onto a new release in waves ([`rollout::decide`]) |
//! | [`run`] | the whole process: builds each controller's context and runs them together |
//!
//! Each reconciler is a thin `reconcile` that gathers its inputs, a pure decision with table
//! tests, and the actions that carry the decision out; its own state lives in its own context.
//! Arrows point down only: a reconciler uses `runtime` and the names here, never another
//! reconciler; `runtime` knows no reconciler; only [`run`] sees them all.
//!
//! `docs/DESIGN.md` draws each reconcile loop.

pub mod addon;
pub mod inventory;
pub mod release;
pub mod rollout;
pub mod run;
pub mod runtime;
pub mod stack;

/// The field manager of every server-side apply the operator makes: the apply engine's, so
/// there is one field manager of our own.
pub const FIELD_MANAGER: &str = crate::apply::FIELD_MANAGER;
/// The finalizer on ClusterStackReleases: applied objects are removed first.
pub const RELEASE_FINALIZER: &str = "clusterstack.x-k8s.io/release-cleanup";
/// Setting this annotation on a ClusterStack to a new value forces an immediate poll.
pub const RECONCILE_REQUESTED_AT: &str = "clusterstack.x-k8s.io/reconcile-requested-at";

/// Label on each ClusterStackRelease naming its ClusterStack, for label selectors.
pub const STACK_LABEL: &str = "clusterstack.x-k8s.io/cluster-stack";

/// Phase: the release's assets are being fetched into the cache.
pub const PHASE_DOWNLOADING: &str = "downloading release assets";
/// Phase: the provider-specific gate (node images) runs.
pub const PHASE_PROVIDER: &str = "provider-specific work";
/// Phase: the rendered objects are being applied.
pub const PHASE_APPLYING: &str = "applying objects";
/// Phase: everything is applied and synced.
pub const PHASE_DONE: &str = "done";
/// Phase: a step failed; the `Ready` condition says which and why.
pub const PHASE_FAILED: &str = "failed";
/// Phase: the release is being deleted (waiting for Clusters, or removing objects).
pub const PHASE_DELETING: &str = "deleting";
/// Phase: the release controller has not reported yet.
pub const PHASE_PENDING: &str = "pending";

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
}
