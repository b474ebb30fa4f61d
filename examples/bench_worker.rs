//! The render worker's cost per release: a real release (the Helm-format
//! fixture's cluster class) rendered in process and through the sandboxed
//! worker, side by side. Goal: under 20 ms added per render.
//!
//! `cargo build --release && cargo run --release --example bench_worker`
//! (the worker is `target/release/clusterstack`; `CLUSTERSTACK_BIN` overrides).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clusterstack::release::ReleaseId;
use clusterstack::render::worker::{Reply, Request, SandboxConfig, run_worker};
use clusterstack::render::{RenderContext, render_cluster_class};

const ROUNDS: u32 = 30;

fn worker_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("CLUSTERSTACK_BIN") {
        return PathBuf::from(p);
    }
    // target/<profile>/examples/bench_worker -> target/<profile>/clusterstack
    let exe = std::env::current_exe().expect("own path");
    exe.parent().and_then(Path::parent).map(|d| d.join("clusterstack")).expect("target directory")
}

#[tokio::main]
async fn main() {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/helm-stack/cluster-class");
    let id = ReleaseId::from_tag("docker-ferrol-1-27-v3").expect("tag");
    let ctx = RenderContext::new(&id, "capi-stacks");
    let config = SandboxConfig::new(worker_binary());
    let request = || Request {
        chart_dir: chart.clone(),
        release_name: ctx.release_name.clone(),
        namespace: ctx.namespace.clone(),
        chart_version: ctx.chart_version.clone(),
        kube_version: None,
        fuel: ctx.limits.fuel,
        max_output_bytes: ctx.limits.max_output_bytes,
        addons: None,
    };
    // The worker rounds run first, so that the parent's resident set after them shows what
    // sandboxed rendering costs the operator; the in-process rounds then show what it saves.
    let rss_start = rss_kib();
    let objects = match run_worker(&config, &request()).await.expect("worker") {
        Reply::Objects(o) => o.len(),
        other => panic!("{other:?}"),
    };
    let mut remote = Duration::ZERO;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        match run_worker(&config, &request()).await.expect("worker") {
            Reply::Objects(o) => assert_eq!(o.len(), objects),
            other => panic!("{other:?}"),
        }
        remote += t.elapsed();
    }
    let rss_after_worker = rss_kib();
    let worker_peak = children_peak_kib();

    render_cluster_class(&chart, &ctx).expect("renders");
    let mut local = Duration::ZERO;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        assert_eq!(render_cluster_class(&chart, &ctx).expect("renders").len(), objects);
        local += t.elapsed();
    }
    let rss_after_local = rss_kib();
    let (l, r) = (local.as_secs_f64() * 1e3 / ROUNDS as f64, remote.as_secs_f64() * 1e3 / ROUNDS as f64);
    println!("release: helm-stack cluster class, {objects} objects, {ROUNDS} rounds");
    println!("{:<24} {:>10}", "", "ms/render");
    println!("{:<24} {:>10.2}", "in process", l);
    println!("{:<24} {:>10.2}", "render worker", r);
    println!("{:<24} {:>10.2}   (goal < 20 ms)", "added by the worker", r - l);
    println!();
    println!("{:<40} {:>10}", "resident set of the rendering process", "KiB");
    println!("{:<40} {:>10}", "parent at start", rss_start);
    println!("{:<40} {:>10}", "parent after the worker rounds", rss_after_worker);
    println!("{:<40} {:>10}", "parent after the in-process rounds", rss_after_local);
    println!("{:<40} {:>10}", "largest worker (peak)", worker_peak);
}

/// This process's resident set, KiB (`VmRSS`).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The largest resident set of any waited-for child, KiB.
fn children_peak_kib() -> u64 {
    // SAFETY: getrusage fills a zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) } != 0 {
        return 0;
    }
    usage.ru_maxrss as u64
}
