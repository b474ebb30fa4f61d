//! The Runtime SDK hook server over TLS: the requests CAPI sends, and the answers.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use clusterstack::controller::addon::hooks::{self, HookState, SKIP_HOLD_ANNOTATION};
use clusterstack::controller::runtime::context::{Context, Settings};
use clusterstack::controller::runtime::metrics::Metrics;
use clusterstack::source::SourceSpec;
use serde_json::{Value, json};
use support::ApiServer;
use tokio_util::sync::CancellationToken;

const NS: &str = "workloads";
const CA: &str = "clusterstack.x-k8s.io/v1alpha1";
const BCU: &str = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/before-cluster-upgrade";

/// Writes a fresh self-signed pair for 127.0.0.1 into `dir`; returns the certificate PEM.
fn write_cert(dir: &Path) -> String {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    let pem = ck.cert.pem();
    std::fs::write(dir.join("tls.key"), ck.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("tls.crt"), &pem).unwrap();
    pem
}

struct Hooks {
    url: String,
    client: reqwest::Client,
    stop: CancellationToken,
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start(mgmt: &ApiServer, dir: &Path, ca_pem: &str, hold: Duration) -> Hooks {
    clusterstack::install_crypto_provider();
    let cache = tempfile::tempdir().unwrap();
    let ctx = Arc::new(
        Context::new(
            mgmt.client(),
            Settings::new(SourceSpec::dir(cache.path()), cache.path()),
            Arc::new(Metrics::new()),
        )
        .unwrap(),
    );
    let state = Arc::new(HookState { ctx, hold_deadline: hold });
    let stop = CancellationToken::new();
    let (addr, _task) =
        hooks::serve_tls("127.0.0.1:0".parse().unwrap(), dir, hooks::router(state), stop.clone()).await.unwrap();
    Hooks { url: format!("https://{addr}"), client: client(ca_pem), stop }
}

fn client(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap()
}

async fn management() -> ApiServer {
    let server = ApiServer::start().await;
    server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    for crd in clusterstack::api::all_crds() {
        server.put_object(serde_json::to_value(&crd).unwrap());
    }
    server
}

fn cluster(class: &str, skip: bool) -> Value {
    let mut c = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": NS, "uid": "u1"},
        "spec": {"topology": {"class": class, "version": "v1.28.0"}}
    });
    if skip {
        c["metadata"]["annotations"] = json!({SKIP_HOLD_ANNOTATION: "true"});
    }
    c
}

/// The ClusterAddon with the addons of `release` applied.
fn put_addon(mgmt: &ApiServer, release: &str, extra: Value) {
    let mut status = json!({"release": release, "addonVersion": "v1", "ready": true});
    if let (Value::Object(s), Value::Object(e)) = (&mut status, extra) {
        s.extend(e);
    }
    let obj = json!({
        "apiVersion": CA, "kind": "ClusterAddon",
        "metadata": {"name": "cluster-addon-c1", "namespace": NS},
        "spec": {"clusterRef": {"kind": "Cluster", "name": "c1"}},
        "status": status
    });
    mgmt.put_object(obj.clone());
    mgmt.put_object(obj);
}

fn addon_status(mgmt: &ApiServer) -> Value {
    mgmt.get_object(CA, "ClusterAddon", Some(NS), "cluster-addon-c1").unwrap()["status"].clone()
}

async fn before_upgrade(h: &Hooks, class: &str, skip: bool) -> Value {
    let body = json!({
        "apiVersion": hooks::HOOKS_API, "kind": "BeforeClusterUpgradeRequest",
        "cluster": cluster(class, skip), "fromKubernetesVersion": "v1.27.3", "toKubernetesVersion": "v1.28.0"
    });
    let r = h.client.post(format!("{}{BCU}", h.url)).json(&body).send().await.unwrap();
    assert!(r.status().is_success());
    r.json().await.unwrap()
}

#[tokio::test]
async fn discovery_lists_the_hooks() {
    let (mgmt, dir) = (management().await, tempfile::tempdir().unwrap());
    let ca = write_cert(dir.path());
    let h = start(&mgmt, dir.path(), &ca, Duration::from_secs(60)).await;
    // As CAPI's runtime client asks: a POSTed DiscoveryRequest.
    let r: Value = h
        .client
        .post(format!("{}/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", h.url))
        .json(&json!({"apiVersion": hooks::HOOKS_API, "kind": "DiscoveryRequest"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["kind"], "DiscoveryResponse");
    assert_eq!(r["status"], "Success");
    let hooks: Vec<&str> =
        r["handlers"].as_array().unwrap().iter().map(|h| h["requestHook"]["hook"].as_str().unwrap()).collect();
    assert_eq!(
        hooks,
        [
            "AfterControlPlaneInitialized",
            "BeforeClusterUpgrade",
            "AfterClusterUpgrade",
            "BeforeControlPlaneUpgrade",
            "AfterControlPlaneUpgrade",
            "BeforeWorkersUpgrade",
            "AfterWorkersUpgrade",
            "BeforeClusterCreate",
            "BeforeClusterDelete"
        ]
    );
    // As CAPI's runtime client sends it: JSON with no Content-Type header, `?timeout=` added.
    let body = json!({"apiVersion": hooks::HOOKS_API, "kind": "AfterControlPlaneInitializedRequest", "cluster": cluster("docker-ferrol-1-27-v1", false)});
    let acpi: Value = h
        .client
        .post(format!("{}/hooks.runtime.cluster.x-k8s.io/v1alpha1/aftercontrolplaneinitialized/after-control-plane-initialized?timeout=10s", h.url))
        .body(serde_json::to_vec(&body).unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(acpi["status"], "Success");
}

#[tokio::test]
async fn the_upgrade_is_held_while_the_stages_run_survives_a_restart_and_goes_once_they_are_done() {
    let (mgmt, dir) = (management().await, tempfile::tempdir().unwrap());
    let ca = write_cert(dir.path());
    put_addon(&mgmt, "docker-ferrol-1-27-v1", json!({"targetRelease": "docker-ferrol-1-27-v2"}));
    let h = start(&mgmt, dir.path(), &ca, Duration::from_secs(600)).await;
    let r = before_upgrade(&h, "docker-ferrol-1-27-v2", false).await;
    assert_eq!(r["status"], "Success");
    assert_eq!(r["retryAfterSeconds"], hooks::RETRY_AFTER_SECONDS, "{r}");
    let started = addon_status(&mgmt)["holdStartedAt"].clone();
    assert!(started.is_string(), "the hold start is in status");

    // A restart in the middle of the hold: a new server, same status, same deadline.
    drop(h);
    let h = start(&mgmt, dir.path(), &ca, Duration::from_secs(600)).await;
    let r = before_upgrade(&h, "docker-ferrol-1-27-v2", false).await;
    assert_eq!(r["retryAfterSeconds"], hooks::RETRY_AFTER_SECONDS);
    assert_eq!(addon_status(&mgmt)["holdStartedAt"], started);

    // The stages are done: the upgrade goes.
    let mut ca_obj = mgmt.get_object(CA, "ClusterAddon", Some(NS), "cluster-addon-c1").unwrap();
    ca_obj["status"]["release"] = json!("docker-ferrol-1-27-v2");
    ca_obj["status"].as_object_mut().unwrap().remove("targetRelease");
    mgmt.put_object(ca_obj);
    let r = before_upgrade(&h, "docker-ferrol-1-27-v2", false).await;
    assert_eq!(r["retryAfterSeconds"], 0, "{r}");
    let s = addon_status(&mgmt);
    assert_eq!(s["holdResult"], hooks::hold::COMPLETED);
    assert!(s.get("holdStartedAt").is_none_or(Value::is_null), "{s}");
}

#[tokio::test]
async fn the_deadline_lets_the_upgrade_through_with_a_warning_and_the_annotation_skips_the_hold() {
    let (mgmt, dir) = (management().await, tempfile::tempdir().unwrap());
    let ca = write_cert(dir.path());
    put_addon(&mgmt, "docker-ferrol-1-27-v1", json!({}));
    let h = start(&mgmt, dir.path(), &ca, Duration::from_secs(1)).await;
    assert_eq!(
        before_upgrade(&h, "docker-ferrol-1-27-v2", false).await["retryAfterSeconds"],
        hooks::RETRY_AFTER_SECONDS
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let r = before_upgrade(&h, "docker-ferrol-1-27-v2", false).await;
    assert_eq!(r["retryAfterSeconds"], 0, "{r}");
    assert_eq!(addon_status(&mgmt)["holdResult"], hooks::hold::DEADLINE_EXCEEDED);
    let events = mgmt.list_objects("events.k8s.io/v1", "Event");
    assert!(events.iter().any(|e| e["reason"] == "AddonUpgradeHoldExpired" && e["type"] == "Warning"), "{events:?}");

    put_addon(&mgmt, "docker-ferrol-1-27-v1", json!({}));
    let r = before_upgrade(&h, "docker-ferrol-1-27-v3", true).await;
    assert_eq!(r["retryAfterSeconds"], 0);
    assert_eq!(addon_status(&mgmt)["holdResult"], hooks::hold::SKIPPED);
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart() {
    let (mgmt, dir) = (management().await, tempfile::tempdir().unwrap());
    let old = write_cert(dir.path());
    let h = start(&mgmt, dir.path(), &old, Duration::from_secs(60)).await;
    let discovery = format!("{}/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery", h.url);
    assert!(h.client.get(&discovery).send().await.is_ok());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let new = write_cert(dir.path());
    let fresh = client(&new);
    let r = fresh.get(&discovery).send().await.expect("the new certificate is served");
    assert!(r.status().is_success());
    assert!(client(&old).get(&discovery).send().await.is_err(), "the old one is not");
}
