//! `bench_operator --real`: one fleet, the same operator binary, first on the API server double
//! and then on the real control plane (kube-apiserver, etcd and kube-controller-manager built by
//! `hack/controlplane/build`), the figures side by side.
//!
//! The fleet: N ClusterStacks (one per namespace) following the in-memory sample on R fake GitHub
//! repositories, and C v1beta2 Clusters on its newest class. The in-memory sample is v1beta2,
//! Cluster API's storage version, and both servers get Cluster API's real CRDs: without its
//! conversion webhook the real server prunes v1beta1 objects (docs/DESIGN.md §13), so the Docker
//! sample of the double-only run cannot be the fleet here.
//!
//! The operator runs under its own ServiceAccount with the RBAC of `install --export` on the real
//! server; its requests are counted from kube-apiserver's audit log there, from the double's
//! request log on the double.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clusterstack::cli::sandbox::setup;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use super::common;
use super::support::ApiServer;
use super::support::github::{FakeAsset, FakeGitHub, FakeRelease};
use super::support::real::{RealCluster, binaries_or_skip};

const CS: &str = "clusterstack.x-k8s.io/v1alpha1";
const TAGS: [&str; 2] = ["inmemory-ferrol-1-35-v2", "inmemory-ferrol-1-35-v3"];

/// The size of the fleet.
pub struct Fleet {
    pub stacks: usize,
    pub repos: usize,
    pub clusters: usize,
    pub latency: Duration,
    pub poll: Duration,
}

/// What one server's run measured.
#[derive(Default)]
struct Figures {
    cold: Duration,
    settled: Option<Duration>,
    requests_ready: usize,
    requests_settled: usize,
    operator_rss: f64,
    operator_cpu: f64,
    quiet_requests: f64,
    /// (program, peak RSS in MiB) of the server's own processes.
    servers: Vec<(String, f64)>,
}

fn ns(i: usize) -> String {
    format!("stacks-{i:04}")
}

/// The fleet's objects, in creation order: namespaces, stacks, Clusters.
fn objects(fleet: &Fleet) -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..fleet.stacks {
        out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns(i)}}));
    }
    for i in 0..fleet.stacks {
        out.push(json!({
            "apiVersion": CS, "kind": "ClusterStack",
            "metadata": {"name": "ferrol", "namespace": ns(i)},
            "spec": {"provider": "inmemory", "name": "ferrol", "kubernetesVersion": "1.35", "channel": "stable",
                     "autoSubscribe": true, "versions": [], "pollInterval": format!("{}s", fleet.poll.as_secs()),
                     "source": {"github": {"owner": "acme", "repository": format!("stacks-{}", i % fleet.repos)}}}
        }));
    }
    for c in 0..fleet.clusters {
        out.push(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": format!("c-{c:05}"), "namespace": ns(c % fleet.stacks.max(1))},
            "spec": {"topology": {"classRef": {"name": TAGS[1]}, "version": "v1.35.4"}}
        }));
    }
    out
}

fn fake_github_releases(fake: &FakeGitHub, repos: usize) -> Result<(), Box<dyn std::error::Error>> {
    let releases = Path::new(env!("CARGO_MANIFEST_DIR")).join("releases");
    for r in 0..repos {
        for tag in TAGS {
            let mut release = FakeRelease::new(tag);
            let mut files: Vec<_> = std::fs::read_dir(releases.join(tag))?.flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
                release = release.asset(FakeAsset::new(&name, std::fs::read(&f)?));
            }
            fake.add_release("acme", &format!("stacks-{r}"), release);
        }
    }
    Ok(())
}

/// The operator child, against `server` (`("BENCH_API_URL", url)` or `("BENCH_KUBECONFIG", path)`).
fn start_operator(
    server: (&str, &str),
    fake: &FakeGitHub,
    cache: &Path,
    poll: Duration,
) -> std::io::Result<std::process::Child> {
    common::operator_command()?
        .env(server.0, server.1)
        .env("BENCH_GITHUB_URL", fake.api_url())
        .env("BENCH_CACHE", cache)
        .env("BENCH_POLL_S", poll.as_secs().to_string())
        .spawn()
}

/// Runs the fleet on both servers and prints the figures side by side.
pub async fn run(fleet: Fleet) -> Result<(), Box<dyn std::error::Error>> {
    let Some(bins) = binaries_or_skip("bench_operator --real") else {
        return Err("no control plane: run hack/controlplane/build".into());
    };
    let crds: Vec<Value> = {
        let mut crds = setup::our_crds();
        crds.extend(setup::capi_crds(&bins.capi_config)?);
        crds
    };
    eprintln!("bench: the fleet on the API server double");
    let double = on_the_double(&fleet, &crds).await?;
    eprintln!("bench: the fleet on the real control plane");
    let real = on_the_real_server(&fleet, bins).await?;

    println!(
        "bench_operator --real: {} ClusterStacks (in-memory sample), {} repositories, {} v1beta2 Clusters, poll {:?}",
        fleet.stacks, fleet.repos, fleet.clusters, fleet.poll
    );
    println!("{:<44} {:>22} {:>22}", "", format!("double ({:?} latency)", fleet.latency), "real kube-apiserver");
    let row = |what: &str, a: String, b: String| println!("{what:<44} {a:>22} {b:>22}");
    let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let settled = |f: &Figures| f.settled.map_or("not within 600 s".into(), secs);
    row(&format!("cold start, all {} releases ready", fleet.stacks), secs(double.cold), secs(real.cold));
    row("  and every ClusterAddon with a status", settled(&double), settled(&real));
    row(
        "API requests (releases ready / fleet)",
        format!("{} / {}", double.requests_ready, double.requests_settled),
        format!("{} / {}", real.requests_ready, real.requests_settled),
    );
    row("operator peak RSS", format!("{:.1} MiB", double.operator_rss), format!("{:.1} MiB", real.operator_rss));
    row("operator CPU (fleet)", format!("{:.2} s", double.operator_cpu), format!("{:.2} s", real.operator_cpu));
    row(
        "API requests per quiet poll interval",
        format!("{:.1}", double.quiet_requests),
        format!("{:.1}", real.quiet_requests),
    );
    for (name, mib) in &real.servers {
        row(&format!("{name} peak RSS"), "-".into(), format!("{mib:.1} MiB"));
    }
    Ok(())
}

async fn on_the_double(fleet: &Fleet, crds: &[Value]) -> Result<Figures, Box<dyn std::error::Error>> {
    let server = ApiServer::start().await;
    for crd in crds {
        server.put_object(crd.clone());
    }
    for o in objects(fleet) {
        server.put_object(o);
    }
    let fake = FakeGitHub::start().await;
    fake_github_releases(&fake, fleet.repos)?;
    server.set_latency(fleet.latency);
    server.clear_requests();
    let cache = tempfile::tempdir()?;
    let started = Instant::now();
    let mut child = start_operator(("BENCH_API_URL", &server.url()), &fake, cache.path(), fleet.poll)?;
    let releases_ready = || {
        let mut ready = 0;
        server.visit_objects(CS, "ClusterStackRelease", |r| ready += usize::from(r["status"]["ready"] == true));
        ready == fleet.stacks
    };
    let addons_settled = || {
        let mut n = 0;
        server.visit_objects(CS, "ClusterAddon", |a| n += usize::from(a.get("status").is_some()));
        n == fleet.clusters
    };
    let result = measure(
        fleet,
        &mut child,
        started,
        || async { releases_ready() },
        || async { addons_settled() },
        || server.requests().len(),
        Duration::from_millis(10),
    )
    .await;
    let _ = child.kill();
    let _ = child.wait();
    result
}

async fn on_the_real_server(
    fleet: &Fleet,
    bins: clusterstack::controlplane::Binaries,
) -> Result<Figures, Box<dyn std::error::Error>> {
    let cluster = RealCluster::start(bins).await;
    let admin = cluster.cp.admin_client().await?;
    // Created 32 at a time (setup::apply resolves each kind once per chunk).
    let all = objects(fleet);
    let (namespaces, rest): (Vec<Value>, Vec<Value>) = all.into_iter().partition(|o| o["kind"] == "Namespace");
    for batch in [namespaces, rest] {
        let chunks: Vec<Vec<Value>> = batch.chunks(50).map(<[Value]>::to_vec).collect();
        let results: Vec<Result<(), setup::SetupError>> = futures::stream::iter(chunks)
            .map(|chunk| {
                let admin = admin.clone();
                async move { setup::apply(&admin, &chunk).await }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        for r in results {
            r?;
        }
    }
    let fake = FakeGitHub::start().await;
    fake_github_releases(&fake, fleet.repos)?;
    let cache = tempfile::tempdir()?;
    let kubeconfig: PathBuf = cluster.operator_kubeconfig.clone();
    let kubeconfig = kubeconfig.to_string_lossy().to_string();
    let before = cluster.audit().len();
    let started = Instant::now();
    let mut child = start_operator(("BENCH_KUBECONFIG", &kubeconfig), &fake, cache.path(), fleet.poll)?;
    let resource = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("clusterstack.x-k8s.io", "v1alpha1", kind),
            plural,
        )
    };
    let releases: Api<DynamicObject> =
        Api::all_with(admin.clone(), &resource("ClusterStackRelease", "clusterstackreleases"));
    let addons: Api<DynamicObject> = Api::all_with(admin.clone(), &resource("ClusterAddon", "clusteraddons"));
    // From the watch cache (resourceVersion 0): the checks cost the server little.
    let cached = ListParams::default().match_any();
    let count = |api: Api<DynamicObject>, pred: fn(&Value) -> bool| {
        let cached = cached.clone();
        async move {
            api.list(&cached)
                .await
                .map(|l| l.items.iter().filter(|o| serde_json::to_value(o).is_ok_and(|v| pred(&v))).count())
                .unwrap_or(0)
        }
    };
    let result = measure(
        fleet,
        &mut child,
        started,
        || {
            let api = releases.clone();
            async move { count(api, |r| r["status"]["ready"] == true).await == fleet.stacks }
        },
        || {
            let api = addons.clone();
            async move { count(api, |a| a.get("status").is_some()).await == fleet.clusters }
        },
        || cluster.audit().len() - before,
        Duration::from_millis(500),
    )
    .await;
    let mut figures = result?;
    figures.servers = cluster.cp.pids().into_iter().map(|(name, pid)| (name, common::child_hwm_mib(pid))).collect();
    let _ = child.kill();
    let _ = child.wait();
    Ok(figures)
}

/// The cold start (until `ready`), the whole fleet (until `settled`), and a quiet stretch of poll
/// intervals; `requests` counts the operator's API requests so far.
async fn measure<R, RF, S, SF>(
    fleet: &Fleet,
    child: &mut std::process::Child,
    started: Instant,
    ready: R,
    settled: S,
    requests: impl Fn() -> usize,
    every: Duration,
) -> Result<Figures, Box<dyn std::error::Error>>
where
    R: Fn() -> RF,
    RF: std::future::Future<Output = bool>,
    S: Fn() -> SF,
    SF: std::future::Future<Output = bool>,
{
    let pid = child.id();
    let mut figures = Figures::default();
    loop {
        if ready().await {
            break;
        }
        if started.elapsed() > Duration::from_secs(900) {
            return Err("not all releases ready within 900 s".into());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("the operator exited: {status}").into());
        }
        tokio::time::sleep(every).await;
    }
    figures.cold = started.elapsed();
    figures.requests_ready = requests();
    loop {
        if settled().await {
            figures.settled = Some(started.elapsed());
            break;
        }
        if started.elapsed() > Duration::from_secs(600) {
            break;
        }
        tokio::time::sleep(every).await;
    }
    figures.requests_settled = requests();
    figures.operator_cpu = super::cpu_seconds(&pid.to_string());
    // Let the last status writes land, then quiet poll intervals (at least 30 s).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let intervals = (30 / fleet.poll.as_secs().max(1) + 1).max(2) as u32;
    let before = requests();
    tokio::time::sleep(fleet.poll * intervals).await;
    figures.quiet_requests = (requests() - before) as f64 / f64::from(intervals);
    figures.operator_rss = common::child_hwm_mib(pid);
    Ok(figures)
}
