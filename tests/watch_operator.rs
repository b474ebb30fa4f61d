//! Watch-driven reactions, idle cost, the shared poller and sharding: the whole operator
//! in-process against the API server double, with the periodic resync set to an hour so that
//! only a watch (or the poller) can explain a reaction.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clusterstack::source::SourceSpec;
use clusterstack::source::github::GitHubConfig;
use serde_json::{Value, json};
use support::ApiServer;
use support::fixtures::load_yaml;
use support::github::{FakeGitHub, Route};
use support::operator::{
    NS, Operator, WAIT, WORKLOADS, cluster, holds_for, publish, ready_in, release_in, releases_dir, server, settings,
    stack_in, wait_within,
};

/// What "within seconds" means here.
const REACTION: Duration = Duration::from_secs(5);
/// After a 410 Gone the watcher backs off before it lists again (about 2 s on a quiet machine);
/// a loaded 2-core CI machine needs more room than a live watch does.
const GAP_REACTION: Duration = Duration::from_secs(15);
const V3: &str = "docker-ferrol-1-27-v3";

const KCPT: &str = "controlplane.cluster.x-k8s.io/v1beta1";

/// The name of release v3's KubeadmControlPlaneTemplate in `NS`.
fn kcpt_name(server: &ApiServer) -> String {
    server
        .list_objects(KCPT, "KubeadmControlPlaneTemplate")
        .into_iter()
        .find(|o| o["metadata"]["namespace"] == NS && o["metadata"]["labels"]["clusterstack.x-k8s.io/release"] == V3)
        .and_then(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .expect("v3 applied a KubeadmControlPlaneTemplate")
}

/// The part of the template the hand edits change.
fn cert_sans(server: &ApiServer) -> Value {
    server
        .get_object(KCPT, "KubeadmControlPlaneTemplate", Some(NS), &kcpt_name(server))
        .map(|o| {
            o["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["controllerManager"].clone()
        })
        .unwrap_or(Value::Null)
}

fn hand_edit(server: &ApiServer) {
    server.edit_object(KCPT, "KubeadmControlPlaneTemplate", Some(NS), &kcpt_name(server), |o| {
        o["spec"]["template"]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["controllerManager"]["extraArgs"]
            ["enable-hostpath-provisioner"] = json!("false");
    });
}

#[tokio::test]
async fn a_hand_edit_is_reverted_within_seconds_also_after_the_watch_expired() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    server.put_object(stack_in(NS, "ferrol", &[], true, "1h"));
    wait_within("v3 ready", WAIT, || ready_in(&server, NS, V3)).await;
    let good = cert_sans(&server);
    assert!(
        good.is_object(),
        "{:#}",
        server.get_object(KCPT, "KubeadmControlPlaneTemplate", Some(NS), &kcpt_name(&server)).unwrap_or_default()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    hand_edit(&server);
    let took = wait_within("the hand edit reverted", REACTION, || cert_sans(&server) == good).await;
    println!("hand edit reverted in {took:?}");

    // The watch stream ends and resuming from the old version answers 410 Gone; an edit made
    // meanwhile is still seen (the re-list) and reverted.
    server.expire_watches();
    hand_edit(&server);
    let took = wait_within("the edit during the gap reverted", GAP_REACTION, || cert_sans(&server) == good).await;
    println!("edit across a 410 reverted in {took:?}");
    // And the resumed watch sees the next one too.
    tokio::time::sleep(Duration::from_millis(300)).await;
    hand_edit(&server);
    wait_within("the edit after resuming reverted", GAP_REACTION, || cert_sans(&server) == good).await;
    op.stop().await;
}

#[tokio::test]
async fn clusters_moving_class_and_going_are_seen_within_seconds() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    // Pinned to v1 (and the latest, v3).
    server.put_object(stack_in(NS, "ferrol", &["v1"], true, "1h"));
    wait_within("v1 ready", WAIT, || ready_in(&server, NS, "docker-ferrol-1-27-v1")).await;
    wait_within("v3 ready", WAIT, || ready_in(&server, NS, V3)).await;
    server.put_object(cluster("dev", WORKLOADS, "docker-ferrol-1-27-v1"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Unpinned: v1 stays while the Cluster uses it. The edit reaches the stack by its watch, so a
    // wrong deletion would come within a reaction's time: that long is watched.
    server.put_object(stack_in(NS, "ferrol", &[], true, "1h"));
    holds_for("v1 in use kept", REACTION, || release_in(&server, NS, "docker-ferrol-1-27-v1").is_some()).await;
    // The Cluster moves to v3: v1 goes within seconds.
    server.put_object(cluster("dev", WORKLOADS, V3));
    let took = wait_within("v1 deleted after the Cluster moved", REACTION, || {
        release_in(&server, NS, "docker-ferrol-1-27-v1").is_none()
    })
    .await;
    println!("cluster move handled in {took:?}");

    // A release deleted by hand waits for its Cluster, and goes within seconds of the Cluster.
    let api: kube::Api<clusterstack::api::ClusterStackRelease> = kube::Api::namespaced(server.client(), NS);
    api.delete(V3, &Default::default()).await.unwrap();
    // The deletion reaches the release by its watch: a wrong removal would come within a
    // reaction's time.
    holds_for("v3 in use waits", REACTION, || release_in(&server, NS, V3).is_some()).await;
    let clusters: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        server.client(),
        "workloads",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "Cluster"),
            "clusters",
        ),
    );
    clusters.delete("dev", &Default::default()).await.unwrap();
    // Deleted, then recreated by its stack (latest): the finalizer went in seconds.
    wait_within("the release deleted after its Cluster went", REACTION, || {
        release_in(&server, NS, V3).is_none_or(|r| r["metadata"]["deletionTimestamp"].is_null())
    })
    .await;
    op.stop().await;
}

#[tokio::test]
async fn a_quiet_period_sends_no_api_request() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    for ns in ["quiet-a", "quiet-b", "quiet-c"] {
        server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        server.put_object(stack_in(ns, "ferrol", &[], true, "1s"));
    }
    for ns in ["quiet-a", "quiet-b", "quiet-c"] {
        wait_within("v3 ready", WAIT, || ready_in(&server, ns, V3)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.clear_requests();
    // Five poll intervals of the (directory) source with nothing new.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let requests: Vec<String> =
        server.requests().iter().map(|r| format!("{} {} {}/{}", r.verb, r.resource, r.namespace, r.name)).collect();
    assert!(requests.is_empty(), "the idle operator sent {} request(s): {requests:#?}", requests.len());
    op.stop().await;
}

#[tokio::test]
async fn a_new_release_is_created_in_one_request_with_its_finalizer() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    // v2 pinned, v3 the latest: two releases.
    server.put_object(stack_in(NS, "ferrol", &["v2"], true, "1s"));
    let v2 = "docker-ferrol-1-27-v2";
    wait_within("v2 and v3 ready", WAIT, || ready_in(&server, NS, v2) && ready_in(&server, NS, V3)).await;
    let requests = server.requests();
    let on_releases = || requests.iter().filter(|r| r.resource == "clusterstackreleases" && r.subresource.is_empty());
    let body_name = |r: &support::RequestRecord| r.body.as_ref().map(|b| b["metadata"]["name"].clone());
    let mut created: Vec<String> = on_releases()
        .filter(|r| r.verb == "create" && r.status == 201)
        .filter_map(|r| body_name(r).and_then(|n| n.as_str().map(str::to_string)))
        .collect();
    created.sort();
    assert_eq!(created, [v2, V3], "each release created once, by a create");
    // No read before a create (a read follows only a create that found the name taken, by a
    // pass whose store had not seen the release yet), and no patch adding the finalizer after it.
    let refused = on_releases().filter(|r| r.verb == "create" && r.status == 409).count();
    let reads = on_releases().filter(|r| r.verb == "get").count();
    assert!(reads <= refused, "{reads} read(s) of a release, {refused} create(s) refused");
    let finalizer_patches = on_releases()
        .filter(|r| r.verb == "patch" && r.body.as_ref().is_some_and(|b| !b["metadata"]["finalizers"].is_null()))
        .count();
    assert_eq!(finalizer_patches, 0, "the finalizer comes with the create");
    for tag in [v2, V3] {
        let release = release_in(&server, NS, tag).unwrap();
        assert_eq!(release["metadata"]["finalizers"], json!(["clusterstack.x-k8s.io/release-cleanup"]), "{release:#}");
    }
    op.stop().await;
}

#[tokio::test]
async fn a_release_whose_deletion_takes_several_passes_is_deleted_once() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    let v1 = "docker-ferrol-1-27-v1";
    server.put_object(stack_in(NS, "ferrol", &["v1"], true, "1h"));
    wait_within("v1 and v3 ready", WAIT, || ready_in(&server, NS, v1) && ready_in(&server, NS, V3)).await;
    // Its ClusterClass refuses to go twice: the release's deletion fails, reports it in its
    // status (which triggers its stack), and is retried after the backoff.
    server.fail_next(support::RequestMatch::any().verb("delete").resource("clusterclasses"), 500, 2);
    server.clear_requests();
    server.put_object(stack_in(NS, "ferrol", &[], true, "1h"));
    wait_within("v1 gone", WAIT, || release_in(&server, NS, v1).is_none()).await;
    let requests = server.requests();
    let failed = requests.iter().filter(|r| r.resource == "clusterclasses" && r.status == 500).count();
    assert_eq!(failed, 2, "the deletion took several passes");
    let deletes =
        requests.iter().filter(|r| r.verb == "delete" && r.resource == "clusterstackreleases" && r.name == v1).count();
    assert_eq!(deletes, 1, "a release being deleted is not deleted again");
    op.stop().await;
}

#[tokio::test]
async fn twenty_stacks_on_one_repository_cost_one_request_per_interval() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let fake = FakeGitHub::start().await;
    publish(&fake, V3);
    let mut s = settings(SourceSpec::github("acme", "stacks"), cache.path());
    s.github = GitHubConfig { api_url: fake.api_url(), token: None, include_prereleases: false };
    let op = Operator::start(&server, s);
    for i in 0..20 {
        let ns = format!("team-{i:02}");
        server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        server.put_object(stack_in(&ns, "ferrol", &[], true, "2s"));
    }
    for i in 0..20 {
        wait_within("all releases ready", WAIT, || ready_in(&server, &format!("team-{i:02}"), V3)).await;
    }
    let before = fake.count(Route::Releases);
    tokio::time::sleep(Duration::from_secs(6) + Duration::from_millis(500)).await;
    let polls = fake.count(Route::Releases) - before;
    println!("listings in 3 intervals of 2 s with 20 stacks: {polls}");
    assert!((3..=4).contains(&polls), "expected one listing per 2 s interval, got {polls} in 6.5 s");
    op.stop().await;
}

#[tokio::test]
async fn two_shards_split_the_stacks_and_none_is_handled_twice() {
    let server = server().await;
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut sa = settings(SourceSpec::dir(releases_dir()), cache_a.path());
    sa.shard = Some("a".into());
    let sb = settings(SourceSpec::dir(releases_dir()), cache_b.path());
    let op_a = Operator::start(&server, sa);
    let op_b = Operator::start(&server, sb);
    for (i, shard) in [Some("a"), None, Some("a"), None].into_iter().enumerate() {
        let ns = format!("shard-{i}");
        server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        let mut s = stack_in(&ns, "ferrol", &[], true, "1h");
        if let Some(shard) = shard {
            s["metadata"]["labels"] = json!({"clusterstack.x-k8s.io/shard": shard});
        }
        server.put_object(s);
    }
    for i in 0..4 {
        wait_within("every shard's release ready", WAIT, || ready_in(&server, &format!("shard-{i}"), V3)).await;
    }
    // Each instance downloaded (into its own cache) only for its own stacks, and each release
    // carries its stack's shard.
    for i in 0..4 {
        let r = release_in(&server, &format!("shard-{i}"), V3).unwrap();
        let label = r["metadata"]["labels"]["clusterstack.x-k8s.io/shard"].as_str().map(str::to_string);
        assert_eq!(label.as_deref(), if i % 2 == 0 { Some("a") } else { None }, "{r:#}");
    }
    // Who applied what: each instance's applied-object gauges name only its own shard's releases.
    let (text_a, text_b) = (op_a.metrics.encode().unwrap(), op_b.metrics.encode().unwrap());
    for i in 0..4 {
        let series = format!("namespace=\"shard-{i}\"");
        let (in_a, in_b) = (text_a.contains(&series), text_b.contains(&series));
        assert!(in_a != in_b, "shard-{i}: handled by a: {in_a}, by b: {in_b}");
        assert_eq!(in_a, i % 2 == 0, "shard-{i} handled by the wrong instance");
    }
    op_a.stop().await;
    op_b.stop().await;
}

fn cached_tags(cache: &Path) -> Vec<String> {
    clusterstack::source::cache::entries_under(cache).into_iter().map(|e| e.tag).collect()
}

#[tokio::test]
async fn the_cache_drops_a_release_after_the_grace_period_never_while_another_namespace_uses_it() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(SourceSpec::dir(releases_dir()), cache.path());
    let grace = Duration::from_secs(1);
    s.cache_grace = grace;
    let op = Operator::start(&server, s);
    for ns in ["team-a", "team-b"] {
        server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        server.put_object(stack_in(ns, "ferrol", &["v2"], true, "1h"));
    }
    for ns in ["team-a", "team-b"] {
        wait_within("v2 ready", WAIT, || ready_in(&server, ns, "docker-ferrol-1-27-v2")).await;
    }
    assert!(cached_tags(cache.path()).contains(&"docker-ferrol-1-27-v2".to_string()));
    // team-a lets v2 go; team-b still has it: it stays in the cache well past the grace period.
    server.put_object(stack_in("team-a", "ferrol", &[], true, "1h"));
    wait_within("v2 deleted in team-a", WAIT, || release_in(&server, "team-a", "docker-ferrol-1-27-v2").is_none())
        .await;
    // A wrong removal would come within the grace period and one collector tick (both 1 s
    // here); twice that is watched.
    holds_for("v2 kept in the cache while team-b uses it", 2 * (grace + Duration::from_secs(1)), || {
        cached_tags(cache.path()).contains(&"docker-ferrol-1-27-v2".to_string())
    })
    .await;
    // Nobody references it any more: removed after the grace period; v3 stays.
    server.put_object(stack_in("team-b", "ferrol", &[], true, "1h"));
    wait_within("v2 removed from the cache", Duration::from_secs(10), || {
        !cached_tags(cache.path()).contains(&"docker-ferrol-1-27-v2".to_string())
    })
    .await;
    assert!(cached_tags(cache.path()).contains(&V3.to_string()));
    op.stop().await;
}

const INFRA: &str = "infrastructure.clusterstack.x-k8s.io/v1alpha1";
const PROVIDER_KIND: &str = "DockerClusterStackReleaseTemplate";

fn set_provider_ready(server: &ApiServer, ready: bool) {
    server.edit_object(INFRA, "DockerClusterStackRelease", Some(NS), V3, |o| o["status"] = json!({"ready": ready}));
}

#[tokio::test]
async fn a_provider_object_regressing_reaches_its_release_within_seconds() {
    let server = server().await;
    for crd in load_yaml("provider/provider-crds.yaml") {
        server.put_object(serde_json::to_value(crd).unwrap());
    }
    for template in load_yaml("provider/template.yaml") {
        let mut template = serde_json::to_value(template).unwrap();
        template["metadata"]["namespace"] = json!(NS);
        server.put_object(template);
    }
    let cache = tempfile::tempdir().unwrap();
    let mut s = settings(SourceSpec::dir(releases_dir()), cache.path());
    s.providers.set_external(Arc::new(clusterstack::provider::ExternalOperator::new()));
    // Only the watch can explain a reaction: the gate's own recheck is an hour away.
    s.gate.ready_recheck = Duration::from_secs(3600);
    s.gate.retry_after = Duration::from_secs(3600);
    let op = Operator::start(&server, s);
    let mut stack = stack_in(NS, "ferrol", &[], true, "1h");
    stack["spec"]["providerRef"] = json!({"apiVersion": INFRA, "kind": PROVIDER_KIND, "name": "docker-template"});
    server.put_object(stack);

    wait_within("the provider object made from the template", WAIT, || {
        server.get_object(INFRA, "DockerClusterStackRelease", Some(NS), V3).is_some()
    })
    .await;
    // Readiness reaches the release by the watch on the provider object: a wrong one would come
    // within a reaction's time.
    holds_for("not ready before the provider says so", REACTION, || !ready_in(&server, NS, V3)).await;
    set_provider_ready(&server, true);
    let took = wait_within("the release ready after its provider object", REACTION, || ready_in(&server, NS, V3)).await;
    println!("provider ready reached the release in {took:?}");

    tokio::time::sleep(Duration::from_millis(500)).await;
    set_provider_ready(&server, false);
    let took = wait_within("the release not ready after the provider regressed", REACTION, || {
        release_in(&server, NS, V3).is_some_and(|r| r["status"]["ready"] == false)
    })
    .await;
    println!("provider regression reached the release in {took:?}");
    op.stop().await;
}

#[tokio::test]
async fn a_failed_discovery_is_asked_again_not_read_as_no_cluster_api() {
    use clusterstack::controller::runtime::clusters::CapiVersion;
    use clusterstack::controller::runtime::context::Context;
    use clusterstack::controller::runtime::metrics::Metrics;
    use support::RequestMatch;

    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let ctx = Context::new(
        server.client(),
        settings(SourceSpec::dir(releases_dir()), cache.path()),
        Arc::new(Metrics::new()),
    )
    .unwrap();
    // The API server answers discovery with errors for a while (a restart, an overloaded
    // aggregator): "no Cluster API" would mark the Cluster index synced and empty.
    let discovery = RequestMatch::any().verb("discovery");
    server.fail_next(discovery.clone(), 503, 3);
    let version =
        tokio::time::timeout(WAIT, clusterstack::controller::runtime::cluster_watch::served_cluster_version(&ctx))
            .await
            .expect("an answer once discovery works again");
    assert_eq!(version, Some(CapiVersion::V1beta1));
    assert!(server.count(&discovery) >= 4, "asked again after the failures: {}", server.count(&discovery));
}
