//! Why a pass over a Cluster's addons failed, by kind: each kind is the `reason` label of
//! `clusterstack_reconcile_failures_total{controller="clusteraddon"}`.

use crate::controller::runtime::clusters::ClusterKey;

/// A failed pass over a Cluster; retried with per-Cluster backoff. The condition on the
/// ClusterAddon says the same in the user's words.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the management cluster's API server failed.
    #[error("Kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// The release or the ClusterAddon cannot be used as they are: an unreadable
    /// `metadata.yaml`, a `valuesFrom` that names nothing usable.
    #[error("{0}")]
    Config(String),
    /// The workload cluster cannot be reached: no kubeconfig Secret, an unusable one, or an API
    /// server that does not answer.
    #[error("workload cluster {cluster}: {message}")]
    WorkloadUnreachable { cluster: ClusterKey, message: String },
    /// The addons do not render (a template error, `clusteraddon.yaml` unreadable).
    #[error("{0}")]
    Render(String),
    /// The addons render more objects than `--max-objects-per-release` allows: nothing applied.
    #[error("{0}")]
    TooManyObjects(String),
    /// Objects were not applied into, or not deleted from, the workload cluster.
    #[error("{0}")]
    Apply(String),
    /// A stage's wait condition was not met before its deadline. Counted when the deadline
    /// passes; the stage stays `Failed` (looked at again every 5 minutes), not retried by backoff.
    #[error("{0}")]
    StageTimeout(String),
    /// A status or object could not be serialised.
    #[error("could not serialise: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl Error {
    /// The failure metric's `reason` label: the variant's name.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "Kube",
            Error::Config(_) => "Config",
            Error::WorkloadUnreachable { .. } => "WorkloadUnreachable",
            Error::Render(_) => "Render",
            Error::TooManyObjects(_) => "TooManyObjects",
            Error::Apply(_) => "Apply",
            Error::StageTimeout(_) => "StageTimeout",
            Error::Serialize(_) => "Serialize",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metric_label_is_the_variant() {
        let api = kube::Error::Api(kube::core::Status::failure("boom", "InternalError").with_code(500).boxed());
        let bad_json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let cluster = ClusterKey { namespace: "ns".into(), name: "c1".into() };
        let cases = [
            (Error::Kube(api), "Kube"),
            (Error::Config("metadata.yaml".into()), "Config"),
            (Error::WorkloadUnreachable { cluster, message: "no kubeconfig".into() }, "WorkloadUnreachable"),
            (Error::Render("template".into()), "Render"),
            (Error::TooManyObjects("6000 objects".into()), "TooManyObjects"),
            (Error::Apply("2 objects not applied".into()), "Apply"),
            (Error::StageTimeout("waitForPostCondition".into()), "StageTimeout"),
            (Error::Serialize(bad_json), "Serialize"),
        ];
        for (error, label) in cases {
            assert_eq!(error.metric_label(), label, "{error}");
            assert!(format!("{error:?}").starts_with(label), "the label names the variant: {error:?}");
        }
    }

    #[test]
    fn an_unreachable_workload_cluster_is_named() {
        let cluster = ClusterKey { namespace: "ns".into(), name: "c1".into() };
        let e = Error::WorkloadUnreachable {
            cluster,
            message: "the kubeconfig Secret ns/c1-kubeconfig does not exist yet".into(),
        };
        assert_eq!(e.to_string(), "workload cluster ns/c1: the kubeconfig Secret ns/c1-kubeconfig does not exist yet");
    }
}
