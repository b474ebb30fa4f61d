//! The older release layout (csctl's before `clusteraddon.yaml`): `cluster-addon/` is one chart
//! whose subcharts are vendored, and its values template is the release's own
//! `cluster-addon-values.yaml` (`values: |` + a Go template over the workload Cluster), keyed by
//! subchart. A release of our own in that layout, built by `clusterstack build`, is read back
//! from a directory and from OCI (the real registry) and its addons must equal `helm template`
//! of its addon chart with the values the template gives for the Cluster, written out by hand
//! here, so that a render that loses them (or renders them differently) fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use clusterstack::package::build::{BuildOptions, build_release, tarball};
use clusterstack::render::ClusterObjects;
use clusterstack::source::cache::ReleaseCache;
use clusterstack::source::{DirSource, FetchPolicy, ReleaseSource};
use serde_json::Value as Json;

#[path = "../crates/helm/tests/support/helm.rs"]
mod helm;
#[path = "support/registry.rs"]
mod registry;

const TAG: &str = "docker-legacy-1-30-v1";
const KUBE: &str = "v1.30.4";

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A subchart of our own, as a vendored archive: a Deployment that prints `commonLabels` and
/// `args` of its values.
fn subchart() -> Vec<u8> {
    let files = std::collections::BTreeMap::from([
        ("Chart.yaml".to_string(), b"apiVersion: v2\nname: metrics-server\nversion: 3.12.2\n".to_vec()),
        ("values.yaml".to_string(), b"commonLabels: {}\nargs: [--secure-port=10250]\nreplicas: 1\n".to_vec()),
        (
            "templates/deployment.yaml".to_string(),
            b"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-metrics-server
  namespace: {{ .Release.Namespace }}
  labels:
    app: metrics-server
    {{- with .Values.commonLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  replicas: {{ .Values.replicas }}
  template:
    spec:
      containers:
        - name: metrics-server
          args:
            {{- toYaml .Values.args | nindent 12 }}
"
            .to_vec(),
        ),
    ]);
    tarball(&files, "metrics-server/").unwrap()
}

/// A stack source in the older layout: `cluster-addon/` one chart, `cluster-addon-values.yaml`.
fn source(dir: &Path) {
    write(
        dir,
        &[
            (
                "csctl.yaml",
                &format!(
                    "apiVersion: csctl.clusterstack.x-k8s.io/v1alpha1\nconfig:\n  kubernetesVersion: {KUBE}\n  clusterStackName: legacy\n  provider:\n    type: docker\n    apiVersion: docker.csctl.clusterstack.x-k8s.io/v1alpha1\n"
                ),
            ),
            ("cluster-class/Chart.yaml", "apiVersion: v2\nname: docker-legacy-1-30-cluster-class\nversion: v0\n"),
            (
                "cluster-class/templates/cluster-class.yaml",
                "apiVersion: cluster.x-k8s.io/v1beta1\nkind: ClusterClass\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}\nspec: {}\n",
            ),
            (
                "cluster-addon/Chart.yaml",
                "apiVersion: v2\nname: docker-legacy-1-30-cluster-addon\nversion: v0\ndependencies:\n- name: metrics-server\n  version: 3.12.2\n  repository: https://kubernetes-sigs.github.io/metrics-server/\n",
            ),
            ("cluster-addon/values.yaml", "parent:\n  clusterName: unset\n  controlPlane: unset\n  infra: unset\n"),
            (
                "cluster-addon/templates/cluster-info.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-info\n  namespace: {{ .Release.Namespace }}\ndata:\n  {{- toYaml .Values.parent | nindent 2 }}\n  kube: {{ .Capabilities.KubeVersion.Version }}\n",
            ),
            // A range whose lines start at column 0: the whole file is the template (as the Go
            // operator renders it), not only the text of `values`.
            (
                "cluster-addon-values.yaml",
                "values: |
  metrics-server:
    commonLabels:
      domain: \"{{ .Cluster.spec.controlPlaneEndpoint.host }}\"
      cluster: {{ .Cluster.metadata.name }}
    args:
{{- range .Cluster.spec.clusterNetwork.pods.cidrBlocks }}
      - --pod-cidr={{ . }}
{{- end }}
  parent:
    clusterName: {{ .Cluster.metadata.name | quote }}
    controlPlane: {{ .ControlPlane.metadata.name }}
    infra: {{ .InfraCluster.metadata.name }}
",
            ),
        ],
    );
    std::fs::create_dir_all(dir.join("cluster-addon/charts")).unwrap();
    std::fs::write(dir.join("cluster-addon/charts/metrics-server-3.12.2.tgz"), subchart()).unwrap();
}

/// What `cluster-addon-values.yaml` gives for `templates/example-cluster.yaml`, by hand.
const EXPECTED_VALUES: &str = "metrics-server:
  commonLabels:
    domain: \"172.18.0.3\"
    cluster: demo
  args:
    - --pod-cidr=10.96.0.0/16
parent:
  clusterName: \"demo\"
  controlPlane: demo-abcde
  infra: demo-fghij
";

fn cluster_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("templates/example-cluster.yaml")
}

/// The Cluster, its control plane and infrastructure cluster of `templates/example-cluster.yaml`.
fn cluster_objects() -> ClusterObjects {
    let text = std::fs::read_to_string(cluster_file()).unwrap();
    let docs: Vec<Json> = serde_saphyr::from_multiple(&text).unwrap();
    ClusterObjects { cluster: docs[0].clone(), control_plane: docs[1].clone(), infra_cluster: docs[2].clone() }
}

/// `helm template` of the release's addon chart archive with the expected values, as objects.
fn helm_objects(helm_bin: &Path, release_dir: &Path, work: &Path) -> std::collections::BTreeMap<String, Json> {
    let values = work.join("expected-values.yaml");
    std::fs::write(&values, EXPECTED_VALUES).unwrap();
    let mut args = helm::TemplateArgs::new("cluster-addon", "kube-system");
    args.include_crds = true;
    args.kube_version = Some(KUBE.into());
    args.values_files.push(values);
    let chart = release_dir.join("docker-legacy-1-30-cluster-addon-v1.tgz");
    let out = helm::helm_template(helm_bin, &chart, &args).unwrap_or_else(|e| panic!("helm template: {e}"));
    let docs = helm::split_helm_output(&out);
    helm::parse_docs(docs.iter().map(|d| (d.source.as_str(), d.content.as_str()))).unwrap()
}

fn by_key(objects: impl IntoIterator<Item = Json>) -> std::collections::BTreeMap<String, Json> {
    objects.into_iter().map(|o| (helm::object_key(&o), o)).collect()
}

/// `clusterstack render TAG --source SOURCE --addons --cluster FILE -o json`, as objects.
fn render_cli(source: &str, cache: &Path) -> std::collections::BTreeMap<String, Json> {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(["render", TAG, "--source", source, "--cache"])
        .arg(cache)
        .args(["--addons", "--cluster"])
        .arg(cluster_file())
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "render {source}: {}", String::from_utf8_lossy(&out.stderr));
    let list: Json = serde_json::from_slice(&out.stdout).unwrap();
    by_key(list["items"].as_array().unwrap().iter().cloned())
}

fn assert_same(
    what: &str,
    ours: &std::collections::BTreeMap<String, Json>,
    helm: &std::collections::BTreeMap<String, Json>,
) {
    assert_eq!(ours.keys().collect::<Vec<_>>(), helm.keys().collect::<Vec<_>>(), "{what}: objects differ");
    for (key, theirs) in helm {
        assert_eq!(&ours[key], theirs, "{what}: {key} differs from helm's");
    }
    // The values reached the charts (a render without them would differ from helm above; this
    // says which way).
    let deployment = &helm["apps/v1/Deployment/kube-system/cluster-addon-metrics-server"];
    assert_eq!(deployment["metadata"]["labels"]["domain"], "172.18.0.3", "{what}");
}

fn build(out: &Path) -> PathBuf {
    let src = tempfile::tempdir().unwrap();
    source(src.path());
    let built =
        build_release(&BuildOptions { source_dir: src.path().into(), out_dir: out.into(), version: None }).unwrap();
    assert_eq!(built.id.tag(), TAG);
    assert!(built.assets.contains(&"cluster-addon-values.yaml".to_string()), "{:?}", built.assets);
    assert!(!built.assets.contains(&"clusteraddon.yaml".to_string()), "{:?}", built.assets);
    built.dir
}

#[test]
fn the_older_layout_renders_its_addons_with_the_release_values_from_a_directory() {
    let Some(helm_bin) = helm::require_helm("the_older_layout_renders_its_addons_with_the_release_values") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let release = build(out.path());
    let expected = helm_objects(&helm_bin, &release, out.path());
    let cache = tempfile::tempdir().unwrap();
    let ours = render_cli(&format!("dir:{}", out.path().display()), cache.path());
    assert_same("render --source dir:", &ours, &expected);
    // The release directory itself, and the operator's own path (the cache, then the addon
    // controller's render).
    let from_dir = Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .arg("render")
        .arg(&release)
        .args(["--addons", "--cluster"])
        .arg(cluster_file())
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(from_dir.status.success(), "{}", String::from_utf8_lossy(&from_dir.stderr));
    let list: Json = serde_json::from_slice(&from_dir.stdout).unwrap();
    assert_same("render RELEASE_DIR", &by_key(list["items"].as_array().unwrap().iter().cloned()), &expected);

    let rt = tokio::runtime::Runtime::new().unwrap();
    let operator = rt.block_on(async {
        let source = DirSource::new(out.path()).unwrap();
        let listing = source.list().await.unwrap();
        let listed = listing.releases.iter().find(|r| r.tag == TAG).unwrap();
        let cache = ReleaseCache::new(cache.path().join("operator")).unwrap();
        let fetched = cache.fetch(&source, listed, FetchPolicy::default()).await.unwrap();
        clusterstack::controller::addon::render::render_release(
            &fetched,
            &fetched.id,
            "default",
            cluster_objects(),
            Default::default(),
            &clusterstack::render::cache::RenderCache::new(0),
        )
        .await
        .unwrap()
    });
    let objects = operator.charts.iter().flat_map(|c| c.objects.iter()).map(|o| serde_json::to_value(o).unwrap());
    assert_same("the addon controller's render", &by_key(objects), &expected);
}

#[test]
fn the_older_layout_renders_its_addons_with_the_release_values_from_oci() {
    let test = "the_older_layout_renders_its_addons_with_the_release_values_from_oci";
    let Some(helm_bin) = helm::require_helm(test) else { return };
    let Some(reg) = registry::Registry::start(test) else { return };
    let out = tempfile::tempdir().unwrap();
    let release = build(out.path());
    let expected = helm_objects(&helm_bin, &release, out.path());
    let target = format!("oci://{}/stacks", reg.host());
    let published =
        Command::new(env!("CARGO_BIN_EXE_clusterstack")).arg("publish").arg(&release).arg(&target).output().unwrap();
    assert!(published.status.success(), "{}", String::from_utf8_lossy(&published.stderr));
    let cache = tempfile::tempdir().unwrap();
    assert_same("render --source oci://", &render_cli(&target, cache.path()), &expected);
}
