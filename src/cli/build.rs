//! `clusterstack build`: package a stack's source directory into a release.

use std::path::PathBuf;

use crate::package::build::{BuildOptions, build_release_with};
use crate::package::deps::{DependencyOptions, parse_mirror};
use crate::release::StackVersion;

use super::CliError;

/// Package a stack source directory (with `csctl.yaml`) into a release directory.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The stack's source: `csctl.yaml`, `cluster-class/`, `cluster-addon/`, ...
    pub source_dir: PathBuf,
    /// The directory of releases; the new release is written to `<out>/<tag>/`.
    #[arg(long)]
    pub out: PathBuf,
    /// The version to build (`v4`, `v0-alpha.1`); default: the next stable
    /// version after the newest release in `--out`.
    #[arg(long, value_parser = parse_version)]
    pub version: Option<StackVersion>,
    /// Fetch Helm chart dependencies from a mirror: `ORIGINAL_URL=MIRROR_URL` (repeatable), e.g.
    /// `https://helm.cilium.io=https://charts.example.com/cilium`; a repository URL (and a chart
    /// URL an index lists) starting with ORIGINAL_URL is fetched from MIRROR_URL instead.
    #[arg(long = "helm-repo-mirror", value_parser = parse_mirror)]
    pub helm_repo_mirror: Vec<(String, String)>,
    /// The cache directory; downloaded dependency charts are kept in `<cache>/helm-charts`.
    /// Default: $XDG_CACHE_HOME/clusterstack, else ~/.cache/clusterstack.
    #[arg(long, env = "CLUSTERSTACK_CACHE")]
    pub cache: Option<PathBuf>,
}

fn parse_version(s: &str) -> Result<StackVersion, String> {
    StackVersion::parse_any(s).map_err(|e| e.to_string())
}

pub fn run(args: BuildArgs) -> Result<(), CliError> {
    let cache = args.cache.unwrap_or_else(super::pull::default_cache_dir);
    let insecure = std::env::var(crate::source::oci::ENV_INSECURE_REGISTRIES).unwrap_or_default();
    let deps = DependencyOptions {
        cache_dir: Some(cache.join(crate::package::deps::DOWNLOAD_CACHE_DIR)),
        mirrors: args.helm_repo_mirror,
        insecure_registries: insecure.split(',').map(str::trim).filter(|h| !h.is_empty()).map(String::from).collect(),
        ..Default::default()
    };
    let opts = BuildOptions { source_dir: args.source_dir, out_dir: args.out, version: args.version };
    let built = build_release_with(&opts, &deps)?;
    let components = &built.metadata.versions.components;
    println!(
        "built {} (kubernetes {}, cluster addon {}{}) in {}",
        built.id,
        built.metadata.versions.kubernetes,
        components.cluster_addon,
        components.node_image.as_ref().map(|v| format!(", node image {v}")).unwrap_or_default(),
        built.dir.display()
    );
    for asset in &built.assets {
        println!("  {asset}");
    }
    Ok(())
}
