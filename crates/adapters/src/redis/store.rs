//! [`RedisRateLimitStore`]: the rate-limit store port over Redis, each
//! decision queued on the asking thread's lane and answered, or failed,
//! within [`RedisRateLimitStore::TIMEOUT`].

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use items_domain::{DependencyDown, Gcra, HealthCheck, RateLimitStore, RateLimitStoreError, Spent};
use redis::io::tcp::TcpSettings;
use redis::{AsyncConnectionConfig, Client};

use super::coalesce::{self, Decision, Failure, micros};
use super::lanes;
use super::shared::Shared;
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
    pub(super) shared: Arc<Shared>,
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
            shared: Arc::new(Shared::new(client, prefix, Self::TIMEOUT, RETRY_EVERY)),
        })
    }
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
