//! A stand-in for Cluster API's topology controller on the API server double: when a Cluster's
//! `spec.topology` class or version changes it reports `TopologyReconciled` False (with
//! `observedGeneration` caught up), then after `delay` `TopologyReconciled` True and `Ready` True
//! — or `Ready` False for Clusters labelled `test.clusterstack.x-k8s.io/fail: "true"` once they
//! left their first class. It records when it saw each move and when each Cluster settled.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::ApiServer;

/// The label that makes a Cluster unhealthy on any class but its first.
pub const FAIL_LABEL: &str = "test.clusterstack.x-k8s.io/fail";

/// What the stand-in saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A change of class or version: `(cluster, class, version)`.
    Moved(String, String, String),
    /// Reported settled: `(cluster, ready)`.
    Settled(String, bool),
}

/// The running stand-in; stops when dropped.
pub struct Topology {
    pub log: Arc<Mutex<Vec<(Instant, Seen)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Tracked {
    first_class: String,
    class: String,
    version: String,
    fails: bool,
    generation: i64,
    settle_at: Option<Instant>,
}

fn topology_of(c: &Value) -> (String, String) {
    let t = &c["spec"]["topology"];
    let class = t["classRef"]["name"].as_str().or(t["class"].as_str()).unwrap_or_default().to_string();
    (class, t["version"].as_str().unwrap_or_default().to_string())
}

fn conditions(topology: bool, ready: bool, reason: &str) -> Value {
    let status = |b: bool| if b { "True" } else { "False" };
    let now = "2026-01-01T00:00:00Z";
    json!([
        {"type": "Ready", "status": status(ready), "reason": if ready { "" } else { reason }, "lastTransitionTime": now},
        {"type": "TopologyReconciled", "status": status(topology), "reason": if topology { "" } else { "ClusterUpgradePending" }, "lastTransitionTime": now},
    ])
}

impl Topology {
    /// Starts reacting to the v1beta1 Clusters of `server`; `delay` is how long a change takes.
    pub fn start(server: &ApiServer, delay: Duration) -> Self {
        let client = server.client();
        let log: Arc<Mutex<Vec<(Instant, Seen)>>> = Arc::default();
        let out = log.clone();
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "Cluster"),
            "clusters",
        );
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        // A watch, not a poll: every version of every Cluster is seen in order, so a Cluster moved
        // right after its creation still shows its first class (a poll could miss it).
        let events = kube::runtime::watcher(all, kube::runtime::watcher::Config::default());
        let task = tokio::spawn(async move {
            use futures::StreamExt;
            let mut tracked: BTreeMap<(String, String), Tracked> = BTreeMap::new();
            let mut events = std::pin::pin!(kube::runtime::WatchStreamExt::applied_objects(events));
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                let seen = tokio::select! {
                    obj = events.next() => match obj {
                        Some(Ok(obj)) => Some(obj),
                        Some(Err(_)) => continue,
                        None => return,
                    },
                    _ = tick.tick() => None,
                };
                let now = Instant::now();
                if let Some(obj) = seen {
                    let Ok(c) = serde_json::to_value(&obj) else { continue };
                    let ns = c["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
                    let name = c["metadata"]["name"].as_str().unwrap_or_default().to_string();
                    let generation = c["metadata"]["generation"].as_i64().unwrap_or(1);
                    let (class, version) = topology_of(&c);
                    let t = tracked.entry((ns.clone(), name.clone())).or_insert_with(|| Tracked {
                        first_class: class.clone(),
                        class: class.clone(),
                        version: version.clone(),
                        fails: false,
                        generation,
                        settle_at: None,
                    });
                    t.fails = c["metadata"]["labels"][FAIL_LABEL] == "true";
                    t.generation = generation;
                    if t.class != class || t.version != version {
                        t.class = class.clone();
                        t.version = version.clone();
                        t.settle_at = Some(now + delay);
                        out.lock().unwrap().push((now, Seen::Moved(name.clone(), class.clone(), version.clone())));
                        // In the background: the next event need not wait for this round trip.
                        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
                        let status = json!({"status": {"observedGeneration": generation, "conditions": conditions(false, true, "")}});
                        tokio::spawn(async move {
                            let _ = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await;
                        });
                    }
                    continue;
                }
                // Every Cluster due settles at once, as many topology workers would.
                let due: Vec<_> = tracked
                    .iter()
                    .filter(|(_, t)| t.settle_at.is_some_and(|at| at <= now))
                    .map(|((ns, name), t)| {
                        (ns.clone(), name.clone(), !(t.fails && t.class != t.first_class), t.generation)
                    })
                    .collect();
                let settles = due.into_iter().map(|(ns, name, ready, generation)| {
                    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
                    async move {
                        let status = json!({"status": {"observedGeneration": generation, "conditions": conditions(true, ready, "ControlPlaneUnhealthy")}});
                        let done = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.is_ok();
                        (ns, name, ready, done)
                    }
                });
                for (ns, name, ready, done) in futures::future::join_all(settles).await {
                    if let (true, Some(t)) = (done, tracked.get_mut(&(ns, name.clone()))) {
                        t.settle_at = None;
                        out.lock().unwrap().push((now, Seen::Settled(name, ready)));
                    }
                }
            }
        });
        Self { log, task }
    }

    pub fn seen(&self) -> Vec<(Instant, Seen)> {
        self.log.lock().unwrap().clone()
    }
}
