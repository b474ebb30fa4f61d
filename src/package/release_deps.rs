//! The consumer's side of charts published without their `charts/`: Sovereign Cloud Stack's stack
//! repository's build script packs each addon chart without its vendored dependencies and leaves
//! resolving them from `Chart.yaml`/`Chart.lock` to whoever renders it (the Go operator runs
//! `helm template --dependency-update`, which fetches them on every render).
//!
//! Here they are resolved once, when a release enters the verified cache ([`ChartDependencies`],
//! the cache's [`Prepare`] step), for a chart whose `charts/` lacks a dependency by name (as
//! helm's `CheckDependencies` decides; a vendored chart of another version is used as it is, so
//! complete releases never reach the network): as `build` vendors them ([`super::deps`]: the
//! lock's versions or the highest satisfying one; `https://` repositories checked against the
//! index's digest, `oci://` against the manifest's; the `--helm-repo-mirror` rules; the
//! content-addressed download cache, so a dependency pinned to a version the cache holds needs
//! no network), written into the chart's `charts/` before the manifest records every extracted
//! file. The renderer then reads a
//! complete chart and never reaches the network. A dependency that cannot be resolved fails the
//! fetch with its chart, name and repository: the release is not cached, so nothing of it renders.
//!
//! A release is not the operator's: its `file://` dependencies must stay inside the release, a
//! plain `http://` repository is refused unless a mirror rule (the operator's own) points there,
//! and a loopback registry unless the operator's insecure-registry setting names it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::deps::{DependencyOptions, missing_dependencies, vendor_chart};
use crate::release::ReleaseId;
use crate::source::cache::Prepare;

/// Resolves the dependencies of a downloaded release's charts; see the module documentation.
#[derive(Debug, Clone)]
pub struct ChartDependencies {
    opts: DependencyOptions,
}

impl ChartDependencies {
    /// Resolving with `opts` (its `file_root` is set per release; `https_only` is forced on).
    pub fn new(opts: DependencyOptions) -> Self {
        Self { opts: DependencyOptions { https_only: true, ..opts } }
    }
}

impl Prepare for ChartDependencies {
    fn prepare(&self, id: &ReleaseId, staging: &Path, class_chart: &Path, addons: Option<&Path>) -> Result<(), String> {
        let opts = DependencyOptions { file_root: Some(staging.to_path_buf()), ..self.opts.clone() };
        let mut charts = vec![(class_chart.to_path_buf(), "cluster-class".to_string())];
        if let Some(bundle) = addons {
            if bundle.join("Chart.yaml").is_file() {
                charts.push((bundle.to_path_buf(), "cluster-addon".to_string()));
            } else {
                let mut dirs: Vec<_> = std::fs::read_dir(bundle)
                    .map_err(|e| format!("cannot read {}: {e}", bundle.display()))?
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.path().join("Chart.yaml").is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                dirs.sort();
                charts.extend(dirs.into_iter().map(|d| (bundle.join(&d), format!("cluster-addon/{d}"))));
            }
        }
        for (dir, label) in charts {
            let n = resolve_chart(&dir, &label, &opts)?;
            if n > 0 {
                tracing::info!(release = %id, chart = label, dependencies = n, "resolved chart dependencies");
            }
        }
        Ok(())
    }
}

/// Resolves the dependencies of the chart in `dir` missing from its `charts/`, writing each
/// there; returns how many were fetched.
pub fn resolve_chart(dir: &Path, label: &str, opts: &DependencyOptions) -> Result<usize, String> {
    let read = |rel: &str| std::fs::read(dir.join(rel)).map_err(|e| format!("cannot read {label}/{rel}: {e}"));
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for name in ["Chart.yaml", "Chart.lock", "requirements.yaml", "requirements.lock"] {
        if dir.join(name).is_file() {
            files.insert(name.to_string(), read(name)?);
        }
    }
    // What `charts/` already holds: archives, and the `Chart.yaml` of chart directories (all the
    // resolver reads of them).
    if let Ok(entries) = std::fs::read_dir(dir.join("charts")) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_file() && name.ends_with(".tgz") {
                files.insert(format!("charts/{name}"), read(&format!("charts/{name}"))?);
            } else if kind.is_dir() && entry.path().join("Chart.yaml").is_file() {
                files.insert(format!("charts/{name}/Chart.yaml"), read(&format!("charts/{name}/Chart.yaml"))?);
            }
        }
    }
    // As `helm template --dependency-update` (the Go operator's): nothing is fetched while every
    // dependency has a chart of its name in `charts/`, whatever its version.
    if missing_dependencies(&files, "", label).map_err(|e| e.to_string())?.is_empty() {
        return Ok(0);
    }
    let before: BTreeSet<String> = files.keys().cloned().collect();
    let fetched = vendor_chart(&mut files, "", dir, label, opts).map_err(|e| e.to_string())?;
    // A stale copy the resolver replaced (helm replaces `charts/` as a whole).
    for gone in before.iter().filter(|k| !files.contains_key(*k)) {
        let path = match gone.strip_suffix("/Chart.yaml") {
            Some(sub) => dir.join(sub),
            None => dir.join(gone),
        };
        let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        removed.map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    }
    for (rel, bytes) in files.iter().filter(|(k, _)| !before.contains(*k)) {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(fetched)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(name: &str, version: &str) -> Vec<u8> {
        let files = BTreeMap::from([(
            "Chart.yaml".to_string(),
            format!("apiVersion: v2\nname: {name}\nversion: {version}\n").into_bytes(),
        )]);
        crate::package::build::tarball(&files, &format!("{name}/")).unwrap()
    }

    fn write(dir: &Path, rel: &str, bytes: &[u8]) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    fn opts(root: &Path) -> DependencyOptions {
        DependencyOptions { file_root: Some(root.to_path_buf()), https_only: true, ..Default::default() }
    }

    /// A chart of another version in `charts/` is used as it is (helm's `CheckDependencies` goes
    /// by name): no network, nothing changed. The repository here could not be reached at all.
    #[test]
    fn a_present_chart_of_another_version_is_kept_without_asking_anyone() {
        let release = tempfile::tempdir().unwrap();
        let dir = release.path().join("cni");
        let chart_yaml = "apiVersion: v2\nname: cni\nversion: 0.1.0\ndependencies:\n- name: a\n  version: 1.0.0\n  repository: https://127.0.0.1:9/x\n";
        write(&dir, "Chart.yaml", chart_yaml.as_bytes());
        write(&dir, "charts/a-0.9.0.tgz", &chart("a", "0.9.0"));
        assert_eq!(resolve_chart(&dir, "cluster-addon/cni", &opts(release.path())).unwrap(), 0);
        let names: Vec<_> = std::fs::read_dir(dir.join("charts")).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["a-0.9.0.tgz"]);
    }

    /// `file://` dependencies resolve inside the release, never outside it.
    #[test]
    fn file_dependencies_stay_inside_the_release() {
        let release = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        write(&release.path().join("common"), "Chart.yaml", b"apiVersion: v2\nname: common\nversion: 1.0.0\n");
        write(&outside.path().join("secret"), "Chart.yaml", b"apiVersion: v2\nname: secret\nversion: 1.0.0\n");
        let dir = release.path().join("cni");
        let inside = "apiVersion: v2\nname: cni\nversion: 0.1.0\ndependencies:\n- name: common\n  version: 1.0.0\n  repository: file://../common\n";
        write(&dir, "Chart.yaml", inside.as_bytes());
        assert_eq!(resolve_chart(&dir, "cluster-addon/cni", &opts(release.path())).unwrap(), 1);
        assert!(dir.join("charts/common-1.0.0.tgz").is_file());

        let escape = format!(
            "apiVersion: v2\nname: cni\nversion: 0.1.0\ndependencies:\n- name: secret\n  version: 1.0.0\n  repository: file://{}\n",
            outside.path().join("secret").display()
        );
        write(&dir, "Chart.yaml", escape.as_bytes());
        let err = resolve_chart(&dir, "cluster-addon/cni", &opts(release.path())).unwrap_err();
        assert!(err.contains("cluster-addon/cni/Chart.yaml") && err.contains("outside the release"), "{err}");
        assert!(!dir.join("charts/secret-1.0.0.tgz").exists());
    }
}
