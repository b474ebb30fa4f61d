//! `clusterstack plan -f rollout.yaml --clusters clusters.yaml`: the waves of a
//! ClusterStackRollout, offline. The same decision the operator makes
//! ([`decide`](crate::controller::rollout::decide::decide)) on a rollout without status: which
//! Cluster is in which wave, from and to, which move first, which are incompatible and why.
//!
//! The rollout's ClusterStack comes from the same file, its releases from the source listing
//! (their Kubernetes versions from `--existing` ClusterStackReleases when given), the target
//! ClusterClass's `spec.variables` from a ClusterClass in the `--clusters` file when there is one.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::ResourceExt;
use serde_json::Value;

use crate::api::{ClusterStack, ClusterStackRelease, ClusterStackRollout};
use crate::controller::rollout::class::{ClassShape, Classes, WorkerClass};
use crate::controller::rollout::decide::{self, ClusterInput, Releases, state};
use crate::controller::rollout::rules;
use crate::controller::rollout::variables::ClassVariable;
use crate::controller::rollout::view::ReleaseView;
use crate::controller::runtime::clusters::{CapiCluster, WorkerTopology, Workers};
use crate::release::ReleaseId;

/// A target class that lets every Cluster through: the variables and worker classes they use.
fn permissive(clusters: &[CapiCluster]) -> ClassShape {
    let mut variables: Vec<String> =
        clusters.iter().flat_map(|c| c.variables().iter().map(|v| v.name.clone())).collect();
    variables.sort();
    variables.dedup();
    let workers = |of: fn(&Workers) -> &Vec<WorkerTopology>| -> Vec<WorkerClass> {
        let mut names: Vec<&str> = clusters
            .iter()
            .filter_map(|c| c.spec.topology.as_ref()?.workers.as_ref())
            .flat_map(|w| of(w).iter().map(|t| t.class.as_str()))
            .collect();
        names.sort();
        names.dedup();
        names.into_iter().map(|class| WorkerClass { class: class.to_string(), infrastructure: None }).collect()
    };
    ClassShape {
        variables: variables
            .into_iter()
            .map(|name| ClassVariable { name, required: false, schema: Value::Null })
            .collect(),
        machine_deployments: workers(|w| &w.machine_deployments),
        machine_pools: workers(|w| &w.machine_pools),
        ..ClassShape::default()
    }
}

/// The plan of each rollout as text. `listed`: per stack (`namespace/name`), the releases its
/// source lists; `classes`: ClusterClass objects (as JSON) by name.
pub fn rollout_plan(
    rollouts: &[ClusterStackRollout],
    stacks: &[ClusterStack],
    listed: &BTreeMap<String, Vec<ReleaseId>>,
    existing: &[ClusterStackRelease],
    clusters: &[CapiCluster],
    classes: &BTreeMap<String, Value>,
    now: Timestamp,
) -> String {
    let mut out = String::new();
    for ro in rollouts {
        let ns = ro.namespace().unwrap_or_default();
        let key = format!("{ns}/{}", ro.name_any());
        let stack_name = &ro.spec.cluster_stack_ref.name;
        let Some(stack) =
            stacks.iter().find(|s| s.name_any() == *stack_name && s.namespace().unwrap_or_default() == ns)
        else {
            out.push_str(&format!(
                "ClusterStackRollout {key}: its ClusterStack {ns}/{stack_name} is not in the file\n"
            ));
            continue;
        };
        let versions: BTreeMap<String, String> = existing
            .iter()
            .filter(|r| r.namespace().unwrap_or_default() == ns)
            .map(|r| (r.name_any(), r.status.as_ref().map(|s| s.kubernetes_version.clone()).unwrap_or_default()))
            .collect();
        let releases: Vec<ReleaseView> = listed
            .get(&format!("{ns}/{stack_name}"))
            .into_iter()
            .flatten()
            .filter(|id| rules::stack_release(&stack.spec, id))
            .map(|id| ReleaseView {
                id: id.clone(),
                ready: true,
                kubernetes_version: versions.get(&id.tag()).cloned().unwrap_or_default(),
            })
            .collect();
        let target = match rules::resolve_target(&ro.spec.target, &stack.spec, &releases) {
            Ok(t) => t,
            Err(e) => {
                out.push_str(&format!("ClusterStackRollout {key}: no target: {e}\n"));
                continue;
            }
        };
        let class = target.id.class_name();
        // The classes in the file are compared as Cluster API would. Without the target class
        // nothing is: every variable and worker class of the Clusters passes (the plan says so).
        let checked = classes.contains_key(&class);
        let shapes: Classes = if checked {
            classes.iter().map(|(name, c)| (name.clone(), Some(ClassShape::read(c)))).collect()
        } else {
            Classes::from([(class.clone(), Some(permissive(clusters)))])
        };
        let inputs: Vec<ClusterInput<'_>> = clusters.iter().map(|c| ClusterInput { cluster: c, addon: None }).collect();
        let decision = decide::decide(
            ro,
            &inputs,
            &Releases { stack: Some(&stack.spec), releases: &releases, classes: &shapes },
            now,
        );
        let version =
            if target.kubernetes_version.is_empty() { "(version unknown)" } else { &target.kubernetes_version };
        out.push_str(&format!(
            "ClusterStackRollout {key}: target {} ({class}, Kubernetes {version}); {}\n",
            target.id.tag(),
            decision.status.phase
        ));
        if !checked {
            out.push_str(&format!(
                "  variables and class compatibility not checked: no ClusterClass {class} in --clusters (add `kubectl get clusterclass {class} -n {ns} -o yaml`)\n"
            ));
        }
        let by_key: BTreeMap<(String, String), &CapiCluster> = clusters
            .iter()
            .map(|c| {
                ((c.metadata.namespace.clone().unwrap_or_default(), c.metadata.name.clone().unwrap_or_default()), c)
            })
            .collect();
        let waves: Vec<String> = if ro.spec.waves.is_empty() {
            vec![decide::DEFAULT_WAVE.to_string()]
        } else {
            ro.spec.waves.iter().map(|w| w.name.clone()).collect()
        };
        for (i, wave) in waves.iter().enumerate() {
            let entries: Vec<_> = decision.status.clusters.iter().filter(|e| &e.wave == wave).collect();
            let max = ro.spec.waves.get(i).and_then(|w| w.max_concurrent.as_ref());
            let max = rules::max_concurrent(max, entries.len());
            out.push_str(&format!("  wave {wave} ({} Clusters, {max} at once)\n", entries.len()));
            for e in entries {
                let Some(c) = by_key.get(&(e.namespace.clone(), e.name.clone())) else { continue };
                let from = format!("{} {}", c.class().map(|(n, _)| n).unwrap_or_default(), c.kubernetes_version());
                let name = format!("{}/{}", e.namespace, e.name);
                let line = match e.state.as_str() {
                    state::HEALTHY => format!("    {name:<28} {from:<36} already on the target\n"),
                    state::INCOMPATIBLE => format!("    {name:<28} {from:<36} INCOMPATIBLE: {}\n", e.message),
                    s => {
                        // Unknown without `--existing`: the release's metadata.yaml is not read offline.
                        let to_version = if target.kubernetes_version.is_empty() {
                            "(version unknown)"
                        } else {
                            &target.kubernetes_version
                        };
                        let first = if s == state::MOVING { "  (moves first)" } else { "" };
                        format!("    {name:<28} {from:<36} -> {class} {to_version}{first}\n")
                    }
                };
                out.push_str(&line);
            }
        }
        let outside = clusters.iter().filter(|c| {
            c.release().is_some_and(|id| rules::stack_release(&stack.spec, &id))
                && !decision.status.clusters.iter().any(|e| {
                    Some(&e.name) == c.metadata.name.as_ref() && Some(&e.namespace) == c.metadata.namespace.as_ref()
                })
        });
        for c in outside {
            out.push_str(&format!("  not in any wave: {}\n", c.key()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    fn cluster(name: &str, class: &str, labels: Value, vars: Value) -> CapiCluster {
        obj(json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "team", "labels": labels},
            "spec": {"topology": {"class": class, "classNamespace": "stacks", "version": "v1.27.3", "variables": vars}}}))
    }

    #[test]
    fn shows_waves_first_moves_and_incompatible_clusters() {
        let stack: ClusterStack = obj(json!({"apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStack",
            "metadata": {"name": "ferrol", "namespace": "stacks"},
            "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27"}}));
        let ro: ClusterStackRollout =
            obj(json!({"apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStackRollout",
            "metadata": {"name": "ferrol", "namespace": "stacks"},
            "spec": {"clusterStackRef": {"name": "ferrol"}, "waves": [
                {"name": "canary", "clusterSelector": {"matchLabels": {"rollout": "canary"}}},
                {"name": "rest", "maxConcurrent": 2}]}}));
        let listed = BTreeMap::from([(
            "stacks/ferrol".to_string(),
            vec![
                ReleaseId::from_tag("docker-ferrol-1-27-v1").unwrap(),
                ReleaseId::from_tag("docker-ferrol-1-27-v3").unwrap(),
            ],
        )]);
        let existing: Vec<ClusterStackRelease> = vec![obj(json!({"apiVersion": "clusterstack.x-k8s.io/v1alpha1",
            "kind": "ClusterStackRelease", "metadata": {"name": "docker-ferrol-1-27-v3", "namespace": "stacks"},
            "spec": {}, "status": {"kubernetesVersion": "v1.27.11"}}))];
        let ok = json!([{"name": "workers", "value": 2}]);
        let clusters = vec![
            cluster("a", "docker-ferrol-1-27-v1", json!({"rollout": "canary"}), ok.clone()),
            cluster("b", "docker-ferrol-1-27-v1", json!({}), ok.clone()),
            cluster("c", "docker-ferrol-1-27-v1", json!({}), json!([{"name": "workers", "value": 0}])),
            cluster("d", "docker-ferrol-1-27-v3", json!({}), ok),
            cluster("e", "someone-elses-class", json!({}), json!([])),
        ];
        let classes = BTreeMap::from([(
            "docker-ferrol-1-27-v3".to_string(),
            json!({"spec": {"variables": [{"name": "workers", "required": true, "schema": {"openAPIV3Schema": {"type": "integer", "minimum": 1}}}]}}),
        )]);
        let text = rollout_plan(
            std::slice::from_ref(&ro),
            std::slice::from_ref(&stack),
            &listed,
            &existing,
            &clusters,
            &classes,
            Timestamp::UNIX_EPOCH,
        );
        assert!(text.starts_with("ClusterStackRollout stacks/ferrol: target docker-ferrol-1-27-v3 (docker-ferrol-1-27-v3, Kubernetes v1.27.11); Progressing\n"), "{text}");
        assert!(text.contains("  wave canary (1 Clusters, 1 at once)\n    team/a"), "{text}");
        assert!(text.contains("-> docker-ferrol-1-27-v3 v1.27.11  (moves first)"), "{text}");
        assert!(text.contains("  wave rest (3 Clusters, 2 at once)\n    team/b"), "{text}");
        assert!(text.contains("team/c") && text.contains("INCOMPATIBLE: docker-ferrol-1-27-v1 to docker-ferrol-1-27-v3: Cluster API would refuse it: spec.topology.variables[workers].value: Invalid value: 0"), "{text}");
        assert!(text.contains("team/d") && text.contains("already on the target"), "{text}");
        assert!(!text.contains("team/e"), "{text}");
        assert_eq!(text.matches("(moves first)").count(), 1, "only the canary moves first: {text}");
        // Without the class: variables not checked, c is not incompatible.
        let text = rollout_plan(
            std::slice::from_ref(&ro),
            std::slice::from_ref(&stack),
            &listed,
            &existing,
            &clusters,
            &BTreeMap::new(),
            Timestamp::UNIX_EPOCH,
        );
        assert!(text.contains("variables and class compatibility not checked"), "{text}");
        assert!(!text.contains("INCOMPATIBLE"), "{text}");
        // With the class the Clusters are on too: compared as Cluster API's webhook would.
        let infra = |kind: &str| json!({"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": kind, "name": "t"}});
        let mut classes = classes;
        classes.get_mut("docker-ferrol-1-27-v3").unwrap()["spec"]["infrastructure"] = infra("DevClusterTemplate");
        classes.insert(
            "docker-ferrol-1-27-v1".into(),
            json!({"spec": {"infrastructure": infra("DockerClusterTemplate")}}),
        );
        let text = rollout_plan(&[ro], &[stack], &listed, &existing, &clusters, &classes, Timestamp::UNIX_EPOCH);
        assert!(
            text.contains("team/a") && text.contains("INCOMPATIBLE: docker-ferrol-1-27-v1 to docker-ferrol-1-27-v3: Cluster API would refuse it: spec.infrastructure.templateRef.kind: kind cannot be changed from \"DockerClusterTemplate\" to \"DevClusterTemplate\""),
            "{text}"
        );
        assert!(!text.contains("->"), "nothing moves: {text}");
    }
}
