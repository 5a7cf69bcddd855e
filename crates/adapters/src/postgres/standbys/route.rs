//! Which standby may serve a read (C13): without a token, one whose lag is
//! at most `DATABASE_READ_MAX_LAG_MS`; with one, a standby the tracker saw
//! at or past it, waiting for one (the tracker then polls eagerly) at most
//! `DATABASE_READ_WAIT_MS`. `None`: the primary serves.
//!
//! The choice is a guess from the last polls; the read itself checks its
//! own connection's position before it (`scoped.rs`).

use std::sync::atomic::Ordering;

use items_domain::Position;
use tokio::time::Instant;

use super::super::positions::meets;
use super::pools::Standbys;
use super::seen::Seen;

/// Counts a read waiting for a standby while it lives.
struct Waiting<'a>(&'a Standbys);

impl<'a> Waiting<'a> {
    fn start(standbys: &'a Standbys) -> Self {
        standbys.waiting.fetch_add(1, Ordering::SeqCst);
        standbys.hurry.notify_waiters();
        Self(standbys)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Standbys {
    /// The standby (its index) a read at `at` goes to, if any.
    pub(in crate::postgres) async fn choose(&self, at: Option<Position>) -> Option<usize> {
        let Some(at) = at else {
            let max_lag = self.settings.max_lag;
            return self.pick(|seen| seen.usable && seen.lag.is_some_and(|lag| lag <= max_lag));
        };
        let meets_token =
            |seen: &Seen| seen.usable && seen.replayed.is_some_and(|replayed| meets(replayed, at));
        if let Some(found) = self.pick(meets_token) {
            return Some(found);
        }
        // Waiting is worth it only for a standby that follows the token's
        // timeline: it may replay it soon.
        let may_catch_up = |seen: &Seen| {
            seen.usable
                && seen
                    .replayed
                    .is_some_and(|replayed| replayed.era() == at.era())
        };
        if self.pick(may_catch_up).is_none() || self.settings.wait.is_zero() {
            return None;
        }
        let deadline = Instant::now() + self.settings.wait;
        let _waiting = Waiting::start(self);
        loop {
            let polled = self.polled.notified();
            tokio::pin!(polled);
            polled.as_mut().enable();
            if let Some(found) = self.pick(meets_token) {
                return Some(found);
            }
            if tokio::time::timeout_at(deadline, polled).await.is_err() {
                return None;
            }
        }
    }

    /// A standby whose last poll `fits`, taking turns among them.
    fn pick(&self, fits: impl Fn(&Seen) -> bool) -> Option<usize> {
        let count = self.standbys.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..count)
            .map(|step| (start + step) % count.max(1))
            .find(|&at| {
                self.standbys
                    .get(at)
                    .is_some_and(|standby| fits(&standby.seen.lock()))
            })
    }
}
