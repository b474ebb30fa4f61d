//! `clusterstack releases`: the cluster-stack releases of a source.

use std::io::Write;

use serde::Serialize;

use crate::release::{KubernetesMinor, StackVersion};
use crate::source::{DigestCoverage, ListedRelease, ReleaseSource};

use super::source_args::{SourceArgs, SourceCliError};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct ReleasesArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Only releases of this provider (e.g. `openstack`).
    #[arg(long)]
    pub provider: Option<String>,
    /// Only releases of this stack name (e.g. `scs`).
    #[arg(long)]
    pub name: Option<String>,
    /// Only releases for this Kubernetes minor (e.g. `1.27`).
    #[arg(long)]
    pub kubernetes: Option<KubernetesMinor>,
    /// Only this channel: `stable`, `custom` (every non-stable version) or a
    /// channel name such as `sha` or `alpha`.
    #[arg(long)]
    pub channel: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// One row of the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseRow {
    pub tag: String,
    pub provider: String,
    pub name: String,
    pub kubernetes: String,
    pub version: String,
    pub channel: String,
    pub assets: usize,
    /// `yes` (a digest for every asset), `sha256sums` (digests in a
    /// SHA256SUMS asset, checked on pull) or `no`.
    pub verified: &'static str,
    pub prerelease: bool,
}

impl ReleaseRow {
    fn new(r: &ListedRelease) -> Self {
        Self {
            tag: r.tag.clone(),
            provider: r.id.provider.clone(),
            name: r.id.name.clone(),
            kubernetes: r.id.kubernetes.to_string(),
            version: r.id.version.dotted(),
            channel: channel_of(&r.id.version).to_string(),
            assets: r.assets.len(),
            verified: match r.digest_coverage() {
                DigestCoverage::Complete => "yes",
                DigestCoverage::Sha256Sums => "sha256sums",
                DigestCoverage::Missing => "no",
            },
            prerelease: r.prerelease,
        }
    }
}

fn channel_of(v: &StackVersion) -> &str {
    match v {
        StackVersion::Stable(_) => "stable",
        StackVersion::PreRelease { channel, .. } => channel,
    }
}

/// Whether `r` passes the filters.
pub fn matches(args: &ReleasesArgs, r: &ListedRelease) -> bool {
    args.provider.as_ref().is_none_or(|p| *p == r.id.provider)
        && args.name.as_ref().is_none_or(|n| *n == r.id.name)
        && args.kubernetes.is_none_or(|k| k == r.id.kubernetes)
        && args.channel.as_deref().is_none_or(|c| match c {
            "stable" => r.id.version.is_stable(),
            "custom" => !r.id.version.is_stable(),
            other => channel_of(&r.id.version) == other,
        })
}

pub async fn run(args: ReleasesArgs) -> Result<(), SourceCliError> {
    let source = args.source.open()?;
    let listing = source.list().await?;
    if !listing.skipped.is_empty() {
        tracing::info!(
            count = listing.skipped.len(),
            tags = listing.skipped.join(", "),
            "skipped tags that are not cluster-stack releases"
        );
    }
    let mut rows: Vec<ReleaseRow> =
        listing.releases.iter().filter(|r| matches(&args, r)).map(ReleaseRow::new).collect();
    rows.sort_by(|a, b| a.tag.cmp(&b.tag));
    let text = match args.output {
        Output::Json => serde_json::to_string_pretty(&rows).map_err(|e| SourceCliError::Output(e.to_string()))? + "\n",
        Output::Yaml => serde_saphyr::to_string(&rows).map_err(|e| SourceCliError::Output(e.to_string()))?,
        Output::Table => table(&rows),
    };
    std::io::stdout().write_all(text.as_bytes()).map_err(|e| SourceCliError::Output(e.to_string()))
}

/// The rows as an aligned table with a header.
pub fn table(rows: &[ReleaseRow]) -> String {
    let header = ["TAG", "KUBERNETES", "VERSION", "CHANNEL", "ASSETS", "VERIFIED"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.tag.clone(),
                r.kubernetes.clone(),
                r.version.clone(),
                r.channel.clone(),
                r.assets.to_string(),
                r.verified.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let mut line = |cols: &[&str]| {
        let parts: Vec<String> = cols.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    line(&header);
    for row in &cells {
        line(&row.iter().map(String::as_str).collect::<Vec<_>>());
    }
    out
}
