//! The apply order: one table of stages, used by the render (which returns objects sorted) and
//! by the engine (which applies one stage at a time, waiting for CRDs before what follows).
//! Deletes go the other way.

use kube::api::DynamicObject;

/// The stage of a kind: lower stages are applied first and deleted last.
///
/// 0 CustomResourceDefinitions, 1 Namespaces, 2 cluster-wide RBAC (ClusterRole,
/// ClusterRoleBinding), 3 kinds ending in `Class`, 4 the rest. A `Namespace` of another group is
/// an ordinary object.
pub fn stage(group: &str, kind: &str) -> u8 {
    match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 0,
        ("", "Namespace") => 1,
        (_, "ClusterRole" | "ClusterRoleBinding") => 2,
        (_, k) if k.ends_with("Class") => 3,
        _ => 4,
    }
}

/// `apps/v1` → `apps`, `v1` → `` (the core group); kind; both empty when the object has none.
fn group_kind(object: &DynamicObject) -> (&str, &str) {
    let (api_version, kind) =
        object.types.as_ref().map(|t| (t.api_version.as_str(), t.kind.as_str())).unwrap_or(("", ""));
    (api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or(""), kind)
}

/// The stage of an object (see [`stage`]).
pub fn stage_of(object: &DynamicObject) -> u8 {
    let (group, kind) = group_kind(object);
    stage(group, kind)
}

/// Sorts objects into the deterministic apply order: by stage, then kind, name, namespace and
/// group. Stable, so objects that compare equal keep their rendered order.
pub fn sort_for_apply(objects: &mut [DynamicObject]) {
    sort_for_apply_by(objects, |o| o);
}

/// [`sort_for_apply`] of items that each hold an object (`object` finds it).
pub fn sort_for_apply_by<T>(items: &mut [T], object: impl Fn(&T) -> &DynamicObject) {
    // The key is computed once per object, not once per comparison.
    items.sort_by_cached_key(|item| {
        let o = object(item);
        let (group, kind) = group_kind(o);
        let name = o.metadata.name.clone().unwrap_or_default();
        (stage(group, kind), kind.to_string(), name, o.metadata.namespace.clone(), group.to_string())
    });
}

/// Splits objects, in the order given, into consecutive runs of one stage: the engine applies
/// a run at a time.
pub(super) fn runs(objects: &[DynamicObject]) -> Vec<&[DynamicObject]> {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=objects.len() {
        if i == objects.len() || stage_of(&objects[i]) != stage_of(&objects[start]) {
            runs.push(&objects[start..i]);
            start = i;
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> DynamicObject {
        let mut v = serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
        if let Some(ns) = ns {
            v["metadata"]["namespace"] = ns.into();
        }
        serde_json::from_value(v).unwrap()
    }

    fn names(objects: &[DynamicObject]) -> Vec<String> {
        objects
            .iter()
            .map(|o| format!("{}/{}", o.types.as_ref().unwrap().kind, o.metadata.name.as_deref().unwrap()))
            .collect()
    }

    #[test]
    fn stages_follow_the_table() {
        assert_eq!(stage("apiextensions.k8s.io", "CustomResourceDefinition"), 0);
        assert_eq!(stage("", "Namespace"), 1);
        assert_eq!(stage("rbac.authorization.k8s.io", "ClusterRoleBinding"), 2);
        assert_eq!(stage("cluster.x-k8s.io", "ClusterClass"), 3);
        assert_eq!(stage("", "ConfigMap"), 4);
        // A Namespace kind of another group is an ordinary object.
        assert_eq!(stage("example.com", "Namespace"), 4);
        assert_eq!(stage_of(&obj("example.com/v1", "Namespace", None, "n")), 4);
        assert_eq!(stage_of(&obj("v1", "Namespace", None, "n")), 1);
    }

    #[test]
    fn apply_order_puts_crds_namespaces_rbac_classes_first() {
        let mut objects = vec![
            obj("apps/v1", "Deployment", Some("kube-system"), "b"),
            obj("cluster.x-k8s.io/v1beta1", "ClusterClass", Some("default"), "cc"),
            obj("v1", "ConfigMap", Some("kube-system"), "a"),
            obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", None, "z"),
            obj("v1", "Namespace", None, "ns"),
            obj("rbac.authorization.k8s.io/v1", "ClusterRole", None, "y"),
            obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "foos.example.com"),
            obj("storage.k8s.io/v1", "StorageClass", None, "fast"),
            obj("apps/v1", "Deployment", Some("kube-system"), "a"),
            obj("rbac.authorization.k8s.io/v1", "Role", Some("kube-system"), "r"),
            obj("example.com/v1", "Namespace", None, "not-a-namespace"),
        ];
        sort_for_apply(&mut objects);
        assert_eq!(
            names(&objects),
            [
                "CustomResourceDefinition/foos.example.com",
                "Namespace/ns",
                "ClusterRole/y",
                "ClusterRoleBinding/z",
                "ClusterClass/cc",
                "StorageClass/fast",
                "ConfigMap/a",
                "Deployment/a",
                "Deployment/b",
                "Namespace/not-a-namespace",
                "Role/r",
            ]
        );
    }

    #[test]
    fn apply_order_is_independent_of_input_order() {
        let a = vec![
            obj("v1", "Service", Some("x"), "s"),
            obj("v1", "Namespace", None, "x"),
            obj("v1", "Service", Some("a"), "s"),
        ];
        let mut b = a.clone();
        b.reverse();
        let (mut a, mut b) = (a, b);
        sort_for_apply(&mut a);
        sort_for_apply(&mut b);
        let key = |v: &[DynamicObject]| {
            v.iter().map(|o| (o.metadata.namespace.clone(), o.metadata.name.clone())).collect::<Vec<_>>()
        };
        assert_eq!(key(&a), key(&b));
        assert_eq!(a[1].metadata.namespace.as_deref(), Some("a"));
    }

    #[test]
    fn runs_split_where_the_stage_changes() {
        let objects = vec![
            obj("v1", "Namespace", None, "a"),
            obj("v1", "Namespace", None, "b"),
            obj("v1", "ConfigMap", Some("a"), "c"),
            obj("v1", "Namespace", None, "d"),
        ];
        let runs: Vec<Vec<String>> = runs(&objects).into_iter().map(names).collect();
        assert_eq!(runs, [vec!["Namespace/a", "Namespace/b"], vec!["ConfigMap/c"], vec!["Namespace/d"]]);
        assert!(super::runs(&[]).is_empty());
    }
}
