//! The operator's one watch of CAPI Clusters (the newest served of v1beta2/v1beta1; none served is
//! fine). It keeps one store of trimmed, slimmed [`CapiCluster`]s, answers which Clusters use
//! which release's ClusterClass from it ([`ClusterFeed::usages_in`]), triggers the release and
//! the stacks of a class when a Cluster starts or stops using it, and tells each subscribed
//! controller (the ClusterAddon controller, the rollout controller) of the changes it asked for,
//! as object references the controller looks up in that same store.
//!
//! One watch instead of one per reader: with thousands of Clusters each list, store and
//! per-object cache costs megabytes, and every start lists every Cluster once per watch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::TryStreamExt;
use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use super::clusters::{CapiCluster, CapiVersion, ClassUsage, class_namespace_of, class_usage};
use super::context::Context;
use super::watch::slim;
use crate::util::lock;

/// Which changes of a Cluster a subscriber is told of: the Cluster as the store held it before
/// (`None`: new to the store), and as it is now.
pub type Wants = fn(Option<&CapiCluster>, &CapiCluster) -> bool;

/// A subscriber's stream of Clusters that changed as it wants.
pub type ClusterTriggers = UnboundedReceiver<ObjectRef<CapiCluster>>;

/// Whether Cluster API is served, and the store of its Clusters when it is.
#[derive(Clone)]
pub enum ClusterApi {
    NotServed,
    Served { version: CapiVersion, store: Store<CapiCluster> },
}

/// The subscriptions and the store of the one Cluster watch (`Watches::cluster_feed` in the [`Context`]).
pub struct ClusterFeed {
    subscribers: Mutex<Vec<(Wants, UnboundedSender<ObjectRef<CapiCluster>>)>>,
    /// `None` until discovery has answered.
    api: tokio::sync::watch::Sender<Option<ClusterApi>>,
    /// The stored Clusters by the namespace of their class: every stack and release pass asks
    /// for one namespace's usages, and a scan of the whole store (a copy of thousands of `Arc`s
    /// each time) was most of the operator's CPU in a cold start with 5,000 Clusters.
    by_class_namespace: Mutex<HashMap<String, Vec<Arc<CapiCluster>>>>,
}

impl Default for ClusterFeed {
    fn default() -> Self {
        Self {
            subscribers: Mutex::default(),
            api: tokio::sync::watch::Sender::new(None),
            by_class_namespace: Mutex::default(),
        }
    }
}

impl ClusterFeed {
    /// Subscribes to the changes `wants` selects. Subscribe before [`start_clusters`]: a
    /// subscriber is told of what happens after it subscribed (the first list included).
    pub fn subscribe(&self, wants: Wants) -> ClusterTriggers {
        let (tx, rx) = unbounded();
        lock(&self.subscribers).push((wants, tx));
        rx
    }

    /// The served version and the store of Clusters, once discovery has answered; `None` when
    /// Cluster API is not served.
    pub async fn served(&self) -> Option<(CapiVersion, Store<CapiCluster>)> {
        let mut api = self.api.subscribe();
        let answer = api.wait_for(Option::is_some).await.ok()?.clone();
        match answer {
            Some(ClusterApi::Served { version, store }) => Some((version, store)),
            Some(ClusterApi::NotServed) | None => None,
        }
    }

    /// The class usages of the Clusters whose class lives in `class_namespace`, from the store
    /// (none when Cluster API is not served or not discovered yet). The namespace is compared
    /// before any class name is parsed: with thousands of Clusters this runs for every stack
    /// and release pass.
    pub fn usages_in(&self, class_namespace: &str) -> Vec<ClassUsage> {
        let index = lock(&self.by_class_namespace);
        index
            .get(class_namespace)
            .map(|clusters| clusters.iter().filter_map(|c| class_usage(c)).collect())
            .unwrap_or_default()
    }

    /// Files the Cluster `new` (as the store holds it now; `None`: gone) in the index by class
    /// namespace, in place of `old` (as the store held it before).
    fn index(&self, old: Option<&CapiCluster>, new: Option<Arc<CapiCluster>>) {
        let mut index = lock(&self.by_class_namespace);
        let same = |a: &CapiCluster, b: &CapiCluster| {
            a.metadata.name == b.metadata.name && a.metadata.namespace == b.metadata.namespace
        };
        if let Some(old) = old
            && let Some(ns) = class_namespace_of(old)
            && let Some(clusters) = index.get_mut(ns)
        {
            clusters.retain(|c| !same(c, old));
            if clusters.is_empty() {
                index.remove(ns);
            }
        }
        if let Some(new) = new
            && let Some(ns) = class_namespace_of(&new)
        {
            let clusters = index.entry(ns.to_string()).or_default();
            clusters.retain(|c| !same(c, &new));
            clusters.push(new);
        }
    }

    /// Rebuilds the index from the whole store (after a list).
    fn index_all(&self, store: &Store<CapiCluster>) {
        let mut index: HashMap<String, Vec<Arc<CapiCluster>>> = HashMap::new();
        for c in store.state() {
            if let Some(ns) = class_namespace_of(&c) {
                index.entry(ns.to_string()).or_default().push(c.clone());
            }
        }
        *lock(&self.by_class_namespace) = index;
    }

    fn notify(&self, old: Option<&CapiCluster>, new: &CapiCluster, version: CapiVersion) {
        let mut subscribers = lock(&self.subscribers);
        // A subscriber gone (its controller stopped) is forgotten.
        subscribers.retain(|(wants, tx)| {
            if !wants(old, new) {
                return !tx.is_closed();
            }
            let reference = ObjectRef::new_with(new.metadata.name.as_deref().unwrap_or_default(), version)
                .within(new.metadata.namespace.as_deref().unwrap_or_default());
            tx.unbounded_send(reference).is_ok()
        });
    }
}

/// Starts the one Cluster watch: discovers the newest served Cluster version, or none (then every
/// answer is "not in use", the usage index counts as synced, and the subscribers hear nothing).
pub fn start_clusters(ctx: &Arc<Context>) {
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let served = tokio::select! {
            v = served_cluster_version(&ctx) => v,
            () = ctx.watches.stop.cancelled() => return,
        };
        let feed = &ctx.watches.cluster_feed;
        let Some(version) = served else {
            tracing::info!("Cluster API is not installed: no Cluster uses any release");
            feed.api.send_replace(Some(ClusterApi::NotServed));
            ctx.watches.mark_clusters_synced();
            return;
        };
        let mut writer = Writer::<CapiCluster>::new(version);
        let store = writer.as_reader();
        feed.api.send_replace(Some(ClusterApi::Served { version, store: store.clone() }));
        let api: Api<CapiCluster> = Api::all_with(ctx.client.clone(), &version);
        let stream = watcher(api, watcher::Config::default())
            .modify(move |c: &mut CapiCluster| {
                slim(c);
                // The version watched, whatever an item says (list items may omit `apiVersion`).
                c.version = version;
            })
            .default_backoff();
        futures::pin_mut!(stream);
        // Usages that changed in a re-list, told when it is done (until then the store shows the
        // Clusters as they were before the watch was lost).
        let mut relisted: Vec<ClassUsage> = Vec::new();
        let mut synced = false;
        loop {
            let event = tokio::select! {
                e = stream.try_next() => e,
                () = ctx.watches.stop.cancelled() => return,
            };
            let event = match event {
                Ok(Some(event)) => event,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "the Cluster watch failed; retrying");
                    continue;
                }
            };
            // The Cluster as the store held it, then the store updated, then the subscribers
            // told: a pass they start finds the Cluster as it is now (an initial list's Clusters
            // once the list is done: a controller runs nothing before its store is ready).
            let old = match &event {
                watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) | watcher::Event::Delete(obj) => {
                    store.get(&ObjectRef::from_obj_with(obj, version))
                }
                _ => None,
            };
            // A re-list replaces the store: what it held before, to find the Clusters gone.
            let before_relist = (synced && matches!(event, watcher::Event::InitDone)).then(|| store.state());
            writer.apply_watcher_event(&event);
            match event {
                watcher::Event::Init => relisted.clear(),
                watcher::Event::InitApply(obj) => {
                    if synced {
                        let (was, is) = (old.as_deref().and_then(class_usage), class_usage(&obj));
                        if was != is {
                            relisted.extend(was.into_iter().chain(is));
                        }
                    }
                    feed.notify(old.as_deref(), &obj, version);
                }
                watcher::Event::InitDone => {
                    feed.index_all(&store);
                    if synced {
                        // Clusters gone while the watch was down.
                        for c in before_relist.unwrap_or_default() {
                            if store.get(&ObjectRef::from_obj_with(&*c, version)).is_none() {
                                relisted.extend(class_usage(&c));
                            }
                        }
                    } else {
                        // The first list: every usage is new.
                        relisted.extend(store.state().iter().filter_map(|c| class_usage(c)));
                    }
                    synced = true;
                    ctx.watches.mark_clusters_synced();
                    ctx.watches.usages_changed(&relisted);
                    relisted = Vec::new();
                }
                watcher::Event::Apply(obj) => {
                    feed.index(old.as_deref(), store.get(&ObjectRef::from_obj_with(&obj, version)));
                    let (was, is) = (old.as_deref().and_then(class_usage), class_usage(&obj));
                    if was != is {
                        ctx.watches.usages_changed(&[was, is].into_iter().flatten().collect::<Vec<_>>());
                    }
                    feed.notify(old.as_deref(), &obj, version);
                }
                watcher::Event::Delete(obj) => {
                    feed.index(old.as_deref().or(Some(&obj)), None);
                    if let Some(usage) = class_usage(&obj) {
                        ctx.watches.usages_changed(&[usage]);
                    }
                }
            }
        }
    });
}

/// The newest Cluster API version served, `None` when none is. A failed discovery is asked again
/// (with the controllers' backoff), never read as "not installed": an index wrongly empty and
/// synced would let a plan delete releases in use, and an addon controller that gave up would
/// never run.
pub async fn served_cluster_version(ctx: &Context) -> Option<CapiVersion> {
    let backoff = super::backoff::Backoff::new(ctx.settings.backoff, ctx.random.clone());
    loop {
        match first_served(ctx).await {
            Ok(version) => return version,
            Err(e) => {
                let delay = backoff.failure("capi");
                tracing::warn!(error = %e, retry_in = ?delay, "discovering CAPI Clusters failed");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

async fn first_served(ctx: &Context) -> Result<Option<CapiVersion>, kube::Error> {
    for version in CapiVersion::ALL {
        if ctx.applier.discovery().resolve(&version.gvk()).await?.is_some() {
            return Ok(Some(version));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use serde_json::json;

    fn cluster(ns: &str, name: &str, class: &str, class_ns: Option<&str>) -> CapiCluster {
        let mut topology = json!({"class": class, "version": "v1.27.3"});
        if let Some(cns) = class_ns {
            topology["classNamespace"] = json!(cns);
        }
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": name, "namespace": ns, "generation": 1},
            "spec": {"topology": topology}
        }))
        .unwrap()
    }

    fn served(feed: &ClusterFeed, clusters: &[CapiCluster]) {
        let mut writer = Writer::<CapiCluster>::new(CapiVersion::V1beta1);
        writer.apply_watcher_event(&watcher::Event::Init);
        for c in clusters {
            writer.apply_watcher_event(&watcher::Event::InitApply(c.clone()));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let store = writer.as_reader();
        feed.index_all(&store);
        feed.api.send_replace(Some(ClusterApi::Served { version: CapiVersion::V1beta1, store }));
    }

    #[test]
    fn usages_come_from_the_store_by_class_namespace() {
        let feed = ClusterFeed::default();
        assert!(feed.usages_in("stacks").is_empty(), "nothing before discovery");
        served(
            &feed,
            &[
                cluster("team-a", "c1", "docker-ferrol-1-27-v2", Some("stacks")),
                cluster("stacks", "c2", "docker-ferrol-1-27-v3", None),
                // Its class lives in its own namespace.
                cluster("team-b", "c3", "docker-ferrol-1-27-v2", None),
                cluster("stacks", "c4", "not-a-stack-class", None),
            ],
        );
        let mut names: Vec<String> = feed.usages_in("stacks").iter().map(|u| u.cluster.to_string()).collect();
        names.sort();
        assert_eq!(names, ["stacks/c2", "team-a/c1"]);
        assert_eq!(feed.usages_in("team-b").len(), 1);
        assert!(feed.usages_in("elsewhere").is_empty());
    }

    #[test]
    fn the_index_follows_a_cluster_moving_class_namespace_and_going() {
        let feed = ClusterFeed::default();
        let tags = |usages: Vec<ClassUsage>| -> Vec<String> {
            usages.iter().map(|u| format!("{} {}", u.cluster, u.class.tag())).collect()
        };
        let before = cluster("team-a", "c1", "docker-ferrol-1-27-v2", Some("stacks"));
        served(&feed, &[before.clone(), cluster("team-a", "c2", "docker-ferrol-1-27-v2", Some("stacks"))]);
        assert_eq!(tags(feed.usages_in("stacks")).len(), 2);
        // c1's class now lives in its own namespace: filed there, and no longer under `stacks`.
        let moved = Arc::new(cluster("team-a", "c1", "docker-ferrol-1-27-v3", None));
        feed.index(Some(&before), Some(moved.clone()));
        assert_eq!(tags(feed.usages_in("stacks")), ["team-a/c2 docker-ferrol-1-27-v2"]);
        assert_eq!(tags(feed.usages_in("team-a")), ["team-a/c1 docker-ferrol-1-27-v3"]);
        // A change in place replaces the stored Cluster, never adds a second.
        let upgraded = Arc::new(cluster("team-a", "c1", "docker-ferrol-1-27-v4", None));
        feed.index(Some(&moved), Some(upgraded.clone()));
        assert_eq!(tags(feed.usages_in("team-a")), ["team-a/c1 docker-ferrol-1-27-v4"]);
        feed.index(Some(&upgraded), None);
        assert!(feed.usages_in("team-a").is_empty());
        assert_eq!(lock(&feed.by_class_namespace).len(), 1, "an emptied namespace is dropped");
    }

    #[tokio::test]
    async fn not_served_answers_none_and_no_usages() {
        let feed = ClusterFeed::default();
        feed.api.send_replace(Some(ClusterApi::NotServed));
        assert!(feed.served().await.is_none());
        assert!(feed.usages_in("stacks").is_empty());
    }

    #[tokio::test]
    async fn subscribers_hear_what_they_want_and_gone_ones_are_dropped() {
        let feed = ClusterFeed::default();
        let mut everything = feed.subscribe(|_, _| true);
        let mut new_only = feed.subscribe(|old, _| old.is_none());
        let dropped = feed.subscribe(|_, _| true);
        drop(dropped);
        let c = cluster("team-a", "c1", "docker-ferrol-1-27-v2", None);
        feed.notify(None, &c, CapiVersion::V1beta1);
        feed.notify(Some(&c), &c, CapiVersion::V1beta1);
        assert_eq!(lock(&feed.subscribers).len(), 2, "the closed subscriber is forgotten");
        let first = everything.next().await.unwrap();
        assert_eq!((first.name.as_str(), first.namespace.as_deref()), ("c1", Some("team-a")));
        assert_eq!(first.dyntype, CapiVersion::V1beta1);
        assert!(everything.next().await.is_some());
        assert!(new_only.next().await.is_some());
        assert!(new_only.try_recv().is_err(), "the change of a known Cluster is not wanted");
    }
}
