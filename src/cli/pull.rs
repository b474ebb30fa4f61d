//! `clusterstack pull`: one release into the cache, verified.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};

use crate::source::{FetchPolicy, Progress, ReleaseSource};

use super::source_args::{SourceArgs, SourceCliError};

#[derive(Debug, clap::Args)]
pub struct PullArgs {
    /// The release tag, e.g. `openstack-scs-1-27-v4`.
    pub tag: String,
    #[command(flatten)]
    pub source: SourceArgs,
    /// The cache directory. Default: $XDG_CACHE_HOME/clusterstack, else ~/.cache/clusterstack.
    #[arg(long, env = "CLUSTERSTACK_CACHE")]
    pub cache: Option<PathBuf>,
    /// Refuse a release for which some asset has no known digest.
    #[arg(long, env = "CLUSTERSTACK_REQUIRE_VERIFIED")]
    pub require_verified: bool,
    #[command(flatten)]
    pub verify: super::verify_args::VerifyArgs,
}

/// The default cache directory.
pub fn default_cache_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("XDG_CACHE_HOME")
        .or_else(|| env("HOME").map(|h| h.join(".cache")))
        .map_or_else(|| PathBuf::from(".clusterstack-cache"), |d| d.join("clusterstack"))
}

pub async fn run(args: PullArgs) -> Result<(), SourceCliError> {
    let source = args.source.open()?;
    let listing = source.list().await?;
    let release = listing.find(&args.tag).ok_or_else(|| {
        let hint = if listing.skipped.contains(&args.tag) {
            "the tag is there but is not a cluster-stack release".to_string()
        } else {
            format!("{} releases listed; see `clusterstack releases`", listing.releases.len())
        };
        SourceCliError::NotFound { tag: args.tag.clone(), source_name: source.name(), hint }
    })?;
    let cache = args.source.release_cache(args.cache.clone().unwrap_or_else(default_cache_dir))?;
    let policy = FetchPolicy { require_verified: args.require_verified };
    let progress: Box<dyn Progress> =
        if std::io::stderr().is_terminal() { Box::new(BarProgress::default()) } else { Box::new(LineProgress) };
    let signature = args.verify.policy(None)?;
    let fetched = cache.fetch_signed(&source, release, policy, signature.as_ref(), progress.as_ref()).await?;

    let mut out = String::new();
    out.push_str(&format!("release   {}\n", fetched.tag()));
    out.push_str(&format!("source    {}\n", fetched.source));
    out.push_str(&format!("directory {}\n", fetched.dir.display()));
    out.push_str(&format!("state     {}{}\n", fetched.verification, if fetched.downloaded { "" } else { " (cached)" }));
    if let Some(record) = &fetched.manifest().signature {
        out.push_str(&format!("signed    by {} (trusted root {})\n", record.signer, record.root));
    }
    for asset in &fetched.assets {
        let by = match asset.verified_by {
            crate::source::cache::VerifiedBy::Digest => "digest",
            crate::source::cache::VerifiedBy::Sha256sums => "SHA256SUMS",
            crate::source::cache::VerifiedBy::DigestAndSha256sums => "digest+SHA256SUMS",
            crate::source::cache::VerifiedBy::None => "unverified",
        };
        out.push_str(&format!("sha256:{}  {}  ({} bytes, {by})\n", asset.sha256, asset.name, asset.size));
    }
    std::io::stdout().write_all(out.as_bytes()).map_err(|e| SourceCliError::Output(e.to_string()))
}

/// Plain lines, for logs and pipes.
struct LineProgress;

impl Progress for LineProgress {
    fn start(&self, asset: &str, total: Option<u64>) {
        match total {
            Some(n) => eprintln!("downloading {asset} ({n} bytes)"),
            None => eprintln!("downloading {asset}"),
        }
    }
    fn finish(&self, asset: &str) {
        eprintln!("downloaded {asset}");
    }
}

/// A progress bar per asset, on a terminal.
#[derive(Default)]
pub(super) struct BarProgress {
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress for BarProgress {
    fn start(&self, asset: &str, total: Option<u64>) {
        let bar = ProgressBar::new(total.unwrap_or(0));
        if let Ok(style) = ProgressStyle::with_template("{msg:40} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}") {
            bar.set_style(style);
        }
        bar.set_message(asset.to_string());
        *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar);
    }
    fn advance(&self, bytes: u64) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            bar.inc(bytes);
        }
    }
    fn finish(&self, _asset: &str) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish();
        }
    }
}
