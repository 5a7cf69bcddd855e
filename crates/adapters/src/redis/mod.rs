//! Redis: rate-limit budgets shared by every instance (C9).
//!
//! Each counted request is one GCRA step on the client's key in a Lua script
//! (`gcra.lua`), atomic in Redis and timed by the Redis server's clock, so
//! instances whose clocks disagree still share one budget. The steps are
//! coalesced (`coalesce.rs`): a decision that finds no script call in flight
//! is sent at once, and the decisions that queue while one is in flight go
//! together in the next call, so under load Redis runs one script per batch
//! instead of one per request, and nothing ever waits on a timer.
//!
//! The lanes, and with them the connection to Redis, run on a thread of
//! their own (one small single-threaded Tokio runtime per store), so a
//! decision's round trip never waits for the request handlers of a busy
//! worker to yield: a burst of requests on one worker would otherwise hold
//! back the very call their decisions queue for, past the time bound.
//!
//! Redis is a dependency the service can live without: no decision waits
//! more than [`RedisRateLimitStore::TIMEOUT`] from the moment it is asked,
//! queueing included, and a failure is the caller's cue to use its local
//! budget. After a failure this store does not ask Redis again for
//! `RETRY_EVERY`, so during an outage requests do not each wait out the
//! timeout; the first success after it is logged once, as the failure was.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use items_domain::{DependencyDown, Gcra, HealthCheck, RateLimitStore, RateLimitStoreError, Spent};
use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::batch;

mod coalesce;
mod health;

use coalesce::{Answer, Decision, Failure};
use health::Health;

/// Failures of the shared store, for `/metrics` (C11): one per decision
/// that fell back to the local budget because Redis failed or was too slow.
pub const STORE_ERRORS: &str = "rate_limit_store_errors_total";

/// How long a degraded store waits before it asks Redis again.
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// The most decisions queued at once, and so in one script call: a caller
/// finding the queue full waits for room, within its own time bound.
const QUEUE_CAPACITY: usize = 512;

/// How many script calls may be in flight at once (see `coalesce.rs` and
/// docs/performance.md for why one).
const LANES: usize = 1;

/// Budgets in Redis under one key prefix.
pub struct RedisRateLimitStore {
    connection: ConnectionManager,
    prefix: String,
    queue: batch::Queue<Decision, Answer>,
    /// The runtime of the lanes' thread, where the connection lives.
    lanes: tokio::runtime::Handle,
    health: Arc<Health>,
}

impl std::fmt::Debug for RedisRateLimitStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateLimitStore")
            .field("prefix", &self.prefix)
            .field("degraded", &self.health.is_degraded())
            .finish_non_exhaustive()
    }
}

impl RedisRateLimitStore {
    /// The longest a decision waits on Redis, from the moment it is asked,
    /// before it is counted locally.
    pub const TIMEOUT: Duration = Duration::from_millis(50);
    /// The key prefix of the service's budgets.
    pub const DEFAULT_PREFIX: &'static str = "items-service:rate-limit:";

    /// A store on the Redis at `url`, keys starting with `prefix`. It
    /// connects lazily and reconnects by itself: a Redis that is down when
    /// the service starts is an outage like any other, not a start-up error.
    ///
    /// # Errors
    /// When `url` is not a Redis URL, or the lanes' thread cannot start.
    pub fn open(url: &str, prefix: &str) -> redis::RedisResult<Self> {
        let client = Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Self::TIMEOUT))
            .set_response_timeout(Some(Self::TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(RETRY_EVERY);
        let connection = ConnectionManager::new_lazy_with_config(client, config)?;
        let (queue, batches) = batch::queue(QUEUE_CAPACITY);
        let health = Arc::new(Health::new(RETRY_EVERY));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let lanes = runtime.handle().clone();
        let run = coalesce::run_lanes(
            LANES,
            batches,
            connection.clone(),
            prefix.to_owned(),
            Arc::clone(&health),
        );
        // The thread ends once the store is dropped: its queue closes, the
        // lanes return, and the runtime goes with whatever it still held.
        std::thread::Builder::new()
            .name("redis-rate-limit".to_owned())
            .spawn(move || runtime.block_on(run))?;
        Ok(Self {
            connection,
            prefix: prefix.to_owned(),
            queue,
            lanes,
            health,
        })
    }

    /// Queues the decision and waits for its answer, never past `deadline`.
    async fn decide(&self, decision: Decision) -> Answer {
        let deadline = decision.deadline;
        let answer = tokio::time::timeout_at(deadline.into(), self.queue.submit(decision));
        match answer.await {
            Ok(Ok(answer)) => answer,
            Ok(Err(batch::Stopped)) => Err(Failure::new("the Redis lanes have stopped")),
            // The lanes answer by the deadline themselves; this is the
            // bound's last guard (a lane whose runtime is starved, say).
            Err(_) => Err(Failure::timed_out()),
        }
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[async_trait]
impl RateLimitStore for RedisRateLimitStore {
    async fn spend(&self, client: IpAddr, gcra: Gcra) -> Result<Spent, RateLimitStoreError> {
        let asked = Instant::now();
        if self.health.wait_before_retry(asked) {
            return Err(RateLimitStoreError::new(
                "Redis failed a moment ago; not asked again yet",
            ));
        }
        let decision = Decision {
            client,
            period: micros(gcra.period()),
            tolerance: micros(gcra.tolerance()),
            deadline: asked + Self::TIMEOUT,
        };
        match self.decide(decision).await {
            Ok(spent) => Ok(spent),
            Err(Failure::Skipped) => Err(RateLimitStoreError::new(
                "Redis failed a moment ago; not asked again yet",
            )),
            Err(Failure::Failed(cause)) => {
                metrics::counter!(STORE_ERRORS).increment(1);
                self.health.failed(&cause);
                Err(RateLimitStoreError::new(cause.to_string()))
            }
        }
    }
}

#[async_trait]
impl HealthCheck for RedisRateLimitStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn ping(&self) -> Result<(), DependencyDown> {
        let mut connection = self.connection.clone();
        // On the lanes' runtime, so that a (re)connection it makes is
        // driven there too, never by a request worker.
        let ping = self.lanes.spawn(async move {
            let command = redis::cmd("PING");
            command.query_async::<String>(&mut connection).await
        });
        match tokio::time::timeout(Self::TIMEOUT * 10, ping).await {
            Ok(Ok(Ok(_))) => Ok(()),
            Ok(Ok(Err(error))) => Err(DependencyDown::new(error)),
            Ok(Err(_)) => Err(DependencyDown::new("the Redis lanes have stopped")),
            Err(_) => Err(DependencyDown::new("no answer to PING")),
        }
    }
}
