//! Benchmark: `GitHubSource::download` (stream to disk while hashing) against
//! `curl -sSL URL | sha256sum` on the same loopback URL, with our peak RSS.
//!
//! Run with `cargo run --release --example bench_download`. Sizes in MiB can be given as
//! arguments (default `10 50`); each size is downloaded a few times and the best time kept.
//! Peak RSS (`VmHWM`) is read after each size: it must not grow with the asset size.
//!
//! The whole pull (listing, download, verification, extraction) is measured by `bench_pull`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/mod.rs"]
mod common;

use clusterstack::release::ReleaseId;
use clusterstack::source::github::{GitHubClient, GitHubConfig};
use clusterstack::source::{AssetInfo, AssetLocator, ListedRelease, NoProgress, ReleaseSource};
use common::{MIB, serve_github_dir, vm_hwm_mib, write_pseudo_random};

const RUNS: usize = 3;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    clusterstack::install_crypto_provider();
    let sizes: Vec<u64> = {
        let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
        if args.is_empty() { vec![10, 50] } else { args }
    };
    let dir = tempfile::tempdir()?;
    for (id, mib) in sizes.iter().enumerate() {
        write_pseudo_random(&dir.path().join(format!("asset-{id}")), mib * MIB)?;
    }
    let base = serve_github_dir(dir.path().to_path_buf()).await?;
    let curl = Command::new("curl").arg("--version").stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    if !curl {
        println!("note: curl is not installed; only our figures are shown");
    }
    println!("baseline VmHWM: {:.1} MiB", vm_hwm_mib());
    println!(
        "{:>8} {:>10} {:>10} {:>16} {:>7} {:>12}",
        "size", "ours ms", "ours MB/s", "curl|sha256 ms", "ratio", "VmHWM MiB"
    );
    for (id, mib) in sizes.iter().enumerate() {
        let size = mib * MIB;
        let url = format!("{base}/repos/o/r/releases/assets/{id}");
        let (ours, sha) = run_ours(&base, id as u64, size, dir.path()).await?;
        let hwm = vm_hwm_mib();
        let mb_s = size as f64 / 1e6 / ours.as_secs_f64();
        if curl {
            let (theirs, curl_sha) = run_curl(&url)?;
            if curl_sha != sha {
                return Err(format!("sha256 differs: ours {sha}, curl {curl_sha}").into());
            }
            let ratio = ours.as_secs_f64() / theirs.as_secs_f64();
            println!(
                "{:>5}MiB {:>10.1} {:>10.0} {:>16.1} {:>7.2} {:>12.1}",
                mib,
                ms(ours),
                mb_s,
                ms(theirs),
                ratio,
                hwm
            );
        } else {
            println!("{:>5}MiB {:>10.1} {:>10.0} {:>16} {:>7} {:>12.1}", mib, ms(ours), mb_s, "-", "-", hwm);
        }
    }
    println!("(best of {RUNS} runs each; ratio = ours / curl|sha256sum; VmHWM = our peak RSS so far)");
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Best time of [`RUNS`] runs of our download, and the sha256 it computed.
async fn run_ours(
    base: &str,
    id: u64,
    size: u64,
    dir: &Path,
) -> Result<(Duration, String), Box<dyn std::error::Error>> {
    let client = GitHubClient::new(GitHubConfig { api_url: base.to_string(), ..GitHubConfig::default() })?;
    let source = client.repository("o", "r");
    let asset = AssetInfo { name: format!("asset-{id}"), size, sha256: None, locator: AssetLocator::GitHub { id } };
    let release = ListedRelease {
        id: ReleaseId::from_tag("docker-ferrol-1-27-v1")?,
        tag: "docker-ferrol-1-27-v1".into(),
        prerelease: false,
        assets: vec![asset.clone()],
    };
    let dest = dir.join("downloaded");
    let mut best = Duration::MAX;
    let mut sha = String::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        sha = source.download(&release, &asset, &dest, &NoProgress).await?.sha256;
        best = best.min(start.elapsed());
        std::fs::remove_file(&dest)?;
    }
    Ok((best, sha))
}

/// Best time of [`RUNS`] runs of `curl -sSL URL | sha256sum`, and the sha256 it printed.
fn run_curl(url: &str) -> Result<(Duration, String), Box<dyn std::error::Error>> {
    let script = format!("curl -sSL -H 'Accept: application/octet-stream' '{url}' | sha256sum");
    let mut best = Duration::MAX;
    let mut sha = String::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = Command::new("sh").arg("-c").arg(&script).output()?;
        best = best.min(start.elapsed());
        if !out.status.success() {
            return Err(format!("curl failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        sha = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_string();
    }
    Ok((best, sha))
}
