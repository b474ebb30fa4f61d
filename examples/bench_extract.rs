//! Extraction benchmark: a generated ~50 MiB release tarball, extracted with
//! `clusterstack::source::archive::extract_tgz` and with `tar xzf`.
//!
//! `cargo run --release --example bench_extract` prints both times (best of
//! 3), their ratio and this process's peak RSS (`VmHWM`).

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use clusterstack::source::archive::{ExtractLimits, extract_tgz};

const TARGET_BYTES: usize = 50 << 20;
const RUNS: usize = 3;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let work = tempfile::tempdir()?;
    let archive = work.path().join("bench-cluster-class-v1.tgz");
    let (files, bytes) = generate(&archive)?;
    let compressed = std::fs::metadata(&archive)?.len();
    println!(
        "archive: {files} files, {:.1} MiB uncompressed, {:.1} MiB compressed",
        bytes as f64 / 1048576.0,
        compressed as f64 / 1048576.0
    );

    // Measure extraction alone: reset the high-water mark left by generating
    // the archive (Linux: writing 5 to clear_refs resets VmHWM).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let rss_before = peak_rss();
    let ours = best_of(|i| {
        let dest = work.path().join(format!("ours-{i}"));
        let start = Instant::now();
        extract_tgz(&archive, &dest, &ExtractLimits::default()).map_err(|e| e.to_string())?;
        Ok(start.elapsed())
    })?;
    let rss_extract = peak_rss();
    let tar = best_of(|i| {
        let dest = work.path().join(format!("tar-{i}"));
        std::fs::create_dir_all(&dest).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let status =
            Command::new("tar").arg("xzf").arg(&archive).arg("-C").arg(&dest).status().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("tar xzf failed: {status}"));
        }
        Ok(start.elapsed())
    })?;
    let same = same_tree(&work.path().join("ours-0"), &work.path().join("tar-0"))?;

    println!("clusterstack extract_tgz: {:.3} s (best of {RUNS})", ours.as_secs_f64());
    println!("tar xzf:                  {:.3} s (best of {RUNS})", tar.as_secs_f64());
    println!("ratio ours/tar:           {:.2}", ours.as_secs_f64() / tar.as_secs_f64());
    println!("throughput (ours):        {:.0} MiB/s uncompressed", bytes as f64 / 1048576.0 / ours.as_secs_f64());
    let show = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
    println!(
        "peak RSS (VmHWM):         {} during extraction ({} before it{})",
        show(rss_extract),
        show(rss_before),
        if reset { ", high-water mark reset after generating" } else { ", not reset: includes generation" }
    );
    println!("trees identical:          {same}");
    Ok(())
}

fn best_of(mut run: impl FnMut(usize) -> Result<Duration, String>) -> Result<Duration, String> {
    let mut best = Duration::MAX;
    for i in 0..RUNS {
        best = best.min(run(i)?);
    }
    Ok(best)
}

/// A chart-like tree of YAML-ish files (compressible like real manifests)
/// plus a few larger, less compressible blobs.
fn generate(path: &Path) -> std::io::Result<(usize, usize)> {
    let file = std::fs::File::create(path)?;
    let gz = flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::default());
    let mut builder = tar::Builder::new(gz);
    let mut seed: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut files, mut bytes) = (0, 0);
    while bytes < TARGET_BYTES {
        let i = files;
        let (name, data) = if i % 100 == 99 {
            // 1 MiB of noise: a binary-ish blob.
            let data: Vec<u8> = (0..(1 << 20) / 8).flat_map(|_| next().to_le_bytes()).collect();
            (format!("bench-cluster-class/files/blob-{i}.bin"), data)
        } else {
            let mut text = String::new();
            while text.len() < 24 * 1024 {
                let n = next();
                text.push_str(&format!(
                    "- name: item-{}\n  image: registry.example.com/team/app:{}\n  replicas: {}\n",
                    n % 10_000,
                    n % 97,
                    n % 5
                ));
            }
            (format!("bench-cluster-class/templates/dir-{}/file-{i}.yaml", i % 50), text.into_bytes())
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, &name, &data[..])?;
        files += 1;
        bytes += data.len();
    }
    let mut gz = builder.into_inner()?;
    gz.flush()?;
    gz.finish()?.flush()?;
    Ok((files, bytes))
}

fn same_tree(a: &Path, b: &Path) -> Result<bool, String> {
    use sha2::{Digest, Sha256};
    let list = |root: &Path| -> Result<Vec<(String, Vec<u8>)>, String> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
                let path = entry.map_err(|e| e.to_string())?.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(root).map_err(|e| e.to_string())?.display().to_string();
                    out.push((rel, Sha256::digest(std::fs::read(&path).map_err(|e| e.to_string())?).to_vec()));
                }
            }
        }
        out.sort();
        Ok(out)
    };
    Ok(list(a)? == list(b)?)
}

fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).map(|v| v.trim().to_string())
}
