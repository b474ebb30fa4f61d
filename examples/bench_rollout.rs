//! A ClusterStackRollout at scale on the API server double (with latency): N Clusters in W waves
//! moved from the sample stack's v1 to v2, the stand-in topology controller settling each moved
//! Cluster after a delay. Prints the operator's peak RSS, API requests per moved Cluster (besides
//! the rollout's status writes), and the time each wave took on top of the stand-in's own delays.
//!
//! The operator runs in a child process (this example run again with `--operator`), so that its
//! peak RSS (`VmHWM`) is its own.
//!
//! `cargo run --release --example bench_rollout -- --clusters 1000 --waves 10 --max 25`
//! (defaults: 1000 Clusters, 10 waves, 25 at once, 2 ms latency, 200 ms settle delay).

#[path = "common/mod.rs"]
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::Duration;

use clusterstack::controller::run::{RunOptions, run};
use clusterstack::controller::runtime::context::Settings;
use clusterstack::source::SourceSpec;
use serde_json::{Value, json};
use support::topology::{Seen, Topology};
use tokio_util::sync::CancellationToken;

const CS: &str = "clusterstack.x-k8s.io/v1alpha1";
const NS: &str = "stacks";

struct Size {
    clusters: usize,
    waves: usize,
    max: usize,
    latency: Duration,
    settle: Duration,
}

fn size() -> Result<Size, String> {
    let mut s = Size {
        clusters: 1000,
        waves: 10,
        max: 25,
        latency: Duration::from_millis(2),
        settle: Duration::from_millis(200),
    };
    for (flag, n) in common::number_flags()? {
        match flag.as_str() {
            "--clusters" => s.clusters = n as usize,
            "--waves" => s.waves = (n as usize).max(1),
            "--max" => s.max = (n as usize).max(1),
            "--latency-ms" => s.latency = Duration::from_millis(n),
            "--settle-ms" => s.settle = Duration::from_millis(n),
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(s)
}

/// Waits until `check` holds (looking every 20 ms); how long it took, or `None` past `limit`.
async fn wait(limit: Duration, check: impl FnMut() -> bool) -> Option<Duration> {
    common::wait_until(limit, Duration::from_millis(20), check).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    clusterstack::install_crypto_provider();
    if std::env::args().nth(1).as_deref() == Some("--operator") {
        return operator().await;
    }
    let size = size()?;
    let server = support::operator::capi_server(&[NS, "team"]).await;
    server.put_object(json!({
        "apiVersion": CS, "kind": "ClusterStack", "metadata": {"name": "ferrol", "namespace": NS},
        "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27", "channel": "stable",
                 "versions": ["v1", "v2"], "autoSubscribe": false, "pollInterval": "30s"}
    }));
    let per_wave = size.clusters.div_ceil(size.waves);
    for c in 0..size.clusters {
        server.put_object(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": format!("c-{c:05}"), "namespace": "team", "labels": {"wave": format!("w{}", c / per_wave)}},
            "spec": {"topology": {"class": "docker-ferrol-1-27-v1", "classNamespace": NS, "version": "v1.27.3"}},
            "status": {"observedGeneration": 1, "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "TopologyReconciled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }));
    }
    server.set_latency(size.latency);
    let cache = tempfile::tempdir()?;
    let mut child =
        common::operator_command()?.env("BENCH_API_URL", server.url()).env("BENCH_CACHE", cache.path()).spawn()?;
    let releases_ready = || {
        let list = server.list_objects(CS, "ClusterStackRelease");
        list.len() == 2 && list.iter().all(|r| r["status"]["ready"] == true)
    };
    if wait(Duration::from_secs(300), releases_ready).await.is_none() {
        let _ = child.kill();
        return Err("releases not ready within 300 s".into());
    }
    let topology = Topology::start(&server, size.settle);
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.clear_requests();
    let cpu_before = common::child_cpu_seconds(child.id());
    let waves: Vec<Value> = (0..size.waves)
        .map(|w| json!({"name": format!("w{w}"), "clusterSelector": {"matchLabels": {"wave": format!("w{w}")}}, "maxConcurrent": size.max}))
        .collect();
    server.put_object(json!({
        "apiVersion": CS, "kind": "ClusterStackRollout", "metadata": {"name": "ferrol", "namespace": NS},
        "spec": {"clusterStackRef": {"name": "ferrol"}, "target": "v2", "progressDeadline": "10m", "waves": waves}
    }));
    let done = || {
        server
            .get_object(CS, "ClusterStackRollout", Some(NS), "ferrol")
            .is_some_and(|r| r["status"]["phase"] == "Succeeded")
    };
    let Some(took) = wait(Duration::from_secs(1800), done).await else {
        let _ = child.kill();
        return Err("the rollout did not succeed within 1800 s".into());
    };
    let rss = common::child_hwm_mib(child.id());
    let cpu = common::child_cpu_seconds(child.id()).zip(cpu_before).map(|(after, before)| after - before);
    let _ = child.kill();

    // The operator's requests: everything but the stand-in's lists and status patches of Clusters.
    let requests = server.requests();
    let ours: Vec<_> = requests
        .iter()
        .filter(|r| !(r.resource == "clusters" && (r.verb == "list" || r.subresource == "status")))
        .collect();
    let status_writes =
        ours.iter().filter(|r| r.resource == "clusterstackrollouts" && r.subresource == "status").count();
    let moves = ours
        .iter()
        .filter(|r| {
            r.resource == "clusters"
                && r.verb == "patch"
                && r.query.get("fieldManager").map(String::as_str) == Some("clusterstack-rollout")
        })
        .count();
    let mut by_kind = std::collections::BTreeMap::new();
    for r in &ours {
        *by_kind
            .entry(format!(
                "{} {}{}",
                r.verb,
                r.resource,
                if r.subresource.is_empty() { String::new() } else { format!("/{}", r.subresource) }
            ))
            .or_insert(0usize) += 1;
    }
    // Per wave: from its first move seen to its last Cluster settled, minus the stand-in's delays
    // (one settle per batch of `max`).
    let seen = topology.seen();
    let wave_of = |name: &str| name.trim_start_matches("c-").parse::<usize>().map(|c| c / per_wave).unwrap_or(0);
    let mut spans: Vec<(Option<tokio::time::Instant>, Option<tokio::time::Instant>)> = vec![(None, None); size.waves];
    for (at, s) in &seen {
        match s {
            Seen::Moved(c, _, _) => {
                let w = &mut spans[wave_of(c)];
                w.0 = Some(w.0.map_or(*at, |t: tokio::time::Instant| t.min(*at)));
            }
            Seen::Settled(c, _) => {
                let w = &mut spans[wave_of(c)];
                w.1 = Some(w.1.map_or(*at, |t: tokio::time::Instant| t.max(*at)));
            }
        }
    }
    let batches = per_wave.div_ceil(size.max) as u32;
    let own = size.settle * batches;
    println!(
        "bench_rollout: {} Clusters, {} waves of {per_wave}, {} at once, latency {:?}, settle {:?}",
        size.clusters, size.waves, size.max, size.latency, size.settle
    );
    println!("  rollout took:            {took:.2?} ({} moves)", moves);
    println!("  operator peak RSS:       {rss:.1} MiB (goal < 64)");
    if let Some(cpu) = cpu {
        println!(
            "  operator CPU time:       {cpu:.2}s for the rollout ({:.1} ms per moved Cluster)",
            cpu * 1000.0 / moves.max(1) as f64
        );
    }
    println!(
        "  load average (1 min):    {}",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().next().unwrap_or("?")
    );
    let besides = ours.len() - status_writes;
    println!(
        "  API requests per moved Cluster besides status writes: {:.2} (goal <= 4); status writes per moved Cluster: {:.2}",
        besides as f64 / moves.max(1) as f64,
        status_writes as f64 / moves.max(1) as f64
    );
    for (k, n) in &by_kind {
        println!("    {k:<44} {n}");
    }
    println!("  per wave, on top of the stand-in's own {own:?} ({batches} batches x {:?}) (goal < 1 s):", size.settle);
    let mut previous_end: Option<tokio::time::Instant> = None;
    for (w, (start, end)) in spans.iter().enumerate() {
        if let (Some(s), Some(e)) = (start, end) {
            // The wave's span counts from the previous wave's end (the gap is the operator's too).
            let from = previous_end.unwrap_or(*s);
            let span = e.duration_since(from);
            println!("    w{w}: {:>6} ms added", span.saturating_sub(own).as_millis());
            previous_end = Some(*e);
        }
    }
    Ok(())
}

/// The operator alone, against the URL the parent passes.
async fn operator() -> Result<(), Box<dyn std::error::Error>> {
    let client = common::operator_client().await?;
    let releases = Path::new(env!("CARGO_MANIFEST_DIR")).join("releases");
    let mut settings = Settings::new(SourceSpec::dir(releases), common::bench_var("BENCH_CACHE")?);
    settings.resync_interval = Duration::from_secs(3600);
    settings.concurrency = 16;
    run(client, settings, RunOptions::default(), CancellationToken::new()).await?;
    Ok(())
}
