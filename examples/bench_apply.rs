//! Applies 500 ConfigMaps to the API server test double with 2 ms latency per request, then
//! re-applies them unchanged; prints wall times, requests sent and objects the re-apply changed.
//! Each pass is what the release controller does: apply, compute what is stale, prune it, and
//! record the inventory.
//!
//! `cargo run --release --example bench_apply`

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clusterstack::apply::{
    Action, Applier, ApplyError, ApplyOptions, ChangeSet, DEFAULT_CONCURRENCY, Inventory, ReleaseOwner, WhenEmpty,
};
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

/// One release pass: apply, then prune what `opts.previous` has and `objects` has not.
async fn pass(
    applier: &Applier,
    objects: &[kube::api::DynamicObject],
    opts: &ApplyOptions,
) -> Result<(ChangeSet, Inventory), ApplyError> {
    let applied = applier.apply(objects, opts).await?;
    let stale = clusterstack::apply::stale(&opts.previous, &applied.identities(), WhenEmpty::Refuse, &opts.owner)?;
    let pruned = applier.prune(&stale, &opts.owner).await;
    let mut inventory = Inventory::from_changes(&applied);
    inventory.record(&pruned);
    Ok((applied, inventory))
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
    let setup = Instant::now();
    let applier = Applier::new(server.client());
    let client_setup = setup.elapsed();
    let opts = ApplyOptions::new(ReleaseOwner::new("bench-stack-1-33-v1", "bench"));
    // Where the time goes: serialising the bodies alone, and discovery (paid once per process).
    let ser = Instant::now();
    let bytes: usize = objects.iter().map(|o| serde_json::to_vec(o).map_or(0, |b| b.len())).sum();
    let serialise = ser.elapsed();
    let disc = Instant::now();
    applier.discovery().resolve(&kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap")).await?;
    let discovery = disc.elapsed();
    server.clear_requests();

    let start = Instant::now();
    let (first, inventory) = pass(&applier, &objects, &opts).await?;
    let first_time = start.elapsed();
    let first_requests = server.requests().len();
    assert!(first.all_ok(), "first apply failed: {:?}", first.failures().next());
    let before = versions(&server);

    server.clear_requests();
    let start = Instant::now();
    let (again, _) = pass(&applier, &objects, &opts.clone().with_previous(inventory)).await?;
    let again_time = start.elapsed();
    let again_requests = server.requests().len();
    let after = versions(&server);
    let changed = before.iter().filter(|(name, rv)| after.get(*name) != Some(*rv)).count();

    println!("objects:                    {OBJECTS} ConfigMaps, {} ms latency per request", LATENCY.as_millis());
    println!("concurrency:                {DEFAULT_CONCURRENCY} per ordering group (one request per object)");
    println!(
        "first apply:                {:?} ({first_requests} requests; serial lower bound {:?})",
        first_time,
        LATENCY * first_requests as u32
    );
    println!("  created:                  {}", first.with(Action::Created).len());
    println!("re-apply (unchanged):       {:?} ({again_requests} requests)", again_time);
    println!("  resourceVersion changed:  {changed}");
    println!("  reported corrected:       {}", again.with(Action::Configured).len());
    println!("requests by verb:           {:?}", server.counters());
    println!("client setup:               {client_setup:?}");
    println!("serialising {OBJECTS} bodies:    {serialise:?} ({bytes} bytes)");
    println!("discovery (once, before):   {discovery:?}");
    // The same first apply at other concurrency levels (fresh namespaces, so every object is new).
    for (i, concurrency) in [8usize, 16, 64].into_iter().enumerate() {
        let ns = format!("bench-c{i}");
        server.put_object(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        let applier = Applier::new(server.client()).with_concurrency(concurrency);
        applier.discovery().resolve(&kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap")).await?;
        let opts = ApplyOptions::new(ReleaseOwner::new("bench-stack-1-33-v1", &ns));
        let start = Instant::now();
        pass(&applier, &objects, &opts).await?;
        println!("first apply at concurrency {concurrency:>2}: {:?}", start.elapsed());
    }
    Ok(())
}
