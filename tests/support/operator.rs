//! The whole operator in-process against the API server double: a server with our CRDs and the
//! CAPI CRDs, a running operator stopped gracefully on `stop` (or when dropped), and the
//! fixtures the operator tests share (stacks, releases, Clusters, waiting, publishing).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clusterstack::controller::run::{Handles, RunOptions, run_with};
use clusterstack::controller::runtime::context::Settings;
use clusterstack::controller::runtime::metrics::Metrics;
use clusterstack::controller::runtime::serve::Readiness;
use clusterstack::source::SourceSpec;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::ApiServer;
use super::fixtures::{capi_crds, load_yaml};
use super::github::{FakeAsset, FakeGitHub, FakeRelease};

/// The namespace of the operator tests' ClusterStacks.
pub const NS: &str = "stacks";
/// The namespace of their Clusters.
pub const WORKLOADS: &str = "workloads";
/// Cluster API's `apiVersion`.
pub const CC: &str = "cluster.x-k8s.io/v1beta1";
/// Our `apiVersion`.
pub const CS: &str = "clusterstack.x-k8s.io/v1alpha1";
/// How long [`wait_for`] waits.
pub const WAIT: Duration = Duration::from_secs(30);

/// How long a graceful stop may take.
const STOP: Duration = Duration::from_secs(30);

/// A server with `namespaces`, our CRDs and the CAPI CRDs (Cluster included).
pub async fn capi_server(namespaces: &[&str]) -> ApiServer {
    clusterstack::install_crypto_provider();
    let server = ApiServer::start().await;
    for ns in namespaces {
        server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    for crd in clusterstack::api::all_crds() {
        server.put_object(serde_json::to_value(&crd).expect("a CRD serialises"));
    }
    for crd in capi_crds().into_iter().chain(load_yaml("operator/clusters.cluster.x-k8s.io.yaml")) {
        server.put_object(serde_json::to_value(&crd).expect("a CRD serialises"));
    }
    server
}

/// A running operator; stopped (gracefully) on `stop` or when dropped.
pub struct Operator {
    token: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    pub metrics: Arc<Metrics>,
    pub readiness: Readiness,
}

impl Operator {
    pub fn start(server: &ApiServer, settings: Settings) -> Self {
        Self::start_with(server, settings, RunOptions::default())
    }

    pub fn start_with(server: &ApiServer, settings: Settings, options: RunOptions) -> Self {
        let token = CancellationToken::new();
        let handles = Handles { metrics: Arc::new(Metrics::new()), readiness: Readiness::default() };
        let (metrics, readiness) = (handles.metrics.clone(), handles.readiness.clone());
        let client = server.client();
        let t = token.clone();
        let task = tokio::spawn(async move {
            run_with(client, settings, options, t, handles).await.expect("operator runs");
        });
        Self { token, task: Some(task), metrics, readiness }
    }

    /// Kills the operator abruptly (a crash): reconciles in flight are dropped mid-way.
    pub async fn kill(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    pub async fn stop(mut self) {
        self.token.cancel();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(STOP, task).await.expect("operator stops in time").expect("operator task");
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// The repository's built releases (`releases/`).
pub fn releases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("releases")
}

/// A server with our CRDs, the CAPI CRDs (Cluster included) and the namespaces [`NS`] and
/// [`WORKLOADS`].
pub async fn server() -> ApiServer {
    capi_server(&[NS, WORKLOADS]).await
}

/// Operator settings for tests: 1 s polls, an hour between resyncs (so only a watch or a poll
/// explains a reaction), a short backoff.
pub fn settings(source: SourceSpec, cache: &Path) -> Settings {
    let mut s = Settings::new(source, cache);
    s.poll_interval = POLL;
    s.resync_interval = Duration::from_secs(3600);
    s.backoff.base = Duration::from_millis(100);
    s.backoff.cap = Duration::from_secs(1);
    s
}

/// A docker/ferrol/1.27 ClusterStack in `ns`.
pub fn stack_in(ns: &str, name: &str, versions: &[&str], auto_subscribe: bool, poll: &str) -> Value {
    json!({
        "apiVersion": CS, "kind": "ClusterStack",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27",
                 "channel": "stable", "versions": versions, "autoSubscribe": auto_subscribe, "pollInterval": poll}
    })
}

/// [`stack_in`] [`NS`], polling every second.
pub fn stack(name: &str, versions: &[&str], auto_subscribe: bool) -> Value {
    stack_in(NS, name, versions, auto_subscribe, "1s")
}

/// The ClusterStackRelease `tag` in `ns`.
pub fn release_in(server: &ApiServer, ns: &str, tag: &str) -> Option<Value> {
    server.get_object(CS, "ClusterStackRelease", Some(ns), tag)
}

/// The ClusterStackRelease `tag` in [`NS`].
pub fn release(server: &ApiServer, tag: &str) -> Option<Value> {
    release_in(server, NS, tag)
}

/// The names of every ClusterStackRelease, sorted.
pub fn release_names(server: &ApiServer) -> Vec<String> {
    let mut v: Vec<String> = server
        .list_objects(CS, "ClusterStackRelease")
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap_or_default().to_string())
        .collect();
    v.sort();
    v
}

/// The condition `type_` of an object's status.
pub fn condition(obj: &Value, type_: &str) -> Option<Value> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_).cloned()
}

/// Whether the ClusterStackRelease `tag` in `ns` is ready.
pub fn ready_in(server: &ApiServer, ns: &str, tag: &str) -> bool {
    release_in(server, ns, tag).is_some_and(|r| r["status"]["ready"] == true)
}

/// Whether the ClusterStackRelease `tag` in [`NS`] is ready.
pub fn ready(server: &ApiServer, tag: &str) -> bool {
    ready_in(server, NS, tag)
}

/// A Cluster in `namespace` of ClusterClass `class` (in [`NS`]).
pub fn cluster(name: &str, namespace: &str, class: &str) -> Value {
    json!({
        "apiVersion": CC, "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"topology": {"class": class, "classNamespace": NS, "version": "v1.27.5"}}
    })
}

/// Polls `check` every 20 ms until it holds; panics with `what` after `limit`. Returns how long
/// it took.
pub async fn wait_within(what: &str, limit: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let start = tokio::time::Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out ({limit:?}) waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

/// A "nothing happens" check: `check` must hold all through `window` (polled every 20 ms), and
/// `window` must be as long as the interval within which the thing checked would otherwise
/// happen; each caller says which interval it guards.
pub async fn holds_for(what: &str, window: Duration, mut check: impl FnMut() -> bool) {
    let start = tokio::time::Instant::now();
    loop {
        assert!(check(), "{what}: stopped holding {:?} into the {window:?} window", start.elapsed());
        if start.elapsed() >= window {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The poll interval of [`stack`]'s ClusterStacks and of [`settings`]: how often a stack's
/// releases are decided again without any other trigger.
pub const POLL: Duration = Duration::from_secs(1);

/// [`wait_within`] [`WAIT`].
pub async fn wait_for(what: &str, check: impl FnMut() -> bool) {
    wait_within(what, WAIT, check).await;
}

/// Publishes `releases/<tag>/` on the fake GitHub as a release of `acme/stacks`, every file an
/// asset; returns the assets' ids.
pub fn publish(fake: &FakeGitHub, tag: &str) -> Vec<u64> {
    publish_to(fake, "acme", "stacks", tag)
}

/// [`publish`] to the repository `owner/repo`.
pub fn publish_to(fake: &FakeGitHub, owner: &str, repo: &str, tag: &str) -> Vec<u64> {
    let mut release = FakeRelease::new(tag);
    let mut files: Vec<_> = std::fs::read_dir(releases_dir().join(tag)).unwrap().map(|f| f.unwrap().path()).collect();
    files.sort();
    for f in files {
        let name = f.file_name().unwrap().to_str().unwrap().to_string();
        release = release.asset(FakeAsset::new(&name, std::fs::read(&f).unwrap()));
    }
    fake.add_release(owner, repo, release)
}
