//! Packaging of Helm-format stack sources, as Sovereign Cloud Stack writes
//! them and its `csctl` builder packs them.
//!
//! Facts taken from csctl: the cluster-class chart is packed like `helm
//! package` does (one top directory named by the chart's `name`, `version`
//! set to the stack version, so the class renders as
//! `<provider>-<name>-<maj>-<min>-<version>`); with `clusteraddon.yaml` the
//! `cluster-addon/` directory is packed as it is (one top directory per
//! addon chart, their versions untouched); without it (`cluster-addon-values.yaml`)
//! `cluster-addon/` is one chart, packed like the cluster class with the addon
//! version. The asset names are the same for both formats.

use std::collections::BTreeMap;

use super::build::{BuildError, CLUSTER_ADDON_DIR, CLUSTER_CLASS_DIR};
use crate::release::{ReleaseId, StackVersion};
use crate::render::{CHART_FILE, RenderError};
use helm_render::{HelmOptions, load_chart, render_chart};

/// The single-chart addon layout's values template (release asset).
pub const ADDON_VALUES_FILE: &str = "cluster-addon-values.yaml";
/// The release name the Go operator renders addons with.
pub const ADDON_RELEASE_NAME: &str = "cluster-addon";
/// The namespace the Go operator renders addons into.
pub const ADDON_NAMESPACE: &str = "kube-system";

/// The template language of a stack source's charts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFormat {
    /// Go templates with Sprig, rendered as `helm template` does (the ecosystem's format).
    Helm,
    /// This project's minijinja bundles.
    Jinja,
}

/// Decides the format from the files of the charts (paths relative to the
/// source directory), as the renderer does: Jinja when a chart's `Chart.yaml`
/// carries the project's engine annotation
/// (`clusterstack.x-k8s.io/template-engine: jinja`), Helm otherwise.
pub fn detect_format<'a>(files: impl IntoIterator<Item = (&'a String, &'a Vec<u8>)>) -> SourceFormat {
    for (name, bytes) in files {
        // Vendored subcharts are Helm by definition; they say nothing about the parent.
        let vendored = name.starts_with("charts/") || name.contains("/charts/");
        if vendored || !(name == crate::render::CHART_FILE || name.ends_with("/Chart.yaml")) {
            continue;
        }
        let Ok((chart, _)) = helm_render::chart_yaml::read(bytes) else { continue };
        if chart.annotations.get(crate::render::ENGINE_ANNOTATION).map(String::as_str) == Some("jinja") {
            return SourceFormat::Jinja;
        }
    }
    SourceFormat::Helm
}

/// `name` of the top-level `Chart.yaml` in `files`.
pub fn chart_name(files: &BTreeMap<String, Vec<u8>>, dir: &str) -> Result<String, BuildError> {
    let file = format!("{dir}/{CHART_FILE}");
    let bytes = files.get(CHART_FILE).ok_or_else(|| BuildError::Config {
        file: file.clone(),
        message: "missing: a Helm chart needs a Chart.yaml".into(),
    })?;
    let (chart, _) =
        helm_render::chart_yaml::read(bytes).map_err(|message| BuildError::Config { file: file.clone(), message })?;
    if chart.name.is_empty() || chart.name.contains('/') {
        return Err(BuildError::Config { file, message: format!("unusable chart name {:?}", chart.name) });
    }
    Ok(chart.name)
}

/// Sets the top-level `version:` of the chart's own `Chart.yaml` (keeping
/// comments), as csctl does; subcharts keep theirs.
pub fn set_chart_version(mut files: BTreeMap<String, Vec<u8>>, version: &StackVersion) -> BTreeMap<String, Vec<u8>> {
    if let Some(bytes) = files.get_mut(CHART_FILE) {
        super::build::set_version_line(bytes, version);
    }
    files
}

/// Whether `cluster-addon/` is one chart (the layout with `cluster-addon-values.yaml`).
pub fn addon_is_single_chart(addon_files: &BTreeMap<String, Vec<u8>>) -> bool {
    addon_files.contains_key(CHART_FILE)
}

/// Renders the packed cluster class as the Go operator does (`helm template
/// <stack> <tgz> --namespace <ns>`) and checks that the ClusterClass it holds,
/// if any, is named as the release's class.
pub fn check_class(class_tgz: &[u8], id: &ReleaseId, namespace: &str) -> Result<usize, BuildError> {
    let dir = tempfile::tempdir().map_err(|source| BuildError::Io {
        context: "cannot create a temp directory for",
        path: CLUSTER_CLASS_DIR.into(),
        source,
    })?;
    let path = dir.path().join(format!("{}-cluster-class.tgz", id.stack_name()));
    std::fs::write(&path, class_tgz).map_err(|source| BuildError::Io {
        context: "cannot write",
        path: path.clone(),
        source,
    })?;
    let chart = load_chart(&path).map_err(|e| relabel(e, CLUSTER_CLASS_DIR))?;
    let manifests = render_chart(&chart, &HelmOptions::new(id.stack_name(), namespace))
        .map_err(|e| relabel(e, CLUSTER_CLASS_DIR))?;
    let mut classes = Vec::new();
    for m in &manifests {
        // Read as the API server is given it: go-yaml, YAML 1.1 (see `render::objects`).
        let doc = helm_render::yaml_to_value(&m.content)
            .map_err(|e| BuildError::Config {
                file: format!("{CLUSTER_CLASS_DIR}: {}", m.source),
                message: format!("the rendered document is not YAML: {e}"),
            })?
            .to_json();
        if doc.get("kind").and_then(|k| k.as_str()) == Some("ClusterClass") {
            let name = doc.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default();
            classes.push(name.to_string());
        }
    }
    let want = id.class_name();
    if let Some(other) = classes.iter().find(|c| **c != want) {
        return Err(BuildError::Config {
            file: format!("{CLUSTER_CLASS_DIR}/templates"),
            message: format!(
                "the ClusterClass is named {other:?}, but the release's class is {want:?}; \
                 name it {{{{ .Release.Name }}}}-{{{{ .Chart.Version }}}}"
            ),
        });
    }
    Ok(manifests.len())
}

/// Renders every addon chart as the Go operator does (`helm template
/// --include-crds --kube-version <k8s> cluster-addon <dir> --namespace
/// kube-system`), with the charts' own values, from the files to be packed (dependencies
/// vendored).
pub fn check_addons(
    addon_files: &BTreeMap<String, Vec<u8>>,
    single_chart: bool,
    kube_version: &str,
) -> Result<usize, BuildError> {
    let mut charts: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    if single_chart {
        charts.insert(String::new(), addon_files.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
    } else {
        let dirs: Vec<&str> =
            addon_files.keys().filter_map(|k| k.strip_suffix("/Chart.yaml").filter(|d| !d.contains('/'))).collect();
        for dir in dirs {
            let prefix = format!("{dir}/");
            let files = addon_files
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(&prefix))
                .map(|(k, v)| (k[prefix.len()..].to_string(), v.clone()))
                .collect();
            charts.insert(dir.to_string(), files);
        }
    }
    let mut count = 0;
    for (dir, files) in charts {
        let label = format!("{CLUSTER_ADDON_DIR}/{dir}");
        let label = label.trim_end_matches('/');
        let chart = helm_render::load::from_files(label, files)
            .map_err(|e| BuildError::Render(RenderError::Chart { chart: label.to_string(), message: e.message }))?;
        let mut opts = HelmOptions::new(ADDON_RELEASE_NAME, ADDON_NAMESPACE);
        opts.kube_version = Some(kube_version.to_string());
        opts.include_crds = true;
        count += render_chart(&chart, &opts).map_err(|e| relabel(e, label))?.len();
    }
    Ok(count)
}

/// Names the source part in a render error instead of a temp path.
fn relabel(e: helm_render::HelmError, part: &str) -> BuildError {
    match e {
        helm_render::HelmError::Chart { chart, message } if chart.contains("/tmp") || chart.contains(".tmp") => {
            BuildError::Render(RenderError::Chart { chart: part.to_string(), message })
        }
        other => BuildError::Render(other.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        list.iter().map(|(n, t)| (n.to_string(), t.as_bytes().to_vec())).collect()
    }

    #[test]
    fn formats_are_told_apart_by_the_engine_annotation() {
        let helm = files(&[("Chart.yaml", "name: c\n"), ("templates/cc.yaml", "name: {{ .Release.Name }}\n")]);
        assert_eq!(detect_format(&helm), SourceFormat::Helm);
        let jinja = files(&[("Chart.yaml", "name: c\nannotations:\n  clusterstack.x-k8s.io/template-engine: jinja\n")]);
        assert_eq!(detect_format(&jinja), SourceFormat::Jinja);
        // A vendored subchart says nothing about its parent.
        let vendored = files(&[(
            "charts/sub/Chart.yaml",
            "name: c\nannotations:\n  clusterstack.x-k8s.io/template-engine: jinja\n",
        )]);
        assert_eq!(detect_format(&vendored), SourceFormat::Helm);
        // `Chart.yaml` read as helm reads it: a repeated key's last value counts.
        let repeated = files(&[(
            "Chart.yaml",
            "name: a\nname: c\nannotations:\n  clusterstack.x-k8s.io/template-engine: helm\nannotations:\n  clusterstack.x-k8s.io/template-engine: jinja\n",
        )]);
        assert_eq!(detect_format(&repeated), SourceFormat::Jinja);
        assert_eq!(chart_name(&repeated, "cluster-class").expect("named"), "c");
    }

    #[test]
    fn only_the_top_chart_version_is_set() {
        let out = set_chart_version(
            files(&[
                ("Chart.yaml", "apiVersion: v2\nname: x\nversion: v0\n"),
                ("charts/sub/Chart.yaml", "name: sub\nversion: 1.2.3\n"),
            ]),
            &StackVersion::Stable(4),
        );
        assert_eq!(out["Chart.yaml"], b"apiVersion: v2\nname: x\nversion: v4\n");
        assert_eq!(out["charts/sub/Chart.yaml"], b"name: sub\nversion: 1.2.3\n");
    }
}
