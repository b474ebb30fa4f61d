//! `clusteraddon.yaml`: the addon stages of each lifecycle hook, and the CEL conditions a stage
//! waits for. Pure: reading the keyed objects from the workload cluster is the caller's job.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The file naming the stages, at the top of a release.
pub const CLUSTER_ADDON_FILE: &str = "clusteraddon.yaml";
/// The hook of a new cluster.
pub const AFTER_CONTROL_PLANE_INITIALIZED: &str = "AfterControlPlaneInitialized";
/// The hook before a Cluster moves to another release.
pub const BEFORE_CLUSTER_UPGRADE: &str = "BeforeClusterUpgrade";
/// The hook after a Cluster moved to another release.
pub const AFTER_CLUSTER_UPGRADE: &str = "AfterClusterUpgrade";

/// A parsed `clusteraddon.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAddonConfig {
    #[serde(default)]
    pub addon_stages: BTreeMap<String, Vec<Stage>>,
}

/// One stage: an addon applied or deleted, with optional waits before and after.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    /// The addon (a top-level directory of the addon bundle).
    pub name: String,
    /// `apply` (default) or `delete`.
    #[serde(default = "default_action")]
    pub action: Action,
    #[serde(default)]
    pub wait_for_pre_condition: Option<WaitCondition>,
    #[serde(default)]
    pub wait_for_post_condition: Option<WaitCondition>,
}

fn default_action() -> Action {
    Action::Apply
}

/// What a stage does with its addon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Apply,
    Delete,
}

impl Action {
    /// The name used in `clusteraddon.yaml` and in status.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Apply => "apply",
            Action::Delete => "delete",
        }
    }
}

/// A CEL expression over keyed objects of the workload cluster.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WaitCondition {
    #[serde(default)]
    pub objects: Vec<KeyedObject>,
    /// The expression; true when the wait is over.
    pub conditions: String,
}

/// An object of the workload cluster, bound to a CEL variable.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyedObject {
    /// The CEL variable name.
    pub key: String,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Why `clusteraddon.yaml` cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{CLUSTER_ADDON_FILE}: {0}")]
pub struct StagesError(pub String);

impl ClusterAddonConfig {
    /// Parses the file and checks every expression compiles and every addon exists.
    pub fn parse(text: &str, addons: &[String]) -> Result<Self, StagesError> {
        let config: ClusterAddonConfig = serde_saphyr::from_str(text).map_err(|e| StagesError(e.to_string()))?;
        for (hook, stages) in &config.addon_stages {
            for stage in stages {
                if !addons.contains(&stage.name) {
                    return Err(StagesError(format!(
                        "hook {hook}: stage names addon {:?}, which the bundle does not have",
                        stage.name
                    )));
                }
                for wait in [&stage.wait_for_pre_condition, &stage.wait_for_post_condition].into_iter().flatten() {
                    super::cel_budget::compile(&wait.conditions, super::cel_budget::ASSUMED_LIST_LEN).map_err(|e| {
                        StagesError(format!("hook {hook}, addon {}: {:?}: {e}", stage.name, trimmed(&wait.conditions)))
                    })?;
                }
            }
        }
        Ok(config)
    }

    /// The stages of `hook`; without a `clusteraddon.yaml` every addon is applied in one stage
    /// (see [`all_addons`]).
    pub fn stages(&self, hook: &str) -> &[Stage] {
        self.addon_stages.get(hook).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// The stages of a bundle without `clusteraddon.yaml`: every addon applied, in name order, one
/// after the other and without waits (one stage in status terms: nothing waits between them).
pub fn all_addons(addons: &[String]) -> Vec<Stage> {
    addons
        .iter()
        .map(|name| Stage {
            name: name.clone(),
            action: Action::Apply,
            wait_for_pre_condition: None,
            wait_for_post_condition: None,
        })
        .collect()
}

/// The outcome of evaluating a wait condition.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// The expression is true.
    Met,
    /// The expression is false (or could not be evaluated yet, e.g. an object is missing); the
    /// text names the expression and the values seen.
    NotMet(String),
}

/// Evaluates `wait` with `objects` bound to their keys (a missing object is `null`).
pub fn evaluate(wait: &WaitCondition, objects: &BTreeMap<String, Value>) -> WaitOutcome {
    let seen = describe_seen(wait, objects);
    // The cost is bounded by the objects actually bound, before anything runs.
    let longest = wait
        .objects
        .iter()
        .filter_map(|k| objects.get(&k.key))
        .map(super::cel_budget::longest_list)
        .fold(1.0, f64::max);
    let program = match super::cel_budget::compile(&wait.conditions, longest) {
        Ok(p) => p,
        Err(e) => return WaitOutcome::NotMet(format!("{:?} cannot run: {e}", trimmed(&wait.conditions))),
    };
    let mut context = cel::Context::default();
    for keyed in &wait.objects {
        let value = objects.get(&keyed.key).cloned().unwrap_or(Value::Null);
        match cel::to_value(value) {
            Ok(v) => context.add_variable_from_value(keyed.key.clone(), v),
            Err(e) => return WaitOutcome::NotMet(format!("{}: cannot convert the object: {e}", keyed.key)),
        }
    }
    match super::cel_budget::execute(&program, &context) {
        Ok(cel::Value::Bool(true)) => WaitOutcome::Met,
        Ok(cel::Value::Bool(false)) => WaitOutcome::NotMet(format!("{:?} is false; {seen}", wait.conditions)),
        Ok(other) => WaitOutcome::NotMet(format!("{:?} is not a boolean ({other:?}); {seen}", wait.conditions)),
        Err(e) => WaitOutcome::NotMet(format!("{:?} cannot be evaluated yet ({e}); {seen}", wait.conditions)),
    }
}

/// An expression as messages show it: at most 200 characters.
fn trimmed(expr: &str) -> String {
    match expr.char_indices().nth(200) {
        Some((at, _)) => format!("{}...", &expr[..at]),
        None => expr.to_string(),
    }
}

/// `key = kind namespace/name (missing | status: {...})` for each keyed object, short.
fn describe_seen(wait: &WaitCondition, objects: &BTreeMap<String, Value>) -> String {
    let parts: Vec<String> = wait
        .objects
        .iter()
        .map(|k| {
            let at = match &k.namespace {
                Some(ns) => format!("{} {ns}/{}", k.kind, k.name),
                None => format!("{} {}", k.kind, k.name),
            };
            match objects.get(&k.key) {
                None | Some(Value::Null) => format!("{} = {at} (missing)", k.key),
                Some(obj) => {
                    let mut status = obj.get("status").map(Value::to_string).unwrap_or_else(|| "{}".into());
                    if status.len() > 300 {
                        let cut = (0..=300).rev().find(|i| status.is_char_boundary(*i)).unwrap_or(0);
                        status.truncate(cut);
                        status.push('…');
                    }
                    format!("{} = {at} (status: {status})", k.key)
                }
            }
        })
        .collect();
    format!("seen: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SAMPLE: &str = include_str!("../../../releases/docker-ferrol-1-27-v2/clusteraddon.yaml");

    fn names() -> Vec<String> {
        vec!["cni".into(), "metrics-server".into()]
    }

    #[test]
    fn the_sample_parses_in_order() {
        let c = ClusterAddonConfig::parse(SAMPLE, &names()).unwrap();
        let first: Vec<&str> = c.stages(AFTER_CONTROL_PLANE_INITIALIZED).iter().map(|s| s.name.as_str()).collect();
        assert_eq!(first, ["cni", "metrics-server"]);
        let upgrade = c.stages(BEFORE_CLUSTER_UPGRADE);
        assert_eq!(upgrade.len(), 1);
        assert!(upgrade[0].wait_for_post_condition.is_some());
        assert!(c.stages(AFTER_CLUSTER_UPGRADE).is_empty());
    }

    #[test]
    fn unknown_addons_and_bad_expressions_are_refused() {
        let e = ClusterAddonConfig::parse(SAMPLE, &["cni".into()]).unwrap_err();
        assert!(e.to_string().contains("metrics-server"), "{e}");
        let bad = "addonStages:\n  AfterControlPlaneInitialized:\n    - name: cni\n      waitForPreCondition:\n        conditions: 'a >= '\n";
        assert!(ClusterAddonConfig::parse(bad, &names()).is_err());
    }

    #[test]
    fn conditions_see_the_keyed_objects_and_name_what_they_saw() {
        let c = ClusterAddonConfig::parse(SAMPLE, &names()).unwrap();
        let wait = c.stages(BEFORE_CLUSTER_UPGRADE)[0].wait_for_post_condition.clone().unwrap();
        let mut objects = BTreeMap::new();
        match evaluate(&wait, &objects) {
            WaitOutcome::NotMet(m) => {
                assert!(m.contains("ms.status.readyReplicas >= 1") && m.contains("missing"), "{m}")
            }
            WaitOutcome::Met => panic!("met without the object"),
        }
        objects.insert("ms".into(), json!({"status": {"readyReplicas": 0}}));
        match evaluate(&wait, &objects) {
            WaitOutcome::NotMet(m) => assert!(m.contains("is false") && m.contains("\"readyReplicas\":0"), "{m}"),
            WaitOutcome::Met => panic!("met with 0 replicas"),
        }
        objects.insert("ms".into(), json!({"status": {"readyReplicas": 2}}));
        assert_eq!(evaluate(&wait, &objects), WaitOutcome::Met);
    }

    #[test]
    fn without_a_file_every_addon_is_applied() {
        let s = all_addons(&names());
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|s| s.action == Action::Apply && s.wait_for_post_condition.is_none()));
    }
}
