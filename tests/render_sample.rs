//! Snapshots of the sample stack as rendered, and the render command's wiring.

use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clusterstack::release::ReleaseId;
use clusterstack::render::{self, ClusterObjects, ObjectKey, RenderContext};
use kube::api::DynamicObject;

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/docker-ferrol-1-27")
}

fn ctx() -> RenderContext {
    RenderContext::new(&ReleaseId::from_tag("docker-ferrol-1-27-v3").unwrap(), "capi-stacks")
}

fn to_yaml(objects: &[DynamicObject]) -> String {
    objects.iter().map(|o| format!("---\n{}", serde_saphyr::to_string(o).unwrap())).collect()
}

fn example_cluster() -> ClusterObjects {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/example-cluster.yaml")).unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    ClusterObjects { cluster: docs[0].clone(), control_plane: docs[1].clone(), infra_cluster: docs[2].clone() }
}

#[test]
fn cluster_class_snapshot() {
    let objects = render::render_cluster_class(&sample().join("cluster-class"), &ctx()).unwrap();
    let kinds: Vec<String> = objects.iter().map(|o| ObjectKey::of(o).kind).collect();
    assert_eq!(
        kinds,
        [
            "ClusterClass",
            "DockerClusterTemplate",
            "DockerMachineTemplate",
            "DockerMachineTemplate",
            "KubeadmConfigTemplate",
            "KubeadmControlPlaneTemplate"
        ]
    );
    // Every template the class references is rendered, under the referenced name.
    let class = &objects[0];
    assert_eq!(class.metadata.name.as_deref(), Some("docker-ferrol-1-27-v3"));
    let spec = &class.data["spec"];
    let refs = [
        &spec["controlPlane"]["ref"],
        &spec["controlPlane"]["machineInfrastructure"]["ref"],
        &spec["infrastructure"]["ref"],
        &spec["workers"]["machineDeployments"][0]["template"]["bootstrap"]["ref"],
        &spec["workers"]["machineDeployments"][0]["template"]["infrastructure"]["ref"],
    ];
    for r in refs {
        let found = objects.iter().any(|o| {
            o.types.as_ref().is_some_and(|t| t.kind == r["kind"] && t.api_version == r["apiVersion"])
                && o.metadata.name.as_deref() == r["name"].as_str()
        });
        assert!(found, "{r} is not rendered");
    }
    assert!(objects.iter().all(|o| o.metadata.namespace.as_deref() == Some("capi-stacks")));
    insta::assert_snapshot!("cluster_class_v3", to_yaml(&objects));
}

#[test]
fn addons_snapshot() {
    let charts =
        render::render_addons(&sample().join("cluster-addon"), &ctx().with_cluster(example_cluster())).unwrap();
    let names: Vec<&str> = charts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["cni", "metrics-server"]);
    let deployment = charts[1].objects.iter().find(|o| ObjectKey::of(o).kind == "Deployment").unwrap();
    // overwrite.yaml brought the Cluster's name and control plane endpoint in.
    let env = &deployment.data["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env[0]["value"], "172.18.0.3");
    assert_eq!(env[1]["value"], "6443");
    assert_eq!(deployment.metadata.labels.as_ref().unwrap()["clusterstack.x-k8s.io/cluster"], "demo");
    let daemonset = &charts[0].objects.iter().find(|o| ObjectKey::of(o).kind == "DaemonSet").unwrap();
    assert_eq!(daemonset.data["spec"]["template"]["spec"]["containers"][0]["env"][2]["value"], "10.96.0.0/16");
    for chart in &charts {
        insta::assert_snapshot!(format!("addon_{}", chart.name), to_yaml(&chart.objects));
    }
}

#[test]
fn rendering_is_deterministic() {
    let dir = sample().join("cluster-class");
    let one = to_yaml(&render::render_cluster_class(&dir, &ctx()).unwrap());
    let two = to_yaml(&render::render_cluster_class(&dir, &ctx()).unwrap());
    assert_eq!(one, two);
}

#[test]
fn two_releases_do_not_collide() {
    let dir = sample().join("cluster-class");
    let v3 = render::render_cluster_class(&dir, &ctx()).unwrap();
    let v4 = render::render_cluster_class(
        &dir,
        &RenderContext::new(&ReleaseId::from_tag("docker-ferrol-1-27-v4").unwrap(), "capi-stacks"),
    )
    .unwrap();
    for a in &v3 {
        assert!(v4.iter().all(|b| ObjectKey::of(a) != ObjectKey::of(b)), "{} is in both", ObjectKey::of(a));
    }
}

#[test]
fn the_command_line_is_consistent() {
    clusterstack::cli::Cli::command().debug_assert();
}

fn run_cli(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("CLUSTERSTACK_SOURCE")
        .env_remove("GIT_ORG_NAME")
        .env_remove("GIT_REPOSITORY_NAME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn render_command_reads_a_tag_through_the_source_and_a_release_directory() {
    let expected = to_yaml(
        &render::render_cluster_class(
            &sample().join("cluster-class"),
            &RenderContext::new(&ReleaseId::from_tag("docker-ferrol-1-27-v3").unwrap(), "ns9"),
        )
        .unwrap(),
    );
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path().to_str().unwrap();
    let by_tag = run_cli(&[
        "render",
        "docker-ferrol-1-27-v3",
        "--source",
        "dir:releases",
        "--cache",
        cache,
        "--namespace",
        "ns9",
    ]);
    assert_eq!(by_tag, expected);
    let by_dir = run_cli(&["render", "releases/docker-ferrol-1-27-v3", "--namespace", "ns9"]);
    assert_eq!(by_dir, expected);

    // Addons of v1 (metrics-server v0.6.4) for the example Cluster, as JSON.
    let json = run_cli(&[
        "render",
        "releases/docker-ferrol-1-27-v1",
        "--addons",
        "--cluster",
        "templates/example-cluster.yaml",
        "-o",
        "json",
    ]);
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    let items = list["items"].as_array().unwrap();
    let deployment = items.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.k8s.io/metrics-server/metrics-server:v0.6.4"
    );
    assert_eq!(items[0]["kind"], "ClusterRole", "apply order within the first addon");
}
