//! The ClusterAddon controller on two API server doubles: the management cluster, and a workload
//! cluster reached through a real kubeconfig Secret (`<cluster>-kubeconfig`, key `value`).
//! Passes are driven by calling the reconciler directly, so each step is deterministic.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clusterstack::controller::addon::{self, AddonContext, AddonSettings, reason};
use clusterstack::controller::runtime::context::{Context, Settings};
use clusterstack::controller::runtime::metrics::Metrics;
use clusterstack::source::SourceSpec;
use serde_json::{Value, json};
use support::fixtures::{capi_crds, load_yaml};
use support::{ApiServer, RequestMatch};

const NS: &str = "workloads";
const CA: &str = "clusterstack.x-k8s.io/v1alpha1";
const CLUSTER: &str = "cluster.x-k8s.io/v1beta1";

fn releases_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("releases")
}

async fn management() -> ApiServer {
    clusterstack::install_crypto_provider();
    let server = ApiServer::start().await;
    server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    for crd in clusterstack::api::all_crds() {
        server.put_object(serde_json::to_value(&crd).unwrap());
    }
    for crd in capi_crds().into_iter().chain(load_yaml("operator/clusters.cluster.x-k8s.io.yaml")) {
        server.put_object(serde_json::to_value(&crd).unwrap());
    }
    server
}

fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: w\n  cluster:\n    server: {url}\ncontexts:\n- name: w\n  context:\n    cluster: w\n    user: w\ncurrent-context: w\nusers:\n- name: w\n  user:\n    token: t\n"
    )
}

fn put_kubeconfig(mgmt: &ApiServer, cluster: &str, url: &str) {
    use base64::Engine;
    let value = base64::engine::general_purpose::STANDARD.encode(kubeconfig(url));
    mgmt.put_object(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": NS},
        "data": {"value": value}
    }));
}

fn put_cluster(mgmt: &ApiServer, name: &str, class: &str, initialized: bool) -> Value {
    // A create drops `status` (a status subresource); the second write keeps it.
    let cluster = json!({
        "apiVersion": CLUSTER, "kind": "Cluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"topology": {"class": class, "version": "v1.27.3"},
                 "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}},
                 "controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443}},
        "status": {"controlPlaneReady": initialized}
    });
    mgmt.put_object(cluster.clone());
    mgmt.put_object(cluster)
}

fn cluster_obj(mgmt: &ApiServer, name: &str) -> Arc<clusterstack::controller::runtime::clusters::CapiCluster> {
    let v = mgmt.get_object(CLUSTER, "Cluster", Some(NS), name).expect("cluster");
    Arc::new(serde_json::from_value(v).unwrap())
}

fn set_class(mgmt: &ApiServer, name: &str, class: &str) {
    let mut v = mgmt.get_object(CLUSTER, "Cluster", Some(NS), name).unwrap();
    v["spec"]["topology"]["class"] = json!(class);
    mgmt.put_object(v);
}

fn addon_status(mgmt: &ApiServer, name: &str) -> Value {
    mgmt.get_object(CA, "ClusterAddon", Some(NS), &format!("cluster-addon-{name}")).expect("ClusterAddon")["status"]
        .clone()
}

/// The condition of a type, `null` when absent.
fn condition(status: &Value, type_: &str) -> Value {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null)
}

fn ready_reason(status: &Value) -> String {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| format!("{}: {}", c["reason"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")))
        .unwrap_or_default()
}

fn context(mgmt: &ApiServer, repo: &Path, cache: &Path, wait_deadline: Duration) -> Arc<AddonContext> {
    context_with(mgmt, repo, cache, wait_deadline, |_| {})
}

fn context_with(
    mgmt: &ApiServer,
    repo: &Path,
    cache: &Path,
    wait_deadline: Duration,
    settings: impl FnOnce(&mut Settings),
) -> Arc<AddonContext> {
    let mut s = Settings::new(SourceSpec::dir(repo), cache);
    s.backoff.base = Duration::from_millis(100);
    settings(&mut s);
    let ctx = Arc::new(Context::new(mgmt.client(), s, Arc::new(Metrics::new())).unwrap());
    Arc::new(AddonContext::new(
        ctx,
        AddonSettings { wait_deadline, resync_interval: Duration::from_secs(3600), apply_concurrency: 8 },
    ))
}

async fn pass(actx: &Arc<AddonContext>, mgmt: &ApiServer, name: &str) -> Result<(), String> {
    addon::reconcile(cluster_obj(mgmt, name), actx.clone()).await.map(|_| ()).map_err(|e| e.to_string())
}

fn workload_writes(w: &ApiServer) -> usize {
    w.requests().iter().filter(|r| matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")).count()
}

/// Makes the metrics-server Deployment of the workload cluster report `ready` replicas.
fn set_ready_replicas(w: &ApiServer, ready: i64) {
    let mut d = w.get_object("apps/v1", "Deployment", Some("kube-system"), "metrics-server").expect("deployment");
    d["status"] = json!({"readyReplicas": ready});
    w.put_object(d);
}

#[tokio::test]
async fn a_new_cluster_gets_its_addons_in_stage_order_once_its_control_plane_is_initialised() {
    let (mgmt, work) = (management().await, ApiServer::start().await);
    let cache = tempfile::tempdir().unwrap();
    let actx = context(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(600));
    put_kubeconfig(&mgmt, "c1", &work.url());
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", false);

    pass(&actx, &mgmt, "c1").await.unwrap();
    let status = addon_status(&mgmt, "c1");
    assert!(ready_reason(&status).starts_with(reason::WAITING_FOR_CONTROL_PLANE), "{status}");
    // kstatus: waiting is work in progress, for the generation seen.
    assert_eq!(condition(&status, "Reconciling")["reason"], reason::WAITING_FOR_CONTROL_PLANE, "{status}");
    assert_eq!(status["observedGeneration"], 1, "{status}");
    assert_eq!(work.requests().len(), 0, "nothing is sent before the control plane is initialised");
    // Owned by the Cluster, so it goes with it.
    let ca = mgmt.get_object(CA, "ClusterAddon", Some(NS), "cluster-addon-c1").unwrap();
    assert_eq!(ca["metadata"]["ownerReferences"][0]["kind"], "Cluster");

    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", true);
    pass(&actx, &mgmt, "c1").await.unwrap();
    let status = addon_status(&mgmt, "c1");
    assert_eq!(status["ready"], true, "{status}");
    assert_eq!(status["release"], "docker-ferrol-1-27-v1");
    assert_eq!(status["addonVersion"], "v1");
    // kstatus: done, so neither Reconciling nor Stalled (what `kubectl wait` and Flux read).
    assert_eq!(condition(&status, "Ready")["status"], "True");
    assert!(condition(&status, "Reconciling").is_null() && condition(&status, "Stalled").is_null(), "{status}");
    let phases: Vec<(&str, &str)> = status["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(phases, [("cni", "Done"), ("metrics-server", "Done")]);
    // Stage order: the CNI's objects are written before metrics-server's.
    let writes: Vec<String> = work.requests().iter().filter(|r| r.verb == "patch").map(|r| r.name.clone()).collect();
    let cni = writes.iter().position(|n| n == "kindnet").expect("cni applied");
    let ms = writes.iter().position(|n| n == "metrics-server").expect("metrics-server applied");
    assert!(cni < ms, "{writes:?}");
    let ds = work.get_object("apps/v1", "DaemonSet", Some("kube-system"), "kindnet").unwrap();
    assert_eq!(ds["metadata"]["labels"]["clusterstack.x-k8s.io/release"], "cluster-addon-c1");
    assert!(
        ds["metadata"]["managedFields"].to_string().contains("clusterstack-addons"),
        "own field manager: {}",
        ds["metadata"]["managedFields"]
    );
    // The values template saw the Cluster.
    assert!(ds.to_string().contains("10.244.0.0/16"), "{ds}");
    assert!(status["resources"].as_array().unwrap().len() >= 4, "inventory in status: {status}");
}

/// A copy of the sample releases in which v2's cni no longer renders its RBAC.
fn repo_with_smaller_v2() -> tempfile::TempDir {
    repo_with("docker-ferrol-1-27-v2", |extracted| {
        std::fs::remove_file(extracted.join("cni/templates/rbac.yaml")).unwrap();
    })
}

/// A copy of the sample releases (no checksums) whose `tag` has its addon bundle changed by
/// `edit` (given the extracted bundle's directory).
fn repo_with(tag: &str, edit: impl FnOnce(&Path)) -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    for tag in ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"] {
        let dest = repo.path().join(tag);
        std::fs::create_dir_all(&dest).unwrap();
        for f in std::fs::read_dir(releases_dir().join(tag)).unwrap() {
            let f = f.unwrap();
            let name = f.file_name().to_string_lossy().into_owned();
            // Without checksums the directory source takes the files as they are.
            if name == "SHA256SUMS" || name == "hashes.json" {
                continue;
            }
            std::fs::copy(f.path(), dest.join(&name)).unwrap();
        }
    }
    let version = tag.rsplit('-').next().unwrap();
    let tgz = repo.path().join(format!("{tag}/docker-ferrol-1-27-cluster-addon-{version}.tgz"));
    let tgz = if tgz.exists() {
        tgz
    } else {
        // v3 ships the v2 addons.
        repo.path().join(format!("{tag}/docker-ferrol-1-27-cluster-addon-v2.tgz"))
    };
    let extracted = tempfile::tempdir().unwrap();
    tar::Archive::new(flate2::read::GzDecoder::new(std::fs::File::open(&tgz).unwrap()))
        .unpack(extracted.path())
        .unwrap();
    edit(extracted.path());
    let file = std::fs::File::create(&tgz).unwrap();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(file, flate2::Compression::fast()));
    builder.append_dir_all(".", extracted.path()).unwrap();
    builder.into_inner().unwrap().finish().unwrap();
    repo
}

#[tokio::test]
async fn v1_to_v2_reapplies_waits_for_its_post_condition_and_prunes_what_v2_dropped_then_v3_sends_nothing() {
    let (mgmt, work) = (management().await, ApiServer::start().await);
    let (cache, repo) = (tempfile::tempdir().unwrap(), repo_with_smaller_v2());
    let actx = context(&mgmt, repo.path(), cache.path(), Duration::from_secs(600));
    put_kubeconfig(&mgmt, "c1", &work.url());
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", true);
    pass(&actx, &mgmt, "c1").await.unwrap();
    assert!(work.get_object("rbac.authorization.k8s.io/v1", "ClusterRole", None, "kindnet").is_some());

    set_class(&mgmt, "c1", "docker-ferrol-1-27-v2");
    pass(&actx, &mgmt, "c1").await.unwrap();
    let status = addon_status(&mgmt, "c1");
    assert_eq!(status["stages"][0]["phase"], "WaitingForPostCondition", "{status}");
    assert!(ready_reason(&status).contains("ms.status.readyReplicas >= 1"), "{status}");
    let image = work.get_object("apps/v1", "Deployment", Some("kube-system"), "metrics-server").unwrap();
    assert!(image.to_string().contains("v0.7.0"), "the BeforeClusterUpgrade stage applied v2's metrics-server");

    // The stuck-stage alert's gauge: the waiting stage, since its startedAt.
    let started = status["stages"][0]["startedAt"].clone();
    let since = started.as_str().unwrap().parse::<jiff::Timestamp>().unwrap().as_second();
    let series = format!(
        "clusterstack_addon_stage_started_timestamp_seconds{{namespace=\"{NS}\",cluster=\"c1\",stage=\"{}\"}} {since}",
        status["stages"][0]["name"].as_str().unwrap()
    );
    assert!(actx.ctx.metrics.encode().unwrap().contains(&series), "{series}");

    // A restart in the middle of the stage resumes it (a new context: no memory).
    let restarted = context(&mgmt, repo.path(), cache.path(), Duration::from_secs(600));
    pass(&restarted, &mgmt, "c1").await.unwrap();
    let status = addon_status(&mgmt, "c1");
    assert_eq!(status["stages"][0]["phase"], "WaitingForPostCondition");
    assert_eq!(status["stages"][0]["startedAt"], started, "the deadline still counts from the first pass");

    assert!(restarted.ctx.metrics.encode().unwrap().contains(&series), "{series}");

    set_ready_replicas(&work, 1);
    pass(&restarted, &mgmt, "c1").await.unwrap();
    let status = addon_status(&mgmt, "c1");
    assert_eq!(status["ready"], true, "{status}");
    assert!(!restarted.ctx.metrics.encode().unwrap().contains("addon_stage_started"), "no stage waits any more");
    assert_eq!(status["release"], "docker-ferrol-1-27-v2");
    assert_eq!(status["addonVersion"], "v2");
    assert!(
        work.get_object("rbac.authorization.k8s.io/v1", "ClusterRole", None, "kindnet").is_none(),
        "pruned from the inventory"
    );
    assert!(!status["resources"].to_string().contains("\"ClusterRole\",\"name\":\"kindnet\""));

    // v2 -> v3 keeps addon version v2: nothing goes to the workload cluster.
    work.clear_requests();
    set_class(&mgmt, "c1", "docker-ferrol-1-27-v3");
    pass(&restarted, &mgmt, "c1").await.unwrap();
    assert_eq!(work.requests().len(), 0, "{:?}", work.requests().iter().map(|r| &r.path).collect::<Vec<_>>());
    let status = addon_status(&mgmt, "c1");
    assert_eq!(status["release"], "docker-ferrol-1-27-v3");
    assert!(ready_reason(&status).starts_with(reason::ADDON_VERSION_UNCHANGED), "{status}");
}

#[tokio::test]
async fn a_post_condition_that_stays_false_fails_the_stage_after_its_deadline() {
    let (mgmt, work) = (management().await, ApiServer::start().await);
    let cache = tempfile::tempdir().unwrap();
    let actx = context(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(1));
    put_kubeconfig(&mgmt, "c1", &work.url());
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", true);
    pass(&actx, &mgmt, "c1").await.unwrap();
    set_class(&mgmt, "c1", "docker-ferrol-1-27-v2");
    pass(&actx, &mgmt, "c1").await.unwrap();
    set_ready_replicas(&work, 0);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    pass(&actx, &mgmt, "c1").await.unwrap();
    let status = addon_status(&mgmt, "c1");
    assert_eq!(status["stages"][0]["phase"], "Failed", "{status}");
    let why = ready_reason(&status);
    assert!(why.starts_with(reason::STAGE_FAILED), "{why}");
    assert!(why.contains("waitForPostCondition") && why.contains("ms.status.readyReplicas >= 1"), "{why}");
    assert!(why.contains("\"readyReplicas\":0"), "names the values seen: {why}");
    assert_eq!(status["release"], "docker-ferrol-1-27-v1", "the upgrade did not complete");
    // kstatus: a failed stage cannot progress without a change.
    assert_eq!(condition(&status, "Stalled")["reason"], reason::STAGE_FAILED, "{status}");
    assert!(condition(&status, "Reconciling").is_null(), "{status}");
}

#[tokio::test]
async fn a_missing_kubeconfig_or_a_workload_api_that_is_down_gives_a_condition_and_backs_off() {
    let mgmt = management().await;
    let cache = tempfile::tempdir().unwrap();
    let actx = context(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(600));
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", true);
    let r = pass(&actx, &mgmt, "c1").await;
    let e = r.expect_err(&addon_status(&mgmt, "c1").to_string());
    assert!(e.contains("c1-kubeconfig"), "{e}");
    let status = addon_status(&mgmt, "c1");
    assert!(ready_reason(&status).starts_with(reason::WORKLOAD_UNREACHABLE), "{status}");
    assert!(ready_reason(&status).contains("does not exist"), "{status}");
    // The error policy backs off per Cluster, growing.
    let err = addon::Error::Config(e);
    let _ = addon::error_policy(cluster_obj(&mgmt, "c1"), &err, actx.clone());
    assert_eq!(actx.backoff.failures(&format!("{NS}/c1")), 1);

    // An API server that does not answer: a closed port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    put_kubeconfig(&mgmt, "c1", &format!("http://{closed}"));
    let e = pass(&actx, &mgmt, "c1").await.unwrap_err();
    assert!(e.contains("workload cluster"), "{e}");
    let status = addon_status(&mgmt, "c1");
    assert!(ready_reason(&status).starts_with(reason::WORKLOAD_UNREACHABLE), "{status}");
    assert_eq!(actx.workloads.len(), 0, "the client of an unreachable cluster is dropped");

    // The Secret changes to a working endpoint: the next pass uses it.
    let work = ApiServer::start().await;
    put_kubeconfig(&mgmt, "c1", &work.url());
    pass(&actx, &mgmt, "c1").await.unwrap();
    assert_eq!(addon_status(&mgmt, "c1")["ready"], true);
}

#[tokio::test]
async fn hostile_platform_values_fail_that_cluster_only_and_good_ones_are_merged() {
    let (mgmt, work1, work2) = (management().await, ApiServer::start().await, ApiServer::start().await);
    let cache = tempfile::tempdir().unwrap();
    let actx = context(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(600));
    put_kubeconfig(&mgmt, "bad", &work1.url());
    put_kubeconfig(&mgmt, "good", &work2.url());
    put_cluster(&mgmt, "bad", "docker-ferrol-1-27-v1", true);
    put_cluster(&mgmt, "good", "docker-ferrol-1-27-v1", true);
    // Create both ClusterAddons, then point them at platform values.
    let _ = pass(&actx, &mgmt, "bad").await;
    let _ = pass(&actx, &mgmt, "good").await;
    mgmt.put_object(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad-values", "namespace": NS},
        "data": {"values.yaml": "- not\n- a mapping\n"}}),
    );
    mgmt.put_object(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ms-values", "namespace": NS},
        "data": {"values.yaml": "image: registry.example/metrics-server:platform\n"}}),
    );
    for (cluster, cm) in [("bad", "bad-values"), ("good", "ms-values")] {
        let mut ca = mgmt.get_object(CA, "ClusterAddon", Some(NS), &format!("cluster-addon-{cluster}")).unwrap();
        ca["spec"]["valuesFrom"] = json!([{"addon": "metrics-server", "kind": "ConfigMap", "name": cm}]);
        ca["status"] = json!({});
        mgmt.put_object(ca);
    }
    work1.clear_requests();
    let e = pass(&actx, &mgmt, "bad").await.unwrap_err();
    assert!(e.contains("bad-values") && e.contains("mapping"), "{e}");
    assert!(ready_reason(&addon_status(&mgmt, "bad")).starts_with(reason::RENDER_FAILED));
    assert_eq!(workload_writes(&work1), 0);

    pass(&actx, &mgmt, "good").await.unwrap();
    let d = work2.get_object("apps/v1", "Deployment", Some("kube-system"), "metrics-server").unwrap();
    assert!(d.to_string().contains("registry.example/metrics-server:platform"), "platform values win: {d}");
}

/// Addons rendering more objects than `--max-objects-per-release` are refused before anything
/// reaches the workload cluster (the ClusterAddon status lists each object: it must fit), with a
/// stalled condition naming the count and the cap, one warning Event, and a backoff; within the
/// cap they are applied.
#[tokio::test]
async fn addons_past_the_object_cap_are_refused_whole() {
    let (mgmt, work) = (management().await, ApiServer::start().await);
    let cache = tempfile::tempdir().unwrap();
    // How many objects the sample's addons render, applied under the default cap.
    let roomy = context(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(600));
    put_kubeconfig(&mgmt, "c1", &work.url());
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", true);
    let _ = pass(&roomy, &mgmt, "c1").await;
    let count = work.requests().iter().filter(|r| r.verb == "patch").count();
    assert!(count >= 2, "the sample's addons apply several objects: {count}");

    let (mgmt, work) = (management().await, ApiServer::start().await);
    let cache = tempfile::tempdir().unwrap();
    let cap = count - 1;
    let tight = context_with(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(600), |s| {
        s.max_objects_per_release = cap
    });
    put_kubeconfig(&mgmt, "c1", &work.url());
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", true);
    for _ in 0..2 {
        let e = pass(&tight, &mgmt, "c1").await.unwrap_err();
        assert!(e.contains(&format!("the {cap} allowed per release")) && e.contains("nothing was applied"), "{e}");
    }
    assert_eq!(workload_writes(&work), 0, "nothing reaches the workload cluster");
    let status = addon_status(&mgmt, "c1");
    assert!(ready_reason(&status).starts_with(reason::TOO_MANY_OBJECTS), "{status}");
    let stalled =
        status["conditions"].as_array().unwrap().iter().any(|c| c["type"] == "Stalled" && c["status"] == "True");
    assert!(stalled, "a refused render needs a change: {status}");
    let events: Vec<_> = mgmt
        .list_objects("events.k8s.io/v1", "Event")
        .into_iter()
        .filter(|e| e["reason"] == reason::TOO_MANY_OBJECTS)
        .collect();
    assert_eq!(events.len(), 1, "one Event, not one per retry: {events:?}");
}

#[tokio::test]
async fn drift_in_the_workload_cluster_is_corrected_on_resync() {
    let (mgmt, work) = (management().await, ApiServer::start().await);
    let cache = tempfile::tempdir().unwrap();
    let mut settings = AddonSettings { wait_deadline: Duration::from_secs(600), ..Default::default() };
    settings.resync_interval = Duration::ZERO;
    let base = context(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(600));
    let actx = Arc::new(AddonContext::new(base.ctx.clone(), settings));
    put_kubeconfig(&mgmt, "c1", &work.url());
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", true);
    pass(&actx, &mgmt, "c1").await.unwrap();
    let mut d = work.get_object("apps/v1", "Deployment", Some("kube-system"), "metrics-server").unwrap();
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil/metrics-server:latest");
    work.put_object(d);
    pass(&actx, &mgmt, "c1").await.unwrap();
    let d = work.get_object("apps/v1", "Deployment", Some("kube-system"), "metrics-server").unwrap();
    assert!(d.to_string().contains("metrics-server:v0.6.4"), "{d}");
    assert!(work.count(&RequestMatch::any().verb("patch")) > 0);
}

#[tokio::test]
async fn a_hostile_values_template_fails_that_cluster_only() {
    // v1's cni values template: an undefined value for Cluster "undefined", a runaway loop for
    // Cluster "runaway", the sample's template for everyone else.
    let repo = repo_with("docker-ferrol-1-27-v1", |dir| {
        let good = std::fs::read_to_string(dir.join("cni/overwrite.yaml")).unwrap();
        let hostile = format!(
            "{{% if cluster.metadata.name == \"undefined\" %}}podSubnet: {{{{ cluster.spec.nowhere.cidr }}}}\n\
             {{% elif cluster.metadata.name == \"runaway\" %}}{{% for i in range(100000) %}}{{% for j in range(100000) %}}x{{% endfor %}}{{% endfor %}}\n\
             {{% else %}}{good}{{% endif %}}\n"
        );
        std::fs::write(dir.join("cni/overwrite.yaml"), hostile).unwrap();
    });
    let mgmt = management().await;
    let cache = tempfile::tempdir().unwrap();
    let actx = context(&mgmt, repo.path(), cache.path(), Duration::from_secs(600));
    let mut workloads = Vec::new();
    for name in ["undefined", "runaway", "good"] {
        let w = ApiServer::start().await;
        put_kubeconfig(&mgmt, name, &w.url());
        put_cluster(&mgmt, name, "docker-ferrol-1-27-v1", true);
        workloads.push(w);
    }
    for (name, expected) in [("undefined", "nowhere"), ("runaway", "fuel")] {
        // The budget, not the clock, is what this checks (the reason names it below); the
        // timeout only turns a budget that never stops the loop into a failure, not a hang.
        let e = tokio::time::timeout(Duration::from_secs(600), pass(&actx, &mgmt, name))
            .await
            .unwrap_or_else(|_| panic!("{name}: no limit stopped the render"))
            .unwrap_err();
        let status = addon_status(&mgmt, name);
        let reason_ = ready_reason(&status);
        assert!(reason_.starts_with(reason::RENDER_FAILED), "{name}: {reason_}");
        // The error names the file and what was wrong.
        assert!(reason_.contains("overwrite.yaml") && reason_.contains(expected), "{name}: {reason_} / {e}");
    }
    for w in &workloads[..2] {
        assert_eq!(workload_writes(w), 0, "nothing is sent to a Cluster whose values failed");
    }
    // The other Cluster of the same release gets its addons, its values rendered.
    pass(&actx, &mgmt, "good").await.unwrap();
    let ds = workloads[2].get_object("apps/v1", "DaemonSet", Some("kube-system"), "kindnet").expect("cni applied");
    assert!(ds.to_string().contains("10.244.0.0/16"), "{ds}");
}

#[tokio::test]
async fn a_helm_addon_printing_documents_no_api_server_accepts_is_not_applied_and_ready_names_them() {
    // An extra Helm addon whose template prints, besides a good ConfigMap, a document without
    // `kind` and one whose label is a number: helm template prints all three.
    let repo = repo_with("docker-ferrol-1-27-v1", |dir| {
        std::fs::create_dir_all(dir.join("odd/templates")).unwrap();
        std::fs::write(dir.join("odd/Chart.yaml"), "apiVersion: v2\nname: odd\nversion: 1.0.0\n").unwrap();
        std::fs::write(
            dir.join("odd/templates/docs.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n---\napiVersion: v1\nmetadata:\n  name: no-kind\n\
             ---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: numbered\n  labels:\n    tier: 1\n",
        )
        .unwrap();
    });
    let (mgmt, work) = (management().await, ApiServer::start().await);
    let cache = tempfile::tempdir().unwrap();
    let actx = context(&mgmt, repo.path(), cache.path(), Duration::from_secs(600));
    put_kubeconfig(&mgmt, "c1", &work.url());
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", true);
    pass(&actx, &mgmt, "c1").await.unwrap_err();
    let reason_ = ready_reason(&addon_status(&mgmt, "c1"));
    assert!(reason_.starts_with(reason::RENDER_FAILED), "{reason_}");
    for named in ["odd/templates/docs.yaml document 2: has no kind", "odd/templates/docs.yaml document 3: metadata"] {
        assert!(reason_.contains(named), "Ready does not name {named:?}: {reason_}");
    }
    assert_eq!(workload_writes(&work), 0, "nothing of the release is applied");
}

#[tokio::test]
async fn a_store_that_shows_no_cluster_addon_saves_the_read_and_a_stale_one_costs_nothing_else() {
    let mgmt = management().await;
    let cache = tempfile::tempdir().unwrap();
    let actx = context(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(600));
    // The store the rollout controller keeps shows no ClusterAddon at all (stale for c2 below).
    actx.ctx.watches.set_cluster_addon_lookup(|_, _| Some(false));
    put_cluster(&mgmt, "c1", "docker-ferrol-1-27-v1", false);
    mgmt.clear_requests();
    pass(&actx, &mgmt, "c1").await.unwrap();
    let on_addons = |mgmt: &ApiServer| -> Vec<String> {
        mgmt.requests()
            .iter()
            .filter(|r| r.resource == "clusteraddons")
            .map(|r| format!("{} {} {}", r.verb, r.subresource, r.status).trim_end().to_string())
            .collect()
    };
    assert_eq!(on_addons(&mgmt), ["create  201", "patch status 200"], "created without a read first");

    // c2's ClusterAddon exists though the store does not show it yet: the create is refused, the
    // read follows, and the pass goes on with the existing object.
    put_cluster(&mgmt, "c2", "docker-ferrol-1-27-v1", false);
    let other = context(&mgmt, &releases_dir(), cache.path(), Duration::from_secs(600));
    pass(&other, &mgmt, "c2").await.unwrap();
    mgmt.clear_requests();
    pass(&actx, &mgmt, "c2").await.unwrap();
    assert_eq!(on_addons(&mgmt), ["create  409", "get  200"], "a stale store: refused create, then the read");
    let status = addon_status(&mgmt, "c2");
    assert!(ready_reason(&status).starts_with(reason::WAITING_FOR_CONTROL_PLANE), "{status}");
}
