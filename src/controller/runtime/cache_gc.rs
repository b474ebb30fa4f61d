//! Keeps the cache volume bounded: a release that no ClusterStackRelease (in any namespace)
//! references any more is removed from the cache once it has been unreferenced for the grace
//! period (`--cache-grace`, 1 h by default), so a release deleted and soon wanted again is not
//! downloaded twice. `cache_bytes` shows the size after each pass. The pass runs on the
//! ClusterStackRelease store (no API request) once a minute.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;

use crate::source::cache::CacheEntry;

use super::context::Context;

/// How often the cache is looked at.
pub const GC_INTERVAL: Duration = Duration::from_secs(60);

/// The cache entries to remove now: unreferenced by any tag in `referenced`, and unreferenced
/// since at least `grace` (`first_unreferenced` remembers since when; updated here).
pub fn due_for_removal(
    entries: &[CacheEntry],
    referenced: &HashSet<String>,
    first_unreferenced: &mut HashMap<(String, String), Instant>,
    grace: Duration,
    now: Instant,
) -> Vec<CacheEntry> {
    let mut due = Vec::new();
    let present: HashSet<(String, String)> = entries.iter().map(|e| (e.source_key.clone(), e.tag.clone())).collect();
    first_unreferenced.retain(|k, _| present.contains(k) && !referenced.contains(&k.1));
    for e in entries {
        if referenced.contains(&e.tag) {
            continue;
        }
        let since = *first_unreferenced.entry((e.source_key.clone(), e.tag.clone())).or_insert(now);
        if now.duration_since(since) >= grace {
            due.push(e.clone());
        }
    }
    due
}

/// Runs the collector until the watches stop.
pub fn start(ctx: &Arc<Context>) {
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(GC_INTERVAL.min(ctx.settings.cache_grace.max(Duration::from_secs(1))));
        let mut first_unreferenced = HashMap::new();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = ctx.watches.stop.cancelled() => return,
            }
            pass(&ctx, &mut first_unreferenced).await;
        }
    });
}

/// One pass: remove what is due, then publish the size.
pub async fn pass(ctx: &Context, first_unreferenced: &mut HashMap<(String, String), Instant>) {
    // Only a synced store may say "no longer referenced".
    let Some(store) = ctx.watches.releases() else { return };
    // `wait_until_ready` wakes only the last task that polled it (the controller polls it too):
    // ask briefly, and skip this pass when the store is not synced.
    if !matches!(tokio::time::timeout(Duration::from_millis(200), store.wait_until_ready()).await, Ok(Ok(()))) {
        return;
    }
    // By tag, in any namespace and any source: a release still used anywhere stays.
    let referenced: HashSet<String> = store.state().iter().map(|r| r.name_any()).collect();
    let root = ctx.sources.cache.root().to_path_buf();
    let Ok(entries) = tokio::task::spawn_blocking(move || crate::source::cache::entries_under(&root)).await else {
        return;
    };
    let due = due_for_removal(&entries, &referenced, first_unreferenced, ctx.settings.cache_grace, Instant::now());
    let mut by_source: HashMap<String, Vec<String>> = HashMap::new();
    for e in &entries {
        if !due.contains(e) {
            by_source.entry(e.source_key.clone()).or_default().push(e.tag.clone());
        }
    }
    let sources: HashSet<&String> = due.iter().map(|e| &e.source_key).collect();
    for source in sources {
        let keep = by_source.get(source).cloned().unwrap_or_default();
        match ctx.sources.cache.prune(source, &keep).await {
            Ok(removed) => {
                for tag in removed {
                    tracing::info!(source = %source, tag, "removed an unreferenced release from the cache");
                    first_unreferenced.remove(&(source.clone(), tag));
                }
            }
            Err(e) => tracing::warn!(source = %source, error = %e, "pruning the cache failed"),
        }
    }
    let bytes: u64 = entries.iter().filter(|e| !due.contains(e)).map(|e| e.bytes).sum();
    ctx.metrics.cache_bytes(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tag: &str) -> CacheEntry {
        CacheEntry { source_key: "github/acme/stacks".into(), tag: tag.into(), bytes: 10 }
    }

    #[test]
    fn removed_only_after_the_grace_period_and_never_while_referenced() {
        let entries = vec![entry("docker-ferrol-1-27-v1"), entry("docker-ferrol-1-27-v2")];
        let mut since = HashMap::new();
        let grace = Duration::from_secs(3600);
        let t0 = Instant::now();
        let referenced: HashSet<String> = ["docker-ferrol-1-27-v2".to_string()].into();
        assert!(due_for_removal(&entries, &referenced, &mut since, grace, t0).is_empty());
        let later = t0 + grace;
        let due = due_for_removal(&entries, &referenced, &mut since, grace, later);
        assert_eq!(due, vec![entry("docker-ferrol-1-27-v1")]);
        // Referenced again before the grace period ended: the clock restarts.
        let both: HashSet<String> = ["docker-ferrol-1-27-v1".into(), "docker-ferrol-1-27-v2".into()].into();
        assert!(due_for_removal(&entries, &both, &mut since, grace, later).is_empty());
        assert!(due_for_removal(&entries, &referenced, &mut since, grace, later + Duration::from_secs(1)).is_empty());
    }
}
