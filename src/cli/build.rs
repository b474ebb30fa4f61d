//! `clusterstack build`: package a stack's source directory into a release.

use std::path::PathBuf;

use crate::package::build::{BuildOptions, build_release};
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
}

fn parse_version(s: &str) -> Result<StackVersion, String> {
    StackVersion::parse_any(s).map_err(|e| e.to_string())
}

pub fn run(args: BuildArgs) -> Result<(), CliError> {
    let built = build_release(&BuildOptions { source_dir: args.source_dir, out_dir: args.out, version: args.version })?;
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
