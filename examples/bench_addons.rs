//! 200 workload Clusters moved from release v1 to v2 of the sample stack.
//!
//! Simulation: one management API server double and one workload API server double per Cluster
//! (200, each on its own 127.0.0.1 port, reached through a real `<cluster>-kubeconfig` Secret
//! holding, as CAPI's do, the cluster CA and a client certificate),
//! all with the same latency per request. A "kubelet" task marks each workload's metrics-server
//! Deployment ready a moment after it is applied, so v2's `BeforeClusterUpgrade`
//! post-condition (`ms.status.readyReplicas >= 1`) comes true.
//!
//! The operator (`clusterstack::controller::run::run`, default settings, the sample releases as
//! its default source) runs in a child process (this example run again with `--operator`), so its
//! peak RSS (`VmHWM`) is its own, not the doubles'.
//!
//! `cargo run --release --example bench_addons`

#[path = "common/mod.rs"]
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use clusterstack::controller::run::{RunOptions, run};
use clusterstack::controller::runtime::context::Settings;
use clusterstack::source::SourceSpec;
use serde_json::{Value, json};
use support::ApiServer;
use support::fixtures::{capi_crds, load_yaml};
use tokio_util::sync::CancellationToken;

const CLUSTERS: usize = 200;
const LATENCY: Duration = Duration::from_millis(2);
const NS: &str = "workloads";
const CA: &str = "clusterstack.x-k8s.io/v1alpha1";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    clusterstack::install_crypto_provider();
    if std::env::args().nth(1).as_deref() == Some("--operator") {
        return operator().await;
    }

    let mgmt = ApiServer::start().await;
    mgmt.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    for crd in clusterstack::api::all_crds() {
        mgmt.put_object(serde_json::to_value(&crd)?);
    }
    for crd in capi_crds().into_iter().chain(load_yaml("operator/clusters.cluster.x-k8s.io.yaml")) {
        mgmt.put_object(serde_json::to_value(&crd)?);
    }
    // Kubeconfigs as CAPI writes them: the cluster's CA and a client certificate (here one
    // self-signed pair for all; the doubles speak plain HTTP, so TLS is set up but never used).
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(vec!["kubernetes".to_string()])?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let (ca_pem, key_pem) = (b64(&ca.pem()), b64(&ca_key.serialize_pem()));
    let mut workloads = Vec::new();
    for i in 0..CLUSTERS {
        let name = format!("c{i:03}");
        let w = ApiServer::start().await;
        w.set_latency(LATENCY);
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: w\n  cluster:\n    server: {}\n    certificate-authority-data: {ca_pem}\ncontexts:\n- name: w\n  context:\n    cluster: w\n    user: w\ncurrent-context: w\nusers:\n- name: w\n  user:\n    client-certificate-data: {ca_pem}\n    client-key-data: {key_pem}\n",
            w.url()
        );
        mgmt.put_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{name}-kubeconfig"), "namespace": NS},
            "data": {"value": base64::engine::general_purpose::STANDARD.encode(kubeconfig)}}));
        let cluster = cluster(&name, "docker-ferrol-1-27-v1");
        mgmt.put_object(cluster.clone());
        mgmt.put_object(cluster);
        workloads.push(w);
    }
    let workloads = Arc::new(workloads);
    let kubelet = workloads.clone();
    tokio::spawn(async move {
        loop {
            for w in kubelet.iter() {
                if let Some(mut d) = w.get_object("apps/v1", "Deployment", Some("kube-system"), "metrics-server")
                    && d["status"]["readyReplicas"] != 1
                {
                    d["status"] = json!({"readyReplicas": 1});
                    w.put_object(d);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    mgmt.set_latency(LATENCY);
    let cache = tempfile::tempdir()?;

    let mut child =
        common::operator_command()?.env("BENCH_API_URL", mgmt.url()).env("BENCH_CACHE", cache.path()).spawn()?;
    let all_at = |tag: &str| {
        let list = mgmt.list_objects(CA, "ClusterAddon");
        list.len() == CLUSTERS && list.iter().all(|a| a["status"]["release"] == tag && a["status"]["ready"] == true)
    };
    let started = Instant::now();
    wait(&mut child, started, || all_at("docker-ferrol-1-27-v1")).await?;
    let first = started.elapsed();
    let (first_mgmt, first_work) = (mgmt.requests().len(), total(&workloads));

    tokio::time::sleep(Duration::from_secs(1)).await;
    mgmt.clear_requests();
    workloads.iter().for_each(ApiServer::clear_requests);
    let started = Instant::now();
    for i in 0..CLUSTERS {
        let name = format!("c{i:03}");
        let mut c = mgmt.get_object("cluster.x-k8s.io/v1beta1", "Cluster", Some(NS), &name).ok_or("cluster")?;
        c["spec"]["topology"]["class"] = json!("docker-ferrol-1-27-v2");
        mgmt.put_object(c);
    }
    wait(&mut child, started, || all_at("docker-ferrol-1-27-v2")).await?;
    let upgrade = started.elapsed();
    let (up_mgmt, up_work) = (mgmt.requests().len(), total(&workloads));
    let rss = common::child_hwm_mib(child.id());
    let _ = child.kill();
    let _ = child.wait();

    let per = |n: usize| n as f64 / CLUSTERS as f64;
    println!(
        "bench_addons: {CLUSTERS} workload Clusters, API latency {LATENCY:?} on every double, default concurrency"
    );
    println!("first addons (v1, AfterControlPlaneInitialized, cold start): {:.2} s", first.as_secs_f64());
    println!("  requests per Cluster: management {:.1}, workload {:.1}", per(first_mgmt), per(first_work));
    println!("v1 -> v2 (BeforeClusterUpgrade with a post-condition, then the rest): {:.2} s", upgrade.as_secs_f64());
    println!("  requests per Cluster: management {:.1}, workload {:.1}", per(up_mgmt), per(up_work));
    println!("operator peak RSS with {CLUSTERS} cached workload clients: {rss:.1} MiB (goal < 64)");
    Ok(())
}

fn cluster(name: &str, class: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"topology": {"class": class, "version": "v1.27.3"},
                 "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
                 "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}}},
        "status": {"controlPlaneReady": true}
    })
}

fn total(workloads: &[ApiServer]) -> usize {
    workloads.iter().map(|w| w.requests().len()).sum()
}

async fn wait(
    child: &mut std::process::Child,
    started: Instant,
    done: impl Fn() -> bool,
) -> Result<(), Box<dyn std::error::Error>> {
    while !done() {
        if started.elapsed() > Duration::from_secs(600) {
            let _ = child.kill();
            return Err("not all ClusterAddons ready within 600 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The operator alone, against the management URL the parent passes.
async fn operator() -> Result<(), Box<dyn std::error::Error>> {
    let client = common::operator_client().await?;
    let releases = Path::new(env!("CARGO_MANIFEST_DIR")).join("releases");
    let settings = Settings::new(SourceSpec::dir(releases), common::bench_var("BENCH_CACHE")?);
    run(client, settings, RunOptions::default(), CancellationToken::new()).await?;
    Ok(())
}
