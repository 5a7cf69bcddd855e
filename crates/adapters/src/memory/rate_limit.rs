//! Rate-limit budgets in this process (C9), for one instance or as the
//! fallback of a shared store.
//!
//! Memory is bounded: at most `capacity` clients are tracked at once, in
//! least-recently-used order, so at the cap the client idle the longest is
//! forgotten first (its next request starts a fresh budget). A flood of
//! distinct addresses therefore costs at most `capacity` entries, never a map
//! that grows with every address ever seen. The map is split in shards, each
//! behind its own lock, so workers serving different clients rarely wait on
//! one another.

use std::hash::BuildHasher;
use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::time::Instant;

use async_trait::async_trait;
use items_domain::{Gcra, RateLimitStore, RateLimitStoreError, Spent};
use lru::{DefaultHasher, LruCache};
use parking_lot::Mutex;

/// Independent locks; a power of two well above the worker count.
const SHARDS: usize = 16;

/// Budgets per client address, in memory, at most `capacity` of them.
#[derive(Debug)]
pub struct InMemoryRateLimitStore {
    shards: Vec<Mutex<LruCache<IpAddr, u64>>>,
    /// The shards' own maps' hasher (foldhash): SipHash, std's, cost 100
    /// instructions more a request for the same seeded spread.
    hasher: DefaultHasher,
    /// The clock's zero: TATs are nanoseconds since then (monotonic, so a
    /// change of wall-clock time cannot refill or drain budgets).
    origin: Instant,
}

impl InMemoryRateLimitStore {
    /// The default cap: 100,000 clients, about 6 MiB of entries.
    pub const DEFAULT_CAPACITY: usize = 100_000;

    /// A store that tracks at most `capacity` clients (at least one per shard).
    pub fn new(capacity: usize) -> Self {
        let per_shard = NonZeroUsize::new(capacity.div_ceil(SHARDS)).unwrap_or(NonZeroUsize::MIN);
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(LruCache::new(per_shard)))
                .collect(),
            hasher: DefaultHasher::default(),
            origin: Instant::now(),
        }
    }

    /// How many clients are tracked now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lock().len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard(&self, client: &IpAddr) -> &Mutex<LruCache<IpAddr, u64>> {
        // The hasher is seeded per process: a client cannot aim at one shard.
        let index = self.hasher.hash_one(client) as usize % SHARDS;
        &self.shards[index]
    }

    /// The decision, in one lock of the client's shard.
    fn spend_now(&self, client: IpAddr, gcra: Gcra, arrived: Instant) -> Spent {
        // A request that arrived before the store was made counts from zero.
        let since = arrived.saturating_duration_since(self.origin);
        let now = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
        let mut shard = self.shard(&client).lock();
        // A known client's TAT is updated where it is: one lookup, not two.
        if let Some(tat) = shard.get_mut(&client) {
            let (spent, next) = gcra.spend(Some(*tat), now);
            if let Some(next) = next {
                *tat = next;
            }
            return spent;
        }
        let (spent, next) = gcra.spend(None, now);
        if let Some(next) = next {
            shard.put(client, next);
        }
        spent
    }
}

impl Default for InMemoryRateLimitStore {
    fn default() -> Self {
        Self::new(Self::DEFAULT_CAPACITY)
    }
}

#[async_trait]
impl RateLimitStore for InMemoryRateLimitStore {
    async fn spend(
        &self,
        client: IpAddr,
        gcra: Gcra,
        arrived: Instant,
    ) -> Result<Spent, RateLimitStoreError> {
        Ok(self.spend_now(client, gcra, arrived))
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::time::Duration;

    use super::*;

    fn gcra() -> Gcra {
        Gcra::new(NonZeroU32::MIN, Duration::from_secs(60))
    }

    #[tokio::test]
    async fn the_number_of_clients_tracked_never_exceeds_the_capacity_c9() {
        let store = InMemoryRateLimitStore::new(160);
        for n in 0..10_000u32 {
            store
                .spend(IpAddr::from(n.to_be_bytes()), gcra(), Instant::now())
                .await
                .unwrap();
        }
        assert!(store.len() <= 160, "{} tracked", store.len());
    }

    #[tokio::test]
    async fn the_client_idle_the_longest_is_forgotten_first_c9() {
        // Four clients per shard: 10,000 others pass through every shard.
        let store = InMemoryRateLimitStore::new(SHARDS * 4);
        let busy = IpAddr::from([198, 51, 100, 1]);
        assert!(
            store
                .spend(busy, gcra(), Instant::now())
                .await
                .unwrap()
                .allowed
        );
        for n in 0..10_000u32 {
            store
                .spend(IpAddr::from(n.to_be_bytes()), gcra(), Instant::now())
                .await
                .unwrap();
            // The busy client keeps asking, so it is never the idlest.
            assert!(
                !store
                    .spend(busy, gcra(), Instant::now())
                    .await
                    .unwrap()
                    .allowed
            );
        }
    }

    #[tokio::test]
    async fn a_budget_of_two_allows_two_requests_then_refuses_c9() {
        let store = InMemoryRateLimitStore::default();
        let client = IpAddr::from([198, 51, 100, 2]);
        let twice_a_minute = Gcra::new(NonZeroU32::new(2).unwrap(), Duration::from_secs(60));
        let arrived = Instant::now();
        for expected in [true, true, false] {
            let spent = store.spend(client, twice_a_minute, arrived).await.unwrap();
            assert_eq!(
                spent.allowed, expected,
                "the budget of two is spent in order"
            );
        }
    }
}
