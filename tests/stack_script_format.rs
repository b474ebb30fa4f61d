//! Releases as Sovereign Cloud Stack's stack repository now builds them (its `hack/build.sh`,
//! which replaces csctl): the class packed by `helm package`, each addon chart tarred **without
//! its `charts/`** (the consumer resolves the dependencies from `Chart.yaml`/`Chart.lock`), a
//! development version `v0-ttl.<unix time>`, `metadata.yaml` indented by four, a `hashes.json`
//! holding only the git sha, and the files pushed with oras under the artifact type
//! `application/vnd.clusterstack.release`, tagged in the class (dot) form.
//!
//! Built here the same way (the real helm, the system's `tar`, PyPI's oras, the real registry),
//! the release must be listed, pulled with its dependencies resolved from 127.0.0.1 (a Helm
//! repository of the test's own behind a `--helm-repo-mirror` rule, and the registry), and its
//! addons must equal `helm template` of each addon chart after `helm dependency build`. Then the
//! same dependencies come from the cache with the repositories gone, and a dependency nobody has
//! fails the pull naming it, with nothing cached.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use clusterstack::package::build::tarball;
use clusterstack::registry::{RegistryClient, RegistryConfig};
use clusterstack::source::oci::{self, OciSource};
use clusterstack::source::{FetchPolicy, ReleaseSource, SourceSpec};
use serde_json::Value as Json;

#[path = "../crates/helm/tests/support/helm.rs"]
mod helm;
#[path = "support/helm_repo.rs"]
mod helm_repo;
#[path = "support/registry.rs"]
mod registry;
#[path = "support/stack_script.rs"]
mod stack_script;

use helm_repo::HelmRepo;
use registry::Registry;
use stack_script::{Stack, build_like_the_stack_script, oras_available, oras_push, run, write};

const KUBE: &str = "v1.34.1";
/// The public repository the `cni` addon's `Chart.yaml` names; the test mirrors it locally.
const PUBLIC_REPO: &str = "https://charts.example.com/stable";

/// A chart of the test's own: a ConfigMap printing `settings` of its values and its own name and
/// version.
fn dep_chart(name: &str, version: &str) -> Vec<u8> {
    let files = BTreeMap::from([
        ("Chart.yaml".to_string(), format!("apiVersion: v2\nname: {name}\nversion: {version}\n").into_bytes()),
        ("values.yaml".to_string(), b"settings:\n  mode: default\n  replicas: \"1\"\n".to_vec()),
        (
            "templates/cm.yaml".to_string(),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Release.Name }}}}-{name}\n  namespace: {{{{ .Release.Namespace }}}}\n  labels:\n    chart: {{{{ .Chart.Name }}}}-{{{{ .Chart.Version }}}}\ndata:\n  {{{{- toYaml .Values.settings | nindent 2 }}}}\n  kube: {{{{ .Capabilities.KubeVersion.Version | quote }}}}\n"
            )
            .into_bytes(),
        ),
    ]);
    tarball(&files, &format!("{name}/")).unwrap()
}

/// The stack's source, as a version directory of the stack repository holds it. The `cni`
/// addon wants `netpol` `netpol_version` from [`PUBLIC_REPO`]; `metrics-server` wants `metrics`
/// `~3.12.0` from the registry at `oci`.
fn stack_source(dir: &Path, oci: &str, netpol_version: &str) {
    write(
        dir,
        &[
            ("stack.yaml", "provider: docker\nclusterStackName: scs\nkubernetesVersion: 1.34\n"),
            ("cluster-class/Chart.yaml", "apiVersion: v2\nname: cluster-class\nversion: 0.1.0\n"),
            (
                "cluster-class/templates/cluster-class.yaml",
                "apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}\n  namespace: {{ .Release.Namespace }}\nspec:\n  infrastructure:\n    templateRef:\n      apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\n      kind: DockerClusterTemplate\n      name: {{ .Release.Name }}-{{ .Chart.Version }}\n",
            ),
            (
                "cluster-addon/cni/Chart.yaml",
                &format!(
                    "apiVersion: v2\nname: cni\ndescription: a CNI for the test\ntype: application\nversion: 0.1.0\ndependencies:\n  - name: netpol\n    version: {netpol_version}\n    repository: {PUBLIC_REPO}/\n"
                ),
            ),
            ("cluster-addon/cni/values.yaml", "netpol:\n  settings:\n    mode: strict\n"),
            (
                "cluster-addon/metrics-server/Chart.yaml",
                &format!(
                    "apiVersion: v2\nname: metrics-server\ntype: application\nversion: 0.1.0\ndependencies:\n  - name: metrics\n    version: ~3.12.0\n    repository: oci://{oci}/charts\n"
                ),
            ),
            ("cluster-addon/metrics-server/values.yaml", "metrics:\n  settings:\n    replicas: \"2\"\n"),
            (
                "cluster-addon/metrics-server/overwrite.yaml",
                "values: |\n  metrics:\n    settings:\n      cluster: {{ .Cluster.metadata.name }}\n      endpoint: \"{{ .Cluster.spec.controlPlaneEndpoint.host }}:{{ .Cluster.spec.controlPlaneEndpoint.port }}\"\n",
            ),
            (
                "clusteraddon.yaml",
                "apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\nclusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1\naddonStages:\n  AfterControlPlaneInitialized:\n    - name: cni\n      action: apply\n    - name: metrics-server\n      action: apply\n",
            ),
        ],
    );
    // A vendored copy in the source, as `helm dependency update` leaves it: the build drops it.
    std::fs::create_dir_all(dir.join("cluster-addon/cni/charts")).unwrap();
    std::fs::write(dir.join("cluster-addon/cni/charts/netpol-1.2.3.tgz"), dep_chart("netpol", "1.2.3")).unwrap();
}

/// The development build `v0-ttl.<time>` of docker/scs for Kubernetes [`KUBE`].
fn ttl(time: u64) -> Stack<'static> {
    Stack { provider: "docker", name: "scs", kubernetes: KUBE, version: format!("v0-ttl.{time}") }
}

/// What `metrics-server/overwrite.yaml` gives for `templates/example-cluster.yaml`, by hand.
const METRICS_VALUES: &str = "metrics:\n  settings:\n    cluster: demo\n    endpoint: \"172.18.0.3:6443\"\n";

fn client() -> Arc<RegistryClient> {
    clusterstack::install_crypto_provider();
    Arc::new(RegistryClient::new(RegistryConfig::default()).unwrap())
}

/// Pushes `metrics` 3.12.1, 3.12.2 and 3.13.0 as `helm push` lays charts out.
async fn push_metrics_charts(reg: &Registry) {
    for version in ["3.12.1", "3.12.2", "3.13.0"] {
        let archive = bytes::Bytes::from(dep_chart("metrics", version));
        let metadata = serde_json::json!({"apiVersion": "v2", "name": "metrics", "version": version});
        oci::publish_chart(
            &client(),
            &reg.host(),
            "charts/metrics",
            &format!("http://{}", reg.host()),
            version,
            &metadata,
            archive,
            Default::default(),
        )
        .await
        .unwrap();
    }
}

fn cluster_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("templates/example-cluster.yaml")
}

fn by_key(objects: impl IntoIterator<Item = Json>) -> BTreeMap<String, Json> {
    objects.into_iter().map(|o| (helm::object_key(&o), o)).collect()
}

/// `helm template` of each addon of the release after `helm dependency build`, with the values
/// the Go operator would give (`metrics-server`'s overwrite.yaml rendered, by hand): the
/// expected objects. The `cni` chart's repository is the mirror's (what the rule rewrites), added
/// with `helm repo add` as `helm dependency build` needs it.
fn helm_expected(helm_bin: &Path, release_dir: &Path, repo: &HelmRepo, work: &Path) -> BTreeMap<String, Json> {
    let addons = work.join("addons");
    let archive = std::fs::read_dir(release_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().contains("cluster-addon"))
        .unwrap();
    std::fs::create_dir_all(&addons).unwrap();
    run(Command::new("tar").arg("-xzf").arg(&archive).arg("-C").arg(&addons));
    let helm_env = |cmd: &mut Command| {
        helm::isolate(cmd);
        cmd.env("HELM_REPOSITORY_CONFIG", work.join("repositories.yaml"))
            .env("HELM_REPOSITORY_CACHE", work.join("repository-cache"))
            .env("HELM_CONTENT_CACHE", work.join("content-cache"));
    };
    let mirror = repo.url("/stable");
    let cni = addons.join("cni/Chart.yaml");
    let text = std::fs::read_to_string(&cni).unwrap().replace(&format!("{PUBLIC_REPO}/"), &mirror);
    std::fs::write(&cni, text).unwrap();
    let mut add = Command::new(helm_bin);
    add.args(["repo", "add", "stable-mirror", &mirror]);
    helm_env(&mut add);
    run(&mut add);
    let values = work.join("metrics-values.yaml");
    std::fs::write(&values, METRICS_VALUES).unwrap();
    let mut objects = BTreeMap::new();
    for addon in ["cni", "metrics-server"] {
        let dir = addons.join(addon);
        let mut build = Command::new(helm_bin);
        build.args(["dependency", "build", "--plain-http"]).arg(&dir);
        helm_env(&mut build);
        run(&mut build);
        let mut template = Command::new(helm_bin);
        template.args(["template", "cluster-addon"]).arg(&dir).args([
            "--namespace",
            "kube-system",
            "--include-crds",
            "--kube-version",
            KUBE,
        ]);
        if addon == "metrics-server" {
            template.arg("-f").arg(&values);
        }
        helm_env(&mut template);
        let out = run(&mut template);
        let docs = helm::split_helm_output(&out);
        objects.extend(helm::parse_docs(docs.iter().map(|d| (d.source.as_str(), d.content.as_str()))).unwrap());
    }
    objects
}

fn clusterstack(args: &[&str], cache: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_clusterstack")).args(args).arg("--cache").arg(cache).output().unwrap()
}

/// `render TAG --addons --cluster FILE -o json` with `source_args` (see [`World::source_args`]).
fn render_addons(source_args: &[String], tag: &str, cache: &Path) -> BTreeMap<String, Json> {
    let cluster = cluster_file();
    let mut args = vec!["render", tag];
    args.extend(source_args.iter().map(String::as_str));
    args.extend(["--addons", "--cluster", cluster.to_str().unwrap(), "-o", "json"]);
    let out = clusterstack(&args, cache);
    assert!(out.status.success(), "render {tag}: {}", String::from_utf8_lossy(&out.stderr));
    let list: Json = serde_json::from_slice(&out.stdout).unwrap();
    by_key(list["items"].as_array().unwrap().iter().cloned())
}

fn assert_same(what: &str, ours: &BTreeMap<String, Json>, helm: &BTreeMap<String, Json>) {
    assert_eq!(ours.keys().collect::<Vec<_>>(), helm.keys().collect::<Vec<_>>(), "{what}: objects differ");
    for (key, theirs) in helm {
        assert_eq!(&ours[key], theirs, "{what}: {key} differs from helm's");
    }
    // The dependencies are the ones asked for, with their values.
    let netpol = &helm["v1/ConfigMap/kube-system/cluster-addon-netpol"];
    assert_eq!(netpol["metadata"]["labels"]["chart"], "netpol-1.2.3", "{what}");
    assert_eq!(netpol["data"]["mode"], "strict", "{what}");
    let metrics = &helm["v1/ConfigMap/kube-system/cluster-addon-metrics"];
    assert_eq!(metrics["metadata"]["labels"]["chart"], "metrics-3.12.2", "{what}");
    assert_eq!(metrics["data"]["endpoint"], "172.18.0.3:6443", "{what}");
}

struct World {
    helm_bin: PathBuf,
    releases: Registry,
    charts: Option<Registry>,
    repo: HelmRepo,
    out: tempfile::TempDir,
    /// The chart registry's `HOST:PORT`, plain http: the CLI's `--insecure-registry`.
    charts_host: String,
}

fn world(test: &str) -> Option<World> {
    let helm_bin = helm::require_helm(test)?;
    let releases = Registry::start(test)?;
    let charts = Registry::start(test)?;
    if !oras_available(test) {
        return None;
    }
    let repo = HelmRepo::start();
    repo.serve_repo(
        "/stable",
        &[("netpol", "1.2.0", dep_chart("netpol", "1.2.0")), ("netpol", "1.2.3", dep_chart("netpol", "1.2.3"))],
    );
    let charts_host = charts.host();
    Some(World { helm_bin, releases, charts: Some(charts), repo, out: tempfile::tempdir().unwrap(), charts_host })
}

impl World {
    fn mirror(&self) -> String {
        format!("{PUBLIC_REPO}={}", self.repo.url("/stable"))
    }

    /// `--source`, the mirror rule and the chart registry (plain http) for `pull` and `render`.
    fn source_args(&self) -> Vec<String> {
        ["--source", &self.source(), "--helm-repo-mirror", &self.mirror(), "--insecure-registry", &self.charts_host]
            .map(String::from)
            .to_vec()
    }

    fn source(&self) -> String {
        format!("oci://{}/stacks", self.releases.host())
    }

    /// Builds and pushes version `v0-ttl.<time>`; returns its release directory.
    fn publish(&self, time: u64, netpol: &str) -> PathBuf {
        let src = tempfile::tempdir().unwrap();
        stack_source(src.path(), &self.charts.as_ref().unwrap().host(), netpol);
        self.push(build_like_the_stack_script(&self.helm_bin, src.path(), self.out.path(), &ttl(time)))
    }

    /// Pushes a release directory with oras, tagged by its name.
    fn push(&self, release: PathBuf) -> PathBuf {
        let tag = release.file_name().unwrap().to_string_lossy().into_owned();
        let host = self.releases.host();
        oras_push(&host, &format!("{host}/stacks:{tag}"), &release);
        release
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_release_pushed_by_the_stack_script_is_listed_pulled_resolved_and_renders_as_helm_after_dependency_build() {
    let test = "a_release_pushed_by_the_stack_script_is_listed_pulled_resolved_and_renders_as_helm";
    let Some(w) = world(test) else { return };
    push_metrics_charts(w.charts.as_ref().unwrap()).await;
    let release = w.publish(1_712_345_678, "1.2.3");
    let dot_tag = "docker-scs-1-34-v0-ttl.1712345678";
    let tag = "docker-scs-1-34-v0-ttl-1712345678";
    assert_eq!(release.file_name().unwrap().to_string_lossy(), dot_tag);

    // What was pushed is what the script pushes: the new artifact type, files as layers.
    let manifest: Json = reqwest::Client::new()
        .get(format!("http://{}/v2/stacks/manifests/{dot_tag}", w.releases.host()))
        .header("Accept", oci::OCI_MANIFEST)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(manifest["artifactType"], oci::ARTIFACT_TYPE);
    assert_eq!(manifest["config"]["mediaType"], oci::EMPTY_CONFIG);

    // Listed under its tag (dash) form, as a release of the ttl channel.
    let source = OciSource::new(client(), &w.releases.host(), "stacks", &format!("http://{}", w.releases.host()));
    let listing = source.list().await.unwrap();
    assert_eq!(listing.releases.iter().map(|r| r.tag.as_str()).collect::<Vec<_>>(), [tag], "{listing:?}");
    assert!(listing.skipped.is_empty(), "{listing:?}");
    let listed = Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(["releases", "--source", &w.source(), "--channel", "ttl", "-o", "json"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let rows: Json = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(rows[0]["tag"], tag, "{rows}");
    assert_eq!(rows[0]["version"], "v0-ttl.1712345678", "{rows}");
    // The script's output directory (`.release/`, directories named in the dot form) is a source too.
    let local = Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(["releases", "--source", &format!("dir:{}", w.out.path().display()), "-o", "json"])
        .output()
        .unwrap();
    let rows: Json = serde_json::from_slice(&local.stdout).unwrap();
    assert_eq!(rows[0]["tag"], tag, "{rows}");

    // Pulled (by the name the script printed), its dependencies resolved into the cache.
    let cache = tempfile::tempdir().unwrap();
    let pulled = clusterstack(
        &[&["pull", dot_tag][..], &w.source_args().iter().map(String::as_str).collect::<Vec<_>>()].concat(),
        cache.path(),
    );
    assert!(pulled.status.success(), "{}", String::from_utf8_lossy(&pulled.stderr));
    let stdout = String::from_utf8_lossy(&pulled.stdout).into_owned();
    let dir = PathBuf::from(stdout.lines().find_map(|l| l.strip_prefix("directory ")).unwrap().trim());
    assert!(dir.join("cluster-addon/cni/charts/netpol-1.2.3.tgz").is_file(), "{stdout}");
    assert!(dir.join("cluster-addon/metrics-server/charts/metrics-3.12.2.tgz").is_file(), "{stdout}");

    // Rendered as helm renders each addon after `helm dependency build`.
    let expected = helm_expected(&w.helm_bin, &release, &w.repo, w.out.path());
    assert_same("render --addons", &render_addons(&w.source_args(), tag, cache.path()), &expected);

    // The operator's own path: the cache with its dependency step, then the addon render.
    let operator_cache = clusterstack::source::cache::ReleaseCache::new(cache.path().join("operator"))
        .unwrap()
        .with_prepare(Arc::new(clusterstack::package::release_deps::ChartDependencies::new(
            clusterstack::package::deps::DependencyOptions {
                cache_dir: Some(cache.path().join("operator-charts")),
                mirrors: vec![clusterstack::package::deps::parse_mirror(&w.mirror()).unwrap()],
                insecure_registries: vec![w.charts_host.clone()],
                ..Default::default()
            },
        )));
    let fetched = operator_cache.fetch(&source, &listing.releases[0], FetchPolicy::default()).await.unwrap();
    let text = std::fs::read_to_string(cluster_file()).unwrap();
    let docs: Vec<Json> = serde_saphyr::from_multiple(&text).unwrap();
    let objects = clusterstack::render::ClusterObjects {
        cluster: docs[0].clone(),
        control_plane: docs[1].clone(),
        infra_cluster: docs[2].clone(),
    };
    let rendered = clusterstack::controller::addon::render::render_release(
        &fetched,
        &fetched.id,
        "default",
        objects,
        Default::default(),
        &clusterstack::render::cache::RenderCache::new(0),
    )
    .await
    .unwrap();
    assert_eq!(rendered.stages("AfterControlPlaneInitialized").len(), 2);
    let ours = by_key(rendered.charts.iter().flat_map(|c| c.objects.iter()).map(|o| serde_json::to_value(o).unwrap()));
    assert_same("the addon controller's render", &ours, &expected);

    // The class renders from the `helm package`d archive as the Go operator renders it.
    let class = clusterstack(
        &[&["render", tag][..], &w.source_args().iter().map(String::as_str).collect::<Vec<_>>(), &["-o", "json"]]
            .concat(),
        cache.path(),
    );
    assert!(class.status.success(), "{}", String::from_utf8_lossy(&class.stderr));
    let class: Json = serde_json::from_slice(&class.stdout).unwrap();
    assert_eq!(class["items"][0]["metadata"]["name"], "docker-scs-1-34-v0-ttl.1712345678");
}

#[tokio::test(flavor = "multi_thread")]
async fn dependencies_come_from_the_cache_offline_and_a_missing_one_fails_the_pull_naming_it() {
    let test = "dependencies_come_from_the_cache_offline_and_a_missing_one_fails_the_pull_naming_it";
    let Some(mut w) = world(test) else { return };
    push_metrics_charts(w.charts.as_ref().unwrap()).await;
    let first = w.publish(1_712_000_000, "1.2.3");
    let cache = tempfile::tempdir().unwrap();
    let pull = |tag: &str, w: &World| {
        clusterstack(
            &[&["pull", tag][..], &w.source_args().iter().map(String::as_str).collect::<Vec<_>>()].concat(),
            cache.path(),
        )
    };
    let out = pull("docker-scs-1-34-v0-ttl.1712000000", &w);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = helm_expected(&w.helm_bin, &first, &w.repo, w.out.path());

    // A newer build of the same charts, published while the dependencies' repositories are up...
    w.publish(1_712_999_999, "1.2.3");
    // ...pulled after they went away: the chart registry stopped, the Helm repository emptied.
    w.charts = None;
    w.repo.serve_repo("/stable", &[]);
    let asked = w.repo.asked().len();
    let out = pull("docker-scs-1-34-v0-ttl.1712999999", &w);
    assert!(out.status.success(), "offline: {}", String::from_utf8_lossy(&out.stderr));
    // The pinned `netpol` 1.2.3 came from the cache without asking; the range `~3.12.0` fell back
    // to the highest cached version that satisfies it.
    assert_eq!(w.repo.asked().len(), asked, "{:?}", &w.repo.asked()[asked..]);
    let ours = render_addons(&w.source_args(), "docker-scs-1-34-v0-ttl-1712999999", cache.path());
    assert_same("offline", &ours, &expected);

    // A dependency nobody has: the pull fails naming the chart, the dependency and its
    // repository, and nothing of the release is cached (so nothing of it renders).
    let src = tempfile::tempdir().unwrap();
    stack_source(src.path(), "127.0.0.1:9", "1.2.9");
    w.push(build_like_the_stack_script(&w.helm_bin, src.path(), w.out.path(), &ttl(1_713_000_000)));
    let out = pull("docker-scs-1-34-v0-ttl.1713000000", &w);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cluster-addon/cni") && err.contains("netpol") && err.contains(PUBLIC_REPO), "{err}");
    let cached = clusterstack::source::cache::entries_under(cache.path());
    assert!(cached.iter().all(|e| e.tag != "docker-scs-1-34-v0-ttl-1713000000"), "{cached:?}");

    // A plain http:// repository named by a release is refused unless a mirror rule points there.
    let src = tempfile::tempdir().unwrap();
    stack_source(src.path(), "127.0.0.1:9", "1.2.3");
    let cni = src.path().join("cluster-addon/cni/Chart.yaml");
    let text = std::fs::read_to_string(&cni).unwrap().replace(&format!("{PUBLIC_REPO}/"), &w.repo.url("/stable"));
    std::fs::write(&cni, text).unwrap();
    w.repo.serve_repo("/stable", &[("netpol", "1.2.3", dep_chart("netpol", "1.2.3"))]);
    w.push(build_like_the_stack_script(&w.helm_bin, src.path(), w.out.path(), &ttl(1_713_000_001)));
    let out = clusterstack(&["pull", "docker-scs-1-34-v0-ttl.1713000001", "--source", &w.source()], cache.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("plain http://") && err.contains("--helm-repo-mirror"), "{err}");
}

/// The operator follows the `ttl` channel of a directory the script built (its directories named
/// in the dot form): the newest build is taken; while a dependency cannot be resolved the release
/// is not ready, its condition names the dependency and nothing is applied; once the mirror has
/// it, the release is resolved, applied and ready.
#[tokio::test(flavor = "multi_thread")]
async fn the_operator_takes_the_newest_ttl_build_and_names_a_missing_dependency_until_it_appears() {
    use support::operator::{NS, Operator, condition, release, release_names, server, settings, wait_for};
    let test = "the_operator_takes_the_newest_ttl_build_and_names_a_missing_dependency_until_it_appears";
    let Some(w) = world(test) else { return };
    push_metrics_charts(w.charts.as_ref().unwrap()).await;
    let older = tempfile::tempdir().unwrap();
    stack_source(older.path(), &w.charts.as_ref().unwrap().host(), "1.2.3");
    build_like_the_stack_script(&w.helm_bin, older.path(), w.out.path(), &ttl(1_712_000_000));
    let newer = tempfile::tempdir().unwrap();
    stack_source(newer.path(), &w.charts.as_ref().unwrap().host(), "1.2.3");
    build_like_the_stack_script(&w.helm_bin, newer.path(), w.out.path(), &ttl(1_712_345_678));
    // The mirror does not have `netpol` yet.
    w.repo.serve_repo("/stable", &[]);

    let server = server().await;
    // The class is a v1beta2 ClusterClass: served beside v1beta1, as CAPI serves both.
    let version = |v: &str, storage: bool| {
        serde_json::json!({"name": v, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    server.put_object(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterclasses.cluster.x-k8s.io"},
        "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                 "names": {"kind": "ClusterClass", "listKind": "ClusterClassList", "plural": "clusterclasses", "singular": "clusterclass"},
                 "versions": [version("v1beta1", true), version("v1beta2", false)]},
    }));
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(SourceSpec::dir(w.out.path().to_path_buf()), cache.path());
    s.chart_dependencies.mirrors = vec![(PUBLIC_REPO.to_string(), w.repo.url("/stable"))];
    s.chart_dependencies.insecure_registries = vec![w.charts_host.clone()];
    let op = Operator::start(&server, s);
    server.put_object(serde_json::json!({
        "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStack",
        "metadata": {"name": "dev", "namespace": NS},
        "spec": {"provider": "docker", "name": "scs", "kubernetesVersion": "1.34", "channel": "ttl",
                 "autoSubscribe": true, "pollInterval": "1s"},
    }));
    let tag = "docker-scs-1-34-v0-ttl-1712345678";
    wait_for("the missing dependency named", || {
        release(&server, tag).and_then(|r| condition(&r, "Ready")).is_some_and(|c| {
            c["status"] == "False"
                && c["message"].as_str().is_some_and(|m| m.contains("netpol") && m.contains("cluster-addon/cni"))
        })
    })
    .await;
    assert_eq!(release_names(&server), [tag], "only the newest build of the channel");
    assert!(
        server
            .get_object("cluster.x-k8s.io/v1beta2", "ClusterClass", Some(NS), "docker-scs-1-34-v0-ttl.1712345678")
            .is_none()
    );

    w.repo.serve_repo("/stable", &[("netpol", "1.2.3", dep_chart("netpol", "1.2.3"))]);
    wait_for("the release ready", || support::operator::ready(&server, tag)).await;
    let r = release(&server, tag).unwrap();
    assert_eq!(r["status"]["kubernetesVersion"], KUBE, "{r:#}");
    op.stop().await;
}
