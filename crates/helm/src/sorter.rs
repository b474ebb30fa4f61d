//! Helm's manifest sorter's order: `releaseutil.InstallOrder`, the kinds in the order helm
//! installs (and `helm template` prints) them; other kinds after these, alphabetically.

/// `releaseutil.InstallOrder` of helm v4.
pub const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// The sort key of a kind in helm's install order: a stable sort by it is helm's
/// `sortManifestsByKind` (known kinds by their place, then unknown ones by name, equal keys
/// keeping their order).
pub fn install_rank(kind: &str) -> (usize, &str) {
    match INSTALL_ORDER.iter().position(|k| *k == kind) {
        Some(i) => (i, ""),
        None => (INSTALL_ORDER.len(), kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_kinds_first_in_helms_order_then_the_others_by_name() {
        let mut kinds = vec!["Zeta", "Deployment", "", "Alpha", "Namespace", "Deployment", "ConfigMap", "Alpha"];
        let tagged: Vec<(usize, &str)> = kinds.iter().copied().enumerate().collect();
        let mut sorted = tagged.clone();
        sorted.sort_by_key(|(_, k)| install_rank(k));
        kinds.sort_by_key(|k| install_rank(k));
        assert_eq!(kinds, ["Namespace", "ConfigMap", "Deployment", "Deployment", "", "Alpha", "Alpha", "Zeta"]);
        // Equal kinds keep their order.
        let deployments: Vec<usize> = sorted.iter().filter(|(_, k)| *k == "Deployment").map(|(i, _)| *i).collect();
        assert_eq!(deployments, [1, 5]);
    }
}
