//! What Cluster API's Cluster webhook refuses when a Cluster moves to another ClusterClass, found
//! before the move so the rollout can say why a Cluster stays where it is instead of failing the
//! write. The rules and their wording follow CAPI v1.14 (`core/webhooks/admission/cluster.go`,
//! `internal/topology/check/compatibility.go`):
//!
//! - the two classes must be compatible (`ClusterClassesAreCompatible`): the infrastructure
//!   cluster, control plane and control plane machine templates, and the infrastructure template
//!   of every worker class both classes have, keep their API group and kind;
//! - every worker class the Cluster's topology uses must exist in the new class
//!   (`MachineDeploymentTopologiesAreValidAndDefinedInClusterClass`, and for MachinePools);
//! - the Kubernetes version may not go down, nor up by two minors or more unless the class lists
//!   its `kubernetesVersions` or names a GenerateUpgradePlan extension; when it lists them, the
//!   version must be one of them;
//! - the variables must fit the class ([`super::variables`]).

use std::fmt;

use serde_json::Value;

use crate::controller::runtime::clusters::CapiCluster;
use crate::release::KubernetesVersion;

use super::variables::{ClassVariable, class_variables};

/// The ClusterClasses of a namespace by name; `None`: read and not found.
pub type Classes = std::collections::BTreeMap<String, Option<ClassShape>>;

/// An API group and kind, as CAPI compares template references.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

impl GroupKind {
    /// From a reference's `apiVersion` and `kind`; `None` when the reference is absent.
    fn of(reference: &Value) -> Option<Self> {
        let api_version = reference["apiVersion"].as_str()?;
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        Some(Self { group: group.to_string(), kind: reference["kind"].as_str().unwrap_or_default().to_string() })
    }
}

/// A worker class (MachineDeployment or MachinePool) and its infrastructure template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerClass {
    pub class: String,
    pub infrastructure: Option<GroupKind>,
}

/// What a rollout needs of a ClusterClass.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassShape {
    pub variables: Vec<ClassVariable>,
    pub infrastructure: Option<GroupKind>,
    pub control_plane: Option<GroupKind>,
    pub control_plane_machine: Option<GroupKind>,
    pub machine_deployments: Vec<WorkerClass>,
    pub machine_pools: Vec<WorkerClass>,
    /// `spec.kubernetesVersions` (CAPI v1.12+).
    pub kubernetes_versions: Vec<String>,
    /// Whether `spec.upgrade.external.generateUpgradePlanExtension` is set.
    pub upgrade_plan_extension: bool,
}

/// A template reference in either API version: v1beta2 `templateRef`, v1beta1 `ref`.
fn template(at: &Value) -> Option<GroupKind> {
    GroupKind::of(&at["templateRef"]).or_else(|| GroupKind::of(&at["ref"]))
}

fn workers(list: &Value) -> Vec<WorkerClass> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|w| {
                    Some(WorkerClass {
                        class: w["class"].as_str()?.to_string(),
                        // v1beta2 `infrastructure`, v1beta1 `template.infrastructure`.
                        infrastructure: template(&w["infrastructure"])
                            .or_else(|| template(&w["template"]["infrastructure"])),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

impl ClassShape {
    /// Reads a ClusterClass object (v1beta1 or v1beta2, as JSON).
    pub fn read(class: &Value) -> Self {
        let spec = &class["spec"];
        Self {
            variables: class_variables(class),
            infrastructure: template(&spec["infrastructure"]),
            control_plane: template(&spec["controlPlane"]),
            control_plane_machine: template(&spec["controlPlane"]["machineInfrastructure"]),
            machine_deployments: workers(&spec["workers"]["machineDeployments"]),
            machine_pools: workers(&spec["workers"]["machinePools"]),
            kubernetes_versions: spec["kubernetesVersions"]
                .as_array()
                .map(|v| v.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
            upgrade_plan_extension: spec["upgrade"]["external"]["generateUpgradePlanExtension"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
        }
    }
}

/// A refusal: the rule CAPI applies, in its words, with the field it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub message: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cluster API would refuse it: {}: {}", self.field, self.message)
    }
}

fn refuse(field: impl Into<String>, message: String) -> Result<(), Refusal> {
    Err(Refusal { field: field.into(), message })
}

/// CAPI's `ClusterClassTemplateAreCompatible`: the group and kind of a template stay.
fn same_template(current: Option<&GroupKind>, desired: Option<&GroupKind>, field: &str) -> Result<(), Refusal> {
    let empty = GroupKind::default();
    let (current, desired) = (current.unwrap_or(&empty), desired.unwrap_or(&empty));
    if current.group != desired.group {
        return refuse(
            format!("{field}.apiVersion"),
            format!(
                "group of apiVersion cannot be changed from {:?} to {:?} to prevent incompatible changes in the Clusters",
                current.group, desired.group
            ),
        );
    }
    if current.kind != desired.kind {
        return refuse(
            format!("{field}.kind"),
            format!(
                "kind cannot be changed from {:?} to {:?} to prevent incompatible changes in the Clusters",
                current.kind, desired.kind
            ),
        );
    }
    Ok(())
}

/// Whether Cluster API lets a Cluster on `current` move to `desired` (`ClusterClassesAreCompatible`).
pub fn classes_compatible(current: &ClassShape, desired: &ClassShape) -> Result<(), Refusal> {
    same_template(current.infrastructure.as_ref(), desired.infrastructure.as_ref(), "spec.infrastructure.templateRef")?;
    same_template(current.control_plane.as_ref(), desired.control_plane.as_ref(), "spec.controlPlane.templateRef")?;
    // Compared whenever either class has one: CAPI compares a missing reference as empty.
    if current.control_plane_machine.is_some() || desired.control_plane_machine.is_some() {
        same_template(
            current.control_plane_machine.as_ref(),
            desired.control_plane_machine.as_ref(),
            "spec.controlPlane.machineInfrastructure.templateRef",
        )?;
    }
    for (list, current_list, path) in [
        (&desired.machine_deployments, &current.machine_deployments, "spec.workers.machineDeployments"),
        (&desired.machine_pools, &current.machine_pools, "spec.workers.machinePools"),
    ] {
        for (i, class) in list.iter().enumerate() {
            for old in current_list.iter().filter(|o| o.class == class.class) {
                same_template(
                    old.infrastructure.as_ref(),
                    class.infrastructure.as_ref(),
                    &format!("{path}[{i}].infrastructure.templateRef"),
                )?;
            }
        }
    }
    Ok(())
}

/// Whether the worker classes the Cluster uses exist in `desired` (named `class_name`).
pub fn workers_defined(cluster: &CapiCluster, desired: &ClassShape, class_name: &str) -> Result<(), Refusal> {
    let Some(workers) = cluster.spec.topology.as_ref().and_then(|t| t.workers.as_ref()) else { return Ok(()) };
    for (used, defined, path, what) in [
        (&workers.machine_deployments, &desired.machine_deployments, "machineDeployments", "MachineDeploymentClass"),
        (&workers.machine_pools, &desired.machine_pools, "machinePools", "MachinePoolClass"),
    ] {
        for (i, w) in used.iter().enumerate() {
            if !defined.iter().any(|d| d.class == w.class) {
                return refuse(
                    format!("spec.topology.workers.{path}[{i}].class"),
                    format!("{what} with name {:?} does not exist in ClusterClass {class_name:?}", w.class),
                );
            }
        }
    }
    Ok(())
}

/// CAPI's version rules for a topology version change from `from` to `to` on class `desired`.
pub fn version_allowed(from: &str, to: &str, desired: &ClassShape) -> Result<(), Refusal> {
    if !desired.kubernetes_versions.is_empty() && !desired.kubernetes_versions.iter().any(|v| v == to) {
        return refuse(
            "spec.topology.version",
            format!("{to:?}: version must match one of the versions defined in the ClusterClass"),
        );
    }
    let (Ok(have), Ok(want)) = (from.parse::<KubernetesVersion>(), to.parse::<KubernetesVersion>()) else {
        return Ok(());
    };
    // CAPI compares major, minor and patch and prints them without the `v` and the build.
    let core = |v: &KubernetesVersion| (v.major, v.minor, v.patch);
    let show = |v: &KubernetesVersion| format!("\"{}.{}.{}\"", v.major, v.minor, v.patch);
    if core(&want) < core(&have) {
        return refuse(
            "spec.topology.version",
            format!("version cannot be decreased from {} to {}", show(&have), show(&want)),
        );
    }
    let ceiling = desired.kubernetes_versions.is_empty() && !desired.upgrade_plan_extension;
    if ceiling && core(&want) >= (have.major, have.minor + 2, 0) {
        return refuse(
            "spec.topology.version",
            format!("version cannot be increased from {} to {}", show(&have), show(&want)),
        );
    }
    Ok(())
}

#[cfg(test)]
#[path = "class_tests.rs"]
mod tests;
