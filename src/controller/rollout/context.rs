//! The rollout controller's own state: its watch stores, and what it wrote but its stores may
//! not show yet. All of it is memory only and rebuilt after a restart: the status is the
//! rollout's memory (lesson 1), these only bridge the lag between a write and its watch event.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::runtime::reflector::Store;

use crate::api::ClusterStackRolloutStatus;
use crate::controller::runtime::backoff::Backoff;
use crate::controller::runtime::clusters::{CapiCluster, CapiVersion, ClusterKey};
use crate::controller::runtime::context::Context;
use crate::util::lock;

use super::class::ClassShape;
use super::view::AddonRecord;

/// How long a ClusterClass's shape is reused before they are read again.
const CLASS_TTL: Duration = Duration::from_secs(60);

/// What one write returned, kept until the store shows it: valid while the store still holds the
/// object at `stale_version`, the version the write was made on.
#[derive(Debug, Clone)]
pub struct Written<T> {
    pub stale_version: String,
    pub value: T,
}

/// A ClusterClass's shape and when it was read (`None`: not found).
type CachedClass = (Instant, Option<ClassShape>);

/// The rollout controller's context.
pub struct RolloutContext {
    pub client: Client,
    /// The operator's shared context: Events, metrics, the stack and release stores.
    pub shared: Arc<Context>,
    pub capi: CapiVersion,
    pub clusters: Store<CapiCluster>,
    pub addons: Store<AddonRecord>,
    pub backoff: Backoff,
    statuses: Mutex<HashMap<String, Written<ClusterStackRolloutStatus>>>,
    moved: Mutex<HashMap<ClusterKey, Written<CapiCluster>>>,
    classes: Mutex<HashMap<(String, String), CachedClass>>,
}

impl RolloutContext {
    pub fn new(
        shared: Arc<Context>,
        capi: CapiVersion,
        clusters: Store<CapiCluster>,
        addons: Store<AddonRecord>,
    ) -> Self {
        Self {
            client: shared.client.clone(),
            backoff: Backoff::new(shared.settings.backoff, shared.random.clone()),
            shared,
            capi,
            clusters,
            addons,
            statuses: Mutex::default(),
            moved: Mutex::default(),
            classes: Mutex::default(),
        }
    }

    /// The status last written for `key`, if the store still shows the object it was written on.
    pub fn written_status(&self, key: &str, resource_version: Option<&str>) -> Option<ClusterStackRolloutStatus> {
        let mut statuses = lock(&self.statuses);
        match statuses.get(key) {
            Some(w) if Some(w.stale_version.as_str()) == resource_version => Some(w.value.clone()),
            Some(_) => {
                statuses.remove(key);
                None
            }
            None => None,
        }
    }

    pub fn remember_status(&self, key: &str, stale_version: String, value: ClusterStackRolloutStatus) {
        lock(&self.statuses).insert(key.to_string(), Written { stale_version, value });
    }

    pub fn forget_rollout(&self, key: &str) {
        lock(&self.statuses).remove(key);
    }

    /// The Clusters as the store shows them, with the answers of our own moves where the store
    /// still shows the Cluster before the move.
    pub fn clusters(&self) -> Vec<Arc<CapiCluster>> {
        let mut moved = lock(&self.moved);
        let mut out = self.clusters.state();
        for c in &mut out {
            let key = c.key();
            if let Some(w) = moved.get(&key) {
                if c.metadata.resource_version.as_deref() == Some(w.stale_version.as_str()) {
                    *c = Arc::new(w.value.clone());
                } else {
                    moved.remove(&key);
                }
            }
        }
        out
    }

    pub fn remember_move(&self, key: ClusterKey, stale_version: String, value: CapiCluster) {
        lock(&self.moved).insert(key, Written { stale_version, value });
    }

    /// The cached shape of a ClusterClass (`Some(None)`: it was not found), if fresh.
    pub fn class_shape(&self, namespace: &str, name: &str) -> Option<Option<ClassShape>> {
        let classes = lock(&self.classes);
        let (at, vars) = classes.get(&(namespace.to_string(), name.to_string()))?;
        (at.elapsed() < CLASS_TTL).then(|| vars.clone())
    }

    pub fn remember_class(&self, namespace: &str, name: &str, shape: Option<ClassShape>) {
        lock(&self.classes).insert((namespace.to_string(), name.to_string()), (Instant::now(), shape));
    }
}
