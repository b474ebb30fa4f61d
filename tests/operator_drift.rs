//! Drift in what a release applied, repaired two ways, each alone: the watch on the applied
//! kind (within seconds, the resync an hour away), and the periodic resync where no watch
//! reports it (the watch's events cut in the API server double).

mod support;

use std::time::Duration;

use clusterstack::source::SourceSpec;
use kube::Api;
use kube::api::DeleteParams;
use support::ApiServer;
use support::operator::{CC, NS, Operator, ready, releases_dir, server, settings, stack, wait_for, wait_within};

fn cluster_classes(server: &ApiServer) -> Api<kube::api::DynamicObject> {
    Api::namespaced_with(
        server.client(),
        NS,
        &kube::core::ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "ClusterClass"),
            "clusterclasses",
        ),
    )
}

fn class_uid(server: &ApiServer) -> Option<serde_json::Value> {
    server.get_object(CC, "ClusterClass", Some(NS), "docker-ferrol-1-27-v3").map(|c| c["metadata"]["uid"].clone())
}

/// A deleted applied object is re-created by the watch on its kind, within seconds, with the
/// resync an hour away (the test settings): the watch alone explains the repair.
#[tokio::test]
async fn a_deleted_applied_object_is_recreated_by_its_watch() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    server.put_object(stack("ferrol", &[], true));
    wait_for("v3 ready", || ready(&server, "docker-ferrol-1-27-v3")).await;
    let uid = class_uid(&server).expect("ClusterClass v3");
    cluster_classes(&server).delete("docker-ferrol-1-27-v3", &DeleteParams::default()).await.unwrap();
    wait_within("ClusterClass re-created", Duration::from_secs(10), || class_uid(&server).is_some_and(|u| u != uid))
        .await;
    wait_for("ready again", || ready(&server, "docker-ferrol-1-27-v3")).await;
    op.stop().await;
}

/// Drift no watch reports is repaired by the periodic resync, and only when it is due: with the
/// ClusterClass watch's events cut (the stream stays open, as a silently broken one does), a
/// ClusterClass deleted by hand stays gone for the whole resync interval after the release's
/// last apply (less its 10% jitter), then is re-created by the re-apply the resync brings.
#[tokio::test]
async fn drift_is_corrected_at_the_resync_interval() {
    /// The interval under test: the "nothing happens" window below is as long (less jitter).
    const RESYNC: Duration = Duration::from_secs(4);
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(SourceSpec::dir(releases_dir()), cache.path());
    s.resync_interval = RESYNC;
    let op = Operator::start(&server, s);
    server.put_object(stack("ferrol", &[], true));
    wait_for("v3 ready", || ready(&server, "docker-ferrol-1-27-v3")).await;
    // The last apply began before v3 was seen ready: the resync is due at least 0.9 x RESYNC
    // after it, so no sooner than 0.9 x RESYNC after `applied` less the apply's own time (well
    // under the 0.5 s allowed here).
    let applied = tokio::time::Instant::now();
    let uid = class_uid(&server).expect("ClusterClass v3");
    server.cut_watch_events("clusterclasses");
    cluster_classes(&server).delete("docker-ferrol-1-27-v3", &DeleteParams::default()).await.unwrap();
    assert!(class_uid(&server).is_none(), "deleted");

    // Nothing repairs it before the resync is due: no watch reports the deletion.
    let quiet_until = applied + RESYNC.mul_f64(0.9) - Duration::from_millis(500);
    while tokio::time::Instant::now() < quiet_until {
        assert!(class_uid(&server).is_none(), "re-created {:?} after the apply, before the resync", applied.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The resync re-applies: due by 1.1 x RESYNC after the apply; 10 s more for a loaded machine.
    let limit = RESYNC.mul_f64(1.1) + Duration::from_secs(10) - applied.elapsed();
    wait_within("ClusterClass re-created by the resync", limit, || class_uid(&server).is_some_and(|u| u != uid)).await;
    println!("re-created {:?} after the last apply (resync interval {RESYNC:?})", applied.elapsed());
    op.stop().await;
}
