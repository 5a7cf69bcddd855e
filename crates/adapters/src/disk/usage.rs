//! The bytes the uploads directory holds, against `UPLOADS_MAX_BYTES` (C5):
//! counted once when the store opens, then kept by reserving each chunk
//! before it is written and releasing what a failed upload or a removal
//! gives back. One atomic add-if-room per chunk, so concurrent uploads
//! cannot jointly pass the bound and no request rescans the directory.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes stored or being received now (a gauge, set at scrape time).
pub const STORED_BYTES: &str = "uploads_stored_bytes";
/// The bound on [`STORED_BYTES`] (`UPLOADS_MAX_BYTES`; 0 = none but the disk's).
pub const MAX_BYTES: &str = "uploads_max_bytes";

/// Describes the upload store's gauges to the installed recorder.
pub fn describe_metrics() {
    metrics::describe_gauge!(
        STORED_BYTES,
        metrics::Unit::Bytes,
        "Bytes of uploaded files this instance counts in UPLOADS_DIR: stored, plus being received."
    );
    metrics::describe_gauge!(
        MAX_BYTES,
        metrics::Unit::Bytes,
        "UPLOADS_MAX_BYTES: the bound on uploads_stored_bytes (0: no bound but the disk's)."
    );
}

/// The directory's bytes and their bound; shared by every clone of the store.
#[derive(Debug)]
pub(super) struct Usage {
    /// Files kept plus bytes reserved by uploads being received.
    stored: AtomicU64,
    /// 0: no bound.
    max: u64,
}

impl Usage {
    pub(super) fn new(stored: u64, max: u64) -> Self {
        Self {
            stored: AtomicU64::new(stored),
            max,
        }
    }

    /// Counts `bytes` more, unless that would pass the bound: then nothing
    /// is counted and the answer is `false`.
    pub(super) fn reserve(&self, bytes: u64) -> bool {
        if self.max == 0 {
            self.stored.fetch_add(bytes, Ordering::Relaxed);
            return true;
        }
        self.stored
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |stored| {
                stored.checked_add(bytes).filter(|total| *total <= self.max)
            })
            .is_ok()
    }

    /// Counts `bytes` fewer (never below zero).
    pub(super) fn release(&self, bytes: u64) {
        let _ = self
            .stored
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |stored| {
                Some(stored.saturating_sub(bytes))
            });
    }

    pub(super) fn stored(&self) -> u64 {
        self.stored.load(Ordering::Relaxed)
    }

    pub(super) fn max(&self) -> u64 {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_reservation_past_the_bound_counts_nothing_c5() {
        let usage = Usage::new(90, 100);
        assert!(usage.reserve(10));
        assert!(!usage.reserve(1));
        assert_eq!(usage.stored(), 100);
        usage.release(30);
        assert!(usage.reserve(30));
        assert!(!usage.reserve(u64::MAX));
        usage.release(u64::MAX);
        assert_eq!(usage.stored(), 0);
    }

    #[test]
    fn without_a_bound_everything_is_counted() {
        let usage = Usage::new(5, 0);
        assert!(usage.reserve(1 << 40));
        assert_eq!(usage.stored(), 5 + (1 << 40));
    }

    #[test]
    fn concurrent_reservations_never_pass_the_bound_together_c5() {
        let usage = Arc::new(Usage::new(0, 10_000));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let usage = Arc::clone(&usage);
                std::thread::spawn(move || (0..10_000).filter(|_| usage.reserve(3)).count())
            })
            .collect();
        let granted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(granted, 3_333);
        assert_eq!(usage.stored(), 9_999);
    }
}
