//! What the release controller remembers of its last good pass over each release, to ignore
//! triggers that change nothing (our own status writes). A watch that sees someone else change
//! an applied object forgets the memo (through `Watches::on_release_changed`), and a pass that
//! began before such a change stores no memo: the ticket taken when it began is stale.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

use crate::util::lock;

/// What the release controller remembers of its last successful pass over a release, to ignore
/// triggers that change nothing (our own status writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseMemo {
    pub generation: Option<i64>,
    pub applied_at: Timestamp,
    /// How long the pass stays good: the resync interval, or sooner when the node-image gate
    /// wants to be asked again.
    pub valid_for: Duration,
}

/// Taken when a pass begins: its memo is stored only if nothing invalidated the release since
/// (a change seen by a watch while the pass runs must not be hidden by the memo it ends with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoTicket(u64);

/// Per release: the memo of its last good pass and how often it was invalidated.
#[derive(Debug, Default)]
struct MemoSlot {
    memo: Option<ReleaseMemo>,
    invalidations: u64,
}

/// The release controller's memos, by release key.
#[derive(Debug, Default)]
pub struct Memos(Mutex<HashMap<String, MemoSlot>>);

impl Memos {
    /// The memo of the release's last good pass, and the ticket a new pass stores its own with.
    pub fn get(&self, key: &str) -> (Option<ReleaseMemo>, MemoTicket) {
        lock(&self.0).get(key).map_or((None, MemoTicket(0)), |slot| (slot.memo.clone(), MemoTicket(slot.invalidations)))
    }

    /// Stores the memo of a good pass, unless the release was invalidated since `ticket`.
    pub fn remember(&self, key: &str, ticket: MemoTicket, memo: ReleaseMemo) {
        let mut memos = lock(&self.0);
        let slot = memos.entry(key.to_string()).or_default();
        if slot.invalidations == ticket.0 {
            slot.memo = Some(memo);
        }
    }

    /// The next pass over the release does the whole work (and a pass in flight stores no memo).
    pub fn forget(&self, key: &str) {
        let mut memos = lock(&self.0);
        let slot = memos.entry(key.to_string()).or_default();
        slot.memo = None;
        slot.invalidations += 1;
    }

    /// The release is gone: nothing to remember.
    pub fn remove(&self, key: &str) {
        lock(&self.0).remove(key);
    }
}

/// How long a pass may skip all work because the memo of the last good pass still holds: same
/// generation, the release ready, and the memo younger than its validity. `None`: do the pass.
pub fn still_good(
    memo: Option<&ReleaseMemo>,
    generation: Option<i64>,
    ready: bool,
    now: Timestamp,
) -> Option<Duration> {
    let memo = memo.filter(|m| m.generation == generation && ready)?;
    let elapsed = now.duration_since(memo.applied_at).unsigned_abs();
    (elapsed < memo.valid_for).then(|| memo.valid_for - elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memo() -> ReleaseMemo {
        ReleaseMemo { generation: Some(1), applied_at: Timestamp::UNIX_EPOCH, valid_for: Duration::from_secs(600) }
    }

    #[test]
    fn a_pass_remembers_what_it_did() {
        let memos = Memos::default();
        let (none, ticket) = memos.get("ns/r");
        assert_eq!(none, None);
        memos.remember("ns/r", ticket, memo());
        assert_eq!(memos.get("ns/r").0, Some(memo()));
        memos.forget("ns/r");
        assert_eq!(memos.get("ns/r").0, None);
    }

    #[test]
    fn a_change_seen_during_a_pass_is_not_hidden_by_its_memo() {
        let memos = Memos::default();
        let (_, ticket) = memos.get("ns/r");
        // A watch sees a hand edit while the pass is still applying.
        memos.forget("ns/r");
        memos.remember("ns/r", ticket, memo());
        assert_eq!(memos.get("ns/r").0, None, "the triggered pass must do the whole work");
        // The pass after it starts with a fresh ticket and may remember again.
        let (_, ticket) = memos.get("ns/r");
        memos.remember("ns/r", ticket, memo());
        assert_eq!(memos.get("ns/r").0, Some(memo()));
    }

    #[test]
    fn memos_are_per_release() {
        let memos = Memos::default();
        let (_, ticket) = memos.get("ns/a");
        memos.forget("ns/b");
        memos.remember("ns/a", ticket, memo());
        assert_eq!(memos.get("ns/a").0, Some(memo()));
        memos.remove("ns/a");
        assert_eq!(memos.get("ns/a").0, None);
    }

    #[test]
    fn a_memo_holds_for_the_same_generation_while_ready_and_young() {
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        let m = ReleaseMemo {
            generation: Some(1),
            applied_at: at("2026-01-01T00:00:00Z"),
            valid_for: Duration::from_secs(600),
        };
        let t = at("2026-01-01T00:04:00Z");
        let cases = [
            ("young", Some(&m), Some(1), true, t, Some(Duration::from_secs(360))),
            ("no memo", None, Some(1), true, t, None),
            ("new generation", Some(&m), Some(2), true, t, None),
            ("not ready", Some(&m), Some(1), false, t, None),
            ("expired", Some(&m), Some(1), true, at("2026-01-01T00:10:00Z"), None),
        ];
        for (name, memo, generation, ready, now, want) in cases {
            assert_eq!(still_good(memo, generation, ready, now), want, "{name}");
        }
    }
}
