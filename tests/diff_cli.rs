//! `clusterstack diff` as a user runs it (the binary, a kubeconfig file) against the API server
//! double: a release applied as the release controller applies it, then drift, a changed render,
//! dropped objects, the addons of a Cluster in its workload cluster; exit codes as `kubectl diff`,
//! and no write ever reaches the server.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use clusterstack::apply::{Applier, ApplyOptions, ReleaseOwner};
use kube::api::DynamicObject;
use serde_json::{Value, json};
use support::operator::capi_server;
use support::{ApiServer, RequestRecord};

const NS: &str = "team-a";
const TAG: &str = "docker-ferrol-1-27-v1";
const INFRA: &str = "infrastructure.cluster.x-k8s.io/v1beta1";

fn release_dir(tag: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("releases").join(tag)
}

fn kubeconfig(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kubeconfig_text(url)).unwrap();
    path
}

fn kubeconfig_text(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {url}\ncontexts:\n- name: t\n  context:\n    cluster: t\n    user: t\ncurrent-context: t\nusers:\n- name: t\n  user:\n    token: t\n"
    )
}

/// Runs the binary with `KUBECONFIG` set; the test's runtime keeps serving meanwhile.
async fn clusterstack(kubeconfig: &Path, args: &[&str]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("CLUSTERSTACK_CACHE", cache.path())
        .env_remove("RUST_LOG")
        .env_remove("CLUSTERSTACK_SOURCE")
        .output()
        .await
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The objects of a release as `render` prints them.
async fn rendered(release: &Path) -> Vec<DynamicObject> {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(["render", release.to_str().unwrap(), "--namespace", NS, "-o", "json"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    serde_json::from_value(list["items"].clone()).unwrap()
}

/// A server where release v1 is applied as the release controller applies it, with its
/// ClusterStackRelease holding the inventory.
async fn server_with_v1() -> ApiServer {
    let server = capi_server(&[NS]).await;
    let objects = rendered(&release_dir(TAG)).await;
    let report =
        Applier::new(server.client()).apply(&objects, &ApplyOptions::new(ReleaseOwner::new(TAG, NS))).await.unwrap();
    assert!(report.all_ok(), "{:?}", report.changes);
    // The compact form the release controller writes: names grouped, failures in detail.
    let (inventory, resources) =
        clusterstack::controller::inventory::to_release_status(&clusterstack::apply::Inventory::from_changes(&report));
    let release = json!({
        "apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStackRelease",
        "metadata": {"name": TAG, "namespace": NS},
        "spec": {},
        "status": {"inventory": serde_json::to_value(&inventory).unwrap(),
                   "resources": serde_json::to_value(&resources).unwrap(), "ready": true}
    });
    server.put_object(release.clone());
    server.put_object(release);
    server
}

fn is_write(r: &RequestRecord) -> bool {
    matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete" | "deletecollection")
}

/// Every write request was a dry run, and the store did not move.
fn assert_nothing_written(server: &ApiServer, rv_before: u64) {
    let writes: Vec<RequestRecord> = server.requests().into_iter().filter(is_write).collect();
    for w in &writes {
        assert_eq!(w.query.get("dryRun").map(String::as_str), Some("All"), "a write without dryRun: {w:?}");
        assert_eq!(w.query.get("fieldManager").map(String::as_str), Some("clusterstack"), "{w:?}");
    }
    assert_eq!(server.resource_version(), rv_before, "the store changed");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_applied_release_has_no_differences_and_nothing_is_written() {
    let server = server_with_v1().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &server.url());
    server.clear_requests();
    let rv = server.resource_version();
    let out = clusterstack(&kc, &["diff", release_dir(TAG).to_str().unwrap(), "-n", NS]).await;
    assert_eq!(out.status.code(), Some(0), "stdout: {}\nstderr: {}", text(&out.stdout), text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(text(&out.stderr), "no differences (0 changed, 0 to create, 0 to prune, 6 unchanged)\n");
    // One dry-run apply per object.
    let patches = server.requests().into_iter().filter(is_write).count();
    assert_eq!(patches, 6);
    assert_nothing_written(&server, rv);
}

#[tokio::test(flavor = "multi_thread")]
async fn drift_shows_as_a_diff_back_to_the_render_and_exits_1() {
    let server = server_with_v1().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &server.url());
    server.edit_object(INFRA, "DockerMachineTemplate", Some(NS), "docker-ferrol-1-27-v1-worker-machine", |o| {
        o["spec"]["template"]["spec"]["extraMounts"][0]["hostPath"] = json!("/tmp/edited.sock");
    });
    server.clear_requests();
    let rv = server.resource_version();
    let out = clusterstack(&kc, &["diff", release_dir(TAG).to_str().unwrap(), "-n", NS]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "stdout: {stdout}\nstderr: {}", text(&out.stderr));
    let header = format!(
        "--- live/{INFRA} DockerMachineTemplate {NS}/docker-ferrol-1-27-v1-worker-machine\n\
         +++ merged/{INFRA} DockerMachineTemplate {NS}/docker-ferrol-1-27-v1-worker-machine\n"
    );
    assert!(stdout.starts_with(&header), "{stdout}");
    assert!(stdout.contains("-        hostPath: /tmp/edited.sock\n"), "{stdout}");
    assert!(stdout.contains("+        hostPath: /var/run/docker.sock\n"), "{stdout}");
    // Plain text when not on a terminal: no escape codes.
    assert!(!stdout.contains('\u{1b}'), "{stdout:?}");
    assert_eq!(text(&out.stderr), "differences: 1 changed, 0 to create, 0 to prune, 5 unchanged\n");
    assert_nothing_written(&server, rv);
}

/// v1's class chart, extracted and edited by `edit`.
fn edited_chart(dir: &Path, edit: impl FnOnce(&Path)) -> PathBuf {
    let tgz = release_dir(TAG).join("docker-ferrol-1-27-cluster-class-v1.tgz");
    let status = std::process::Command::new("tar").arg("xzf").arg(&tgz).arg("-C").arg(dir).status().unwrap();
    assert!(status.success());
    let chart = dir.join("docker-ferrol-1-27-cluster-class");
    edit(&chart);
    chart
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_render_shows_changes_creations_and_prunes() {
    let server = server_with_v1().await;
    // An object of the inventory that someone took over (labels removed) is left alone.
    server.edit_object(INFRA, "DockerClusterTemplate", Some(NS), "docker-ferrol-1-27-v1-cluster", |o| {
        o["metadata"]["labels"] = json!({});
    });
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &server.url());
    let chart = edited_chart(dir.path(), |chart| {
        let templates = chart.join("templates");
        // kubeadm.yaml's two templates go (pruned); docker.yaml changes one mount and drops the
        // cluster template (not ours any more: skipped); a new ConfigMap appears (created).
        std::fs::remove_file(templates.join("kubeadm.yaml")).unwrap();
        let docker = std::fs::read_to_string(templates.join("docker.yaml")).unwrap();
        let docker = docker.replace("containerPath: /var/run/docker.sock", "containerPath: /run/docker.sock");
        let docker = docker
            .split_once("{% for part")
            .map(|(_, rest)| format!("{{% import \"_names.j2\" as names %}}\n{{% for part{rest}"))
            .unwrap();
        std::fs::write(templates.join("docker.yaml"), docker).unwrap();
        std::fs::write(
            templates.join("extra.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\ndata:\n  a: \"1\"\n",
        )
        .unwrap();
    });
    server.clear_requests();
    let rv = server.resource_version();
    let out = clusterstack(&kc, &["diff", chart.to_str().unwrap(), "-n", NS]).await;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    // The README's sample (`cargo test --test diff_cli -- --nocapture`).
    println!("{stdout}{stderr}");
    assert_eq!(out.status.code(), Some(1), "stdout: {stdout}\nstderr: {stderr}");
    // Changed: both machine templates, their mount's containerPath.
    assert_eq!(stdout.matches("-      - containerPath: /var/run/docker.sock\n").count(), 2, "{stdout}");
    assert_eq!(stdout.matches("+      - containerPath: /run/docker.sock\n").count(), 2, "{stdout}");
    // Created: the ConfigMap, from /dev/null-like empty live side, with our labels.
    assert!(stdout.contains(&format!("+++ merged/v1 ConfigMap {NS}/extra\n")), "{stdout}");
    assert!(stdout.contains("+    clusterstack.x-k8s.io/release: docker-ferrol-1-27-v1\n"), "{stdout}");
    // Pruned: the two kubeadm templates, every line removed.
    for pruned in [
        "bootstrap.cluster.x-k8s.io/v1beta1 KubeadmConfigTemplate team-a/docker-ferrol-1-27-v1-worker-bootstrap",
        "controlplane.cluster.x-k8s.io/v1beta1 KubeadmControlPlaneTemplate team-a/docker-ferrol-1-27-v1-control-plane",
    ] {
        assert!(stdout.contains(&format!("--- live/{pruned}\n")), "{pruned} missing:\n{stdout}");
    }
    assert!(
        stderr.contains(
            "note: infrastructure.cluster.x-k8s.io/v1beta1 DockerClusterTemplate team-a/docker-ferrol-1-27-v1-cluster \
         is in the inventory but no longer carries the release labels: not pruned"
        ),
        "{stderr}"
    );
    assert!(stderr.ends_with("differences: 2 changed, 1 to create, 2 to prune, 1 unchanged\n"), "{stderr}");
    assert_nothing_written(&server, rv);
    // Everything is still there.
    assert!(
        server
            .get_object(
                "bootstrap.cluster.x-k8s.io/v1beta1",
                "KubeadmConfigTemplate",
                Some(NS),
                "docker-ferrol-1-27-v1-worker-bootstrap"
            )
            .is_some()
    );
    assert!(server.get_object("v1", "ConfigMap", Some(NS), "extra").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_release_would_create_everything() {
    let server = server_with_v1().await;
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &server.url());
    server.clear_requests();
    let rv = server.resource_version();
    let out = clusterstack(&kc, &["diff", release_dir("docker-ferrol-1-27-v2").to_str().unwrap(), "-n", NS]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "differences: 0 changed, 6 to create, 0 to prune, 0 unchanged\n");
    assert_eq!(text(&out.stdout).matches("+++ merged/").count(), 6);
    assert_nothing_written(&server, rv);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_cluster_or_a_failing_object_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let kc = kubeconfig(dir.path(), &format!("http://{closed}"));
    let out = clusterstack(&kc, &["diff", release_dir(TAG).to_str().unwrap(), "-n", NS]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).starts_with("error: "), "{}", text(&out.stderr));

    // A cluster without the Cluster API kinds: every object fails to compare.
    let bare = ApiServer::start().await;
    let kc = kubeconfig(dir.path(), &bare.url());
    let out = clusterstack(&kc, &["diff", release_dir(TAG).to_str().unwrap()]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the cluster serves no kind ClusterClass in cluster.x-k8s.io/v1beta1"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn addons_are_compared_in_the_workload_cluster_through_the_kubeconfig_secret() {
    use base64::Engine;
    let mgmt = capi_server(&[NS]).await;
    let work = ApiServer::start().await;
    mgmt.put_object(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "c1-kubeconfig", "namespace": NS},
        "data": {"value": base64::engine::general_purpose::STANDARD.encode(kubeconfig_text(&work.url()))}
    }));
    mgmt.put_object(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": NS},
        "spec": {"topology": {"class": "docker-ferrol-1-27-v1", "version": "v1.27.3"},
                 "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}},
                 "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443}}
    }));
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), &mgmt.url());
    let release = release_dir(TAG);
    let args = ["diff", release.to_str().unwrap(), "--addons", "--cluster", "team-a/c1"];
    let (mgmt_rv, work_rv) = (mgmt.resource_version(), work.resource_version());
    let out = clusterstack(&kc, &args).await;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stdout: {stdout}\nstderr: {stderr}");
    // Everything is new in the empty workload cluster, labelled with the addon owner, applied by
    // the addon field manager; the templates saw the Cluster (its pod CIDR).
    assert!(stdout.contains("+++ merged/apps/v1 Deployment kube-system/metrics-server\n"), "{stdout}");
    assert!(stdout.contains("+    clusterstack.x-k8s.io/release: cluster-addon-c1\n"), "{stdout}");
    assert!(stdout.contains("10.244.0.0/16"), "{stdout}");
    assert!(stderr.starts_with("differences: 0 changed, "), "{stderr}");
    for r in work.requests().iter().filter(|r| is_write(r)) {
        assert_eq!(r.query.get("dryRun").map(String::as_str), Some("All"), "{r:?}");
        assert_eq!(r.query.get("fieldManager").map(String::as_str), Some("clusterstack-addons"), "{r:?}");
    }
    assert!(mgmt.requests().iter().all(|r| !is_write(r)), "the management cluster was written");
    assert_eq!((mgmt.resource_version(), work.resource_version()), (mgmt_rv, work_rv));

    // A missing Cluster is an error (2).
    let out =
        clusterstack(&kc, &["diff", release_dir(TAG).to_str().unwrap(), "--addons", "--cluster", "team-a/nope"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Cluster team-a/nope not found"), "{}", text(&out.stderr));
}

/// Against a real cluster (`cargo test -- --ignored`, KUBECONFIG set, Cluster API CRDs installed):
/// a namespace of our own, release v1 applied, then its diff must be empty and a drift must show.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs a real cluster with the Cluster API CRDs (KUBECONFIG)"]
async fn real_cluster_diff() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, DeleteParams, PostParams};
    clusterstack::install_crypto_provider();
    let client = kube::Client::try_default().await.expect("a kubeconfig");
    let ns_name = format!("clusterstack-diff-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": ns_name}})).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.expect("namespace");
    let objects = rendered(&release_dir(TAG)).await;
    let objects: Vec<DynamicObject> = objects
        .into_iter()
        .map(|mut o| {
            o.metadata.namespace = Some(ns_name.clone());
            o
        })
        .collect();
    let report = Applier::new(client.clone())
        .apply(&objects, &ApplyOptions::new(ReleaseOwner::new(TAG, &ns_name)))
        .await
        .expect("apply");
    assert!(report.all_ok(), "{:?}", report.changes);
    let kc = std::env::var("KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".kube/config"));
    let out = clusterstack(&kc, &["diff", release_dir(TAG).to_str().unwrap(), "-n", &ns_name]).await;
    let _ = namespaces.delete(&ns_name, &DeleteParams::default()).await;
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
}
