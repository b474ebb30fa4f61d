//! Helpers shared by the benchmarks (`#[path = "common/mod.rs"] mod common;`):
//! peak-memory readings, the operator child process (started, and its side of the set-up), the
//! command line's flags, waiting for a condition, incompressible data, a synthetic cluster-class
//! tarball and a loopback server shaped like GitHub's release API that streams assets from files.

#![allow(dead_code)] // each benchmark uses a different subset

use std::io::Write;
use std::path::{Path, PathBuf};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::BytesMut;
use tokio::io::AsyncReadExt;

pub const MIB: u64 = 1 << 20;

/// Peak resident set size of this process (`VmHWM`), in MiB.
pub fn vm_hwm_mib() -> f64 {
    status_mib("self", "VmHWM:").unwrap_or(f64::NAN)
}

/// A `/proc/<pid>/status` field given in kB (`VmHWM:`, `RssAnon:`...), in MiB; `None` when
/// unreadable (not Linux, process gone).
pub fn status_mib(pid: &str, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Peak RSS of child process `pid` (`VmHWM`), in MiB; 0 when unreadable.
pub fn child_hwm_mib(pid: u32) -> f64 {
    status_mib(&pid.to_string(), "VmHWM:").unwrap_or(0.0)
}

/// This example run again with `--operator`, as a child process so that its peak RSS is the
/// operator's own: with the malloc setting the Deployment runs it with, and under
/// `BENCH_OPERATOR_WRAPPER` (say `heaptrack`) when that is set.
pub fn operator_command() -> std::io::Result<std::process::Command> {
    let exe = std::env::current_exe()?;
    let mut command = match std::env::var_os("BENCH_OPERATOR_WRAPPER") {
        Some(wrapper) => {
            let mut c = std::process::Command::new(wrapper);
            c.arg(&exe);
            c
        }
        None => std::process::Command::new(&exe),
    };
    let (arena_var, arena_max) = clusterstack::cli::MALLOC_ARENA_MAX;
    command.arg("--operator").env(arena_var, arena_max);
    Ok(command)
}

/// A variable the parent passes to the operator child (`BENCH_API_URL`, `BENCH_CACHE`...).
pub fn bench_var(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} is not set"))
}

/// The operator child's client: the kubeconfig at `BENCH_KUBECONFIG` (a real kube-apiserver),
/// else the API server double at `BENCH_API_URL`.
pub async fn operator_client() -> Result<kube::Client, Box<dyn std::error::Error>> {
    if let Ok(path) = std::env::var("BENCH_KUBECONFIG") {
        let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default()).await?;
        return Ok(kube::Client::try_from(config)?);
    }
    let config = kube::Config::new(bench_var("BENCH_API_URL")?.parse()?);
    Ok(kube::Client::try_from(config)?)
}

/// The command line as `--flag N` pairs (every benchmark flag takes a whole number).
pub fn number_flags() -> Result<NumberFlags, String> {
    number_flags_and(&[]).map(|(flags, _)| flags)
}

/// `--flag N` pairs.
pub type NumberFlags = Vec<(String, u64)>;

/// [`number_flags`], and which of `switches` (flags without a value) were given.
pub fn number_flags_and(switches: &[&str]) -> Result<(NumberFlags, Vec<String>), String> {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let (given, args): (Vec<String>, Vec<String>) = all.into_iter().partition(|a| switches.contains(&a.as_str()));
    let flags = args
        .chunks(2)
        .map(|pair| {
            let [flag, value] = pair else { return Err(format!("{pair:?}: a flag needs a value")) };
            let n: u64 = value.parse().map_err(|e| format!("{flag} {value}: {e}"))?;
            Ok((flag.clone(), n))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((flags, given))
}

/// Waits until `check` holds, looking every `every`: how long it took, or `None` past `limit`.
pub async fn wait_until(
    limit: std::time::Duration,
    every: std::time::Duration,
    mut check: impl FnMut() -> bool,
) -> Option<std::time::Duration> {
    let start = std::time::Instant::now();
    while !check() {
        if start.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(every).await;
    }
    Some(start.elapsed())
}

/// Resets the peak-RSS high-water mark, so that a later reading covers only
/// what follows. Returns whether the kernel allowed it.
pub fn reset_vm_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A xorshift generator: fast, deterministic, and its output does not compress.
pub struct XorShift(u64);

impl XorShift {
    pub fn new() -> Self {
        XorShift(0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for word in buf.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            word.copy_from_slice(&bytes[..word.len()]);
        }
    }
}

/// Writes `size` incompressible bytes, 1 MiB at a time.
pub fn write_pseudo_random(path: &Path, size: u64) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut rng = XorShift::new();
    let mut chunk = vec![0u8; MIB as usize];
    let mut left = size;
    while left > 0 {
        rng.fill(&mut chunk);
        let n = left.min(MIB) as usize;
        file.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    file.flush()
}

/// Writes a cluster-class-like `.tgz` of about `target` uncompressed bytes under
/// `top/`: a `Chart.yaml`, YAML templates (which compress well) and a random
/// 1 MiB blob every `blob_every`-th file (which does not). Returns (files,
/// uncompressed bytes).
pub fn write_synthetic_tgz(
    path: &Path,
    top: &str,
    target: usize,
    blob_every: usize,
) -> std::io::Result<(usize, usize)> {
    let file = std::fs::File::create(path)?;
    let gz = flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::default());
    let mut builder = tar::Builder::new(gz);
    let mut rng = XorShift::new();
    let chart = format!("name: {top}\nversion: v1\n");
    let mut header = tar::Header::new_gnu();
    header.set_size(chart.len() as u64);
    header.set_mode(0o644);
    builder.append_data(&mut header, format!("{top}/Chart.yaml"), chart.as_bytes())?;
    let (mut files, mut bytes) = (1, chart.len());
    while bytes < target {
        let i = files;
        let (name, data) = if i % blob_every == 0 {
            let mut data = vec![0u8; MIB as usize];
            rng.fill(&mut data);
            (format!("{top}/files/blob-{i}.bin"), data)
        } else {
            let mut text = String::new();
            while text.len() < 24 * 1024 {
                let n = rng.next_u64();
                text.push_str(&format!(
                    "- name: item-{}\n  image: registry.example.com/team/app:{}\n  replicas: {}\n",
                    n % 10_000,
                    n % 97,
                    n % 5
                ));
            }
            (format!("{top}/templates/dir-{}/file-{i}.yaml", i % 50), text.into_bytes())
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, &name, &data[..])?;
        files += 1;
        bytes += data.len();
    }
    builder.into_inner()?.finish()?.flush()?;
    Ok((files, bytes))
}

/// Serves `dir` on 127.0.0.1 in the shape of GitHub's release API, for any
/// owner and repository: `/repos/{o}/{r}/releases` answers the file
/// `dir/releases.json` (one page), `/repos/{o}/{r}/releases/assets/{id}` streams
/// the file `dir/asset-{id}` from disk. Returns the base URL.
pub async fn serve_github_dir(dir: PathBuf) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = Router::new()
        .route("/repos/{o}/{r}/releases", get(listing))
        .route("/repos/{o}/{r}/releases/assets/{id}", get(asset))
        .with_state(dir);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(base)
}

async fn listing(State(dir): State<PathBuf>) -> Response {
    match tokio::fs::read(dir.join("releases.json")).await {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
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

/// CPU time (user + system) child process `pid` has used so far, from `/proc/<pid>/stat`; on a
/// loaded machine the operator's own cost, where wall time also counts waiting for a core.
/// `None` when unreadable.
pub fn child_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf reads a constant of the system; no memory is passed.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| ticks / hz as f64)
}
