//! Addon renders kept for reuse: the Clusters of one release whose addons render from the same
//! values get the same objects, so a fleet renders each addon once per distinct values, not once
//! per Cluster and pass.
//!
//! An entry is one addon's render, keyed by the release (its extracted bundle, asset digests,
//! Kubernetes version and limits: [`ReleaseKey`]), the addon and the digest of its values
//! ([`super::addons::values_digest`]). Only renders that drew on no randomness are kept
//! ([`super::addons::AddonRender::Rendered`]'s `shareable`): a generated key or password must not
//! go to two Clusters. The values are still rendered for every Cluster (in the worker, as any
//! release input): only an addon whose values digest the cache holds skips its chart.
//!
//! Bounded by the size of the documents the kept renders were read from (the parsed objects take
//! a few times that), least recently used first out. Entries are shared (`Arc`) with the passes
//! using them, so eviction never takes a render from under a pass.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::RenderedChart;

/// Everything besides an addon's values that its render depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReleaseKey(String);

impl ReleaseKey {
    /// The key of the addon bundle `bundle` (of the release whose assets have `digests`) rendered
    /// with `ctx`'s Kubernetes version and limits.
    pub fn new(bundle: &std::path::Path, digests: &[&str], ctx: &super::RenderContext) -> Self {
        Self(format!(
            "{}|{}|{}|{}|{}",
            bundle.display(),
            digests.join(","),
            ctx.kube_version.as_deref().unwrap_or_default(),
            ctx.limits.fuel,
            ctx.limits.max_output_bytes
        ))
    }
}

/// Counters of a cache's use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Addons whose render was reused.
    pub hits: u64,
    /// Addons rendered.
    pub renders: u64,
    /// Kept renders, and the size of their documents.
    pub entries: usize,
    pub bytes: usize,
}

/// Shareable addon renders, least recently used out past a budget.
pub struct RenderCache {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<(ReleaseKey, String, String), Entry>,
    clock: u64,
    stats: CacheStats,
}

struct Entry {
    chart: Arc<RenderedChart>,
    bytes: usize,
    used: u64,
}

/// The renders of one release a caller may reuse: by addon key and values digest.
pub type Held = HashMap<(String, String), Arc<RenderedChart>>;

impl RenderCache {
    /// A cache keeping renders read from at most `budget` bytes of documents (0: none).
    pub fn new(budget: usize) -> Self {
        Self { budget, inner: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        crate::util::lock(&self.inner)
    }

    /// The renders kept for `release`, held for the caller (eviction cannot take them now).
    pub fn held(&self, release: &ReleaseKey) -> Held {
        let inner = self.lock();
        inner
            .entries
            .iter()
            .filter(|((r, _, _), _)| r == release)
            .map(|((_, addon, values), e)| ((addon.clone(), values.clone()), e.chart.clone()))
            .collect()
    }

    /// Counts a reused render of `release`'s `addon` (keeping it in use).
    pub fn hit(&self, release: &ReleaseKey, addon: &str, values: &str) {
        let mut inner = self.lock();
        inner.clock += 1;
        let clock = inner.clock;
        inner.stats.hits += 1;
        if let Some(e) = inner.entries.get_mut(&(release.clone(), addon.to_string(), values.to_string())) {
            e.used = clock;
        }
    }

    /// Records a render; keeps it when `shareable` and within the budget.
    pub fn insert(
        &self,
        release: &ReleaseKey,
        addon: &str,
        values: &str,
        chart: Arc<RenderedChart>,
        shareable: bool,
        bytes: usize,
    ) {
        let mut inner = self.lock();
        inner.stats.renders += 1;
        if !shareable || bytes > self.budget {
            return;
        }
        inner.clock += 1;
        let used = inner.clock;
        inner.entries.insert((release.clone(), addon.to_string(), values.to_string()), Entry { chart, bytes, used });
        let mut total: usize = inner.entries.values().map(|e| e.bytes).sum();
        while total > self.budget {
            let Some(oldest) = inner.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else { break };
            if let Some(e) = inner.entries.remove(&oldest) {
                total -= e.bytes;
            }
        }
    }

    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats { entries: inner.entries.len(), bytes: inner.entries.values().map(|e| e.bytes).sum(), ..inner.stats }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(name: &str) -> Arc<RenderedChart> {
        Arc::new(RenderedChart {
            name: name.into(),
            objects: Vec::new(),
            unaccepted: Vec::new(),
            texts: Vec::new(),
            streamed: Vec::new(),
        })
    }

    #[test]
    fn shareable_renders_are_kept_per_release_within_the_budget() {
        let cache = RenderCache::new(100);
        let (r1, r2) = (ReleaseKey("r1".into()), ReleaseKey("r2".into()));
        cache.insert(&r1, "a", "v1", chart("a"), true, 40);
        cache.insert(&r1, "b", "v1", chart("b"), false, 10);
        cache.insert(&r2, "a", "v1", chart("a2"), true, 40);
        let held = cache.held(&r1);
        assert_eq!(held.len(), 1, "a render that drew randomness is not kept");
        assert_eq!(held[&("a".to_string(), "v1".to_string())].name, "a");
        assert_eq!(cache.held(&r2).len(), 1);
        // Over the budget, the least recently used goes: r1's, unless it was just reused.
        cache.hit(&r1, "a", "v1");
        cache.insert(&r2, "c", "v2", chart("c"), true, 40);
        assert_eq!(cache.held(&r1).len(), 1);
        assert_eq!(cache.held(&r2).len(), 1, "r2's a, the oldest, went");
        assert!(cache.held(&r2).contains_key(&("c".to_string(), "v2".to_string())));
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.renders, stats.entries, stats.bytes), (1, 4, 2, 80));
        // A render larger than the whole budget is never kept; a zero budget keeps nothing.
        cache.insert(&r1, "d", "v", chart("d"), true, 101);
        assert!(!cache.held(&r1).contains_key(&("d".to_string(), "v".to_string())));
        let none = RenderCache::new(0);
        none.insert(&r1, "a", "v1", chart("a"), true, 1);
        assert!(none.held(&r1).is_empty());
    }
}
