//! The ClusterStack controller's decisions besides the keep set ([`super::keep::plan`]): whether
//! a pass forces a poll, and what the poller's listing means for this pass. Pure.

use std::sync::Arc;
use std::time::Duration;

use crate::controller::runtime::poller::SyncOutcome;
use crate::source::ListedRelease;

use super::context::StackPoll;

/// What this pass asks of the poller and of the token cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollRequest {
    /// A new `reconcile-requested-at` value: poll now.
    pub forced: bool,
    /// Read the `tokenSecretRef` tokens again: forced, or GitHub refused the last one (a rotated
    /// Secret).
    pub reread_tokens: bool,
}

/// The poll request of a pass, from the stack's last poll and its `reconcile-requested-at`.
pub fn poll_request(previous: Option<&StackPoll>, requested_at: Option<&str>) -> PollRequest {
    let forced = previous.is_some_and(|p| p.last.requested_at.as_deref() != requested_at);
    let refused = previous.is_some_and(|p| {
        matches!(&p.listing, Err(SyncOutcome::Unavailable { message, .. })
            if message.contains("401") || message.contains("Bad credentials"))
    });
    PollRequest { forced, reread_tokens: forced || refused }
}

/// What the poll gives this pass: the outcome for the status and the releases, if listed. An
/// unavailable source's retry time is derived from the poll's time, so that every pass before
/// the retry writes the same status.
pub fn sync_outcome(poll: StackPoll, interval: Duration) -> (SyncOutcome, Option<Arc<Vec<ListedRelease>>>) {
    match poll.listing {
        Ok(list) => (SyncOutcome::Listed, Some(list)),
        Err(SyncOutcome::Unavailable { message, retry_at: None }) => {
            let retry_at = poll.last.at.checked_add(interval).ok();
            (SyncOutcome::Unavailable { message, retry_at }, None)
        }
        Err(outcome) => (outcome, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::stack::objects::LastPoll;
    use jiff::Timestamp;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn poll(requested_at: Option<&str>, listing: Result<Arc<Vec<ListedRelease>>, SyncOutcome>) -> StackPoll {
        StackPoll {
            last: LastPoll {
                at: at("2026-01-01T00:00:00Z"),
                generation: Some(1),
                requested_at: requested_at.map(Into::into),
            },
            listing,
        }
    }

    fn unavailable(message: &str) -> Result<Arc<Vec<ListedRelease>>, SyncOutcome> {
        Err(SyncOutcome::Unavailable { message: message.into(), retry_at: None })
    }

    #[test]
    fn a_new_request_annotation_forces_a_poll_and_a_refused_token_is_read_again() {
        let listed = || Ok(Arc::new(Vec::new()));
        let cases: [(&str, Option<StackPoll>, Option<&str>, PollRequest); 7] = [
            ("first pass", None, Some("1"), PollRequest { forced: false, reread_tokens: false }),
            (
                "same annotation",
                Some(poll(Some("1"), listed())),
                Some("1"),
                PollRequest { forced: false, reread_tokens: false },
            ),
            (
                "new annotation",
                Some(poll(Some("1"), listed())),
                Some("2"),
                PollRequest { forced: true, reread_tokens: true },
            ),
            (
                "annotation added",
                Some(poll(None, listed())),
                Some("1"),
                PollRequest { forced: true, reread_tokens: true },
            ),
            (
                "401",
                Some(poll(None, unavailable("github: 401 Unauthorized"))),
                None,
                PollRequest { forced: false, reread_tokens: true },
            ),
            (
                "bad credentials",
                Some(poll(None, unavailable("Bad credentials"))),
                None,
                PollRequest { forced: false, reread_tokens: true },
            ),
            (
                "down",
                Some(poll(None, unavailable("connection refused"))),
                None,
                PollRequest { forced: false, reread_tokens: false },
            ),
        ];
        for (name, previous, requested, want) in cases {
            assert_eq!(poll_request(previous.as_ref(), requested), want, "{name}");
        }
    }

    #[test]
    fn the_listing_becomes_the_outcome_and_a_down_source_retries_one_interval_after_the_poll() {
        let interval = Duration::from_secs(300);
        let releases = Arc::new(Vec::new());
        let (outcome, list) = sync_outcome(poll(None, Ok(releases.clone())), interval);
        assert_eq!(outcome, SyncOutcome::Listed);
        assert!(list.is_some_and(|l| Arc::ptr_eq(&l, &releases)));
        let (outcome, list) = sync_outcome(poll(None, unavailable("down")), interval);
        assert_eq!(
            outcome,
            SyncOutcome::Unavailable { message: "down".into(), retry_at: Some(at("2026-01-01T00:05:00Z")) }
        );
        assert!(list.is_none());
        let limited = SyncOutcome::RateLimited { until: at("2026-01-01T01:00:00Z") };
        assert_eq!(sync_outcome(poll(None, Err(limited.clone())), interval).0, limited);
    }
}
