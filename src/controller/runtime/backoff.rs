//! Per-object exponential backoff, and jittered intervals for periodic polls.
//!
//! kube-runtime's `error_policy` is not told about successes, so the failure
//! count lives here: the reconciler calls [`Backoff::success`] when a pass
//! succeeds and the error policy asks [`Backoff::failure`] for the delay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A source of uniform random numbers in `[0, 1)`; injected so tests are deterministic.
pub type RandomSource = Arc<dyn Fn() -> f64 + Send + Sync>;

/// The thread-local generator of `rand`.
pub fn thread_random() -> RandomSource {
    Arc::new(rand::random::<f64>)
}

/// Spreads `interval` by up to `±jitter` (a fraction, e.g. `0.1` = 10%), so
/// many objects polled at the same interval do not all fire together.
pub fn jittered(interval: Duration, jitter: f64, random: &RandomSource) -> Duration {
    let jitter = jitter.clamp(0.0, 1.0);
    let factor = 1.0 + jitter * (2.0 * random().clamp(0.0, 1.0) - 1.0);
    interval.mul_f64(factor.max(0.0))
}

/// Parses `spec.pollInterval` (`30s`, `5m`, `1h30m`); unset means `default`.
pub fn poll_interval(value: Option<&str>, default: Duration) -> Result<Duration, humantime::DurationError> {
    match value {
        None => Ok(default),
        Some(v) => humantime::parse_duration(v),
    }
}

/// Settings of a [`Backoff`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// Delay after the first failure.
    pub base: Duration,
    /// Upper bound of any delay (before jitter).
    pub cap: Duration,
    /// Fraction of the delay added or removed at random.
    pub jitter: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self { base: Duration::from_secs(5), cap: Duration::from_secs(300), jitter: 0.1 }
    }
}

/// Failure counts per object key (e.g. `namespace/name`), with exponential delays.
#[derive(Clone)]
pub struct Backoff {
    config: BackoffConfig,
    random: RandomSource,
    failures: Arc<Mutex<HashMap<String, u32>>>,
}

impl std::fmt::Debug for Backoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backoff").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Backoff {
    /// A backoff with the given settings and random source.
    pub fn new(config: BackoffConfig, random: RandomSource) -> Self {
        Self { config, random, failures: Arc::default() }
    }

    /// Records a failure of `key` and returns how long to wait before the
    /// next attempt: `base * 2^(failures-1)`, capped, jittered.
    pub fn failure(&self, key: &str) -> Duration {
        let n = {
            let mut map = crate::util::lock(&self.failures);
            let n = map.entry(key.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        jittered(self.delay_for(n), self.config.jitter, &self.random)
    }

    /// The un-jittered delay after `n` consecutive failures.
    pub fn delay_for(&self, n: u32) -> Duration {
        if n == 0 {
            return Duration::ZERO;
        }
        // 2^31 already exceeds any sane cap; avoid overflow.
        let factor = 1u32.checked_shl(n.saturating_sub(1).min(31)).unwrap_or(u32::MAX);
        self.config.base.saturating_mul(factor).min(self.config.cap)
    }

    /// Forgets the failures of `key`: the next failure starts at `base` again.
    pub fn success(&self, key: &str) {
        crate::util::lock(&self.failures).remove(key);
    }

    /// The current consecutive failure count of `key`.
    pub fn failures(&self, key: &str) -> u32 {
        crate::util::lock(&self.failures).get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(v: f64) -> RandomSource {
        Arc::new(move || v)
    }

    fn backoff(jitter: f64, random: f64) -> Backoff {
        Backoff::new(
            BackoffConfig { base: Duration::from_secs(1), cap: Duration::from_secs(60), jitter },
            fixed(random),
        )
    }

    #[test]
    fn delays_double_up_to_the_cap() {
        let b = backoff(0.0, 0.5);
        let secs: Vec<u64> = (0..9).map(|_| b.failure("ns/a").as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(b.failures("ns/a"), 9);
    }

    #[test]
    fn success_resets_and_keys_are_independent() {
        let b = backoff(0.0, 0.5);
        b.failure("ns/a");
        b.failure("ns/a");
        b.failure("ns/b");
        assert_eq!(b.failure("ns/a"), Duration::from_secs(4));
        b.success("ns/a");
        assert_eq!(b.failures("ns/a"), 0);
        assert_eq!(b.failure("ns/a"), Duration::from_secs(1));
        assert_eq!(b.failure("ns/b"), Duration::from_secs(2));
    }

    #[test]
    fn many_failures_never_overflow() {
        let b = backoff(0.0, 0.5);
        assert_eq!(b.delay_for(u32::MAX), Duration::from_secs(60));
        assert_eq!(b.delay_for(40), Duration::from_secs(60));
        assert_eq!(b.delay_for(0), Duration::ZERO);
    }

    #[test]
    fn jitter_spreads_within_bounds() {
        let d = Duration::from_secs(100);
        assert_eq!(jittered(d, 0.1, &fixed(0.0)), Duration::from_secs(90));
        assert_eq!(jittered(d, 0.1, &fixed(0.5)), Duration::from_secs(100));
        assert_eq!(jittered(d, 0.1, &fixed(0.75)), Duration::from_secs(105));
        assert_eq!(jittered(d, 0.0, &fixed(0.9)), d);
        // Failure delays are jittered too.
        assert_eq!(backoff(0.5, 0.0).failure("k"), Duration::from_millis(500));
    }

    #[test]
    fn real_randomness_stays_in_range() {
        let r = thread_random();
        for _ in 0..1000 {
            let d = jittered(Duration::from_secs(10), 0.2, &r);
            assert!(d >= Duration::from_secs(8) && d <= Duration::from_secs(12), "{d:?}");
        }
    }

    #[test]
    fn poll_interval_parses_or_defaults() {
        let default = Duration::from_secs(300);
        assert_eq!(poll_interval(None, default).unwrap(), default);
        assert_eq!(poll_interval(Some("30s"), default).unwrap(), Duration::from_secs(30));
        assert_eq!(poll_interval(Some("1h30m"), default).unwrap(), Duration::from_secs(5400));
        assert!(poll_interval(Some("soon"), default).is_err());
    }
}
