//! Releases built as Sovereign Cloud Stack's stack repository builds them (`hack/build.sh`, which
//! replaces csctl) and pushed as it pushes them (oras, artifact type
//! `application/vnd.clusterstack.release`): the class packed by the real `helm package`, the addon
//! charts tarred by the system's `tar` without their `charts/`, `metadata.yaml` indented by four,
//! `hashes.json` holding only the git sha, a generated `csctl.yaml`, pushed by PyPI's oras client.
//! Included by the tests that need it: `#[path = "support/stack_script.rs"] mod stack_script;`.

// Each test binary uses a different part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The git sha the script writes into `hashes.json`.
pub const GIT_SHA: &str = "9baa57c2b6f0e3b1c8d4a5f6e7d8c9b0a1b2c3d4";

pub fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// What the script reads from a version directory's `stack.yaml` and decides.
pub struct Stack<'a> {
    pub provider: &'a str,
    /// `clusterStackName`.
    pub name: &'a str,
    /// The resolved Kubernetes version, `v1.34.1`.
    pub kubernetes: &'a str,
    /// `v<N>`, or `v0-ttl.<unix time>` for a development build.
    pub version: String,
}

impl Stack<'_> {
    /// `<provider>-<name>-<major>-<minor>`.
    pub fn prefix(&self) -> String {
        let minor: Vec<&str> = self.kubernetes.trim_start_matches('v').split('.').take(2).collect();
        format!("{}-{}-{}", self.provider, self.name, minor.join("-"))
    }
}

/// `hack/build.sh`'s `build_version_dir`, step by step, for the version directory `source`
/// (`cluster-class/`, `cluster-addon/<addon>/`, optional `clusteraddon.yaml`): returns the release
/// directory (named, as the script names it, `<prefix>-<version>`: the class form).
pub fn build_like_the_stack_script(helm_bin: &Path, source: &Path, out: &Path, stack: &Stack<'_>) -> PathBuf {
    let (version, prefix, kube) = (&stack.version, stack.prefix(), stack.kubernetes);
    let release_dir = out.join(format!("{prefix}-{version}"));
    std::fs::create_dir_all(&release_dir).unwrap();
    let work = tempfile::tempdir().unwrap();
    copy_dir(&source.join("cluster-class"), &work.path().join("cluster-class"));
    copy_dir(&source.join("cluster-addon"), &work.path().join("cluster-addon"));
    // yq -i '.name = ...' and '.version = ...'
    std::fs::write(
        work.path().join("cluster-class/Chart.yaml"),
        format!("apiVersion: v2\nname: {prefix}-cluster-class\nversion: {version}\n"),
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(work.path().join("cluster-class/charts"));
    run(Command::new(helm_bin)
        .arg("package")
        .arg(work.path().join("cluster-class"))
        .arg("-d")
        .arg(&release_dir)
        .env("HELM_CACHE_HOME", work.path().join("helm-cache"))
        .env("HELM_CONFIG_HOME", work.path().join("helm-config"))
        .env("HELM_DATA_HOME", work.path().join("helm-data")));
    // Each addon without its charts/, tarred as `tar -czf ... */`.
    let addon_temp = tempfile::tempdir().unwrap();
    let mut addons: Vec<String> = std::fs::read_dir(work.path().join("cluster-addon"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    addons.sort();
    for addon in &addons {
        copy_dir(&work.path().join("cluster-addon").join(addon), &addon_temp.path().join(addon));
        let _ = std::fs::remove_dir_all(addon_temp.path().join(addon).join("charts"));
    }
    run(Command::new("tar")
        .current_dir(addon_temp.path())
        .arg("-czf")
        .arg(release_dir.join(format!("{prefix}-cluster-addon-{version}.tgz")))
        .args(addons.iter().map(|a| format!("{a}/"))));
    if source.join("clusteraddon.yaml").is_file() {
        std::fs::copy(source.join("clusteraddon.yaml"), release_dir.join("clusteraddon.yaml")).unwrap();
    }
    std::fs::write(
        release_dir.join("csctl.yaml"),
        format!(
            "apiVersion: csctl.clusterstack.x-k8s.io/v1alpha1\nconfig:\n  provider:\n    type: {}\n  clusterStackName: {}\n  kubernetesVersion: {kube}\n",
            stack.provider, stack.name
        ),
    )
    .unwrap();
    std::fs::write(
        release_dir.join("metadata.yaml"),
        format!("apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions:\n    kubernetes: {kube}\n    clusterStack: {version}\n    components:\n        clusterAddon: {version}\n        nodeImage: {version}\n"),
    )
    .unwrap();
    std::fs::write(release_dir.join("hashes.json"), format!("{{\n  \"clusterStack\": \"{GIT_SHA}\"\n}}\n")).unwrap();
    release_dir
}

/// python3 with PyPI's oras importable (`CLUSTERSTACK_ORAS_PYTHONPATH`, as `.ci/run` installs it).
pub fn python() -> Command {
    let mut cmd = Command::new("python3");
    if let Ok(p) = std::env::var("CLUSTERSTACK_ORAS_PYTHONPATH") {
        cmd.env("PYTHONPATH", p);
    }
    cmd
}

/// Whether oras can be imported; a loud SKIPPED line when not (a panic under `CI=true`).
pub fn oras_available(test: &str) -> bool {
    let ok = python()
        .args(["-c", "import oras.client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: python3 cannot import oras (CI=true): set CLUSTERSTACK_ORAS_PYTHONPATH");
        }
        eprintln!("\n*** SKIPPED {test}: python3 cannot import oras (set CLUSTERSTACK_ORAS_PYTHONPATH) ***\n");
    }
    ok
}

/// `oras push HOST/REPO:TAG --artifact-type application/vnd.clusterstack.release FILES...` in the
/// release directory, with PyPI's oras client: it has no `--artifact-type`, so the script lays
/// the manifest out as the oras CLI does with it (image manifest v1.1: `artifactType`, the empty
/// config `{}` as `application/vnd.oci.empty.v1+json`), each file a layer of oras' default media
/// type named by its title annotation.
const ORAS_PUSH: &str = r#"
import os, sys, tempfile, oras.client, oras.oci, oras.defaults
host, target, artifact_type = sys.argv[1:4]
reg = oras.client.OrasClient(hostname=host, insecure=True)
container = reg.get_container(target)
manifest = oras.oci.NewManifest()
for f in sorted(sys.argv[4:]):
    layer = oras.oci.NewLayer(f)
    layer["annotations"] = {oras.defaults.annotation_title: os.path.basename(f)}
    reg._check_200_response(reg.upload_blob(f, container, layer))
    manifest["layers"].append(layer)
with tempfile.TemporaryDirectory() as d:
    empty = os.path.join(d, "config.json")
    open(empty, "w").write("{}")
    conf = {"mediaType": "application/vnd.oci.empty.v1+json", "digest": oras.defaults.blank_config_hash, "size": 2}
    reg._check_200_response(reg.upload_blob(empty, container, conf))
manifest["config"] = conf
manifest["artifactType"] = artifact_type
reg._check_200_response(reg.upload_manifest(manifest, container))
"#;

pub fn oras_push(host: &str, target: &str, release_dir: &Path) {
    let files: Vec<String> = std::fs::read_dir(release_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    run(python()
        .current_dir(release_dir)
        .args(["-c", ORAS_PUSH, host, target, "application/vnd.clusterstack.release"])
        .args(&files)
        .stdout(Stdio::null()));
}
