//! Building a Helm-format stack source (Sovereign Cloud Stack's layout): the
//! release has csctl's asset names and layout, its metadata, and a cluster
//! class chart versioned so the class is named after the release.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use clusterstack::package::build::{BuildError, BuildOptions, build_release};
use clusterstack::release::{ReleaseMetadata, StackVersion};
use helm_render::{HelmOptions, load_chart, render_chart};

fn source() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/helm-stack")
}

/// Path → content of every regular file in a `.tgz`, plus its directory entries.
fn tgz_entries(path: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let bytes = std::fs::read(path).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
    let mut out = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string();
        if entry.header().entry_type().is_dir() {
            out.insert(name, None);
        } else {
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            out.insert(name, Some(content));
        }
    }
    out
}

#[test]
fn helm_stack_builds_with_csctl_names_and_layout() {
    let out = tempfile::tempdir().unwrap();
    let built =
        build_release(&BuildOptions { source_dir: source(), out_dir: out.path().into(), version: None }).unwrap();
    assert_eq!(built.id.tag(), "docker-scs-1-30-v1");
    assert_eq!(built.dir, out.path().join("docker-scs-1-30-v1"));
    assert_eq!(
        built.assets,
        [
            "SHA256SUMS",
            "clusteraddon.yaml",
            "docker-scs-1-30-cluster-addon-v1.tgz",
            "docker-scs-1-30-cluster-class-v1.tgz",
            "hashes.json",
            "metadata.yaml",
            "node-images.yaml",
        ]
    );

    let metadata =
        ReleaseMetadata::parse("metadata.yaml", &std::fs::read_to_string(built.dir.join("metadata.yaml")).unwrap())
            .unwrap();
    assert_eq!(metadata.versions.cluster_stack, StackVersion::Stable(1));
    assert_eq!(metadata.versions.kubernetes.to_string(), "v1.30.10");
    assert_eq!(metadata.versions.components.cluster_addon, StackVersion::Stable(1));
    assert_eq!(metadata.versions.components.node_image, Some(StackVersion::Stable(1)));

    // The class chart: one top directory named by the chart, as `helm package` writes it,
    // with the stack version in Chart.yaml.
    let class = tgz_entries(&built.dir.join("docker-scs-1-30-cluster-class-v1.tgz"));
    assert!(class.keys().all(|k| k.starts_with("docker-scs-1-30-cluster-class/")), "{:?}", class.keys());
    let chart = String::from_utf8(class["docker-scs-1-30-cluster-class/Chart.yaml"].clone().unwrap()).unwrap();
    assert!(chart.contains("\nversion: v1\n"), "{chart}");
    assert!(class.contains_key("docker-scs-1-30-cluster-class/templates/_helpers.tpl"));

    // The addons: cluster-addon/ as it is, one directory per addon; vendored charts and
    // the addon charts' own versions untouched.
    let addon = tgz_entries(&built.dir.join("docker-scs-1-30-cluster-addon-v1.tgz"));
    let vendored = std::fs::read(source().join("cluster-addon/cni/charts/kindnet-1.0.0.tgz")).unwrap();
    assert_eq!(addon["cni/charts/kindnet-1.0.0.tgz"].as_deref(), Some(vendored.as_slice()));
    let cni_chart = String::from_utf8(addon["cni/Chart.yaml"].clone().unwrap()).unwrap();
    assert!(cni_chart.contains("version: 0.1.0"), "{cni_chart}");
    assert!(addon.contains_key("metrics-server/templates/deployment.yaml"));
    assert!(!addon.keys().any(|k| k.starts_with("cluster-addon")), "{:?}", addon.keys());

    // Copied verbatim.
    for file in ["clusteraddon.yaml", "node-images.yaml"] {
        assert_eq!(std::fs::read(built.dir.join(file)).unwrap(), std::fs::read(source().join(file)).unwrap());
    }

    // What the Go operator does with it: `helm template docker-scs-1-30 <class tgz>`.
    let chart = load_chart(&built.dir.join("docker-scs-1-30-cluster-class-v1.tgz")).unwrap();
    let manifests = render_chart(&chart, &HelmOptions::new("docker-scs-1-30", "ns1")).unwrap();
    let class_doc = manifests.iter().find(|m| m.content.contains("kind: ClusterClass")).unwrap();
    assert!(class_doc.content.contains("name: docker-scs-1-30-v1\n"), "{}", class_doc.content);
    assert!(class_doc.content.contains("name: docker-scs-1-30-v1-control-plane\n"), "{}", class_doc.content);
}

#[test]
fn helm_stack_builds_reproducibly_and_keeps_unchanged_addons() {
    let out = tempfile::tempdir().unwrap();
    let one = build_release(&BuildOptions { source_dir: source(), out_dir: out.path().into(), version: None }).unwrap();
    let two = build_release(&BuildOptions { source_dir: source(), out_dir: out.path().into(), version: None }).unwrap();
    assert_eq!(two.id.tag(), "docker-scs-1-30-v2");
    // Unchanged addons keep their version and bytes.
    assert_eq!(two.metadata.versions.components.cluster_addon, StackVersion::Stable(1));
    assert!(two.assets.contains(&"docker-scs-1-30-cluster-addon-v1.tgz".to_string()));
    assert_eq!(
        std::fs::read(one.dir.join("docker-scs-1-30-cluster-addon-v1.tgz")).unwrap(),
        std::fs::read(two.dir.join("docker-scs-1-30-cluster-addon-v1.tgz")).unwrap()
    );

    let other = tempfile::tempdir().unwrap();
    let again =
        build_release(&BuildOptions { source_dir: source(), out_dir: other.path().into(), version: None }).unwrap();
    for asset in &one.assets {
        assert_eq!(
            std::fs::read(one.dir.join(asset)).unwrap(),
            std::fs::read(again.dir.join(asset)).unwrap(),
            "{asset}"
        );
    }
}

/// Copies a source tree (for tests that change it).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn a_class_not_named_after_the_release_is_refused() {
    let src = tempfile::tempdir().unwrap();
    copy_tree(&source(), src.path());
    let file = src.path().join("cluster-class/templates/_helpers.tpl");
    let text =
        std::fs::read_to_string(&file).unwrap().replace("{{ .Release.Name }}-{{ .Chart.Version }}", "fixed-name");
    std::fs::write(&file, text).unwrap();
    let out = tempfile::tempdir().unwrap();
    let err = build_release(&BuildOptions { source_dir: src.path().into(), out_dir: out.path().into(), version: None })
        .unwrap_err();
    assert!(matches!(err, BuildError::Config { .. }), "{err}");
    assert!(err.to_string().contains("\"fixed-name\""), "{err}");
    assert!(err.to_string().contains("docker-scs-1-30-v1"), "{err}");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "nothing was written");
}

#[test]
fn a_template_error_names_the_part_and_nothing_is_written() {
    let src = tempfile::tempdir().unwrap();
    copy_tree(&source(), src.path());
    std::fs::write(
        src.path().join("cluster-addon/metrics-server/templates/broken.yaml"),
        "x: {{ .Values.nope.deeper }}\n",
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let err = build_release(&BuildOptions { source_dir: src.path().into(), out_dir: out.path().into(), version: None })
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("cluster-addon/metrics-server/templates/broken.yaml:1"), "{text}");
    assert!(text.contains(".Values.nope.deeper"), "{text}");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "nothing was written");
}

#[test]
fn single_chart_addons_are_packed_with_their_values_template() {
    let src = tempfile::tempdir().unwrap();
    copy_tree(&source(), src.path());
    // The older layout: cluster-addon/ is one chart, values in cluster-addon-values.yaml.
    std::fs::remove_dir_all(src.path().join("cluster-addon")).unwrap();
    std::fs::remove_file(src.path().join("clusteraddon.yaml")).unwrap();
    copy_tree(&source().join("cluster-addon/metrics-server"), &src.path().join("cluster-addon"));
    std::fs::write(
        src.path().join("cluster-addon/Chart.yaml"),
        "apiVersion: v2\nname: docker-scs-1-30-cluster-addon\nversion: v0\n",
    )
    .unwrap();
    std::fs::write(src.path().join("cluster-addon-values.yaml"), "values: |\n  replicas: 2\n").unwrap();
    let out = tempfile::tempdir().unwrap();
    let built =
        build_release(&BuildOptions { source_dir: src.path().into(), out_dir: out.path().into(), version: None })
            .unwrap();
    assert!(built.assets.contains(&"cluster-addon-values.yaml".to_string()), "{:?}", built.assets);
    assert!(!built.assets.contains(&"clusteraddon.yaml".to_string()));
    let addon = tgz_entries(&built.dir.join("docker-scs-1-30-cluster-addon-v1.tgz"));
    let chart = String::from_utf8(addon["docker-scs-1-30-cluster-addon/Chart.yaml"].clone().unwrap()).unwrap();
    assert!(chart.contains("version: v1"), "{chart}");
}

/// `clusterstack render` on a Helm-format release directory that is not named by its tag: the tag
/// is read from the assets, the class renders under the release's name, the addons with the
/// release's Kubernetes version, as the Go operator renders them.
#[test]
fn render_reads_the_tag_of_a_renamed_helm_release_and_renders_class_and_addons() {
    let out = tempfile::tempdir().unwrap();
    let built =
        build_release(&BuildOptions { source_dir: source(), out_dir: out.path().into(), version: None }).unwrap();
    let renamed = out.path().join("downloaded");
    std::fs::rename(&built.dir, &renamed).unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_clusterstack")).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let dir = renamed.to_str().unwrap();
    let class: serde_json::Value =
        serde_json::from_str(&run(&["render", dir, "--namespace", "stacks", "-o", "json"])).unwrap();
    let items = class["items"].as_array().unwrap();
    let cc = items.iter().find(|o| o["kind"] == "ClusterClass").expect("a ClusterClass");
    assert_eq!(cc["metadata"]["name"], "docker-scs-1-30-v1");
    assert_eq!(cc["metadata"]["namespace"], "stacks");

    let cluster = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("templates/example-cluster.yaml");
    let addons: serde_json::Value =
        serde_json::from_str(&run(&["render", dir, "--addons", "--cluster", cluster.to_str().unwrap(), "-o", "json"]))
            .unwrap();
    let items = addons["items"].as_array().unwrap();
    assert!(!items.is_empty());
    // Namespaced addon objects go to kube-system unless their chart says otherwise (release `cluster-addon`).
    assert!(items.iter().any(|o| o["metadata"]["namespace"] == "kube-system"), "{addons}");
}

/// A failing template in a release directory: the error names the release directory's cluster-class
/// asset, the template and the line, never the temporary directory it was extracted to.
#[test]
fn render_errors_name_the_release_not_the_extraction_directory() {
    let out = tempfile::tempdir().unwrap();
    let built =
        build_release(&BuildOptions { source_dir: source(), out_dir: out.path().into(), version: None }).unwrap();
    // Replace the class tarball with one whose template fails on line 2.
    let asset = built.dir.join("docker-scs-1-30-cluster-class-v1.tgz");
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (name, text) in [
        (
            "docker-scs-1-30-cluster-class/Chart.yaml",
            "apiVersion: v2\nname: docker-scs-1-30-cluster-class\nversion: v1\n",
        ),
        ("docker-scs-1-30-cluster-class/templates/cc.yaml", "kind: ClusterClass\nname: {{ .Values.nope.deeper }}\n"),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, name, text.as_bytes()).unwrap();
    }
    std::fs::write(&asset, builder.into_inner().unwrap().finish().unwrap()).unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(["render", built.dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    let expected = format!("{}[cluster-class]/docker-scs-1-30-cluster-class/templates/cc.yaml:2", built.dir.display());
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(stderr.contains("nil pointer evaluating interface {}.deeper"), "{stderr}");
}
