//! What the tracker saw (C13): the primary's positions, sampled, against
//! which a standby's lag is reckoned (`tracker.rs` says how), and what the
//! last poll of each standby found.

use std::collections::VecDeque;
use std::time::Duration;

use items_domain::Position;
use tokio::time::Instant;

/// The most samples of the primary kept: positions are kept only when
/// they change, and the oldest are dropped first.
const MOST_SAMPLES: usize = 4096;

/// The primary's positions, each with when it was first seen there.
#[derive(Debug, Default)]
pub(in crate::postgres) struct Samples {
    seen: VecDeque<(Instant, Position)>,
}

impl Samples {
    /// Records the primary at `position` at `now`, keeping what is younger
    /// than `keep` (and at least the latest). A new timeline starts afresh.
    pub(super) fn record(&mut self, now: Instant, position: Position, keep: Duration) {
        match self.seen.back() {
            Some((_, last)) if *last == position => {}
            Some((_, last)) if last.era() != position.era() => {
                self.seen.clear();
                self.seen.push_back((now, position));
            }
            _ => self.seen.push_back((now, position)),
        }
        while self.seen.len() > MOST_SAMPLES
            || (self.seen.len() > 1
                && self
                    .seen
                    .front()
                    .is_some_and(|(at, _)| now.saturating_duration_since(*at) > keep))
        {
            self.seen.pop_front();
        }
    }

    /// The timeline the primary was last seen on.
    pub(in crate::postgres) fn timeline(&self) -> Option<u32> {
        self.seen.back().map(|(_, position)| position.era())
    }

    /// How long ago, as of `now`, the primary reached `replayed`; `None`
    /// before the primary was sampled, or for a position of another
    /// timeline. Older than every sample kept: at least as old as the
    /// oldest.
    pub(super) fn lag(&self, replayed: Position, now: Instant) -> Option<Duration> {
        let (_, latest) = self.seen.back()?;
        if latest.era() != replayed.era() {
            return None;
        }
        if replayed.offset() >= latest.offset() {
            return Some(Duration::ZERO);
        }
        // The primary reached `replayed` after the last sample below it:
        // dating it by that sample over-estimates the lag by at most one
        // interval, so a standby lagging more than the bound is never
        // taken for one within it (C13); the first sample at or past it
        // would under-estimate by as much.
        let reached = self
            .seen
            .iter()
            .rev()
            .find(|(_, position)| position.offset() < replayed.offset())
            .or(self.seen.front())
            .map(|(at, _)| *at)?;
        Some(now.saturating_duration_since(reached))
    }
}

/// What the last poll of a standby found.
#[derive(Debug, Default, Clone, Copy)]
pub(in crate::postgres) struct Seen {
    /// The position it had replayed, if it answered as a standby.
    pub(in crate::postgres) replayed: Option<Position>,
    /// Its lag, when on the primary's timeline.
    pub(in crate::postgres) lag: Option<Duration>,
    /// In recovery, on the primary's timeline, and answered.
    pub(in crate::postgres) usable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEEP: Duration = Duration::from_secs(10);

    #[test]
    fn a_standby_at_or_past_the_latest_sample_has_no_lag_however_old_the_sample() {
        let start = Instant::now();
        let mut samples = Samples::default();
        samples.record(start, Position::new(1, 100), KEEP);
        let later = start + Duration::from_secs(3600);
        samples.record(later, Position::new(1, 100), KEEP);
        assert_eq!(
            samples.lag(Position::new(1, 100), later),
            Some(Duration::ZERO)
        );
        assert_eq!(
            samples.lag(Position::new(1, 120), later),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn lag_is_how_long_ago_the_primary_reached_what_the_standby_replayed() {
        let start = Instant::now();
        let mut samples = Samples::default();
        for (ms, offset) in [(0, 100), (50, 200), (100, 300), (150, 400)] {
            samples.record(
                start + Duration::from_millis(ms),
                Position::new(1, offset),
                KEEP,
            );
        }
        let now = start + Duration::from_millis(150);
        assert_eq!(
            samples.lag(Position::new(1, 200), now),
            Some(Duration::from_millis(150)),
            "first seen at 50 ms, perhaps reached just after 0 ms: never short"
        );
        assert_eq!(
            samples.lag(Position::new(1, 250), now),
            Some(Duration::from_millis(100)),
            "reached between two samples: the earlier one's time"
        );
        assert_eq!(
            samples.lag(Position::new(1, 50), now),
            Some(Duration::from_millis(150)),
            "older than every sample: at least the oldest's age"
        );
        assert_eq!(
            samples.lag(Position::new(2, 500), now),
            None,
            "another timeline"
        );
        assert_eq!(samples.timeline(), Some(1));
    }

    #[test]
    fn samples_older_than_kept_are_dropped_but_the_latest_stays() {
        let start = Instant::now();
        let mut samples = Samples::default();
        samples.record(start, Position::new(1, 1), Duration::from_millis(10));
        samples.record(
            start + Duration::from_secs(1),
            Position::new(1, 2),
            Duration::from_millis(10),
        );
        assert_eq!(samples.seen.len(), 1);
        samples.record(
            start + Duration::from_secs(2),
            Position::new(2, 1),
            Duration::from_secs(60),
        );
        assert_eq!(samples.timeline(), Some(2), "a new timeline starts afresh");
        assert_eq!(samples.seen.len(), 1);
    }
}
