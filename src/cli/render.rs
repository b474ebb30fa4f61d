//! `clusterstack render`: print the objects a release would apply.
//!
//! Works on an extracted chart directory: the cluster-class chart
//! (`<p>-<n>-<maj>-<min>-cluster-class/`) or, with `--addons`, the extracted
//! addon bundle. Resolving a release tag through a source and extracting its
//! tarballs belongs to `crate::source` and is wired in later.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use kube::api::DynamicObject;

use crate::release::ReleaseId;
use crate::render::{self, CHART_FILE, ClusterObjects, RenderContext};

use super::CliError;

/// Print the objects of a release in apply order.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// An extracted chart directory: the cluster-class chart, or with `--addons`
    /// the directory holding one chart per addon.
    pub chart_dir: PathBuf,
    /// The release (tag or class name) to render as; default for the cluster
    /// class: taken from its `Chart.yaml` (`<stack>-cluster-class`, version).
    #[arg(long)]
    pub release: Option<String>,
    /// `release.namespace` in templates.
    #[arg(long, default_value = "default")]
    pub namespace: String,
    /// Render the addons for the Cluster of `--cluster`.
    #[arg(long, requires = "cluster")]
    pub addons: bool,
    /// A YAML file with the CAPI `Cluster`, optionally followed by its control
    /// plane and infrastructure cluster objects as further documents.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Yaml,
    Json,
}

pub fn run(args: RenderArgs) -> Result<(), CliError> {
    let id = match &args.release {
        Some(release) => ReleaseId::parse_any(release).map_err(|e| CliError::Usage(e.to_string()))?,
        None if args.addons => {
            return Err(CliError::Usage(
                "--addons needs --release TAG: an addon bundle does not name its release".into(),
            ));
        }
        None => release_of_chart(&args.chart_dir)?,
    };
    let ctx = RenderContext::new(&id, &args.namespace);
    let objects: Vec<DynamicObject> = if args.addons {
        let Some(cluster_file) = &args.cluster else {
            return Err(CliError::Usage("--addons needs --cluster FILE".into()));
        };
        let ctx = ctx.with_cluster(read_cluster(cluster_file)?);
        render::render_addons(&args.chart_dir, &ctx)?.into_iter().flat_map(|chart| chart.objects).collect()
    } else {
        render::render_cluster_class(&args.chart_dir, &ctx)?
    };
    print!("{}", format_objects(&objects, args.output)?);
    Ok(())
}

/// Formats objects as a YAML stream or a JSON `List`.
pub fn format_objects(objects: &[DynamicObject], format: Format) -> Result<String, CliError> {
    match format {
        Format::Yaml => {
            let mut out = String::new();
            for object in objects {
                out.push_str("---\n");
                out.push_str(&serde_saphyr::to_string(object).map_err(CliError::CrdYaml)?);
            }
            Ok(out)
        }
        Format::Json => {
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
            let mut out = serde_json::to_string_pretty(&list).map_err(|e| CliError::Usage(e.to_string()))?;
            out.push('\n');
            Ok(out)
        }
    }
}

/// The release a packaged cluster-class chart belongs to: its `Chart.yaml`
/// is named `<stack>-cluster-class` and carries the stack version.
fn release_of_chart(chart_dir: &Path) -> Result<ReleaseId, CliError> {
    #[derive(serde::Deserialize)]
    struct Chart {
        name: String,
        version: String,
    }
    let path = chart_dir.join(CHART_FILE);
    let usage = |m: String| CliError::Usage(format!("{}: {m}; pass --release TAG", path.display()));
    let text = std::fs::read_to_string(&path).map_err(|e| usage(e.to_string()))?;
    let chart: Chart = serde_saphyr::from_str(&text).map_err(|e| usage(e.to_string()))?;
    let stack =
        chart.name.strip_suffix("-cluster-class").ok_or_else(|| usage("name does not end in -cluster-class".into()))?;
    ReleaseId::from_class_name(&format!("{stack}-{}", chart.version)).map_err(|e| usage(e.to_string()))
}

/// Reads the Cluster and, when present, its control plane and infrastructure
/// cluster (matched by the Cluster's `controlPlaneRef`/`infrastructureRef`).
pub fn read_cluster(path: &Path) -> Result<ClusterObjects, CliError> {
    let bad = |m: String| CliError::Usage(format!("{}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).map_err(|e| bad(e.to_string()))?;
    let kind = |d: &serde_json::Value| d["kind"].as_str().map(str::to_string);
    let cluster = docs
        .iter()
        .find(|d| kind(d).as_deref() == Some("Cluster"))
        .cloned()
        .ok_or_else(|| bad("no object of kind Cluster".into()))?;
    let referenced = |reference: &serde_json::Value| {
        docs.iter()
            .find(|d| {
                reference.is_object() && d["kind"] == reference["kind"] && d["metadata"]["name"] == reference["name"]
            })
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}))
    };
    Ok(ClusterObjects {
        control_plane: referenced(&cluster["spec"]["controlPlaneRef"]),
        infra_cluster: referenced(&cluster["spec"]["infrastructureRef"]),
        cluster,
    })
}
