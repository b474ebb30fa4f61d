//! The other format changes of the stack repository and of open csctl changes, each read back
//! from releases built as the stack repository's build script builds them
//! (`support/stack_script.rs`): a stack name with a dash (`scs-hcp`), an RKE2 Kubernetes version
//! (`v1.33.4+rke2r1`), a `clusterClass` component in `metadata.yaml`, a hosted-control-plane class
//! without `machineInfrastructure`, a v1beta2 ClusterClass over v1beta1 templates beside a stack
//! of v1beta1 classes, `hashes.json` holding only the git sha, and `publish` writing csctl's form
//! next to the new one. Rendered against the real helm; applied by the operator against the API
//! server double.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clusterstack::source::SourceSpec;
use serde_json::{Value as Json, json};
use support::operator::{NS, Operator, condition, ready, release, server, settings};

#[path = "../crates/helm/tests/support/helm.rs"]
mod helm;
#[path = "support/registry.rs"]
mod registry;
#[path = "support/stack_script.rs"]
mod stack_script;

use stack_script::{Stack, build_like_the_stack_script, oras_available, oras_push, run, write};

const RKE2: &str = "v1.33.4+rke2r1";

/// `openstack/scs-hcp` for RKE2 1.33: a hosted control plane, so its v1beta1 ClusterClass has no
/// `machineInfrastructure`; one addon printing the Kubernetes version it is rendered for.
fn hcp_source(dir: &Path) {
    write(
        dir,
        &[
            ("cluster-class/Chart.yaml", "apiVersion: v2\nname: cluster-class\nversion: 0.1.0\n"),
            (
                "cluster-class/templates/cluster-class.yaml",
                "apiVersion: cluster.x-k8s.io/v1beta1
kind: ClusterClass
metadata:
  name: {{ .Release.Name }}-{{ .Chart.Version }}
spec:
  controlPlane:
    ref:
      apiVersion: controlplane.cluster.x-k8s.io/v1alpha1
      kind: HostedControlPlaneTemplate
      name: {{ .Release.Name }}-{{ .Chart.Version }}-control-plane
    # No machineInfrastructure: the control plane runs in the management cluster.
  infrastructure:
    ref:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
      kind: OpenStackClusterTemplate
      name: {{ .Release.Name }}-{{ .Chart.Version }}-cluster
",
            ),
            (
                "cluster-class/templates/hosted-control-plane-template.yaml",
                "apiVersion: controlplane.cluster.x-k8s.io/v1alpha1\nkind: HostedControlPlaneTemplate\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}-control-plane\nspec:\n  template:\n    spec:\n      replicas: 3\n",
            ),
            (
                "cluster-class/templates/openstack-cluster-template.yaml",
                "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: OpenStackClusterTemplate\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}-cluster\nspec:\n  template:\n    spec: {}\n",
            ),
            ("cluster-addon/ccm/Chart.yaml", "apiVersion: v2\nname: ccm\nversion: 0.1.0\n"),
            (
                "cluster-addon/ccm/templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ccm-kube\n  namespace: {{ .Release.Namespace }}\ndata:\n  version: {{ .Capabilities.KubeVersion.Version | quote }}\n  minor: {{ .Capabilities.KubeVersion.Minor | quote }}\n  {{- if semverCompare \">=1.33.0\" .Capabilities.KubeVersion.Version }}\n  recent: \"yes\"\n  {{- end }}\n",
            ),
            (
                "clusteraddon.yaml",
                "apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\nclusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1\naddonStages:\n  AfterControlPlaneInitialized:\n    - {name: ccm, action: apply}\n",
            ),
        ],
    );
}

/// `docker/scs` for 1.35: a v1beta2 ClusterClass and control-plane template over v1beta1
/// infrastructure templates in one release.
fn v1beta2_source(dir: &Path) {
    write(
        dir,
        &[
            ("cluster-class/Chart.yaml", "apiVersion: v2\nname: cluster-class\nversion: 0.1.0\n"),
            (
                "cluster-class/templates/cluster-class.yaml",
                "apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata:
  name: {{ .Release.Name }}-{{ .Chart.Version }}
  namespace: {{ .Release.Namespace }}
spec:
  controlPlane:
    templateRef:
      apiVersion: controlplane.cluster.x-k8s.io/v1beta2
      kind: KubeadmControlPlaneTemplate
      name: {{ .Release.Name }}-{{ .Chart.Version }}-control-plane
    machineInfrastructure:
      templateRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: DockerMachineTemplate
        name: {{ .Release.Name }}-{{ .Chart.Version }}-machine
  infrastructure:
    templateRef:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
      kind: DockerClusterTemplate
      name: {{ .Release.Name }}-{{ .Chart.Version }}-cluster
",
            ),
            (
                "cluster-class/templates/kcp.yaml",
                "apiVersion: controlplane.cluster.x-k8s.io/v1beta2\nkind: KubeadmControlPlaneTemplate\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}-control-plane\n  namespace: {{ .Release.Namespace }}\nspec:\n  template:\n    spec: {}\n",
            ),
            (
                "cluster-class/templates/machine.yaml",
                "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: DockerMachineTemplate\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}-machine\n  namespace: {{ .Release.Namespace }}\nspec:\n  template:\n    spec: {}\n",
            ),
            (
                "cluster-class/templates/cluster.yaml",
                "apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: DockerClusterTemplate\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}-cluster\n  namespace: {{ .Release.Namespace }}\nspec:\n  template:\n    spec: {}\n",
            ),
            ("cluster-addon/cni/Chart.yaml", "apiVersion: v2\nname: cni\nversion: 0.1.0\n"),
            (
                "cluster-addon/cni/templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cni\n  namespace: {{ .Release.Namespace }}\ndata:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n",
            ),
            (
                "clusteraddon.yaml",
                "apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\nclusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1\naddonStages:\n  AfterControlPlaneInitialized:\n    - {name: cni, action: apply}\n",
            ),
        ],
    );
}

fn hcp_stack() -> Stack<'static> {
    Stack { provider: "openstack", name: "scs-hcp", kubernetes: RKE2, version: "v2".into() }
}

fn v1beta2_stack() -> Stack<'static> {
    Stack { provider: "docker", name: "scs", kubernetes: "v1.35.0", version: "v1".into() }
}

/// Both releases, built as the script builds them into `out`; the hcp one's `metadata.yaml` gets
/// the `clusterClass` component an open csctl change writes.
fn build_both(helm_bin: &Path, out: &Path) -> (PathBuf, PathBuf) {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    hcp_source(a.path());
    v1beta2_source(b.path());
    let hcp = build_like_the_stack_script(helm_bin, a.path(), out, &hcp_stack());
    let metadata = hcp.join("metadata.yaml");
    let text = std::fs::read_to_string(&metadata).unwrap();
    std::fs::write(&metadata, format!("{text}        clusterClass: v1\n")).unwrap();
    let docker = build_like_the_stack_script(helm_bin, b.path(), out, &v1beta2_stack());
    (hcp, docker)
}

fn clusterstack(args: &[&str]) -> String {
    run(Command::new(env!("CARGO_BIN_EXE_clusterstack")).args(args))
}

fn objects_of(list: &str) -> BTreeMap<String, Json> {
    let list: Json = serde_json::from_str(list).unwrap();
    list["items"].as_array().unwrap().iter().map(|o| (helm::object_key(o), o.clone())).collect()
}

fn helm_objects(helm_bin: &Path, chart: &Path, args: &helm::TemplateArgs) -> BTreeMap<String, Json> {
    let out = helm::helm_template(helm_bin, chart, args).unwrap_or_else(|e| panic!("helm template: {e}"));
    let docs = helm::split_helm_output(&out);
    helm::parse_docs(docs.iter().map(|d| (d.source.as_str(), d.content.as_str()))).unwrap()
}

fn asset(dir: &Path, part: &str) -> PathBuf {
    std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).find(|p| p.to_string_lossy().contains(part)).unwrap()
}

#[test]
fn dashed_names_rke2_versions_a_class_component_and_mixed_class_versions_read_back_as_helm_renders_them() {
    let test = "dashed_names_rke2_versions_a_class_component_and_mixed_class_versions_read_back";
    let Some(helm_bin) = helm::require_helm(test) else { return };
    let Some(reg) = registry::Registry::start(test) else { return };
    if !oras_available(test) {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let (hcp, docker) = build_both(&helm_bin, out.path());
    let host = reg.host();
    for dir in [&hcp, &docker] {
        let tag = dir.file_name().unwrap().to_string_lossy().into_owned();
        oras_push(&host, &format!("{host}/stacks:{tag}"), dir);
    }
    let source = format!("oci://{host}/stacks");
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path().to_str().unwrap();

    // Listed with the dashed name, by the name alone.
    let rows: Json =
        serde_json::from_str(&clusterstack(&["releases", "--source", &source, "--name", "scs-hcp", "-o", "json"]))
            .unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["tag"], "openstack-scs-hcp-1-33-v2", "{rows}");
    let rows: Json =
        serde_json::from_str(&clusterstack(&["releases", "--source", &source, "--name", "scs", "-o", "json"])).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["tag"], "docker-scs-1-35-v1", "{rows}");

    // Each class as the Go operator renders it: `helm template <p>-<n>-<maj>-<min> <class tgz>`.
    for (tag, dir, stack) in
        [("openstack-scs-hcp-1-33-v2", &hcp, hcp_stack()), ("docker-scs-1-35-v1", &docker, v1beta2_stack())]
    {
        let ours =
            objects_of(&clusterstack(&["render", tag, "--source", &source, "--cache", cache, "-n", NS, "-o", "json"]));
        let theirs =
            helm_objects(&helm_bin, &asset(dir, "cluster-class"), &helm::TemplateArgs::new(&stack.prefix(), NS));
        assert_eq!(ours, theirs, "{tag}");
        let class = theirs.values().find(|o| o["kind"] == "ClusterClass").unwrap();
        assert_eq!(class["metadata"]["name"], tag, "{tag}");
    }

    // The addons for the RKE2 version, whole (`+rke2r1` included), as helm sees it.
    let cluster = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("templates/example-cluster.yaml");
    let ours = objects_of(&clusterstack(&[
        "render",
        "openstack-scs-hcp-1-33-v2",
        "--source",
        &source,
        "--cache",
        cache,
        "--addons",
        "--cluster",
        cluster.to_str().unwrap(),
        "-o",
        "json",
    ]));
    let addons = tempfile::tempdir().unwrap();
    run(Command::new("tar").arg("-xzf").arg(asset(&hcp, "cluster-addon")).arg("-C").arg(addons.path()));
    let mut args = helm::TemplateArgs::new("cluster-addon", "kube-system");
    args.include_crds = true;
    args.kube_version = Some(RKE2.into());
    let theirs = helm_objects(&helm_bin, &addons.path().join("ccm"), &args);
    assert_eq!(ours, theirs);
    let cm = &theirs["v1/ConfigMap/kube-system/ccm-kube"];
    assert_eq!(
        (&cm["data"]["version"], &cm["data"]["minor"], &cm["data"]["recent"]),
        (&json!(RKE2), &json!("33"), &json!("yes"))
    );

    // The cached metadata keeps the class component and the RKE2 version.
    let pulled = clusterstack(&["pull", "openstack-scs-hcp-1-33-v2", "--source", &source, "--cache", cache]);
    let dir = PathBuf::from(pulled.lines().find_map(|l| l.strip_prefix("directory ")).unwrap().trim());
    let metadata = clusterstack::release::ReleaseMetadata::parse(
        "metadata.yaml",
        &std::fs::read_to_string(dir.join("metadata.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(metadata.versions.kubernetes.to_string(), RKE2);
    assert_eq!(metadata.versions.components.cluster_class.map(|v| v.dotted()).as_deref(), Some("v1"));

    // `publish` writes csctl's form too; it is read like the script's.
    let published = clusterstack(&[
        "publish",
        docker.to_str().unwrap(),
        &format!("oci://{host}/csctl"),
        "--artifact-type",
        "csctl",
    ]);
    assert!(published.contains("docker-scs-1-35-v1@sha256:"), "{published}");
    let manifest: Json = serde_json::from_str(&run(Command::new("python3").args([
        "-c",
        "import sys, urllib.request, json; r = urllib.request.Request(sys.argv[1], headers={'Accept': 'application/vnd.oci.image.manifest.v1+json'}); print(urllib.request.urlopen(r).read().decode())",
        &format!("http://{host}/v2/csctl/manifests/docker-scs-1-35-v1"),
    ])))
    .unwrap();
    assert_eq!(manifest["artifactType"], "application/vnd.scs.cluster-stacks.v1");
    let types: BTreeMap<String, String> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["annotations"]["org.opencontainers.image.title"].as_str().unwrap().to_string(),
                l["mediaType"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(types["metadata.yaml"], "application/vnd.scs.metadata.layer.v1+yaml");
    assert_eq!(types["docker-scs-1-35-cluster-addon-v1.tgz"], "application/vnd.scs.cluster-addon.layer.v1.tar+gzip");
    let csctl = objects_of(&clusterstack(&[
        "render",
        "docker-scs-1-35-v1",
        "--source",
        &format!("oci://{host}/csctl"),
        "--cache",
        cache,
        "-n",
        NS,
        "-o",
        "json",
    ]));
    assert_eq!(csctl.len(), 4, "{csctl:?}");
}

/// `clusterstack build` continues a stack the script built: its `hashes.json` (the git sha only)
/// is not ours, so every part counts as changed, and the next version follows the script's.
#[test]
fn build_continues_after_a_release_of_the_script() {
    let Some(helm_bin) = helm::require_helm("build_continues_after_a_release_of_the_script") else { return };
    let out = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    v1beta2_source(src.path());
    build_like_the_stack_script(&helm_bin, src.path(), out.path(), &v1beta2_stack());
    write(
        src.path(),
        &[(
            "csctl.yaml",
            "apiVersion: csctl.clusterstack.x-k8s.io/v1alpha1\nconfig:\n  kubernetesVersion: v1.35.0\n  clusterStackName: scs\n  provider:\n    type: docker\n",
        )],
    );
    let built = clusterstack::package::build::build_release(&clusterstack::package::build::BuildOptions {
        source_dir: src.path().into(),
        out_dir: out.path().into(),
        version: None,
    })
    .unwrap();
    assert_eq!(built.id.tag(), "docker-scs-1-35-v2");
    assert_eq!(built.metadata.versions.components.cluster_addon.dotted(), "v2");
}

/// A minimal CRD serving `versions` of one kind (objects are shared between versions, as a
/// conversion webhook would make them).
fn crd(group: &str, kind: &str, versions: &[&str]) -> Json {
    let lower = kind.to_lowercase();
    let plural = if lower.ends_with("ss") { format!("{lower}es") } else { format!("{lower}s") };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural, "singular": kind.to_lowercase()},
            "scope": "Namespaced",
            "versions": versions.iter().enumerate().map(|(i, v)| json!({
                "name": v, "served": true, "storage": i == 0,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            })).collect::<Vec<_>>(),
        },
    })
}

/// The operator applies both: the hosted-control-plane stack (dashed name, RKE2 version, v1beta1
/// class without `machineInfrastructure`) and the v1beta2 class over v1beta1 templates, each
/// object in the version it is written in.
#[tokio::test]
async fn the_operator_applies_a_dashed_hosted_control_plane_stack_and_a_v1beta2_class_beside_v1beta1() {
    let Some(helm_bin) = helm::require_helm("the_operator_applies_a_dashed_hosted_control_plane_stack") else { return };
    let out = tempfile::tempdir().unwrap();
    build_both(&helm_bin, out.path());
    let server = server().await;
    for c in [
        crd("cluster.x-k8s.io", "ClusterClass", &["v1beta1", "v1beta2"]),
        crd("controlplane.cluster.x-k8s.io", "KubeadmControlPlaneTemplate", &["v1beta1", "v1beta2"]),
        crd("controlplane.cluster.x-k8s.io", "HostedControlPlaneTemplate", &["v1alpha1"]),
        crd("infrastructure.cluster.x-k8s.io", "OpenStackClusterTemplate", &["v1beta1"]),
    ] {
        server.put_object(c);
    }
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(out.path().to_path_buf()), cache.path()));
    for (name, provider, stack, kube) in [("hcp", "openstack", "scs-hcp", "1.33"), ("scs135", "docker", "scs", "1.35")]
    {
        server.put_object(json!({
            "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStack",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"provider": provider, "name": stack, "kubernetesVersion": kube, "channel": "stable",
                     "autoSubscribe": true, "pollInterval": "1s"},
        }));
    }
    support::operator::wait_for("both releases ready", || {
        ready(&server, "openstack-scs-hcp-1-33-v2") && ready(&server, "docker-scs-1-35-v1")
    })
    .await;
    let r = release(&server, "openstack-scs-hcp-1-33-v2").unwrap();
    assert_eq!(r["status"]["kubernetesVersion"], RKE2, "{r:#}");
    assert_eq!(condition(&r, "Ready").unwrap()["status"], "True");
    let class =
        server.get_object("cluster.x-k8s.io/v1beta1", "ClusterClass", Some(NS), "openstack-scs-hcp-1-33-v2").unwrap();
    assert!(class["spec"]["controlPlane"].get("machineInfrastructure").is_none(), "{class:#}");
    assert!(
        server
            .get_object(
                "controlplane.cluster.x-k8s.io/v1alpha1",
                "HostedControlPlaneTemplate",
                Some(NS),
                "openstack-scs-hcp-1-33-v2-control-plane"
            )
            .is_some()
    );
    let class = server.get_object("cluster.x-k8s.io/v1beta2", "ClusterClass", Some(NS), "docker-scs-1-35-v1").unwrap();
    assert_eq!(class["spec"]["controlPlane"]["templateRef"]["kind"], "KubeadmControlPlaneTemplate", "{class:#}");
    assert!(
        server
            .get_object(
                "infrastructure.cluster.x-k8s.io/v1beta1",
                "DockerMachineTemplate",
                Some(NS),
                "docker-scs-1-35-v1-machine"
            )
            .is_some()
    );
    // Only its own stack's release each: `scs` took nothing of `scs-hcp`.
    assert_eq!(support::operator::release_names(&server), ["docker-scs-1-35-v1", "openstack-scs-hcp-1-33-v2"]);
    op.stop().await;
}
