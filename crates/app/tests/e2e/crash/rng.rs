//! The test's dice: a small seeded generator (SplitMix64), so a failing run
//! can be repeated with the same choices (`CRASH_SEED=<seed>`). The
//! interleaving of the writers and the kernel's scheduling still differ
//! from run to run; the seed fixes what each writer tries and when the
//! process is killed.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The seed of this run: `CRASH_SEED` when set, otherwise the clock. It is
/// printed, and named in every failure message.
pub fn seed() -> u64 {
    std::env::var("CRASH_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos() as u64)
        })
}

/// SplitMix64: a few lines, good enough to pick writes and moments.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator of its own for one part of the test (a writer, a
    /// round), so adding draws in one part leaves the others' unchanged.
    pub fn fork(&self, part: u64) -> Self {
        Self(self.0 ^ part.wrapping_mul(0xA24B_AED4_963E_E407)).skipped()
    }

    fn skipped(mut self) -> Self {
        self.next();
        self
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    /// A duration between `low` and `high` milliseconds.
    pub fn millis(&mut self, low: u64, high: u64) -> Duration {
        Duration::from_millis(low + self.below(high - low + 1))
    }
}
