use serde_json::json;

use super::*;

fn v1beta2() -> Value {
    json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "spec": {
        "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevClusterTemplate", "name": "a"}},
        "controlPlane": {
            "templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate", "name": "b"},
            "machineInfrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachineTemplate", "name": "c"}}
        },
        "workers": {
            "machineDeployments": [{"class": "md", "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachineTemplate", "name": "d"}}}],
            "machinePools": [{"class": "mp", "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachinePoolTemplate", "name": "e"}}}]
        },
        "variables": [{"name": "x", "required": true, "schema": {"openAPIV3Schema": {"type": "string"}}}]
    }})
}

fn gk(group: &str, kind: &str) -> Option<GroupKind> {
    Some(GroupKind { group: group.into(), kind: kind.into() })
}

#[test]
fn both_api_versions_read_the_same() {
    let a = ClassShape::read(&v1beta2());
    // The same class as CAPI v1beta1 spells it: `ref`, `template.infrastructure.ref`.
    let b = ClassShape::read(&json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "ClusterClass", "spec": {
        "infrastructure": {"ref": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevClusterTemplate", "name": "a"}},
        "controlPlane": {
            "ref": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate", "name": "b"},
            "machineInfrastructure": {"ref": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachineTemplate", "name": "c"}}
        },
        "workers": {
            "machineDeployments": [{"class": "md", "template": {"infrastructure": {"ref": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachineTemplate", "name": "d"}}}}],
            "machinePools": [{"class": "mp", "template": {"infrastructure": {"ref": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachinePoolTemplate", "name": "e"}}}}]
        },
        "variables": [{"name": "x", "required": true, "schema": {"openAPIV3Schema": {"type": "string"}}}]
    }}));
    assert_eq!(a, b);
    assert_eq!(a.infrastructure, gk("infrastructure.cluster.x-k8s.io", "DevClusterTemplate"));
    assert_eq!(a.control_plane_machine, gk("infrastructure.cluster.x-k8s.io", "DevMachineTemplate"));
    assert_eq!(
        a.machine_pools,
        [WorkerClass {
            class: "mp".into(),
            infrastructure: gk("infrastructure.cluster.x-k8s.io", "DevMachinePoolTemplate")
        }]
    );
    assert_eq!(a.variables.len(), 1);
    assert!(a.kubernetes_versions.is_empty() && !a.upgrade_plan_extension);
}

/// Each change `ClusterClassesAreCompatible` forbids, and what it allows.
#[test]
fn class_compatibility_follows_cluster_api() {
    let base = ClassShape::read(&v1beta2());
    let changed = |f: &dyn Fn(&mut ClassShape)| {
        let mut s = base.clone();
        f(&mut s);
        s
    };
    let table: Vec<(&str, ClassShape, Option<&str>)> = vec![
        ("identical", base.clone(), None),
        (
            "a worker class added, one removed, bootstrap untouched: allowed",
            changed(&|s| {
                s.machine_deployments
                    .push(WorkerClass { class: "new".into(), infrastructure: gk("x.io", "OtherTemplate") });
                s.machine_pools.clear();
            }),
            None,
        ),
        (
            "infrastructure group",
            changed(&|s| s.infrastructure = gk("infrastructure.example.com", "DevClusterTemplate")),
            Some(
                "spec.infrastructure.templateRef.apiVersion: group of apiVersion cannot be changed from \"infrastructure.cluster.x-k8s.io\" to \"infrastructure.example.com\" to prevent incompatible changes in the Clusters",
            ),
        ),
        (
            "control plane kind",
            changed(&|s| s.control_plane = gk("controlplane.cluster.x-k8s.io", "RKE2ControlPlaneTemplate")),
            Some(
                "spec.controlPlane.templateRef.kind: kind cannot be changed from \"KubeadmControlPlaneTemplate\" to \"RKE2ControlPlaneTemplate\"",
            ),
        ),
        (
            "control plane machines dropped (a hosted control plane)",
            changed(&|s| s.control_plane_machine = None),
            Some(
                "spec.controlPlane.machineInfrastructure.templateRef.apiVersion: group of apiVersion cannot be changed from \"infrastructure.cluster.x-k8s.io\" to \"\"",
            ),
        ),
        (
            "a kept worker class on another kind",
            changed(&|s| {
                s.machine_deployments.insert(0, WorkerClass { class: "extra".into(), infrastructure: None });
                s.machine_deployments[1].infrastructure =
                    gk("infrastructure.cluster.x-k8s.io", "DockerMachineTemplate");
            }),
            Some(
                "spec.workers.machineDeployments[1].infrastructure.templateRef.kind: kind cannot be changed from \"DevMachineTemplate\" to \"DockerMachineTemplate\"",
            ),
        ),
        (
            "a kept machine pool class on another group",
            changed(&|s| {
                s.machine_pools[0].infrastructure = gk("infrastructure.example.com", "DevMachinePoolTemplate")
            }),
            Some(
                "spec.workers.machinePools[0].infrastructure.templateRef.apiVersion: group of apiVersion cannot be changed",
            ),
        ),
    ];
    for (case, desired, refused) in table {
        let got = classes_compatible(&base, &desired);
        match refused {
            None => assert_eq!(got, Ok(()), "{case}"),
            Some(why) => {
                let r = got.expect_err(case);
                let text = format!("{}: {}", r.field, r.message);
                assert!(text.starts_with(why), "{case}: {text}");
            }
        }
    }
    // Neither class has control plane machines: nothing to compare.
    let mut hosted = base.clone();
    hosted.control_plane_machine = None;
    assert_eq!(classes_compatible(&hosted, &hosted), Ok(()));
}

#[test]
fn the_workers_a_cluster_uses_must_exist() {
    let shape = ClassShape::read(&v1beta2());
    let cluster = |workers: serde_json::Value| -> CapiCluster {
        serde_json::from_value(json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "spec": {"topology": {"classRef": {"name": "cc"}, "version": "v1.35.0", "workers": workers}}}))
        .unwrap()
    };
    assert_eq!(
        workers_defined(&cluster(json!({"machineDeployments": [{"class": "md", "name": "a"}]})), &shape, "cc"),
        Ok(())
    );
    let r = workers_defined(
        &cluster(json!({"machineDeployments": [{"class": "md", "name": "a"}, {"class": "gone", "name": "b"}]})),
        &shape,
        "cc",
    )
    .unwrap_err();
    assert_eq!(r.field, "spec.topology.workers.machineDeployments[1].class");
    assert_eq!(r.message, "MachineDeploymentClass with name \"gone\" does not exist in ClusterClass \"cc\"");
    let r = workers_defined(&cluster(json!({"machinePools": [{"class": "other", "name": "p"}]})), &shape, "cc")
        .unwrap_err();
    assert_eq!(r.message, "MachinePoolClass with name \"other\" does not exist in ClusterClass \"cc\"");
    // No topology workers at all.
    assert_eq!(workers_defined(&cluster(json!(null)), &shape, "cc"), Ok(()));
}

#[test]
fn version_rules_follow_cluster_api() {
    let plain = ClassShape::default();
    let listed = ClassShape {
        kubernetes_versions: vec!["v1.33.4".into(), "v1.34.2".into(), "v1.35.1".into()],
        ..Default::default()
    };
    let planned = ClassShape { upgrade_plan_extension: true, ..Default::default() };
    let table: Vec<(&str, &str, &ClassShape, Option<&str>)> = vec![
        ("v1.33.4", "v1.33.4", &plain, None),
        ("v1.33.4", "v1.34.0", &plain, None),
        ("v1.33.4", "v1.35.0", &plain, Some("version cannot be increased from \"1.33.4\" to \"1.35.0\"")),
        ("v1.33.4", "v1.33.1", &plain, Some("version cannot be decreased from \"1.33.4\" to \"1.33.1\"")),
        // Build metadata is not part of the comparison, nor of the message.
        ("v1.33.4+rke2r1", "v1.33.4+rke2r2", &plain, None),
        // A class that lists its versions allows chained upgrades, to a listed version only.
        ("v1.33.4", "v1.35.1", &listed, None),
        (
            "v1.33.4",
            "v1.35.0",
            &listed,
            Some("\"v1.35.0\": version must match one of the versions defined in the ClusterClass"),
        ),
        ("v1.33.4", "v1.36.0", &planned, None),
        ("v1.36.0", "v1.35.0", &planned, Some("version cannot be decreased")),
    ];
    for (from, to, class, refused) in table {
        let got = version_allowed(from, to, class);
        match refused {
            None => assert_eq!(got, Ok(()), "{from} -> {to}"),
            Some(why) => {
                let r = got.expect_err(to);
                assert_eq!(r.field, "spec.topology.version");
                assert!(r.message.starts_with(why), "{from} -> {to}: {}", r.message);
            }
        }
    }
}
