//! `clusterstack build` resolves Helm chart dependencies as `helm dependency build` does: from a
//! loopback Helm repository of the test's own (an `index.yaml` and `.tgz`s it packs itself), from
//! the real registry (`oci://`), from `file://` paths and from `charts/` offline.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use clusterstack::package::build::{BuildOptions, build_release_with, collect_files, tarball};
use clusterstack::package::deps::DependencyOptions;
use sha2::{Digest, Sha256};

#[path = "support/corpus.rs"]
mod corpus;
#[path = "support/registry.rs"]
mod registry;
use registry::Registry;

/// A Helm repository on 127.0.0.1: serves the files it is given and records the paths asked.
struct Repo {
    port: u16,
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Repo {
    fn start() -> Repo {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let files: Arc<Mutex<BTreeMap<String, Vec<u8>>>> = Arc::default();
        let asked: Arc<Mutex<Vec<String>>> = Arc::default();
        let (f, a) = (files.clone(), asked.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // Skip the headers.
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                a.lock().unwrap().push(path.clone());
                let body = f.lock().unwrap().get(&path).cloned();
                let (status, body) = match body {
                    Some(b) => ("200 OK", b),
                    None => ("404 Not Found", b"not found".to_vec()),
                };
                let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&body));
            }
        });
        Repo { port, files, asked }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn serve(&self, path: &str, bytes: Vec<u8>) {
        self.files.lock().unwrap().insert(path.to_string(), bytes);
    }

    /// Serves `charts` (name, version, archive) as the Helm repository at `dir`: each archive at
    /// `dir/name-version.tgz` (relative URL in the index) with its sha256 digest.
    fn serve_repo(&self, dir: &str, charts: &[(&str, &str, Vec<u8>)]) {
        let mut index = String::from("apiVersion: v1\nentries:\n");
        let mut names: Vec<&str> = charts.iter().map(|c| c.0).collect();
        names.dedup();
        for name in names {
            index += &format!("  {name}:\n");
            for (_, version, bytes) in charts.iter().filter(|c| c.0 == name) {
                index += &format!(
                    "  - name: {name}\n    version: {version}\n    urls:\n    - {name}-{version}.tgz\n    digest: {}\n",
                    hex::encode(Sha256::digest(bytes))
                );
                self.serve(&format!("{dir}/{name}-{version}.tgz"), bytes.clone());
            }
        }
        self.serve(&format!("{dir}/index.yaml"), index.into_bytes());
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

/// A chart of the test's own: one ConfigMap naming the chart and its version.
fn chart(name: &str, version: &str) -> Vec<u8> {
    let files = BTreeMap::from([
        ("Chart.yaml".to_string(), format!("apiVersion: v2\nname: {name}\nversion: {version}\n").into_bytes()),
        ("values.yaml".to_string(), b"greeting: hello\n".to_vec()),
        (
            "templates/cm.yaml".to_string(),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Release.Name }}}}-{name}\ndata:\n  chart: {name}-{version}\n  greeting: {{{{ .Values.greeting }}}}\n"
            )
            .into_bytes(),
        ),
    ]);
    tarball(&files, &format!("{name}/")).unwrap()
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A stack source with one addon `app` whose `Chart.yaml` has `dependencies`.
fn stack(dir: &Path, dependencies: &str) {
    write(
        dir,
        &[
            (
                "csctl.yaml",
                "apiVersion: csctl.clusterstack.x-k8s.io/v1alpha1\nconfig:\n  kubernetesVersion: v1.30.4\n  clusterStackName: deps\n  provider:\n    type: docker\n    apiVersion: docker.csctl.clusterstack.x-k8s.io/v1alpha1\n",
            ),
            ("cluster-class/Chart.yaml", "apiVersion: v2\nname: docker-deps-1-30-cluster-class\nversion: v1\n"),
            (
                "cluster-class/templates/cc.yaml",
                "apiVersion: cluster.x-k8s.io/v1beta1\nkind: ClusterClass\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}\n",
            ),
            (
                "clusteraddon.yaml",
                "apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\nclusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1\naddonStages:\n  AfterControlPlaneInitialized:\n    - name: app\n      action: apply\n",
            ),
            (
                "cluster-addon/app/Chart.yaml",
                &format!("apiVersion: v2\nname: app\nversion: v1\ndependencies:\n{dependencies}"),
            ),
        ],
    );
}

/// The files of the addon asset of a built release.
fn addon_asset(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let tgz = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("-cluster-addon-"))
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(tgz).unwrap());
    tar::Archive::new(gz).unpack(out.path()).unwrap();
    collect_files(out.path()).unwrap()
}

fn opts(source: &Path, out: &Path) -> BuildOptions {
    BuildOptions { source_dir: source.into(), out_dir: out.into(), version: None }
}

fn deps(repo: &Repo, mirrors: &[(&str, &str)], cache: Option<&Path>) -> DependencyOptions {
    DependencyOptions {
        mirrors: mirrors.iter().map(|(a, b)| (a.to_string(), repo.url(b))).collect(),
        cache_dir: cache.map(Path::to_path_buf),
        ..Default::default()
    }
}

#[test]
fn the_highest_matching_version_is_fetched_verified_vendored_and_cached() {
    let repo = Repo::start();
    repo.serve_repo(
        "/r",
        &[
            ("lib", "1.0.0", chart("lib", "1.0.0")),
            ("lib", "1.2.0", chart("lib", "1.2.0")),
            ("lib", "2.0.0", chart("lib", "2.0.0")),
        ],
    );
    let src = tempfile::tempdir().unwrap();
    stack(src.path(), "  - name: lib\n    version: ^1.0.0\n    repository: https://charts.example.com/stable\n");
    let (out, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mirror = deps(&repo, &[("https://charts.example.com/stable", "/r")], Some(cache.path()));
    let built = build_release_with(&opts(src.path(), out.path()), &mirror).unwrap();
    let files = addon_asset(&built.dir);
    assert_eq!(files["app/charts/lib-1.2.0.tgz"], chart("lib", "1.2.0"));
    assert!(!files.keys().any(|k| k.contains("lib-1.0.0") || k.contains("lib-2.0.0")), "{:?}", files.keys());
    // The source is left as it was.
    assert!(!src.path().join("cluster-addon/app/charts").exists());

    // Built again: the archive comes from the cache, only the index is asked for.
    let before = repo.asked().len();
    build_release_with(&opts(src.path(), tempfile::tempdir().unwrap().path()), &mirror).unwrap();
    assert_eq!(repo.asked()[before..], ["/r/index.yaml".to_string()]);
}

#[test]
fn a_download_that_does_not_match_the_index_digest_is_refused() {
    let repo = Repo::start();
    repo.serve_repo("/r", &[("lib", "1.0.0", chart("lib", "1.0.0"))]);
    repo.serve("/r/lib-1.0.0.tgz", chart("lib", "1.0.1"));
    let src = tempfile::tempdir().unwrap();
    stack(src.path(), "  - name: lib\n    version: 1.0.0\n    repository: https://charts.example.com\n");
    let err = build_release_with(
        &opts(src.path(), tempfile::tempdir().unwrap().path()),
        &deps(&repo, &[("https://charts.example.com", "/r")], None),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("cluster-addon/app/Chart.yaml"), "{err}");
    assert!(err.contains("dependency lib (https://charts.example.com)"), "{err}");
    assert!(err.contains("digest mismatch"), "{err}");
}

#[test]
fn a_missing_version_names_the_dependency_and_the_repository() {
    let repo = Repo::start();
    repo.serve_repo("/r", &[("lib", "1.0.0", chart("lib", "1.0.0"))]);
    let src = tempfile::tempdir().unwrap();
    stack(src.path(), "  - name: lib\n    version: \">=3\"\n    repository: https://charts.example.com\n");
    let err = build_release_with(
        &opts(src.path(), tempfile::tempdir().unwrap().path()),
        &deps(&repo, &[("https://charts.example.com", "/r")], None),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("dependency lib (https://charts.example.com)"), "{err}");
    assert!(err.contains("no version of lib that satisfies \">=3\""), "{err}");
}

#[test]
fn charts_already_vendored_are_used_offline_and_file_paths_are_packed() {
    let repo = Repo::start();
    let src = tempfile::tempdir().unwrap();
    stack(
        src.path(),
        "  - name: lib\n    version: ~1.2.0\n    repository: https://charts.example.com\n  - name: local\n    version: 0.3.0\n    repository: file://../../local\n",
    );
    std::fs::create_dir_all(src.path().join("cluster-addon/app/charts")).unwrap();
    std::fs::write(src.path().join("cluster-addon/app/charts/lib-1.2.3.tgz"), chart("lib", "1.2.3")).unwrap();
    write(
        src.path(),
        &[
            ("local/Chart.yaml", "apiVersion: v2\nname: local\nversion: 0.3.0\n"),
            ("local/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local\n"),
        ],
    );
    let out = tempfile::tempdir().unwrap();
    let built =
        build_release_with(&opts(src.path(), out.path()), &deps(&repo, &[("https://charts.example.com", "/r")], None))
            .unwrap();
    assert!(repo.asked().is_empty(), "{:?}", repo.asked());
    let files = addon_asset(&built.dir);
    assert_eq!(files["app/charts/lib-1.2.3.tgz"], chart("lib", "1.2.3"));
    assert!(files.contains_key("app/charts/local-0.3.0.tgz"), "{:?}", files.keys());
}

#[test]
fn a_lock_out_of_sync_with_chart_yaml_is_refused() {
    let repo = Repo::start();
    let src = tempfile::tempdir().unwrap();
    stack(src.path(), "  - name: lib\n    version: ^1.0.0\n    repository: https://charts.example.com\n");
    write(
        src.path(),
        &[(
            "cluster-addon/app/Chart.lock",
            "dependencies:\n- name: lib\n  repository: https://charts.example.com\n  version: 1.0.0\ndigest: sha256:0000\n",
        )],
    );
    let err = build_release_with(
        &opts(src.path(), tempfile::tempdir().unwrap().path()),
        &deps(&repo, &[("https://charts.example.com", "/r")], None),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("cluster-addon/app/Chart.lock"), "{err}");
    assert!(err.contains("out of sync"), "{err}");
}

fn copy_dir(from: &Path, to: &Path) {
    for (name, bytes) in collect_files(from).unwrap() {
        let path = to.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// `openstack/scs2` names its four addon charts as dependencies in three public Helm
/// repositories; served here (charts of the test's own under those names and versions) from
/// 127.0.0.1 through `--helm-repo-mirror`-style rewrites.
#[test]
fn scs2_resolves_its_four_dependencies_from_a_loopback_repository() {
    let Some(corpus) = corpus::require_corpus("scs2_resolves_its_four_dependencies_from_a_loopback_repository") else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    copy_dir(&corpus.join("stacks/openstack/scs2"), src.path());
    let repo = Repo::start();
    repo.serve_repo(
        "/openstack",
        &[
            ("openstack-cloud-controller-manager", "2.34.2", chart("openstack-cloud-controller-manager", "2.34.2")),
            ("openstack-cinder-csi", "2.34.3", chart("openstack-cinder-csi", "2.34.3")),
        ],
    );
    repo.serve_repo("/cilium", &[("cilium", "1.18.9", chart("cilium", "1.18.9"))]);
    repo.serve_repo("/metrics-server", &[("metrics-server", "3.13.0", chart("metrics-server", "3.13.0"))]);
    let mirror = deps(
        &repo,
        &[
            ("https://kubernetes.github.io/cloud-provider-openstack", "/openstack"),
            ("https://helm.cilium.io", "/cilium"),
            ("https://kubernetes-sigs.github.io/metrics-server", "/metrics-server"),
        ],
        None,
    );
    let out = tempfile::tempdir().unwrap();
    let built = build_release_with(&opts(src.path(), out.path()), &mirror).unwrap();
    let files = addon_asset(&built.dir);
    for (addon, dep) in [
        ("ccm", "openstack-cloud-controller-manager-2.34.2"),
        ("csi", "openstack-cinder-csi-2.34.3"),
        ("cni", "cilium-1.18.9"),
        ("metrics-server", "metrics-server-3.13.0"),
    ] {
        let (name, version) = dep.rsplit_once('-').unwrap();
        assert_eq!(files[&format!("{addon}/charts/{dep}.tgz")], chart(name, version), "{addon}");
    }

    // The release renders the vendored charts as helm would: each addon's ConfigMap.
    let cluster = src.path().join("cluster.yaml");
    std::fs::write(
        &cluster,
        "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: wl\n  namespace: ns\nspec:\n  controlPlaneEndpoint: {host: 10.0.0.1, port: 6443}\n  topology: {class: c, version: v1.34.7}\n",
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(["render", built.dir.to_str().unwrap(), "--addons", "--cluster", cluster.to_str().unwrap(), "-o", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut charts: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["data"]["chart"].as_str().map(str::to_string))
        .collect();
    charts.sort();
    assert_eq!(
        charts,
        [
            "cilium-1.18.9",
            "metrics-server-3.13.0",
            "openstack-cinder-csi-2.34.3",
            "openstack-cloud-controller-manager-2.34.2"
        ]
    );
}

/// Pushes `chart` as `helm push` does: a config blob, the chart layer, an OCI manifest.
async fn push_chart(base: &str, repository: &str, tag: &str, chart: &[u8]) {
    let http = reqwest::Client::new();
    let mut layers = Vec::new();
    for (media, bytes) in [
        ("application/vnd.cncf.helm.config.v1+json", b"{}".to_vec()),
        ("application/vnd.cncf.helm.chart.content.v1.tar+gzip", chart.to_vec()),
    ] {
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        let resp = http.post(format!("{base}/v2/{repository}/blobs/uploads/")).send().await.unwrap();
        let location = resp.headers()["location"].to_str().unwrap().to_string();
        let location = if location.starts_with('/') { format!("{base}{location}") } else { location };
        let sep = if location.contains('?') { '&' } else { '?' };
        let put = http.put(format!("{location}{sep}digest={digest}")).body(bytes.clone()).send().await.unwrap();
        assert!(put.status().is_success(), "{}", put.status());
        layers.push(serde_json::json!({"mediaType": media, "digest": digest, "size": bytes.len()}));
    }
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": layers[0],
        "layers": [layers[1]],
    });
    let put = http
        .put(format!("{base}/v2/{repository}/manifests/{tag}"))
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(serde_json::to_vec(&manifest).unwrap())
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
}

#[tokio::test]
async fn oci_dependencies_come_from_the_registry_exact_or_by_range() {
    let Some(registry) = Registry::start("oci_dependencies_come_from_the_registry_exact_or_by_range") else { return };
    clusterstack::install_crypto_provider();
    let base = format!("http://127.0.0.1:{}", registry.port());
    for v in ["0.9.0", "1.1.0", "1.4.0", "2.0.0"] {
        push_chart(&base, "charts/lib", v, &chart("lib", v)).await;
    }
    push_chart(&base, "charts/other", "3.0.0", &chart("other", "3.0.0")).await;
    let src = tempfile::tempdir().unwrap();
    let repo = format!("oci://127.0.0.1:{}/charts", registry.port());
    stack(
        src.path(),
        &format!(
            "  - name: lib\n    version: \">=1.0.0 <2.0.0\"\n    repository: {repo}\n  - name: other\n    version: 3.0.0\n    repository: {repo}\n"
        ),
    );
    let out = tempfile::tempdir().unwrap();
    let (src_path, out_path) = (src.path().to_path_buf(), out.path().to_path_buf());
    let built = tokio::task::spawn_blocking(move || {
        build_release_with(&opts(&src_path, &out_path), &DependencyOptions::default())
    })
    .await
    .unwrap()
    .unwrap();
    let files = addon_asset(&built.dir);
    assert_eq!(files["app/charts/lib-1.4.0.tgz"], chart("lib", "1.4.0"));
    assert_eq!(files["app/charts/other-3.0.0.tgz"], chart("other", "3.0.0"));

    // A tag that is not there names the dependency and the registry.
    let bad = tempfile::tempdir().unwrap();
    stack(bad.path(), &format!("  - name: lib\n    version: 9.9.9\n    repository: {repo}\n"));
    let bad_path = bad.path().to_path_buf();
    let err = tokio::task::spawn_blocking(move || {
        build_release_with(&opts(&bad_path, tempfile::tempdir().unwrap().path()), &DependencyOptions::default())
    })
    .await
    .unwrap()
    .unwrap_err()
    .to_string();
    assert!(err.contains(&format!("dependency lib ({repo})")), "{err}");
}
