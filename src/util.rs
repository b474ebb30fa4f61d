//! Two small helpers every layer uses, defined once: the lock that outlives a panic elsewhere,
//! and the test for a 404 from the API server.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `m`, ignoring poisoning. Every mutex this crate shares guards a cache, a counter or a
/// map updated by a single insert or remove, so a holder that panicked leaves consistent data
/// behind: carrying on is right, and a panic in one reconcile never stops the others.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether an API error is 404 Not Found.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_is_recognised() {
        let e = kube::Error::Api(kube::core::Status::failure("gone", "NotFound").with_code(404).boxed());
        assert!(is_not_found(&e));
        let e = kube::Error::Api(kube::core::Status::failure("conflict", "Conflict").with_code(409).boxed());
        assert!(!is_not_found(&e));
    }

    #[test]
    fn a_poisoned_lock_still_opens() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let held = m.clone();
        let _ = std::thread::spawn(move || {
            let _guard = held.lock().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(m.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
    }
}
