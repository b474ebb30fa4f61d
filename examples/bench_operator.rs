//! 100 ClusterStacks (one per namespace) following one fake GitHub repository, on the API server
//! double with 2 ms latency per request. Prints the cold start until every release is ready (wall
//! time, the operator's peak RSS, GitHub and API requests), then what one more poll interval with
//! nothing new costs (GitHub requests, object mutations).
//!
//! The operator runs in a child process (this example run again with `--operator`), so that its
//! peak RSS (`VmHWM`) is its own, not the test doubles'.
//!
//! `cargo run --release --example bench_operator`

#[path = "../tests/fake_github/mod.rs"]
mod fake_github;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use clusterstack::controller::context::Settings;
use clusterstack::controller::run::{RunOptions, run};
use clusterstack::source::SourceSpec;
use clusterstack::source::github::GitHubConfig;
use fake_github::{FakeAsset, FakeGitHub, FakeRelease, Route};
use serde_json::json;
use support::ApiServer;
use support::fixtures::capi_crds;
use tokio_util::sync::CancellationToken;

const STACKS: usize = 100;
const LATENCY: Duration = Duration::from_millis(2);
const POLL: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    clusterstack::install_crypto_provider();
    if std::env::args().nth(1).as_deref() == Some("--operator") {
        return operator().await;
    }

    let server = ApiServer::start().await;
    for crd in clusterstack::api::all_crds() {
        server.put_object(serde_json::to_value(&crd)?);
    }
    for crd in capi_crds() {
        server.put_object(serde_json::to_value(&crd)?);
    }
    let fake = FakeGitHub::start().await;
    let releases = Path::new(env!("CARGO_MANIFEST_DIR")).join("releases");
    for v in 1..=3 {
        let tag = format!("docker-ferrol-1-27-v{v}");
        let mut release = FakeRelease::new(&tag);
        let mut files: Vec<_> = std::fs::read_dir(releases.join(&tag))?.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            release = release.asset(FakeAsset::new(&name, std::fs::read(&f)?));
        }
        fake.add_release("acme", "stacks", release);
    }
    for i in 0..STACKS {
        let ns = format!("stacks-{i:03}");
        server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        server.put_object(json!({
            "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStack",
            "metadata": {"name": "ferrol", "namespace": ns},
            "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27", "channel": "stable",
                     "autoSubscribe": true, "pollInterval": format!("{}s", POLL.as_secs())}
        }));
    }
    server.set_latency(LATENCY);
    server.clear_requests();
    let cache = tempfile::tempdir()?;

    let started = Instant::now();
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .arg("--operator")
        .env("BENCH_API_URL", server.url())
        .env("BENCH_GITHUB_URL", fake.api_url())
        .env("BENCH_CACHE", cache.path())
        .spawn()?;
    let ready = || {
        let list = server.list_objects("clusterstack.x-k8s.io/v1alpha1", "ClusterStackRelease");
        list.len() == STACKS && list.iter().all(|r| r["status"]["ready"] == true)
    };
    while !ready() {
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            return Err("not all releases ready within 300 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cold = started.elapsed();
    let cold_api = server.requests().len();
    let cold_github = fake.requests().len();
    let cold_rss = vm_hwm_mib(child.id());

    // Let the last status writes land, then one whole poll interval (plus jitter) with nothing new.
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.clear_requests();
    let github_before = fake.count(Route::Releases);
    let requests_before = fake.requests().len();
    tokio::time::sleep(POLL + POLL / 5).await;
    let steady = server.requests();
    let mutations =
        steady.iter().filter(|r| ["create", "update", "patch", "delete"].contains(&r.verb.as_str())).count();
    let steady_list = fake.count(Route::Releases) - github_before;
    let steady_github = fake.requests().len() - requests_before;
    let rss = vm_hwm_mib(child.id());
    let _ = child.kill();
    let _ = child.wait();

    println!("bench_operator: {STACKS} ClusterStacks, one repository, API latency {LATENCY:?}, poll {POLL:?}");
    println!("cold start until all {STACKS} releases ready: {:.2} s", cold.as_secs_f64());
    println!("  API requests:            {cold_api}");
    println!(
        "  GitHub requests:         {cold_github} (listings {}, asset downloads {})",
        fake.count(Route::Releases) - steady_list,
        fake.count(Route::Asset)
    );
    println!("  operator peak RSS:       {cold_rss:.1} MiB");
    println!("one more poll interval, nothing new:");
    println!("  GitHub requests:         {steady_github} (listings {steady_list}, goal 1)");
    println!("  object mutations:        {mutations} (goal 0)");
    println!("  API requests (reads):    {}", steady.len());
    println!("  operator peak RSS:       {rss:.1} MiB (goal < 40)");
    Ok(())
}

/// The operator alone, against the URLs the parent passes.
async fn operator() -> Result<(), Box<dyn std::error::Error>> {
    let var = |k: &str| std::env::var(k).map_err(|_| format!("{k} is not set"));
    let config = kube::Config::new(var("BENCH_API_URL")?.parse()?);
    let client = kube::Client::try_from(config)?;
    let mut settings = Settings::new(SourceSpec::github("acme", "stacks"), var("BENCH_CACHE")?);
    settings.github = GitHubConfig { api_url: var("BENCH_GITHUB_URL")?, token: None, include_prereleases: false };
    settings.poll_interval = POLL;
    run(client, settings, RunOptions::default(), CancellationToken::new()).await?;
    Ok(())
}

/// Peak RSS of process `pid`, in MiB (Linux `VmHWM`; 0 elsewhere).
fn vm_hwm_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}
