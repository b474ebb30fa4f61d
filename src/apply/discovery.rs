//! A cached view of the server's API resources, so kinds resolve to real plurals and scopes.

use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::{ApiCapabilities, Discovery, Scope};
use std::time::{Duration, Instant};

use tokio::sync::RwLock;

/// A kind resolved through discovery.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The resource (with its real plural).
    pub resource: ApiResource,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
}

/// Discovery results cached until [`DiscoveryCache::refresh`].
pub struct DiscoveryCache {
    client: Client,
    /// The cached discovery and how many refreshes produced it (to avoid refreshing twice when
    /// several tasks miss the same kind at once).
    state: RwLock<(Option<Discovery>, u64)>,
    /// When discovery last ran; an unknown kind refreshes at most once per [`MISS_REFRESH_INTERVAL`].
    last_run: std::sync::Mutex<Option<Instant>>,
}

/// How often a lookup miss may re-run discovery (a kind that really is unknown must not cost a
/// discovery round per object).
const MISS_REFRESH_INTERVAL: Duration = Duration::from_secs(2);

impl DiscoveryCache {
    /// An empty cache; the first lookup runs discovery.
    pub fn new(client: Client) -> Self {
        Self { client, state: RwLock::new((None, 0)), last_run: std::sync::Mutex::new(None) }
    }

    /// Runs discovery again, unless another task did since `seen_generation`.
    async fn refresh_from(&self, seen_generation: u64) -> Result<u64, kube::Error> {
        let mut state = self.state.write().await;
        if state.1 != seen_generation && state.0.is_some() {
            return Ok(state.1);
        }
        // Aggregated discovery takes two requests; older servers only answer the classic form.
        let discovery = match Discovery::new(self.client.clone()).run_aggregated().await {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(error = %e, "aggregated discovery failed, falling back to per-group discovery");
                Discovery::new(self.client.clone()).run().await?
            }
        };
        state.0 = Some(discovery);
        *self.last_run.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        state.1 += 1;
        Ok(state.1)
    }

    /// Forces the next lookup to see the server's current resources (after applying CRDs).
    pub async fn refresh(&self) -> Result<(), kube::Error> {
        let generation = self.state.read().await.1;
        self.refresh_from(generation).await.map(|_| ())
    }

    fn lookup(discovery: &Discovery, gvk: &GroupVersionKind) -> Option<Resolved> {
        discovery.resolve_gvk(gvk).map(|(resource, caps): (ApiResource, ApiCapabilities)| Resolved {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        })
    }

    /// Resolves a kind; an unknown kind triggers one refresh before giving up with `None`.
    pub async fn resolve(&self, gvk: &GroupVersionKind) -> Result<Option<Resolved>, kube::Error> {
        let generation = {
            let state = self.state.read().await;
            if let Some(d) = &state.0
                && let Some(r) = Self::lookup(d, gvk)
            {
                return Ok(Some(r));
            }
            let recent = self
                .last_run
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some_and(|t| t.elapsed() < MISS_REFRESH_INTERVAL);
            if state.0.is_some() && recent {
                return Ok(None);
            }
            state.1
        };
        self.refresh_from(generation).await?;
        let state = self.state.read().await;
        Ok(state.0.as_ref().and_then(|d| Self::lookup(d, gvk)))
    }
}
