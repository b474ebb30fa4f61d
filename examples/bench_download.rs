//! Benchmark: `GitHubSource::download` (stream to disk while hashing) against
//! `curl -sSL URL | sha256sum` on the same loopback URL, with our peak RSS.
//!
//! Run with `cargo run --release --example bench_download`. Sizes in MiB can be given as
//! arguments (default `10 50`); each size is downloaded a few times and the best time kept.
//! Peak RSS (`VmHWM`) is read after each size: it must not grow with the asset size.
//!
//! Later stages (verification and extraction through the release cache) fit in as further
//! [`Pipeline`] variants measured by [`run_ours`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::BytesMut;
use clusterstack::release::ReleaseId;
use clusterstack::source::github::{GitHubClient, GitHubConfig};
use clusterstack::source::{AssetInfo, AssetLocator, ListedRelease, NoProgress, ReleaseSource};
use tokio::io::AsyncReadExt;

const RUNS: usize = 3;
const MIB: u64 = 1 << 20;

/// What "ours" does with the asset.
#[derive(Debug, Clone, Copy)]
enum Pipeline {
    /// `GitHubSource::download`: stream, hash, write.
    Download,
    // Extraction through the cache goes here once `source::cache` is merged.
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    clusterstack::install_crypto_provider();
    let sizes: Vec<u64> = {
        let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
        if args.is_empty() { vec![10, 50] } else { args }
    };
    let dir = tempfile::tempdir()?;
    for (id, mib) in sizes.iter().enumerate() {
        write_asset(&dir.path().join(format!("asset-{id}")), mib * MIB)?;
    }
    let base = serve(dir.path().to_path_buf()).await?;
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
        let (ours, sha) = run_ours(Pipeline::Download, &base, id as u64, size, dir.path()).await?;
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

/// Best time of [`RUNS`] runs of our pipeline, and the sha256 it computed.
async fn run_ours(
    pipeline: Pipeline,
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
        match pipeline {
            Pipeline::Download => {
                let got = source.download(&release, &asset, &dest, &NoProgress).await?;
                sha = got.sha256;
            }
        }
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

/// Writes `size` pseudo-random bytes (xorshift, so they do not compress) 1 MiB at a time.
fn write_asset(path: &Path, size: u64) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut chunk = vec![0u8; MIB as usize];
    let mut left = size;
    while left > 0 {
        for word in chunk.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let n = left.min(MIB) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    file.flush()
}

/// Serves `dir/asset-{id}` at the GitHub asset path on 127.0.0.1, streamed from disk.
async fn serve(dir: PathBuf) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = Router::new().route("/repos/{o}/{r}/releases/assets/{id}", get(asset)).with_state(dir);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(base)
}

async fn asset(State(dir): State<PathBuf>, UrlPath((_, _, id)): UrlPath<(String, String, u64)>) -> Response {
    let Ok(file) = tokio::fs::File::open(dir.join(format!("asset-{id}"))).await else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let Ok(length) = file.metadata().await.map(|m| m.len()) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let stream = futures::stream::unfold(file, |mut file| async move {
        let mut buf = BytesMut::with_capacity(64 * 1024);
        match file.read_buf(&mut buf).await {
            Ok(0) => None,
            Ok(_) => Some((Ok::<_, std::io::Error>(buf.freeze()), file)),
            Err(e) => Some((Err(e), file)),
        }
    });
    ([(header::CONTENT_LENGTH, length.to_string())], Body::from_stream(stream)).into_response()
}

/// Peak resident set size of this process, in MiB.
fn vm_hwm_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}
