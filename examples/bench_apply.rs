//! Applies 500 ConfigMaps to the API server test double with 2 ms latency per request, then
//! re-applies them unchanged; prints wall times, requests sent and objects the re-apply changed.
//!
//! `cargo run --release --example bench_apply`

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clusterstack::apply::{Applier, ApplyOptions, DEFAULT_CONCURRENCY, ReleaseOwner};
use support::ApiServer;
use support::fixtures::config_map;

const OBJECTS: usize = 500;
const LATENCY: Duration = Duration::from_millis(2);

fn versions(server: &ApiServer) -> BTreeMap<String, String> {
    server
        .list_objects("v1", "ConfigMap")
        .into_iter()
        .filter(|o| o["metadata"]["namespace"] == "bench")
        .map(|o| {
            let name = o["metadata"]["name"].as_str().unwrap_or_default().to_string();
            (name, o["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    clusterstack::install_crypto_provider();
    let server = ApiServer::start().await;
    server.put_object(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}));
    let objects: Vec<_> = (0..OBJECTS)
        .map(|i| {
            config_map(&format!("cm-{i:04}"), None, &[("index", &i.to_string()), ("payload", "x".repeat(64).as_str())])
        })
        .collect();
    server.set_latency(LATENCY);
    let applier = Applier::new(server.client());
    let opts = ApplyOptions::new(ReleaseOwner::new("bench-stack-1-33-v1", "bench"));

    let start = Instant::now();
    let first = applier.apply(&objects, &opts).await?;
    let first_time = start.elapsed();
    let first_requests = server.requests().len();
    assert!(first.all_synced(), "first apply failed: {:?}", first.failures().next());
    let before = versions(&server);

    server.clear_requests();
    let start = Instant::now();
    let again = applier.apply(&objects, &opts.clone().with_previous(first.inventory.clone())).await?;
    let again_time = start.elapsed();
    let again_requests = server.requests().len();
    let after = versions(&server);
    let changed = before.iter().filter(|(name, rv)| after.get(*name) != Some(*rv)).count();

    println!("objects:                    {OBJECTS} ConfigMaps, {} ms latency per request", LATENCY.as_millis());
    println!("concurrency:                {DEFAULT_CONCURRENCY} per ordering group");
    println!(
        "first apply:                {:?} ({first_requests} requests; serial lower bound {:?})",
        first_time,
        LATENCY * first_requests as u32
    );
    println!("  created:                  {}", first.created.len());
    println!("re-apply (unchanged):       {:?} ({again_requests} requests)", again_time);
    println!("  resourceVersion changed:  {changed}");
    println!("  reported corrected:       {}", again.corrected.len());
    println!("requests by verb:           {:?}", server.counters());
    Ok(())
}
