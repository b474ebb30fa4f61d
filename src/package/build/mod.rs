//! Packaging a stack's source directory into a release, as the ecosystem's
//! `csctl` builder does, but reproducibly.
//!
//! The source directory holds `csctl.yaml` (Kubernetes version, stack name,
//! provider), `cluster-class/` (one chart), `cluster-addon/` (one chart per
//! addon), optionally `clusteraddon.yaml` and `node-images.yaml`. The release
//! written to `<out>/<tag>/` has the ecosystem's assets plus `hashes.json` and
//! `SHA256SUMS`; see `docs/release-format.md`.

mod files;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::deps::{DependencyOptions, vendor_chart};
use super::helm;
use crate::release::{
    Components, KubernetesVersion, METADATA_FILE, ReleaseId, ReleaseMetadata, StackVersion, Versions,
};
use crate::render::{self, ClusterObjects, RenderContext, RenderError};

pub(crate) use files::set_version_line;
pub use files::{collect_files, tarball};
use files::{hash_files, rewrite_charts};

/// The build configuration of a stack source directory.
pub const CSCTL_FILE: &str = "csctl.yaml";
/// The cluster-class chart in a source directory.
pub const CLUSTER_CLASS_DIR: &str = "cluster-class";
/// The addon charts in a source directory.
pub const CLUSTER_ADDON_DIR: &str = "cluster-addon";
/// The staged addon configuration (source and release asset).
pub const CLUSTER_ADDON_CONFIG: &str = "clusteraddon.yaml";
/// The node image list (source and release asset).
pub const NODE_IMAGES_FILE: &str = "node-images.yaml";
/// The builder's source fingerprints (release asset).
pub const HASHES_FILE: &str = "hashes.json";
/// The checksums of every other asset (release asset).
pub const SUMS_FILE: &str = "SHA256SUMS";
/// The namespace the build-time render check uses.
const CHECK_NAMESPACE: &str = "default";

/// Why a release could not be built. Names the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{context} {path}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: {message}")]
    Config { file: String, message: String },
    #[error("{path}: refusing to package a symlink; replace it with the file it points to")]
    Symlink { path: PathBuf },
    #[error("the release {path} already exists; pass another --version or remove it")]
    Exists { path: PathBuf },
    #[error("the previous release {path}: {message}")]
    Previous { path: PathBuf, message: String },
    #[error("the release does not render, nothing was written: {0}")]
    Render(#[from] RenderError),
}

fn io_err<'a>(context: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BuildError + 'a {
    move |source| BuildError::Io { context, path: path.to_path_buf(), source }
}

/// `csctl.yaml`: what the builder needs to name the release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackConfig {
    pub provider: String,
    pub name: String,
    pub kubernetes: KubernetesVersion,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCsctl {
    config: RawCsctlConfig,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCsctlConfig {
    kubernetes_version: String,
    cluster_stack_name: String,
    provider: RawProvider,
}

#[derive(Deserialize)]
struct RawProvider {
    #[serde(rename = "type")]
    kind: String,
}

impl StackConfig {
    /// Reads `<source_dir>/csctl.yaml`.
    pub fn read(source_dir: &Path) -> Result<Self, BuildError> {
        let path = source_dir.join(CSCTL_FILE);
        let text = std::fs::read_to_string(&path).map_err(io_err("cannot read", &path))?;
        let bad = |message: String| BuildError::Config { file: path.display().to_string(), message };
        let raw: RawCsctl = serde_saphyr::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let kubernetes = raw
            .config
            .kubernetes_version
            .parse::<KubernetesVersion>()
            .map_err(|m| bad(format!("config.kubernetesVersion: {m}")))?;
        Ok(Self { provider: raw.config.provider.kind, name: raw.config.cluster_stack_name, kubernetes })
    }

    /// The identity of version `version` of this stack.
    pub fn release_id(&self, version: StackVersion) -> Result<ReleaseId, BuildError> {
        ReleaseId::new(&self.provider, &self.name, self.kubernetes.minor_version(), version).map_err(|e| {
            BuildError::Config { file: CSCTL_FILE.into(), message: format!("provider and stack name: {e}") }
        })
    }
}

/// `hashes.json`: sha256 fingerprints of the sources each part was built from.
/// Tells the next build whether the addons or node images changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceHashes {
    pub cluster_class: String,
    /// `cluster-addon/` and `clusteraddon.yaml`.
    pub cluster_addon: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_images: Option<String>,
}

/// The name of the cluster-class asset of `id`.
pub fn cluster_class_asset(id: &ReleaseId) -> String {
    format!("{}-cluster-class-{}.tgz", id.stack_name(), id.version.dotted())
}

/// The name of the addon asset of `id`'s stack at addon version `addon`.
pub fn cluster_addon_asset(id: &ReleaseId, addon: &StackVersion) -> String {
    format!("{}-cluster-addon-{}.tgz", id.stack_name(), addon.dotted())
}

/// What to build and where.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub source_dir: PathBuf,
    /// The directory of releases: the new one goes to `<out_dir>/<tag>/`.
    pub out_dir: PathBuf,
    /// The version to build; default: the next stable version after the newest in `out_dir`.
    pub version: Option<StackVersion>,
}

/// A release that was written.
#[derive(Debug, Clone)]
pub struct BuiltRelease {
    pub id: ReleaseId,
    pub dir: PathBuf,
    pub metadata: ReleaseMetadata,
    pub hashes: SourceHashes,
    /// Asset names, sorted.
    pub assets: Vec<String>,
}

/// The newest earlier stable release of the same stack in the output directory.
struct Previous {
    dir: PathBuf,
    metadata: ReleaseMetadata,
    hashes: Option<SourceHashes>,
}

/// Builds one release: checks that it renders, then writes it into a temp
/// directory and renames that into `<out_dir>/<tag>`. Helm chart dependencies not vendored in
/// the source are fetched directly (no cache, no mirrors): see [`build_release_with`].
pub fn build_release(opts: &BuildOptions) -> Result<BuiltRelease, BuildError> {
    build_release_with(opts, &DependencyOptions::default())
}

/// [`build_release`], fetching Helm chart dependencies with `deps`.
pub fn build_release_with(opts: &BuildOptions, deps: &DependencyOptions) -> Result<BuiltRelease, BuildError> {
    let config = StackConfig::read(&opts.source_dir)?;
    let probe = config.release_id(StackVersion::Stable(0))?;
    let newest = newest_stable(&opts.out_dir, &probe, opts.version.as_ref())?;
    let version = match (&opts.version, &newest) {
        (Some(v), _) => v.clone(),
        (None, Some((_, StackVersion::Stable(n)))) => StackVersion::Stable(n + 1),
        (None, _) => StackVersion::Stable(1),
    };
    let id = config.release_id(version.clone())?;
    let final_dir = opts.out_dir.join(id.tag());
    if final_dir.exists() {
        return Err(BuildError::Exists { path: final_dir });
    }
    let previous = newest.map(|(dir, _)| read_previous(&dir)).transpose()?;

    let class_dir = opts.source_dir.join(CLUSTER_CLASS_DIR);
    let addon_dir = opts.source_dir.join(CLUSTER_ADDON_DIR);
    let mut class_files = collect_files(&class_dir)?;
    let mut addon_files = collect_files(&addon_dir)?;
    let addon_config = read_optional(&opts.source_dir.join(CLUSTER_ADDON_CONFIG))?;
    let addon_values = read_optional(&opts.source_dir.join(helm::ADDON_VALUES_FILE))?;
    let node_images = read_optional(&opts.source_dir.join(NODE_IMAGES_FILE))?;
    let format = helm::detect_format(class_files.iter().chain(addon_files.iter()));
    if format == helm::SourceFormat::Helm {
        // Vendored before hashing: the release's addon version changes with its dependencies.
        vendor_dependencies(&mut class_files, &mut addon_files, &class_dir, &addon_dir, deps)?;
    }

    let mut addon_hash_input = addon_files.clone();
    if let Some(bytes) = &addon_config {
        addon_hash_input.insert(format!("../{CLUSTER_ADDON_CONFIG}"), bytes.clone());
    }
    if let Some(bytes) = &addon_values {
        addon_hash_input.insert(format!("../{}", helm::ADDON_VALUES_FILE), bytes.clone());
    }
    let hashes = SourceHashes {
        cluster_class: hash_files(&class_files),
        cluster_addon: hash_files(&addon_hash_input),
        node_images: node_images.as_deref().map(|b| hex::encode(Sha256::digest(b))),
    };

    // A part keeps its version only when its sources are unchanged since the previous release.
    let prev_hashes = previous.as_ref().and_then(|p| p.hashes.as_ref());
    let addon_unchanged = prev_hashes.is_some_and(|h| h.cluster_addon == hashes.cluster_addon);
    let cluster_addon = match (&previous, addon_unchanged) {
        (Some(p), true) => p.metadata.versions.components.cluster_addon.clone(),
        _ => version.clone(),
    };
    let node_image = node_images.as_ref().map(|_| {
        let unchanged = prev_hashes.is_some_and(|h| h.node_images == hashes.node_images);
        match previous.as_ref().and_then(|p| p.metadata.versions.components.node_image.clone()) {
            Some(v) if unchanged => v,
            _ => version.clone(),
        }
    });

    let addon_name = cluster_addon_asset(&id, &cluster_addon);
    let previous_addon = match (&previous, addon_unchanged) {
        // The same bytes as before, so consumers see the addons did not change.
        (Some(p), true) => {
            let path = p.dir.join(&addon_name);
            Some(std::fs::read(&path).map_err(|e| BuildError::Previous { path, message: e.to_string() })?)
        }
        _ => None,
    };
    let (class_tgz, addon_tgz) = match format {
        helm::SourceFormat::Jinja => {
            // Every template renders once; a release that does not render is never written.
            let ctx = RenderContext::new(&id, CHECK_NAMESPACE);
            render::render_cluster_class(&class_dir, &ctx)?;
            render::render_addons(&addon_dir, &ctx.clone().with_cluster(check_cluster()))?;
            let class_tgz =
                tarball(&rewrite_charts(class_files, &version), &format!("{}-cluster-class/", id.stack_name()))
                    .map_err(io_err("cannot compress", &class_dir))?;
            let addon_tgz = match previous_addon {
                Some(bytes) => bytes,
                None => tarball(&rewrite_charts(addon_files, &cluster_addon), "")
                    .map_err(io_err("cannot compress", &addon_dir))?,
            };
            (class_tgz, addon_tgz)
        }
        helm::SourceFormat::Helm => {
            // Packed as csctl packs it, then rendered from the packed bytes as the Go operator does.
            let class_chart = helm::chart_name(&class_files, CLUSTER_CLASS_DIR)?;
            let class_tgz = tarball(&helm::set_chart_version(class_files, &version), &format!("{class_chart}/"))
                .map_err(io_err("cannot compress", &class_dir))?;
            helm::check_class(&class_tgz, &id, CHECK_NAMESPACE)?;
            let single = helm::addon_is_single_chart(&addon_files);
            if !single && addon_config.is_none() {
                return Err(BuildError::Config {
                    file: CLUSTER_ADDON_CONFIG.into(),
                    message: format!(
                        "missing: {CLUSTER_ADDON_DIR}/ holds one chart per addon, so {CLUSTER_ADDON_CONFIG} must stage them"
                    ),
                });
            }
            helm::check_addons(&addon_files, single, &config.kubernetes.to_string())?;
            let addon_tgz = match previous_addon {
                Some(bytes) => bytes,
                None if single => {
                    let addon_chart = helm::chart_name(&addon_files, CLUSTER_ADDON_DIR)?;
                    tarball(&helm::set_chart_version(addon_files, &cluster_addon), &format!("{addon_chart}/"))
                        .map_err(io_err("cannot compress", &addon_dir))?
                }
                None => tarball(&addon_files, "").map_err(io_err("cannot compress", &addon_dir))?,
            };
            (class_tgz, addon_tgz)
        }
    };

    let metadata = ReleaseMetadata {
        versions: Versions {
            cluster_stack: version.clone(),
            kubernetes: config.kubernetes.clone(),
            components: Components { cluster_addon, node_image, cluster_class: None },
        },
    };
    let mut assets: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    assets.insert(METADATA_FILE.into(), metadata.to_yaml().into_bytes());
    assets.insert(cluster_class_asset(&id), class_tgz);
    assets.insert(addon_name, addon_tgz);
    if let Some(bytes) = addon_config {
        assets.insert(CLUSTER_ADDON_CONFIG.into(), bytes);
    }
    if let Some(bytes) = addon_values {
        assets.insert(helm::ADDON_VALUES_FILE.into(), bytes);
    }
    if let Some(bytes) = node_images {
        assets.insert(NODE_IMAGES_FILE.into(), bytes);
    }
    let mut hashes_json = serde_json::to_string_pretty(&hashes).unwrap_or_default();
    hashes_json.push('\n');
    assets.insert(HASHES_FILE.into(), hashes_json.into_bytes());
    let sums: String =
        assets.iter().map(|(name, bytes)| format!("{}  {name}\n", hex::encode(Sha256::digest(bytes)))).collect();
    assets.insert(SUMS_FILE.into(), sums.into_bytes());

    std::fs::create_dir_all(&opts.out_dir).map_err(io_err("cannot create", &opts.out_dir))?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".build-{}-", id.tag()))
        .tempdir_in(&opts.out_dir)
        .map_err(io_err("cannot create a temp directory in", &opts.out_dir))?;
    for (name, bytes) in &assets {
        let path = tmp.path().join(name);
        let mut file = std::fs::File::create(&path).map_err(io_err("cannot create", &path))?;
        file.write_all(bytes).map_err(io_err("cannot write", &path))?;
        file.sync_all().map_err(io_err("cannot sync", &path))?;
    }
    let tmp_path = tmp.keep();
    if let Err(e) = std::fs::rename(&tmp_path, &final_dir) {
        let _ = std::fs::remove_dir_all(&tmp_path);
        return Err(io_err("cannot move the release into", &final_dir)(e));
    }
    tracing::info!(release = %id, dir = %final_dir.display(), "built release");
    Ok(BuiltRelease { id, dir: final_dir, metadata, hashes, assets: assets.into_keys().collect() })
}

/// Vendors the Helm dependencies of the cluster-class chart and of every addon chart into their
/// `charts/` (see [`super::deps`]).
fn vendor_dependencies(
    class_files: &mut BTreeMap<String, Vec<u8>>,
    addon_files: &mut BTreeMap<String, Vec<u8>>,
    class_dir: &Path,
    addon_dir: &Path,
    deps: &DependencyOptions,
) -> Result<(), BuildError> {
    vendor_chart(class_files, "", class_dir, CLUSTER_CLASS_DIR, deps)?;
    if helm::addon_is_single_chart(addon_files) {
        vendor_chart(addon_files, "", addon_dir, CLUSTER_ADDON_DIR, deps)?;
        return Ok(());
    }
    let charts: Vec<String> = addon_files
        .keys()
        .filter_map(|k| k.strip_suffix("/Chart.yaml").filter(|d| !d.contains('/')).map(str::to_string))
        .collect();
    for chart in charts {
        let label = format!("{CLUSTER_ADDON_DIR}/{chart}");
        let n = vendor_chart(addon_files, &format!("{chart}/"), &addon_dir.join(&chart), &label, deps)?;
        if n > 0 {
            tracing::info!(chart = %label, dependencies = n, "vendored chart dependencies");
        }
    }
    Ok(())
}

/// The newest stable release of `probe`'s stack in `out_dir` (below `below`
/// when that is a stable version): its directory and version.
fn newest_stable(
    out_dir: &Path,
    probe: &ReleaseId,
    below: Option<&StackVersion>,
) -> Result<Option<(PathBuf, StackVersion)>, BuildError> {
    let entries = match std::fs::read_dir(out_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("cannot read", out_dir)(e)),
    };
    let limit = match below {
        Some(StackVersion::Stable(n)) => Some(*n),
        _ => None,
    };
    let mut best: Option<(PathBuf, u64)> = None;
    for entry in entries {
        let entry = entry.map_err(io_err("cannot read", out_dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Anything that is not a release of this stack (temp dirs, other stacks) is skipped.
        let Ok(id) = ReleaseId::from_tag(&name) else { continue };
        let StackVersion::Stable(n) = id.version else { continue };
        if !id.same_stack(probe) || limit.is_some_and(|l| n >= l) || !entry.path().is_dir() {
            continue;
        }
        if best.as_ref().is_none_or(|(_, b)| n > *b) {
            best = Some((entry.path(), n));
        }
    }
    Ok(best.map(|(dir, n)| (dir, StackVersion::Stable(n))))
}

fn read_previous(dir: &Path) -> Result<Previous, BuildError> {
    let path = dir.join(METADATA_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| BuildError::Previous { path: path.clone(), message: e.to_string() })?;
    let metadata = ReleaseMetadata::parse(&path.display().to_string(), &text)
        .map_err(|e| BuildError::Previous { path: path.clone(), message: e.to_string() })?;
    let hashes_path = dir.join(HASHES_FILE);
    // Without our hashes (e.g. a release built elsewhere: csctl's `hashes.json` has other keys,
    // the stack repository's build script writes only `{"clusterStack": "<git sha>"}`)
    // everything counts as changed.
    let hashes = match std::fs::read(&hashes_path) {
        Ok(bytes) => match serde_json::from_slice::<SourceHashes>(&bytes) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::info!(path = %hashes_path.display(), error = %e, "not this builder's source fingerprints: every part counts as changed");
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(BuildError::Previous { path: hashes_path, message: e.to_string() }),
    };
    Ok(Previous { dir: dir.to_path_buf(), metadata, hashes })
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, BuildError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("cannot read", path)(e)),
    }
}

/// The workload cluster the build-time render check uses for the addons.
fn check_cluster() -> ClusterObjects {
    ClusterObjects {
        cluster: serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Cluster",
            "metadata": {"name": "build-check", "namespace": CHECK_NAMESPACE},
            "spec": {
                "clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}, "services": {"cidrBlocks": ["10.128.0.0/12"]}},
                "controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443},
            },
        }),
        control_plane: serde_json::json!({
            "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
            "kind": "KubeadmControlPlane",
            "metadata": {"name": "build-check-control-plane", "namespace": CHECK_NAMESPACE},
            "spec": {"replicas": 1, "version": "v1.27.0"},
        }),
        infra_cluster: serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "DockerCluster",
            "metadata": {"name": "build-check", "namespace": CHECK_NAMESPACE},
            "spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 6443}},
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tarballs_are_reproducible_and_sorted() {
        let mut files = BTreeMap::new();
        files.insert("b/x.yaml".to_string(), b"x".to_vec());
        files.insert("a.yaml".to_string(), b"a".to_vec());
        let one = tarball(&files, "top/").unwrap();
        let two = tarball(&files, "top/").unwrap();
        assert_eq!(one, two);
        // gzip header: no mtime (bytes 4..8) and no file name flag (FNAME = 0x08).
        assert_eq!(&one[4..8], &[0, 0, 0, 0]);
        assert_eq!(one[3] & 0x08, 0);

        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(one.as_slice()));
        let listed: Vec<(String, u32, u64, u64)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let h = e.header();
                (e.path().unwrap().display().to_string(), h.mode().unwrap(), h.mtime().unwrap(), h.uid().unwrap())
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("top/".into(), 0o755, 0, 0),
                ("top/a.yaml".into(), 0o644, 0, 0),
                ("top/b/".into(), 0o755, 0, 0),
                ("top/b/x.yaml".into(), 0o644, 0, 0)
            ]
        );
        files.insert("a.yaml".to_string(), b"changed".to_vec());
        assert_ne!(tarball(&files, "top/").unwrap(), one);
    }

    #[test]
    fn chart_versions_are_rewritten_keeping_comments() {
        let mut files = BTreeMap::new();
        files.insert("cni/Chart.yaml".to_string(), b"# c\nname: cni\nversion: v0\n".to_vec());
        files.insert("Chart.yaml".to_string(), b"name: top\n".to_vec());
        files.insert("cni/values.yaml".to_string(), b"version: keep\n".to_vec());
        let out = rewrite_charts(files, &StackVersion::Stable(7));
        assert_eq!(out["cni/Chart.yaml"], b"# c\nname: cni\nversion: v7\n");
        assert_eq!(out["Chart.yaml"], b"name: top\nversion: v7\n");
        assert_eq!(out["cni/values.yaml"], b"version: keep\n");
    }

    #[test]
    fn hashes_depend_on_names_and_content() {
        let mut a = BTreeMap::new();
        a.insert("x".to_string(), b"1".to_vec());
        let mut b = BTreeMap::new();
        b.insert("y".to_string(), b"1".to_vec());
        let mut c = BTreeMap::new();
        c.insert("x".to_string(), b"2".to_vec());
        assert_ne!(hash_files(&a), hash_files(&b));
        assert_ne!(hash_files(&a), hash_files(&c));
        assert_eq!(hash_files(&a), hash_files(&a.clone()));
    }
}
