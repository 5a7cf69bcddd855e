//! Redis: rate-limit budgets shared by every instance (C9).
//!
//! Each counted request is one GCRA step on the client's key in a Lua script
//! (`gcra.lua`), atomic in Redis and timed by the Redis server's clock, so
//! instances whose clocks disagree still share one budget. Each thread that
//! asks has a lane (`lanes.rs`): a queue of [`crate::batch`], a task that
//! sends what queued during its previous call as one script call
//! (`coalesce.rs`) and a connection of the redis crate's (`script.rs`).
//!
//! Invariants: no decision waits more than [`RedisRateLimitStore::TIMEOUT`]
//! from the moment it is asked, queueing included (unless its own worker was
//! too busy to send it in time: Redis then still gets a round trip's time,
//! `coalesce.rs`); a failure is the caller's cue to use its local budget and
//! counts once in [`STORE_ERRORS`]; after one, Redis is not asked again for
//! `RETRY_EVERY`, so an outage costs a request nothing; an outage and the
//! return are each logged once (`health.rs`); nothing connects before the
//! first decision, so a Redis down at start is an outage, not a start error.
//!
//! Why: one script call per ~40 decisions (docs/performance.md, "The Redis store, measured").

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use items_domain::{DependencyDown, Gcra, HealthCheck, RateLimitStore, RateLimitStoreError, Spent};
use redis::io::tcp::TcpSettings;
use redis::{AsyncConnectionConfig, Client};

mod coalesce;
mod health;
mod lanes;
mod script;

use coalesce::{Decision, Failure};
use health::Health;

use crate::batch;

/// Failures of the shared store, for `/metrics` (C11): one per decision
/// that fell back to the local budget because Redis failed or was too slow.
pub const STORE_ERRORS: &str = "rate_limit_store_errors_total";

/// Why a decision was not sent: Redis failed within `RETRY_EVERY`.
const NOT_ASKED: &str = "Redis failed a moment ago; not asked again yet";

/// How long a degraded store waits before it asks Redis again.
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// Budgets in Redis under one key prefix.
pub struct RedisRateLimitStore {
    shared: Arc<Shared>,
}

/// What every thread's lane of one store shares. A lane holds clones of
/// the `Arc` fields, never the `Shared` itself: the lanes' registry tells a
/// dropped store by its `Shared` being gone (`lanes.rs`).
struct Shared {
    client: Client,
    /// A lane's connection, for its script calls.
    connection: AsyncConnectionConfig,
    script: Arc<redis::Script>,
    prefix: Arc<str>,
    health: Arc<Health>,
}

impl std::fmt::Debug for RedisRateLimitStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateLimitStore")
            .field("prefix", &self.shared.prefix)
            .field("degraded", &self.shared.health.is_degraded())
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
    /// connects lazily (each thread that asks, on its first decision) and
    /// reconnects by itself: a Redis that is down when the service starts
    /// is an outage like any other, not a start-up error.
    ///
    /// # Errors
    /// When `url` is not a Redis URL.
    pub fn open(url: &str, prefix: &str) -> redis::RedisResult<Self> {
        let info = Client::open(url)?.get_connection_info().clone();
        // One call, one segment: nothing is to be gained by waiting.
        let client = Client::open(info.set_tcp_settings(TcpSettings::default().set_nodelay(true)))?;
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                connection: connection_config(),
                script: Arc::new(gcra()),
                prefix: prefix.into(),
                health: Arc::new(Health::new(RETRY_EVERY)),
            }),
        })
    }
}

/// The script every lane runs.
fn gcra() -> redis::Script {
    redis::Script::new(include_str!("gcra.lua"))
}

/// A lane's connection: the crate's own timeouts no longer than a
/// decision's bound, which each call's deadline enforces anyway.
fn connection_config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(RedisRateLimitStore::TIMEOUT))
        .set_response_timeout(Some(RedisRateLimitStore::TIMEOUT))
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[async_trait]
impl RateLimitStore for RedisRateLimitStore {
    /// Budgets are measured on Redis' clock (`TIME` in the script), one
    /// for every instance, not on `_arrived`.
    async fn spend(
        &self,
        client: IpAddr,
        gcra: Gcra,
        _arrived: Instant,
    ) -> Result<Spent, RateLimitStoreError> {
        // Only the queued decision's answer (no timer) lives across the
        // wait, so the future async_trait boxes, one per request in flight,
        // stays small (docs/performance.md, "The Redis store, measured").
        // Its span (C11) is current while the decision is queued, so the
        // lane's batch links to it, and ends with the answer.
        let span = crate::traces::limiter_call();
        let asked = span.in_scope(|| self.ask(client, gcra))?;
        let answer = asked.await;
        drop(span);
        self.settle(answer.unwrap_or_else(|_| Err(Failure::new(lanes::STOPPED))))
    }
}

impl RedisRateLimitStore {
    /// Queues the decision on this thread's lane; the answer is to be
    /// waited for.
    fn ask(
        &self,
        client: IpAddr,
        gcra: Gcra,
    ) -> Result<batch::Undated<coalesce::Reply>, RateLimitStoreError> {
        let asked = Instant::now();
        if self.shared.health.wait_before_retry(asked) {
            return Err(RateLimitStoreError::new(NOT_ASKED));
        }
        let decision = Decision {
            client,
            period: micros(gcra.period()),
            tolerance: micros(gcra.tolerance()),
            deadline: asked + Self::TIMEOUT,
        };
        lanes::ask(&self.shared, decision)
            .map_err(|error| self.failure(Failure::new(error.to_string())))
    }

    /// What the lane answered, as the port says it: a failure is counted
    /// and marks Redis as failing.
    fn settle(&self, answer: coalesce::Reply) -> Result<Spent, RateLimitStoreError> {
        answer.map_err(|failure| self.failure(failure))
    }

    fn failure(&self, failure: Failure) -> RateLimitStoreError {
        match failure {
            Failure::Skipped => RateLimitStoreError::new(NOT_ASKED),
            Failure::Failed(cause) => {
                metrics::counter!(STORE_ERRORS).increment(1);
                self.shared.health.failed(&cause);
                RateLimitStoreError::new(cause.to_string())
            }
        }
    }
}

#[async_trait]
impl HealthCheck for RedisRateLimitStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    /// On a connection of its own, opened for the ping: readiness asks
    /// every few seconds, and a fresh connection is what a new lane would
    /// get, so no worker keeps one open for it.
    async fn ping(&self) -> Result<(), DependencyDown> {
        let patience = Self::TIMEOUT * 10;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(patience))
            .set_response_timeout(Some(patience));
        let ping = async {
            let mut connection = self
                .shared
                .client
                .get_multiplexed_async_connection_with_config(&config)
                .await?;
            redis::cmd("PING")
                .query_async::<String>(&mut connection)
                .await
        };
        match tokio::time::timeout(patience, ping).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(DependencyDown::new(error)),
            Err(_) => Err(DependencyDown::new("no answer to PING")),
        }
    }
}
