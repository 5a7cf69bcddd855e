//! Redis: rate-limit budgets shared by every instance (C9).
//!
//! Each counted request runs one Lua script (`gcra.lua`): a GCRA step on the
//! client's key, atomic in Redis and timed by the Redis server's clock, so
//! instances whose clocks disagree still share one budget. The script is sent
//! by hash (`EVALSHA`) and loaded only when Redis does not know it yet.
//!
//! Redis is a dependency the service can live without: every call is bounded
//! by [`RedisRateLimitStore::TIMEOUT`], and a failure is the caller's cue to
//! use its local budget. After a failure this store does not ask Redis again
//! for `RETRY_EVERY`, so during an outage requests do not each wait out the
//! timeout; the first success after it is logged once, as the failure was.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use items_domain::{DependencyDown, Gcra, HealthCheck, RateLimitStore, RateLimitStoreError, Spent};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};

/// Failures of the shared store, for `/metrics` (C11).
pub const STORE_ERRORS: &str = "rate_limit_store_errors_total";

/// How long a degraded store waits before it asks Redis again.
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// Budgets in Redis under one key prefix.
pub struct RedisRateLimitStore {
    connection: ConnectionManager,
    script: Script,
    prefix: String,
    /// Whether the last attempt failed (the change is logged once each way).
    degraded: AtomicBool,
    /// When Redis may be asked again, in milliseconds since `origin`.
    retry_at_ms: AtomicU64,
    origin: Instant,
}

impl std::fmt::Debug for RedisRateLimitStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRateLimitStore")
            .field("prefix", &self.prefix)
            .field("degraded", &self.degraded.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RedisRateLimitStore {
    /// The longest a request waits on Redis before it is counted locally.
    pub const TIMEOUT: Duration = Duration::from_millis(50);
    /// The key prefix of the service's budgets.
    pub const DEFAULT_PREFIX: &'static str = "items-service:rate-limit:";

    /// A store on the Redis at `url`, keys starting with `prefix`. It
    /// connects lazily and reconnects by itself: a Redis that is down when
    /// the service starts is an outage like any other, not a start-up error.
    ///
    /// # Errors
    /// When `url` is not a Redis URL.
    pub fn open(url: &str, prefix: &str) -> redis::RedisResult<Self> {
        let client = Client::open(url)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(Self::TIMEOUT))
            .set_response_timeout(Some(Self::TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(RETRY_EVERY);
        let connection = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Self {
            connection,
            script: Script::new(include_str!("gcra.lua")),
            prefix: prefix.to_owned(),
            degraded: AtomicBool::new(false),
            retry_at_ms: AtomicU64::new(0),
            origin: Instant::now(),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    async fn run_script(&self, client: IpAddr, gcra: Gcra) -> Result<Spent, String> {
        let mut connection = self.connection.clone();
        let key = format!("{}{client}", self.prefix);
        let period = micros(gcra.period());
        let tolerance = micros(gcra.tolerance());
        let mut invocation = self.script.key(key);
        invocation.arg(period).arg(tolerance);
        let call = invocation.invoke_async::<(i64, i64)>(&mut connection);
        let (allowed, until_full) = tokio::time::timeout(Self::TIMEOUT, call)
            .await
            .map_err(|_| format!("no answer within {} ms", Self::TIMEOUT.as_millis()))?
            .map_err(|error| error.to_string())?;
        Ok(Spent {
            allowed: allowed == 1,
            until_full: Duration::from_micros(u64::try_from(until_full).unwrap_or(0)),
        })
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[async_trait]
impl RateLimitStore for RedisRateLimitStore {
    async fn spend(&self, client: IpAddr, gcra: Gcra) -> Result<Spent, RateLimitStoreError> {
        if self.degraded.load(Ordering::Relaxed)
            && self.now_ms() < self.retry_at_ms.load(Ordering::Relaxed)
        {
            return Err(RateLimitStoreError::new(
                "Redis failed a moment ago; not asked again yet",
            ));
        }
        match self.run_script(client, gcra).await {
            Ok(spent) => {
                if self.degraded.swap(false, Ordering::Relaxed) {
                    tracing::info!("Redis answers again: rate-limit budgets are shared again");
                }
                Ok(spent)
            }
            Err(cause) => {
                metrics::counter!(STORE_ERRORS).increment(1);
                self.retry_at_ms.store(
                    self.now_ms() + RETRY_EVERY.as_millis() as u64,
                    Ordering::Relaxed,
                );
                if !self.degraded.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        error = %cause,
                        "Redis does not answer: rate-limit budgets are per instance until it does"
                    );
                }
                Err(RateLimitStoreError::new(cause))
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
        let command = redis::cmd("PING");
        let ping = command.query_async::<String>(&mut connection);
        match tokio::time::timeout(Self::TIMEOUT * 10, ping).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(DependencyDown::new(error)),
            Err(_) => Err(DependencyDown::new("no answer to PING")),
        }
    }
}
