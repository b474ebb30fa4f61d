//! The operator at scale on the API server double (2 ms latency per request) and the fake GitHub:
//! N ClusterStacks (one per namespace) on R repositories, C CAPI Clusters. Prints the cold start
//! until every release is ready, the operator's peak RSS, what one quiet poll interval costs (API
//! requests, GitHub requests, mutations), and p50/p99 reaction times for a Cluster moving class
//! (the release it left is deleted), a provider object regressing (its release turns not ready)
//! and a hand edit of an applied object (reverted).
//!
//! The sampled stacks name a provider template (`providerRef`); a stand-in for the provider's
//! operator, in this process, marks every provider object ready a moment after it appears.
//!
//! The operator runs in a child process (this example run again with `--operator`), so that its
//! peak RSS (`VmHWM`) is its own, not the test doubles'.
//!
//! `cargo run --release --example bench_operator -- --stacks 1000 --repos 10 --clusters 5000`
//! (defaults: 100 stacks, 10 repositories, 500 Clusters, 2 ms, poll 10 s, 20 samples).
//!
//! With `--real`, the fleet runs on the double and then on the real control plane built by
//! `hack/controlplane/build`, and the figures print side by side (`bench_operator/fleet.rs`).

#[path = "common/mod.rs"]
mod common;
#[path = "bench_operator/fleet.rs"]
mod fleet;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use clusterstack::controller::run::{RunOptions, run};
use clusterstack::controller::runtime::context::Settings;
use clusterstack::source::SourceSpec;
use clusterstack::source::github::GitHubConfig;
use serde_json::{Value, json};
use support::ApiServer;
use support::fixtures::{capi_crds, load_yaml};
use support::github::{FakeAsset, FakeGitHub, FakeRelease, Route};
use tokio_util::sync::CancellationToken;

const CS: &str = "clusterstack.x-k8s.io/v1alpha1";
const KCPT: &str = "controlplane.cluster.x-k8s.io/v1beta1";
const INFRA: &str = "infrastructure.clusterstack.x-k8s.io/v1alpha1";
const PROVIDER: &str = "DockerClusterStackRelease";

struct Size {
    stacks: usize,
    repos: usize,
    clusters: usize,
    latency: Duration,
    poll: Duration,
    samples: usize,
    /// `--real`: the fleet on the double and on the real control plane.
    real: bool,
}

fn size() -> Result<Size, String> {
    let mut s = Size {
        stacks: 100,
        repos: 10,
        clusters: 500,
        latency: Duration::from_millis(2),
        poll: Duration::from_secs(10),
        samples: 20,
        real: false,
    };
    let (flags, switches) = common::number_flags_and(&["--real"])?;
    s.real = !switches.is_empty();
    for (flag, n) in flags {
        match flag.as_str() {
            "--stacks" => s.stacks = n as usize,
            "--repos" => s.repos = (n as usize).max(1),
            "--clusters" => s.clusters = n as usize,
            "--latency-ms" => s.latency = Duration::from_millis(n),
            "--poll-s" => s.poll = Duration::from_secs(n.max(1)),
            "--samples" => s.samples = n as usize,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    s.samples = s.samples.min(s.stacks);
    Ok(s)
}

fn ns(i: usize) -> String {
    format!("stacks-{i:04}")
}

fn tag(v: u32) -> String {
    format!("docker-ferrol-1-27-v{v}")
}

fn stack(i: usize, repos: usize, poll: Duration, versions: &[&str], sampled: bool) -> Value {
    let mut stack = json!({
        "apiVersion": CS, "kind": "ClusterStack",
        "metadata": {"name": "ferrol", "namespace": ns(i)},
        "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27", "channel": "stable",
                 "autoSubscribe": true, "versions": versions, "pollInterval": format!("{}s", poll.as_secs()),
                 "source": {"github": {"owner": "acme", "repository": format!("stacks-{}", i % repos)}}}
    });
    if sampled {
        stack["spec"]["providerRef"] =
            json!({"apiVersion": INFRA, "kind": format!("{PROVIDER}Template"), "name": "docker-template"});
    }
    stack
}

/// The provider's operator: every provider object without a status is made ready.
fn provider_operator(server: &ApiServer) {
    // Polled every 10 ms: the double's objects are read in place, only waiting ones edited.
    let mut waiting = Vec::new();
    server.visit_objects(INFRA, PROVIDER, |o| {
        if o["status"]["ready"].is_null()
            && let (Some(ns), Some(name)) = (o["metadata"]["namespace"].as_str(), o["metadata"]["name"].as_str())
        {
            waiting.push((ns.to_string(), name.to_string()));
        }
    });
    for (ns, name) in waiting {
        server.edit_object(INFRA, PROVIDER, Some(&ns), &name, |o| o["status"] = json!({"ready": true}));
    }
}

fn cluster(name: &str, namespace: &str, class: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"topology": {"class": class, "version": "v1.27.5"}}
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The CPU time (user and system, all threads) process `pid` ("self" for this one) has used so
/// far, in seconds; 0 when unreadable. Fields 14 and 15 of `/proc/<pid>/stat`, in USER_HZ (100).
fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // The command name (field 2) may hold spaces: count from the ')' that closes it.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // `rest` starts at field 3 (state): utime is field 14, stime field 15.
    (ticks(11) + ticks(12)) / 100.0
}

/// Waits until `check` holds (looking every 10 ms); how long it took, or `None` past `limit`.
async fn wait(limit: Duration, check: impl FnMut() -> bool) -> Option<Duration> {
    common::wait_until(limit, Duration::from_millis(10), check).await
}

/// [`wait`] looking every millisecond, for reactions of a few milliseconds: each check reads one
/// object, and at 10 ms the figures were whole ticks (11 or 22 ms) whatever the reaction took.
async fn wait_fine(limit: Duration, check: impl FnMut() -> bool) -> Option<Duration> {
    common::wait_until(limit, Duration::from_millis(1), check).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    clusterstack::install_crypto_provider();
    if std::env::args().nth(1).as_deref() == Some("--operator") {
        return operator().await;
    }
    let size = size()?;
    if size.real {
        let fleet = fleet::Fleet {
            stacks: size.stacks,
            repos: size.repos,
            clusters: size.clusters,
            latency: size.latency,
            poll: size.poll,
        };
        return fleet::run(fleet).await;
    }

    let server = ApiServer::start().await;
    for crd in clusterstack::api::all_crds() {
        server.put_object(serde_json::to_value(&crd)?);
    }
    for crd in capi_crds()
        .into_iter()
        .chain(load_yaml("operator/clusters.cluster.x-k8s.io.yaml"))
        .chain(load_yaml("provider/provider-crds.yaml"))
    {
        server.put_object(serde_json::to_value(&crd)?);
    }
    let template = load_yaml("provider/template.yaml").into_iter().next().ok_or("no provider template fixture")?;
    let template = serde_json::to_value(template)?;
    let fake = FakeGitHub::start().await;
    let releases = Path::new(env!("CARGO_MANIFEST_DIR")).join("releases");
    for r in 0..size.repos {
        for v in 2..=3 {
            let mut release = FakeRelease::new(&tag(v));
            let mut files: Vec<_> = std::fs::read_dir(releases.join(tag(v)))?.flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
                release = release.asset(FakeAsset::new(&name, std::fs::read(&f)?));
            }
            fake.add_release("acme", &format!("stacks-{r}"), release);
        }
    }
    // The sample stacks pin v2 and have a Cluster on it (the cluster-move reaction).
    for i in 0..size.stacks {
        server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns(i)}}));
        let sampled = i < size.samples;
        let versions: &[&str] = if sampled { &["v2"] } else { &[] };
        if sampled {
            let mut t = template.clone();
            t["metadata"]["namespace"] = json!(ns(i));
            server.put_object(t);
        }
        server.put_object(stack(i, size.repos, size.poll, versions, sampled));
    }
    for c in 0..size.clusters {
        let i = c % size.stacks.max(1);
        let class = if c < size.samples { tag(2) } else { tag(3) };
        server.put_object(cluster(&format!("c-{c:05}"), &ns(i), &class));
    }
    server.set_latency(size.latency);
    server.clear_requests();
    let cache = tempfile::tempdir()?;

    let started = Instant::now();
    let mut child = common::operator_command()?
        .env("BENCH_API_URL", server.url())
        .env("BENCH_GITHUB_URL", fake.api_url())
        .env("BENCH_CACHE", cache.path())
        .env("BENCH_POLL_S", size.poll.as_secs().to_string())
        .spawn()?;
    let expected = size.stacks + size.samples;
    let ready = || {
        provider_operator(&server);
        let (mut all, mut ready) = (0, 0);
        server.visit_objects(CS, "ClusterStackRelease", |r| {
            all += 1;
            ready += usize::from(r["status"]["ready"] == true);
        });
        all == expected && ready == expected
    };
    if wait(Duration::from_secs(900), ready).await.is_none() {
        let _ = child.kill();
        return Err("not all releases ready within 900 s".into());
    }
    let cold = started.elapsed();
    let cold_requests = server.requests();
    let cold_api = cold_requests.len();
    // Where the cold start's requests go: by verb and resource (status writes apart).
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for r in &cold_requests {
        let what = match r.subresource.as_str() {
            "" => format!("{} {}", r.verb, r.resource),
            sub => format!("{} {}/{sub}", r.verb, r.resource),
        };
        *by_kind.entry(what.trim().to_string()).or_default() += 1;
    }
    drop(cold_requests);
    let mut by_kind: Vec<(String, usize)> = by_kind.into_iter().collect();
    by_kind.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let cold_github = fake.requests().len();
    let cold_rss = common::child_hwm_mib(child.id());
    let (cold_cpu, double_cpu) = (cpu_seconds(&child.id().to_string()), cpu_seconds("self"));
    // The whole fleet: the addon controller works beside the releases, so an operator that
    // gets to the ClusterAddons sooner spends the cold start's CPU on them; this counts both.
    let addons_settled = || {
        let mut with_status = 0;
        server.visit_objects(CS, "ClusterAddon", |a| with_status += usize::from(a.get("status").is_some()));
        with_status == size.clusters
    };
    let settled = wait(Duration::from_secs(300), addons_settled).await.map(|_| started.elapsed());
    let settled_api = server.requests().len();
    let settled_cpu = (cpu_seconds(&child.id().to_string()), cpu_seconds("self"));

    // Let the last status writes land, then one whole poll interval with nothing new.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Several intervals, so the count per interval does not depend on where the window falls,
    // and at least 70 s, so minute-long requeues would show.
    let intervals = (70 / size.poll.as_secs().max(1) + 1).max(3) as u32;
    server.clear_requests();
    let github_before = fake.requests().len();
    tokio::time::sleep(size.poll * intervals).await;
    let quiet = server.requests();
    let mutations = quiet.iter().filter(|r| ["create", "update", "patch", "delete"].contains(&r.verb.as_str())).count();
    let quiet_github = (fake.requests().len() - github_before) as f64 / f64::from(intervals);

    // Hand edits of an applied object, reverted by the watch.
    let mut edits = Vec::new();
    for i in 0..size.samples {
        let namespace = ns(i);
        let Some(name) = server
            .list_objects(KCPT, "KubeadmControlPlaneTemplate")
            .into_iter()
            .find(|o| {
                o["metadata"]["namespace"] == namespace.as_str()
                    && o["metadata"]["labels"]["clusterstack.x-k8s.io/release"] == tag(3)
            })
            .and_then(|o| o["metadata"]["name"].as_str().map(str::to_string))
        else {
            continue;
        };
        let name = name.as_str();
        // The part the edit changes.
        let controller_manager = |s: &ApiServer| {
            s.get_object(KCPT, "KubeadmControlPlaneTemplate", Some(&ns(i)), name).map(|o| {
                o["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["controllerManager"].clone()
            })
        };
        let good = controller_manager(&server);
        let edited = server.edit_object(KCPT, "KubeadmControlPlaneTemplate", Some(&ns(i)), name, |o| {
            o["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["controllerManager"]["extraArgs"]
                ["enable-hostpath-provisioner"] = json!("false");
        });
        if Some(
            edited["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["controllerManager"]
                .clone(),
        ) == good
        {
            return Err("the hand edit changed nothing".into());
        }
        if let Some(t) = wait_fine(Duration::from_secs(30), || controller_manager(&server) == good).await {
            edits.push(t);
        }
    }
    // Provider objects regressing: the release says not ready; then ready again.
    let mut regressions = Vec::new();
    for i in 0..size.samples {
        let namespace = ns(i);
        let set = |ready: bool| {
            server.edit_object(INFRA, PROVIDER, Some(&namespace), &tag(3), |o| o["status"] = json!({"ready": ready}))
        };
        let release_ready = || {
            server
                .get_object(CS, "ClusterStackRelease", Some(&namespace), &tag(3))
                .map(|r| r["status"]["ready"].clone())
        };
        set(false);
        if let Some(t) = wait_fine(Duration::from_secs(30), || release_ready() == Some(json!(false))).await {
            regressions.push(t);
        }
        set(true);
        wait(Duration::from_secs(30), || release_ready() == Some(json!(true))).await;
    }
    // Clusters moving class: unpin v2 (kept: in use), then move its Cluster to v3.
    for i in 0..size.samples {
        server.put_object(stack(i, size.repos, size.poll, &[], true));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut moves = Vec::new();
    for i in 0..size.samples {
        let c = format!("c-{i:05}");
        let namespace = ns(i % size.stacks.max(1));
        let trace = std::env::var_os("BENCH_TRACE_MOVE").is_some();
        if trace {
            server.clear_requests();
        }
        let moved = Instant::now();
        server.put_object(cluster(&c, &namespace, &tag(3)));
        let gone = || {
            server
                .get_object(CS, "ClusterStackRelease", Some(&namespace), &tag(2))
                .is_none_or(|r| !r["metadata"]["deletionTimestamp"].is_null())
        };
        if let Some(t) = wait_fine(Duration::from_secs(30), gone).await {
            moves.push(t);
            if trace {
                eprintln!("move {i}: seen gone after {t:?} (from {:?} after the move)", moved.elapsed());
            }
        }
        if trace {
            // The requests of each move, in order (BENCH_TRACE_MOVE=1).
            for r in server.requests() {
                let at = r.at.saturating_duration_since(moved);
                eprintln!(
                    "move: +{at:?} {} {} {}/{} {} -> {}",
                    r.verb, r.resource, r.namespace, r.name, r.subresource, r.status
                );
            }
        }
    }
    let rss = common::child_hwm_mib(child.id());
    // What the resident set is made of at the end: heap and stacks, and mapped files (the code).
    let (anon, file) = {
        let pid = child.id().to_string();
        (common::status_mib(&pid, "RssAnon:").unwrap_or(0.0), common::status_mib(&pid, "RssFile:").unwrap_or(0.0))
    };
    let _ = child.kill();
    let _ = child.wait();
    edits.sort();
    moves.sort();
    regressions.sort();

    println!(
        "bench_operator: {} ClusterStacks, {} repositories, {} Clusters, API latency {:?}, poll {:?}",
        size.stacks, size.repos, size.clusters, size.latency, size.poll
    );
    println!("cold start until all {expected} releases ready: {:.2} s", cold.as_secs_f64());
    match settled {
        Some(t) => println!(
            "  and every Cluster's ClusterAddon with a status: {:.2} s, {settled_api} API requests, CPU operator {:.2} s, this process {:.2} s",
            t.as_secs_f64(),
            settled_cpu.0,
            settled_cpu.1
        ),
        None => println!("  not every Cluster's ClusterAddon had a status within 300 s"),
    }
    println!("  API requests:            {cold_api}");
    let shown: Vec<String> = by_kind.iter().take(8).map(|(what, n)| format!("{n} {what}")).collect();
    println!("    of which               {}", shown.join(", "));
    println!("  GitHub requests:         {cold_github} (asset downloads {})", fake.count(Route::Asset));
    println!("  operator peak RSS:       {cold_rss:.1} MiB");
    println!(
        "  CPU time:                operator {cold_cpu:.2} s, this process (API double, GitHub, checks) {double_cpu:.2} s"
    );
    println!("quiet poll intervals ({intervals} measured, figures per interval):");
    println!("  API requests:            {:.1} (goal 0)", quiet.len() as f64 / f64::from(intervals));
    println!("  GitHub requests:         {quiet_github:.1} (goal {}, one per repository)", size.repos);
    println!("  mutations:               {:.1} (goal 0)", mutations as f64 / f64::from(intervals));
    println!("reactions ({} samples each, goal p99 < 2 s):", size.samples);
    for (what, times) in
        [("hand edit reverted:", &edits), ("Cluster moved class:", &moves), ("provider regression:", &regressions)]
    {
        println!(
            "  {what:<24} p50 {:?} p99 {:?} ({} of {})",
            percentile(times, 0.5),
            percentile(times, 0.99),
            times.len(),
            size.samples
        );
    }
    println!("operator peak RSS overall: {rss:.1} MiB (goal < 64)");
    println!("  resident at the end:     {anon:.1} MiB anonymous (heap, stacks), {file:.1} MiB file-backed (code)");
    Ok(())
}

/// The operator alone, against the URLs the parent passes.
async fn operator() -> Result<(), Box<dyn std::error::Error>> {
    let client = common::operator_client().await?;
    let mut settings = Settings::new(SourceSpec::github("acme", "stacks-0"), common::bench_var("BENCH_CACHE")?);
    settings.github =
        GitHubConfig { api_url: common::bench_var("BENCH_GITHUB_URL")?, token: None, include_prereleases: false };
    settings.poll_interval = Duration::from_secs(common::bench_var("BENCH_POLL_S")?.parse()?);
    settings.resync_interval = Duration::from_secs(3600);
    settings.concurrency = 16;
    settings.providers.set_external(std::sync::Arc::new(clusterstack::provider::ExternalOperator::new()));
    run(client, settings, RunOptions::default(), CancellationToken::new()).await?;
    Ok(())
}
