//! Benchmark: pull + verify + extract of a ~50 MiB release from a loopback
//! GitHub-shaped server through the release cache, against the same work done
//! by `curl | tee | sha256sum` per asset and `tar xzf` on the same files.
//!
//! Run with `cargo run --release --example bench_pull [MiB]` (default 60 MiB
//! uncompressed, about 50 MiB to download). Prints the best of a few runs, the
//! ratio, and our peak RSS, which must not grow with the release size: run it
//! with `20` and `120` to see.

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use clusterstack::release::{Components, KubernetesVersion, ReleaseMetadata, StackVersion, Versions};
use clusterstack::source::github::{GitHubClient, GitHubConfig};
use clusterstack::source::{FetchPolicy, ReleaseCache, ReleaseSource};
use common::{MIB, reset_vm_hwm, serve_github_dir, vm_hwm_mib, write_synthetic_tgz};
use sha2::{Digest, Sha256};

const RUNS: usize = 3;
const TAG: &str = "bench-ferrol-1-27-v1";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    clusterstack::install_crypto_provider();
    let mib: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(60);
    let work = tempfile::tempdir()?;
    let served = work.path().join("served");
    std::fs::create_dir_all(&served)?;
    let (files, bytes, download) = publish(&served, mib * MIB as usize)?;
    println!(
        "release {TAG}: 3 assets, {download:.1} MiB to download, cluster class {files} files / {:.1} MiB uncompressed",
        bytes as f64 / MIB as f64
    );
    let base = serve_github_dir(served).await?;

    let reset = reset_vm_hwm();
    let ours = best_of(|i| {
        let cache_dir = work.path().join(format!("cache-{i}"));
        let base = base.clone();
        async move {
            let client = GitHubClient::new(GitHubConfig { api_url: base, ..GitHubConfig::default() })?;
            let source = client.repository("bench", "stacks");
            let start = Instant::now();
            let listing = source.list().await?;
            let release = listing.releases.iter().find(|r| r.tag == TAG).ok_or("release not listed")?;
            let cache = ReleaseCache::new(&cache_dir)?;
            let fetched = cache.fetch(&source, release, FetchPolicy { require_verified: true }).await?;
            let elapsed = start.elapsed();
            if !fetched.cluster_class_chart_dir().join("Chart.yaml").is_file() {
                return Err("the chart was not extracted".into());
            }
            Ok(elapsed)
        }
    })
    .await?;
    let hwm = vm_hwm_mib();

    let script = format!(
        "set -e; curl -sSf -o listing.json '{base}/repos/bench/stacks/releases'
for id in 1 2 3; do curl -sSfL -H 'Accept: application/octet-stream' \"{base}/repos/bench/stacks/releases/assets/$id\" | tee asset-$id | sha256sum >> sums; done
mkdir cc addon; tar xzf asset-2 -C cc; tar xzf asset-3 -C addon"
    );
    let theirs = best_of(|i| {
        let dir = work.path().join(format!("tools-{i}"));
        let script = script.clone();
        async move {
            std::fs::create_dir_all(&dir)?;
            let start = Instant::now();
            let out = Command::new("sh").arg("-c").arg(&script).current_dir(&dir).output()?;
            if !out.status.success() {
                return Err(format!("curl/tar failed: {}", String::from_utf8_lossy(&out.stderr)).into());
            }
            Ok(start.elapsed())
        }
    })
    .await;

    println!("clusterstack list + fetch (verify, extract, manifest): {:.3} s (best of {RUNS})", ours.as_secs_f64());
    match theirs {
        Ok(theirs) => {
            println!(
                "curl | tee | sha256sum + tar xzf:                    {:.3} s (best of {RUNS})",
                theirs.as_secs_f64()
            );
            println!(
                "ratio ours / system tools:                           {:.2}",
                ours.as_secs_f64() / theirs.as_secs_f64()
            );
        }
        Err(e) => println!("system tools not measured: {e}"),
    }
    println!(
        "peak RSS (VmHWM) during our pulls:                   {hwm:.1} MiB{}",
        if reset { "" } else { " (not reset: includes generating the release)" }
    );
    Ok(())
}

async fn best_of<F, Fut>(mut run: F) -> Result<Duration, Box<dyn std::error::Error>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<Duration, Box<dyn std::error::Error>>>,
{
    let mut best = Duration::MAX;
    for i in 0..RUNS {
        best = best.min(run(i).await?);
    }
    Ok(best)
}

/// Writes the release's assets as `asset-{id}` and a GitHub listing with their
/// sizes and sha256 digests. Returns (files, uncompressed bytes, MiB to download).
fn publish(dir: &Path, target: usize) -> Result<(usize, usize, f64), Box<dyn std::error::Error>> {
    let metadata = ReleaseMetadata {
        versions: Versions {
            cluster_stack: StackVersion::Stable(1),
            kubernetes: KubernetesVersion { major: 1, minor: 27, patch: 3, build: None },
            components: Components { cluster_addon: StackVersion::Stable(1), node_image: None, cluster_class: None },
        },
    };
    std::fs::write(dir.join("asset-1"), metadata.to_yaml())?;
    let (files, bytes) = write_synthetic_tgz(&dir.join("asset-2"), "bench-ferrol-1-27-cluster-class", target, 10)?;
    write_synthetic_tgz(&dir.join("asset-3"), "cni", 64 * 1024, 1000)?;
    let names = ["metadata.yaml", "bench-ferrol-1-27-cluster-class-v1.tgz", "bench-ferrol-1-27-cluster-addon-v1.tgz"];
    let mut assets = Vec::new();
    let mut total = 0u64;
    for (i, name) in names.iter().enumerate() {
        let id = i + 1;
        let content = std::fs::read(dir.join(format!("asset-{id}")))?;
        total += content.len() as u64;
        assets.push(serde_json::json!({
            "id": id, "name": name, "size": content.len(),
            "digest": format!("sha256:{}", hex::encode(Sha256::digest(&content))),
        }));
    }
    let listing = serde_json::json!([{ "tag_name": TAG, "draft": false, "prerelease": false, "assets": assets }]);
    std::fs::write(dir.join("releases.json"), serde_json::to_vec(&listing)?)?;
    Ok((files, bytes, total as f64 / MIB as f64))
}
