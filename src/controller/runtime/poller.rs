//! One poller per release repository, shared by every ClusterStack that reads it.
//!
//! A ClusterStack subscribes with its poll interval ([`Pollers::subscribe`]); the poller of the
//! source's cache key lists the source once per interval, **the smallest interval any subscriber
//! asked for** (so no stack sees new releases later than its own `pollInterval` promises), and
//! tells the subscribers when the listing changed. Whatever the number of stacks, a repository
//! costs one (conditional, ETag) request per interval. The choice against per-interval groups:
//! groups would cost one request per distinct interval for the same data; the smallest interval
//! costs at most what the most eager stack asked for anyway.
//!
//! A source with several `tokenSecretRef`s shares one poller (the first subscriber's source is
//! used): the listing is the same whoever asks.
//!
//! The latest listing of every source, by cache key, is kept here and only here: the pollers write
//! it, and so does a listing asked for on demand ([`Pollers::list`], the release and addon
//! controllers needing a release no poller has seen yet); both read it, so a listing one of them
//! made serves the other, and news found on demand triggers the poller's subscribers too.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::Notify;

use crate::source::{ListedRelease, ReleaseSource, SourceError};
use crate::util::lock;

/// How the last attempt to list the source went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    /// Listed; the plan was carried out.
    Listed,
    /// The source could not be listed; nothing was deleted.
    Unavailable { message: String, retry_at: Option<Timestamp> },
    /// The source's rate limit is exhausted until `until`; nothing was deleted.
    RateLimited { until: Timestamp },
    /// `spec.suspend` is true: nothing was polled or changed.
    Suspended,
}

/// The last listing of one source.
#[derive(Debug, Clone)]
pub struct Listing {
    /// When it was listed.
    pub at: Timestamp,
    /// The releases, or the failure.
    pub result: Result<Arc<Vec<ListedRelease>>, SyncOutcome>,
}

impl Listing {
    fn same_releases(&self, other: &Listing) -> bool {
        match (&self.result, &other.result) {
            (Ok(a), Ok(b)) => {
                a.len() == b.len()
                    && a.iter().zip(b.iter()).all(|(x, y)| x.tag == y.tag && x.assets.len() == y.assets.len())
            }
            (Err(a), Err(b)) => a == b,
            _ => false,
        }
    }
}

struct Poller {
    /// Subscribers (stack keys `namespace/name`) and the interval each asked for.
    subscribers: HashMap<String, Duration>,
    /// Subscribers waiting for a poll they forced.
    forced: HashSet<String>,
    wake: Arc<Notify>,
}

impl Poller {
    fn interval(&self) -> Option<Duration> {
        self.subscribers.values().min().copied()
    }
}

/// Called with the subscribers to trigger after a poll.
pub type Notifier = Arc<dyn Fn(Vec<String>) + Send + Sync>;

/// The pollers and the listings, under one lock (a listing is recorded and its subscribers read
/// in one step).
#[derive(Default)]
struct State {
    pollers: HashMap<String, Poller>,
    /// The latest listing of each source, by cache key, whoever made it.
    listings: HashMap<String, Listing>,
}

impl State {
    /// Records `listing` as the latest of `key`; returns the subscribers to trigger: every one
    /// when the releases changed, else (`take_forced`) those who forced this poll.
    fn record(&mut self, key: &str, listing: Listing, take_forced: bool) -> Vec<String> {
        let changed = self.listings.get(key).is_none_or(|l| !l.same_releases(&listing));
        self.listings.insert(key.to_string(), listing);
        let Some(p) = self.pollers.get_mut(key) else { return Vec::new() };
        let forced: Vec<String> = if take_forced { p.forced.drain().collect() } else { Vec::new() };
        if changed { p.subscribers.keys().cloned().collect() } else { forced }
    }
}

/// The pollers of a process, by source cache key, and the latest listing of each source.
pub struct Pollers<S> {
    state: Arc<Mutex<State>>,
    notify: Notifier,
    _source: std::marker::PhantomData<fn() -> S>,
}

impl<S> std::fmt::Debug for Pollers<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("Pollers")
            .field("sources", &state.pollers.len())
            .field("listings", &state.listings.len())
            .finish()
    }
}

impl<S: ReleaseSource + Clone + 'static> Pollers<S> {
    /// No pollers yet; `notify` is told which subscribers to trigger after a poll.
    pub fn new(notify: Notifier) -> Self {
        Self { state: Arc::default(), notify, _source: std::marker::PhantomData }
    }

    /// Subscribes `subscriber` to the poller of `key` (started on the first subscription) at
    /// `interval`; returns the source's latest listing, `None` until there is one (the subscriber
    /// is notified then).
    pub fn subscribe(&self, key: &str, source: &S, interval: Duration, subscriber: &str) -> Option<Listing> {
        let mut state = lock(&self.state);
        let State { pollers, listings } = &mut *state;
        // A stack that moved to another source leaves its old poller.
        for (k, p) in pollers.iter_mut() {
            if k != key {
                p.subscribers.remove(subscriber);
            }
        }
        if let Some(p) = pollers.get_mut(key) {
            let previous = p.subscribers.insert(subscriber.to_string(), interval);
            if previous.is_none_or(|d| d > interval) {
                // A shorter interval takes effect now, not after the current sleep.
                p.wake.notify_one();
            }
            return listings.get(key).cloned();
        }
        let wake = Arc::new(Notify::new());
        pollers.insert(
            key.to_string(),
            Poller {
                subscribers: HashMap::from([(subscriber.to_string(), interval)]),
                forced: HashSet::new(),
                wake: wake.clone(),
            },
        );
        // A listing made on demand before this poller existed is the subscriber's until the first
        // poll: if that poll finds nothing new, nobody is triggered.
        let latest = listings.get(key).cloned();
        drop(state);
        tokio::spawn(run_poller(self.state.clone(), key.to_string(), source.clone(), wake, self.notify.clone()));
        latest
    }

    /// Asks the poller of `key` to poll now; `subscriber` is notified when it has.
    pub fn poll_now(&self, key: &str, subscriber: &str) {
        if let Some(p) = lock(&self.state).pollers.get_mut(key) {
            p.forced.insert(subscriber.to_string());
            p.wake.notify_one();
        }
    }

    /// Removes `subscriber` from every poller; a poller without subscribers stops.
    pub fn unsubscribe(&self, subscriber: &str) {
        for p in lock(&self.state).pollers.values_mut() {
            if p.subscribers.remove(subscriber).is_some() {
                p.wake.notify_one();
            }
        }
    }

    /// The latest listing of `key`, by a poller or on demand, if any.
    pub fn latest(&self, key: &str) -> Option<Listing> {
        lock(&self.state).listings.get(key).cloned()
    }

    /// Lists `source` (of cache key `key`) on demand, unless its latest successful listing is
    /// younger than `fresh`: many users of one source send one request, not one each. A successful
    /// listing becomes the latest (and triggers the poller's subscribers when the releases
    /// changed); a failed one is only returned, so it never hides the last good listing.
    pub async fn list(&self, key: &str, source: &S, fresh: Duration) -> Listing {
        let now = Timestamp::now();
        if let Some(l) = lock(&self.state).listings.get(key)
            && l.result.is_ok()
            && now.duration_since(l.at).unsigned_abs() < fresh
        {
            return l.clone();
        }
        let listing = list(source).await;
        if listing.result.is_ok() {
            let to_notify = lock(&self.state).record(key, listing.clone(), false);
            if !to_notify.is_empty() {
                (self.notify)(to_notify);
            }
        }
        listing
    }

    /// How many pollers run.
    pub fn len(&self) -> usize {
        lock(&self.state).pollers.len()
    }

    /// Whether no poller runs.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

async fn list<S: ReleaseSource>(source: &S) -> Listing {
    let result = match source.list().await {
        Ok(listing) => Ok(Arc::new(listing.releases)),
        Err(SourceError::RateLimited { until, .. }) => Err(SyncOutcome::RateLimited { until }),
        Err(e) => Err(SyncOutcome::Unavailable { message: e.to_string(), retry_at: None }),
    };
    Listing { at: Timestamp::now(), result }
}

async fn run_poller<S: ReleaseSource>(
    state: Arc<Mutex<State>>,
    key: String,
    source: S,
    wake: Arc<Notify>,
    notify: Notifier,
) {
    let mut last_poll: Option<tokio::time::Instant> = None;
    loop {
        // Wait until the interval has passed since the last poll, or a forced poll.
        loop {
            let (interval, forced) = {
                let mut state = lock(&state);
                let Some(p) = state.pollers.get(&key) else { return };
                let Some(interval) = p.interval() else {
                    state.pollers.remove(&key);
                    tracing::debug!(source = %key, "no subscriber left: poller stopped");
                    return;
                };
                (interval, !p.forced.is_empty())
            };
            let due = last_poll.map_or(tokio::time::Instant::now(), |t| t + interval);
            if forced || tokio::time::Instant::now() >= due {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                () = wake.notified() => {}
            }
        }
        last_poll = Some(tokio::time::Instant::now());
        let listing = list(&source).await;
        let wait_until = match &listing.result {
            Err(SyncOutcome::RateLimited { until }) => Some(*until),
            _ => None,
        };
        let to_notify = {
            let mut state = lock(&state);
            if !state.pollers.contains_key(&key) {
                return;
            }
            state.record(&key, listing, true)
        };
        if !to_notify.is_empty() {
            notify(to_notify);
        }
        if let Some(until) = wait_until {
            // Rate limited: the next request waits for the reset, whatever the interval.
            let wait = until.duration_since(Timestamp::now());
            if wait.is_positive() {
                tokio::time::sleep(wait.unsigned_abs()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::ReleaseId;
    use crate::source::{AssetInfo, Listing as SourceListing};
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug, Clone, Default)]
    struct Counting {
        calls: Arc<AtomicUsize>,
        tags: Arc<Mutex<Vec<String>>>,
        fail: Arc<std::sync::atomic::AtomicBool>,
    }

    impl ReleaseSource for Counting {
        fn name(&self) -> String {
            "test:repo".into()
        }
        async fn list(&self) -> Result<SourceListing, SourceError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if self.fail.load(Ordering::SeqCst) {
                return Err(SourceError::Other("down".into()));
            }
            let releases = lock(&self.tags)
                .iter()
                .map(|t| ListedRelease {
                    id: ReleaseId::from_tag(t).unwrap(),
                    tag: t.clone(),
                    prerelease: false,
                    assets: Vec::new(),
                })
                .collect();
            Ok(SourceListing { releases, skipped: Vec::new() })
        }
        async fn download(
            &self,
            _: &ListedRelease,
            _: &AssetInfo,
            _: &Path,
            _: &dyn crate::source::Progress,
        ) -> Result<crate::source::DownloadedAsset, SourceError> {
            Err(SourceError::Other("not here".into()))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_request_per_interval_whatever_the_subscribers() {
        let notified = Arc::new(Mutex::new(Vec::<String>::new()));
        let n = notified.clone();
        let pollers: Pollers<Counting> = Pollers::new(Arc::new(move |keys| lock(&n).extend(keys)));
        let source = Counting::default();
        lock(&source.tags).push("docker-ferrol-1-27-v1".into());
        for i in 0..20 {
            let _ = pollers.subscribe("repo", &source, Duration::from_secs(60 + i), &format!("ns/s{i}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 1);
        assert_eq!(lock(&notified).len(), 20, "the first listing is news to everyone");
        tokio::time::sleep(Duration::from_secs(60 * 3)).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 4, "one per 60 s, the smallest interval");
        assert_eq!(lock(&notified).len(), 20, "nothing new, nobody triggered");
        lock(&source.tags).push("docker-ferrol-1-27-v2".into());
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(lock(&notified).len(), 40);
        // A forced poll notifies only who asked, when nothing changed.
        pollers.poll_now("repo", "ns/s3");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 6);
        assert_eq!(lock(&notified).last().map(String::as_str), Some("ns/s3"));
        for i in 0..20 {
            pollers.unsubscribe(&format!("ns/s{i}"));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(pollers.is_empty());
    }

    fn tags(listing: &Listing) -> Vec<String> {
        listing.result.as_ref().map(|l| l.iter().map(|r| r.tag.clone()).collect()).unwrap_or_default()
    }

    #[tokio::test(start_paused = true)]
    async fn a_polled_listing_serves_an_on_demand_list() {
        let pollers: Pollers<Counting> = Pollers::new(Arc::new(|_| {}));
        let source = Counting::default();
        lock(&source.tags).push("docker-ferrol-1-27-v1".into());
        assert!(pollers.subscribe("repo", &source, Duration::from_secs(300), "ns/stack").is_none());
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 1);
        // The release controller asks within its freshness: the poller's listing, no request.
        let listed = pollers.list("repo", &source, Duration::from_secs(60)).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 1);
        assert_eq!(tags(&listed), ["docker-ferrol-1-27-v1"]);
        // Asked for a listing fresher than any (`Duration::ZERO`): one request.
        let _ = pollers.list("repo", &source, Duration::ZERO).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_on_demand_listing_serves_the_pollers_users_and_its_news_triggers_them() {
        let notified = Arc::new(Mutex::new(Vec::<String>::new()));
        let n = notified.clone();
        let pollers: Pollers<Counting> = Pollers::new(Arc::new(move |keys| lock(&n).extend(keys)));
        let source = Counting::default();
        lock(&source.tags).push("docker-ferrol-1-27-v1".into());
        let listed = pollers.list("repo", &source, Duration::ZERO).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 1);
        // One cache: what was listed on demand is the source's latest, for a new subscriber too.
        assert_eq!(pollers.latest("repo").as_ref().map(tags), Some(tags(&listed)));
        let first = pollers.subscribe("repo", &source, Duration::from_secs(300), "ns/stack");
        assert_eq!(first.as_ref().map(tags), Some(tags(&listed)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 2, "the poller's own first poll");
        assert!(lock(&notified).is_empty(), "nothing new since the on-demand listing");
        // A release found on demand between two polls triggers the subscriber now...
        lock(&source.tags).push("docker-ferrol-1-27-v2".into());
        let _ = pollers.list("repo", &source, Duration::ZERO).await;
        assert_eq!(*lock(&notified), ["ns/stack"]);
        assert_eq!(pollers.latest("repo").as_ref().map(tags).map(|t| t.len()), Some(2));
        // ...and only once: the next poll finds nothing new.
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert_eq!(source.calls.load(Ordering::SeqCst), 4);
        assert_eq!(lock(&notified).len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_on_demand_listing_keeps_the_last_good_one() {
        let pollers: Pollers<Counting> = Pollers::new(Arc::new(|_| {}));
        let source = Counting::default();
        lock(&source.tags).push("docker-ferrol-1-27-v1".into());
        let _ = pollers.list("repo", &source, Duration::ZERO).await;
        source.fail.store(true, Ordering::SeqCst);
        let failed = pollers.list("repo", &source, Duration::ZERO).await;
        assert!(failed.result.is_err());
        assert_eq!(pollers.latest("repo").as_ref().map(tags), Some(vec!["docker-ferrol-1-27-v1".to_string()]));
    }
}
