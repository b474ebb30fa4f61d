//! The operator's Kubernetes Events (`events.k8s.io/v1`).
//!
//! An event repeated within [`SERIES_TTL`] (same object, type, reason, action and note) becomes
//! a series on the first Event: its count and last time are patched, as client-go's recorder
//! does. Two things differ from kube's `Recorder`, which is why this is not it:
//! - the note is part of the series key: kube's key leaves it out, so "created release v1"
//!   followed by "created release v3" on one stack showed as "created release v1" twice;
//! - only the Event's name, count and time are remembered per series (a few dozen bytes), where
//!   kube keeps each whole Event: megabytes after a cold start with a thousand stacks.
//!
//! Notes are cut to the API's 1 kB limit (a longer one is refused with 422, losing the event).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// How long a repeated event extends the series of the first (client-go and kube use 6 min).
pub const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);
/// Series remembered at most; the oldest goes first (memory stays bounded whatever happens).
pub const MAX_SERIES: usize = 4096;
/// The API server's limit on `note`, in bytes.
pub const NOTE_LIMIT: usize = 1024;
/// The API server's limit on `reportingInstance`.
const INSTANCE_LIMIT: usize = 128;

/// One series: the Event that carries it, how often it happened, and when last.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Series {
    name: String,
    count: i32,
    last: Timestamp,
}

/// The series seen recently, by the hash of their key (pure bookkeeping, no I/O).
#[derive(Debug, Default)]
pub struct SeriesBook {
    series: HashMap<u64, Series>,
}

impl SeriesBook {
    /// The event `key` happens again at `now`: the name of its Event and the new count, or `None`
    /// when it starts a new series (none, or the last one ended more than [`SERIES_TTL`] ago).
    pub fn repeat(&mut self, key: u64, now: Timestamp) -> Option<(String, i32)> {
        self.series.retain(|_, s| s.last + SERIES_TTL > now);
        let s = self.series.get_mut(&key)?;
        s.count += 1;
        s.last = now;
        Some((s.name.clone(), s.count))
    }

    /// A new Event `name` was created for `key` at `now`.
    pub fn started(&mut self, key: u64, name: String, now: Timestamp) {
        if self.series.len() >= MAX_SERIES
            && !self.series.contains_key(&key)
            && let Some(oldest) = self.series.iter().min_by_key(|(_, s)| s.last).map(|(k, _)| *k)
        {
            self.series.remove(&oldest);
        }
        self.series.insert(key, Series { name, count: 1, last: now });
    }

    /// The Event of `key` is gone (deleted by its TTL on the server): start anew.
    pub fn forget(&mut self, key: u64) {
        self.series.remove(&key);
    }

    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

/// `note` cut to [`NOTE_LIMIT`] bytes on a character boundary, marked when cut.
pub fn limit_note(note: String) -> String {
    if note.len() <= NOTE_LIMIT {
        return note;
    }
    const MARK: &str = " …";
    let mut end = NOTE_LIMIT - MARK.len();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{MARK}", &note[..end])
}

/// Publishes Events for one controller process.
pub struct EventRecorder {
    client: Client,
    controller: String,
    instance: String,
    hasher: RandomState,
    book: Mutex<SeriesBook>,
}

impl EventRecorder {
    /// `instance` is the reporting instance (the pod), or the controller's name when unknown.
    pub fn new(client: Client, controller: &str, instance: Option<String>) -> Self {
        let mut instance = instance.filter(|i| !i.is_empty()).unwrap_or_else(|| controller.to_string());
        instance.truncate(INSTANCE_LIMIT);
        Self {
            client,
            controller: controller.to_string(),
            instance,
            hasher: RandomState::new(),
            book: Mutex::new(SeriesBook::default()),
        }
    }

    fn book(&self) -> MutexGuard<'_, SeriesBook> {
        crate::util::lock(&self.book)
    }

    fn key(&self, regarding: &ObjectReference, warning: bool, reason: &str, action: &str, note: &str) -> u64 {
        self.hasher.hash_one((
            &regarding.api_version,
            &regarding.kind,
            &regarding.namespace,
            &regarding.name,
            &regarding.uid,
            warning,
            reason,
            action,
            note,
        ))
    }

    /// Publishes an event about `regarding`: a new Event, or the next count of its series.
    pub async fn publish(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let note = limit_note(note);
        let now = Timestamp::now();
        let key = self.key(regarding, warning, reason, action, &note);
        let namespace = regarding.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);

        let repeat = self.book().repeat(key, now);
        if let Some((name, count)) = repeat {
            let series = EventSeries { count, last_observed_time: MicroTime(now) };
            let patch = serde_json::json!({ "series": series });
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => return Ok(()),
                // Expired on the server (its TTL is an hour): start a new series.
                Err(e) if crate::util::is_not_found(&e) => {
                    self.book().forget(key);
                }
                Err(e) => return Err(e),
            }
        }

        let name =
            format!("{}.{:x}", regarding.name.as_deref().unwrap_or(self.controller.as_str()), now.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(namespace), ..Default::default() },
            action: Some(action.to_string()),
            reason: Some(reason.to_string()),
            note: Some(note),
            type_: Some(if warning { "Warning" } else { "Normal" }.to_string()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        api.create(&PostParams::default(), &event).await?;
        self.book().started(key, name, now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    #[test]
    fn a_repeat_within_the_ttl_extends_the_series() {
        let mut book = SeriesBook::default();
        assert_eq!(book.repeat(1, at(0)), None);
        book.started(1, "ferrol.1".into(), at(0));
        assert_eq!(book.repeat(1, at(10)), Some(("ferrol.1".into(), 2)));
        // The series' last time moves on: 5 min after the last repeat is still the series.
        assert_eq!(book.repeat(1, at(10 + 300)), Some(("ferrol.1".into(), 3)));
        // Another key is another series.
        assert_eq!(book.repeat(2, at(311)), None);
    }

    #[test]
    fn a_series_ends_after_the_ttl() {
        let mut book = SeriesBook::default();
        book.started(1, "a.1".into(), at(0));
        assert_eq!(book.repeat(1, at(SERIES_TTL.as_secs())), None, "exactly the TTL later: a new series");
        assert!(book.is_empty(), "expired series are dropped");
    }

    #[test]
    fn the_book_is_bounded_and_drops_the_oldest() {
        let mut book = SeriesBook::default();
        // Key 0 is the oldest; the others are a second or more younger.
        for k in 0..MAX_SERIES as u64 {
            book.started(k, format!("e.{k}"), at(if k == 0 { 0 } else { 1 + k as i64 % 60 }));
        }
        assert_eq!(book.len(), MAX_SERIES);
        book.started(u64::MAX, "new".into(), at(61));
        assert_eq!(book.len(), MAX_SERIES);
        assert_eq!(book.repeat(0, at(62)), None, "the oldest (key 0, at 0 s) went");
        assert_eq!(book.repeat(u64::MAX, at(62)), Some(("new".into(), 2)));
        assert_eq!(book.repeat(1, at(62)), Some(("e.1".into(), 2)));
    }

    #[test]
    fn forget_starts_anew() {
        let mut book = SeriesBook::default();
        book.started(7, "x.1".into(), at(0));
        book.forget(7);
        assert_eq!(book.repeat(7, at(1)), None);
    }

    #[test]
    fn notes_are_cut_to_the_api_limit_on_a_character_boundary() {
        let short = "created ClusterStackRelease docker-ferrol-1-27-v3".to_string();
        assert_eq!(limit_note(short.clone()), short);
        let exact = "x".repeat(NOTE_LIMIT);
        assert_eq!(limit_note(exact.clone()), exact);
        // Multi-byte characters across the cut.
        let long = "é".repeat(NOTE_LIMIT);
        let cut = limit_note(long);
        assert!(cut.len() <= NOTE_LIMIT, "{}", cut.len());
        assert!(cut.ends_with(" …"));
        assert!(cut.trim_end_matches(" …").chars().all(|c| c == 'é'));
    }
}
