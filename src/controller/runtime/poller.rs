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
    latest: Option<Listing>,
    wake: Arc<Notify>,
}

impl Poller {
    fn interval(&self) -> Option<Duration> {
        self.subscribers.values().min().copied()
    }
}

/// Called with the subscribers to trigger after a poll.
pub type Notifier = Arc<dyn Fn(Vec<String>) + Send + Sync>;

/// The pollers of a process, by source cache key.
pub struct Pollers<S> {
    pollers: Arc<Mutex<HashMap<String, Poller>>>,
    notify: Notifier,
    _source: std::marker::PhantomData<fn() -> S>,
}

impl<S> std::fmt::Debug for Pollers<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pollers").field("sources", &lock(&self.pollers).len()).finish()
    }
}

impl<S: ReleaseSource + Clone + 'static> Pollers<S> {
    /// No pollers yet; `notify` is told which subscribers to trigger after a poll.
    pub fn new(notify: Notifier) -> Self {
        Self { pollers: Arc::default(), notify, _source: std::marker::PhantomData }
    }

    /// Subscribes `subscriber` to the poller of `key` (started on the first subscription) at
    /// `interval`; returns the poller's latest listing, `None` until its first poll ended (the
    /// subscriber is notified then).
    pub fn subscribe(&self, key: &str, source: &S, interval: Duration, subscriber: &str) -> Option<Listing> {
        let mut pollers = lock(&self.pollers);
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
            return p.latest.clone();
        }
        let wake = Arc::new(Notify::new());
        pollers.insert(
            key.to_string(),
            Poller {
                subscribers: HashMap::from([(subscriber.to_string(), interval)]),
                forced: HashSet::new(),
                latest: None,
                wake: wake.clone(),
            },
        );
        drop(pollers);
        tokio::spawn(run_poller(self.pollers.clone(), key.to_string(), source.clone(), wake, self.notify.clone()));
        None
    }

    /// Asks the poller of `key` to poll now; `subscriber` is notified when it has.
    pub fn poll_now(&self, key: &str, subscriber: &str) {
        if let Some(p) = lock(&self.pollers).get_mut(key) {
            p.forced.insert(subscriber.to_string());
            p.wake.notify_one();
        }
    }

    /// Removes `subscriber` from every poller; a poller without subscribers stops.
    pub fn unsubscribe(&self, subscriber: &str) {
        for p in lock(&self.pollers).values_mut() {
            if p.subscribers.remove(subscriber).is_some() {
                p.wake.notify_one();
            }
        }
    }

    /// The latest listing of `key`, if polled.
    pub fn latest(&self, key: &str) -> Option<Listing> {
        lock(&self.pollers).get(key).and_then(|p| p.latest.clone())
    }

    /// How many pollers run.
    pub fn len(&self) -> usize {
        lock(&self.pollers).len()
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
    pollers: Arc<Mutex<HashMap<String, Poller>>>,
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
                let mut map = lock(&pollers);
                let Some(p) = map.get(&key) else { return };
                let Some(interval) = p.interval() else {
                    map.remove(&key);
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
            let mut map = lock(&pollers);
            let Some(p) = map.get_mut(&key) else { return };
            let changed = p.latest.as_ref().is_none_or(|l| !l.same_releases(&listing));
            p.latest = Some(listing);
            let forced: Vec<String> = p.forced.drain().collect();
            if changed { p.subscribers.keys().cloned().collect() } else { forced }
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
    }

    impl ReleaseSource for Counting {
        fn name(&self) -> String {
            "test:repo".into()
        }
        async fn list(&self) -> Result<SourceListing, SourceError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
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
}
