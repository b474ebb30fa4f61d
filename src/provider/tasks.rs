//! Tracked background tasks for plug-ins: long work runs on its own tokio task, keyed by what it
//! works for, and the reconcile only polls it (waiting at most a short budget).
//!
//! The tracker is memory only, on purpose: after a restart a plug-in simply starts the work again
//! (it must be idempotent), and what a user needs to see is in the release's status.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::util::lock;

struct Running<T> {
    result: watch::Receiver<Option<T>>,
    abort: AbortHandle,
}

/// Background tasks by key, each answering a `T` once.
pub struct TaskTracker<K, T> {
    tasks: Arc<Mutex<HashMap<K, Running<T>>>>,
}

impl<K, T> Default for TaskTracker<K, T> {
    fn default() -> Self {
        Self { tasks: Arc::new(Mutex::new(HashMap::new())) }
    }
}

impl<K, T> Clone for TaskTracker<K, T> {
    fn clone(&self) -> Self {
        Self { tasks: self.tasks.clone() }
    }
}

impl<K, T> TaskTracker<K, T>
where
    K: Eq + Hash + Clone + Send + 'static,
    T: Clone + Send + Sync + 'static,
{
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// The result of the task under `key`, when it has one: starts the task with `start` if none
    /// runs, then waits at most `budget` for it. A finished task's result is handed out once and
    /// the task forgotten, so the next call starts fresh work (a re-check). `None`: still running.
    pub async fn poll<F>(&self, key: K, budget: Duration, start: impl FnOnce() -> F) -> Option<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let mut rx = {
            let mut tasks = lock(&self.tasks);
            match tasks.get(&key) {
                Some(running) => running.result.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    let work = start();
                    let handle = tokio::spawn(async move {
                        let out = work.await;
                        let _ = tx.send(Some(out));
                    });
                    tasks.insert(key.clone(), Running { result: rx.clone(), abort: handle.abort_handle() });
                    rx
                }
            }
        };
        let done = match tokio::time::timeout(budget, rx.wait_for(Option::is_some)).await {
            Ok(Ok(value)) => value.clone(),
            // The task panicked or was aborted (the sender is gone): forget it, start again next time.
            Ok(Err(_)) => {
                lock(&self.tasks).remove(&key);
                return None;
            }
            Err(_) => return None,
        };
        lock(&self.tasks).remove(&key);
        done
    }

    /// Aborts and forgets the task under `key`, if any (the release went away).
    pub fn forget(&self, key: &K) {
        if let Some(running) = lock(&self.tasks).remove(key) {
            running.abort.abort();
        }
    }

    /// How many tasks are tracked (running, or finished and not yet collected).
    pub fn len(&self) -> usize {
        lock(&self.tasks).len()
    }

    /// Whether no task is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn quick_work_answers_within_the_budget_and_is_then_forgotten() {
        let t: TaskTracker<&str, u32> = TaskTracker::new();
        assert_eq!(t.poll("a", Duration::from_secs(5), || async { 7 }).await, Some(7));
        assert!(t.is_empty());
    }

    #[tokio::test]
    async fn slow_work_is_polled_without_restarting_it() {
        let t: TaskTracker<&str, u32> = TaskTracker::new();
        let starts = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let mut rx = Some(rx);
        let mut start = || {
            starts.fetch_add(1, Ordering::SeqCst);
            let rx = rx.take().expect("started once");
            async move { rx.await.unwrap_or(0) }
        };
        assert_eq!(t.poll("a", Duration::from_millis(10), &mut start).await, None);
        assert_eq!(t.poll("a", Duration::from_millis(10), &mut start).await, None);
        assert_eq!(t.len(), 1);
        tx.send(3).unwrap();
        assert_eq!(t.poll("a", Duration::from_secs(5), &mut start).await, Some(3));
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn forget_aborts_the_task() {
        let t: TaskTracker<&str, u32> = TaskTracker::new();
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        assert_eq!(t.poll("a", Duration::ZERO, || async move { rx.await.unwrap_or(0) }).await, None);
        t.forget(&"a");
        assert!(t.is_empty());
        // The aborted task dropped its receiver, so sending fails once the abort took effect.
        let mut tx = Some(tx);
        for _ in 0..100 {
            if tx.as_ref().is_some_and(|t| t.is_closed()) {
                tx = None;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(tx.is_none(), "the task was not aborted");
    }
}
