//! Benchmark: pull of a ~50 MiB release from a real local OCI registry (Debian's
//! `docker-registry`, started on 127.0.0.1) by our OCI source, against `oras pull` (PyPI's `oras`)
//! of the same artifact, in one run; and our peak RSS for a small and a large release, which must
//! be flat in the release size (blobs stream through a hash into the file).
//!
//! `cargo run --release --example bench_oci [MiB]` (default 60 MiB uncompressed, about 50 MiB to
//! download). The registry binary comes from `CLUSTERSTACK_REGISTRY_BIN` or `PATH`, `oras` from
//! `CLUSTERSTACK_ORAS_PYTHONPATH` (what `.ci/run` installs) or whatever `python3` imports.

#[path = "common/mod.rs"]
mod common;
#[path = "../tests/support/registry.rs"]
mod registry;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterstack::registry::{RegistryClient, RegistryConfig};
use clusterstack::release::{Components, KubernetesVersion, ReleaseMetadata, StackVersion, Versions};
use clusterstack::source::oci::{self, OciSource};
use clusterstack::source::{NoProgress, ReleaseSource};
use common::{MIB, reset_vm_hwm, vm_hwm_mib, write_synthetic_tgz};

type Error = Box<dyn std::error::Error>;

const RUNS: usize = 3;
const REPOSITORY: &str = "bench/stacks";

/// A release directory: metadata, a cluster class of about `target` uncompressed bytes, a small
/// addon. Returns the bytes to download.
fn write_release(dir: &Path, version: u64, target: usize) -> Result<u64, Error> {
    std::fs::create_dir_all(dir)?;
    let metadata = ReleaseMetadata {
        versions: Versions {
            cluster_stack: StackVersion::Stable(version),
            kubernetes: KubernetesVersion { major: 1, minor: 27, patch: 3, build: None },
            components: Components { cluster_addon: StackVersion::Stable(1), node_image: None, cluster_class: None },
        },
    };
    std::fs::write(dir.join("metadata.yaml"), metadata.to_yaml())?;
    write_synthetic_tgz(
        &dir.join(format!("bench-ferrol-1-27-cluster-class-v{version}.tgz")),
        "bench-ferrol-1-27-cluster-class",
        target,
        10,
    )?;
    write_synthetic_tgz(&dir.join("bench-ferrol-1-27-cluster-addon-v1.tgz"), "cni", 64 * 1024, 1000)?;
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

/// Our pull: list the tags, read the manifest, stream every blob into a file through its digest.
async fn ours(source: &OciSource, tag: &str, out: &Path) -> Result<Duration, Error> {
    std::fs::create_dir_all(out)?;
    let start = Instant::now();
    let listing = source.list().await?;
    let release = listing.releases.iter().find(|r| r.tag == tag).ok_or("release not listed")?;
    for asset in &release.assets {
        source.download(release, asset, &out.join(&asset.name), &NoProgress).await?;
    }
    Ok(start.elapsed())
}

fn oras_pull(host: &str, tag: &str, out: &Path) -> Result<Duration, Error> {
    std::fs::create_dir_all(out)?;
    let mut cmd = Command::new("python3");
    if let Some(p) = std::env::var_os("CLUSTERSTACK_ORAS_PYTHONPATH") {
        cmd.env("PYTHONPATH", p);
    }
    let start = Instant::now();
    let status = cmd
        .args([
            "-c",
            "import sys, oras.client; oras.client.OrasClient(hostname=sys.argv[1], insecure=True).pull(target=sys.argv[2], outdir=sys.argv[3])",
        ])
        .arg(host)
        .arg(format!("{host}/{REPOSITORY}:{tag}"))
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let elapsed = start.elapsed();
    if !status.status.success() {
        return Err(format!("oras pull failed: {}", String::from_utf8_lossy(&status.stderr)).into());
    }
    Ok(elapsed)
}

fn same_files(a: &Path, b: &Path) -> Result<bool, Error> {
    let mut names: Vec<_> = std::fs::read_dir(a)?.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>()?;
    names.sort();
    for name in &names {
        if std::fs::read(a.join(name))? != std::fs::read(b.join(name))? {
            return Ok(false);
        }
    }
    Ok(!names.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    clusterstack::install_crypto_provider();
    let mib: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(60);
    let registry = registry::Registry::start("bench_oci").ok_or("docker-registry not found")?;
    let host = registry.host();
    let base = format!("http://{host}");
    let client = Arc::new(RegistryClient::new(RegistryConfig::default())?);
    let work = tempfile::tempdir()?;

    // A small release and the large one, published by us.
    let mut sizes = Vec::new();
    for (version, target) in [(1, 6 * MIB as usize), (2, mib * MIB as usize)] {
        let dir = work.path().join(format!("release-v{version}"));
        let bytes = write_release(&dir, version, target)?;
        let tag = format!("bench-ferrol-1-27-v{version}");
        let start = Instant::now();
        oci::publish(&client, &host, REPOSITORY, &base, &tag, &dir, &NoProgress).await?;
        println!("published {tag}: {:.1} MiB in {:.3} s", bytes as f64 / MIB as f64, start.elapsed().as_secs_f64());
        sizes.push((tag, dir, bytes));
    }

    let source = OciSource::new(client.clone(), &host, REPOSITORY, &base);
    // Peak RSS per release size, each pull after resetting the high-water mark.
    let mut rss = Vec::new();
    for (tag, _, bytes) in &sizes {
        let reset = reset_vm_hwm();
        ours(&source, tag, &work.path().join(format!("rss-{tag}"))).await?;
        rss.push((*bytes, vm_hwm_mib(), reset));
    }

    let (tag, published, bytes) = &sizes[1];
    let mut best_ours = Duration::MAX;
    let mut best_oras: Option<Duration> = None;
    let mut oras_error = None;
    // Interleaved, so both see the same machine state.
    for i in 0..RUNS {
        let out = work.path().join(format!("ours-{i}"));
        best_ours = best_ours.min(ours(&source, tag, &out).await?);
        if !same_files(published, &out)? {
            return Err("our pull differs from what was published".into());
        }
        let out = work.path().join(format!("oras-{i}"));
        match oras_pull(&host, tag, &out) {
            Ok(t) => {
                best_oras = Some(best_oras.map_or(t, |b| b.min(t)));
                if !same_files(published, &out)? {
                    return Err("oras pull differs from what was published".into());
                }
            }
            Err(e) => oras_error = Some(e.to_string()),
        }
    }

    println!("release {tag}: {:.1} MiB in 3 blobs", *bytes as f64 / MIB as f64);
    println!(
        "clusterstack OCI pull (list, manifest, verified blobs): {:.3} s (best of {RUNS})",
        best_ours.as_secs_f64()
    );
    match best_oras {
        Some(theirs) => {
            println!(
                "oras pull (PyPI oras, one process):                    {:.3} s (best of {RUNS})",
                theirs.as_secs_f64()
            );
            println!(
                "ratio ours / oras:                                      {:.2} (goal <= 1.0)",
                best_ours.as_secs_f64() / theirs.as_secs_f64()
            );
        }
        None => println!("oras not measured: {}", oras_error.unwrap_or_default()),
    }
    for (bytes, hwm, reset) in rss {
        println!(
            "peak RSS pulling {:>5.1} MiB:                           {hwm:.1} MiB{}",
            bytes as f64 / MIB as f64,
            if reset { "" } else { " (high-water mark not reset: includes setup)" }
        );
    }
    Ok(())
}
