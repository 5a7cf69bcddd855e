//! The settings, grouped by what they configure: the public server, the
//! store, the rate limiter, the uploads and the admin listener (C1). Each
//! value is checked and converted by its parser, once; the adapters'
//! settings are built from a group here (`From<&…Config>`), nowhere else.
//!
//! A new setting goes into the group it configures, with its flag, its
//! environment variable and its default; its `--help` line lands under that
//! group's heading.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::TypedValueParser as _;
use clap::{Args, ValueEnum};
use items_adapters::http::{
    BodyLimits, ChangeStreamSettings, DEFAULT_SEND_TIMEOUT, RateLimitSettings, UploadLimits,
};
use items_adapters::postgres::{
    DEFAULT_POOL_SIZE, DEFAULT_READ_MAX_LAG, DEFAULT_READ_WAIT, DEFAULT_STATEMENT_TIMEOUT,
    PostgresSettings, PostgresUrl, StandbySettings,
};
use items_adapters::sqlite::SqliteSettings;
use items_domain::defaults as limits;

use super::DatabaseUrl;
use crate::defaults;

/// The public listener: where it binds, what bodies it accepts, how it logs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server")]
pub struct ServerConfig {
    /// TCP port to listen on.
    #[arg(long, env = "PORT", default_value_t = defaults::PORT)]
    pub port: u16,

    /// Address to bind (an IP address, or `localhost`).
    #[arg(long, env = "HOST", default_value_t = defaults::HOST, value_parser = parse_host)]
    pub host: IpAddr,

    /// Largest JSON or form body, in bytes.
    #[arg(long, env = "MAX_JSON_BYTES", default_value_t = limits::MAX_JSON_BYTES as usize,
          value_parser = clap::value_parser!(u64).range(1..=1_073_741_824).try_map(usize::try_from))]
    pub max_json_bytes: usize,

    /// Log format: one line per request; the level comes from `RUST_LOG`.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = defaults::LOG_FORMAT)]
    pub log_format: LogFormat,

    /// How long a client may read nothing of a response, in milliseconds
    /// (1–3600000), before its connection is cut (C12).
    #[arg(long, env = "SEND_TIMEOUT_MS",
          default_value_t = DEFAULT_SEND_TIMEOUT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_SEND_TIMEOUT_MS))]
    pub send_timeout_ms: u64,
}

/// The longest `SEND_TIMEOUT_MS`: an hour, as the statement budget's; the
/// kernel's option takes milliseconds in 32 bits, which this stays far
/// within.
const MAX_SEND_TIMEOUT_MS: u64 = 3_600_000;

impl ServerConfig {
    /// The address of the public listener.
    pub fn address(&self) -> SocketAddr {
        SocketAddr::new(self.host, self.port)
    }

    /// How long a client may read nothing (`SEND_TIMEOUT_MS`).
    pub fn send_timeout(&self) -> Duration {
        Duration::from_millis(self.send_timeout_ms)
    }
}

impl From<&ServerConfig> for BodyLimits {
    fn from(server: &ServerConfig) -> Self {
        Self {
            max_bytes: server.max_json_bytes,
            ..Self::default()
        }
    }
}

/// How log lines are written (`LOG_FORMAT`): as text or as one JSON object
/// per line.
// Doc comments on the variants would become `--help` text, replacing the
// one-line `[possible values: text, json]`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Where items, products and users are kept: in this process unless a
/// database is named.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Store")]
pub struct StoreConfig {
    /// `sqlite://PATH` (a durable file, created when missing) or a
    /// PostgreSQL URL (`postgres://…`); unset keeps everything in memory.
    #[arg(long, env = "DATABASE_URL", value_parser = DatabaseUrl::parse)]
    pub database_url: Option<DatabaseUrl>,

    /// PostgreSQL connections per instance (1–1000).
    #[arg(long, env = "DATABASE_POOL_SIZE", default_value_t = DEFAULT_POOL_SIZE,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub database_pool_size: u32,

    /// The longest one store operation may take, in milliseconds
    /// (1–3600000): past it the request gets 503 with `Retry-After` and
    /// what it was writing is rolled back (PostgreSQL and SQLite).
    #[arg(long, env = "DATABASE_STATEMENT_TIMEOUT_MS",
          default_value_t = DEFAULT_STATEMENT_TIMEOUT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(1..=MAX_STATEMENT_TIMEOUT_MS))]
    pub database_statement_timeout_ms: u64,

    /// How long a durable store keeps its changes, so a change stream
    /// resumes from an older cursor (C14): a number with a unit, `s`, `m`,
    /// `h` or `d` (`24h`, `90m`), or seconds alone; 1 s to 366 d. The
    /// in-memory store keeps its last 100,000 changes instead.
    #[arg(long, env = "CHANGES_RETENTION", default_value = "24h", value_parser = parse_retention)]
    pub changes_retention: Duration,

    /// PostgreSQL standbys that may serve reads (C13), in the form of a
    /// PostgreSQL `DATABASE_URL` (one host per standby); unset: the
    /// primary serves every read. Needs a PostgreSQL `DATABASE_URL`.
    #[arg(long, env = "DATABASE_READ_URL", value_parser = parse_read_url)]
    pub database_read_url: Option<Box<PostgresUrl>>,

    /// How long a read with a `Consistency-Token` waits for a standby to
    /// replay it before the primary serves it, in milliseconds (0–60000).
    #[arg(long, env = "DATABASE_READ_WAIT_MS",
          default_value_t = DEFAULT_READ_WAIT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub database_read_wait_ms: u64,

    /// The most replay lag a standby may have to serve a read without a
    /// token, in milliseconds (0–3600000).
    #[arg(long, env = "DATABASE_READ_MAX_LAG_MS",
          default_value_t = DEFAULT_READ_MAX_LAG.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub database_read_max_lag_ms: u64,
}

/// `DATABASE_READ_URL`: a PostgreSQL URL, read as `DATABASE_URL`'s is.
fn parse_read_url(raw: &str) -> Result<Box<PostgresUrl>, String> {
    match DatabaseUrl::parse(raw)? {
        DatabaseUrl::Postgres(url) => Ok(url),
        DatabaseUrl::Sqlite(_) => {
            Err("must be a postgres:// or postgresql:// URL naming standbys".to_owned())
        }
    }
}

/// The longest budget `DATABASE_STATEMENT_TIMEOUT_MS` takes: an hour. A
/// request left waiting longer is no request any client still waits for;
/// `0` is refused rather than read as "no budget", since an unbounded wait
/// on a stalled database is what the setting exists to prevent.
const MAX_STATEMENT_TIMEOUT_MS: u64 = 3_600_000;

impl StoreConfig {
    /// The durable store `DATABASE_URL` names; `None` keeps everything in
    /// memory.
    pub fn database(&self) -> Option<&DatabaseUrl> {
        self.database_url.as_ref()
    }

    /// How reads go to the standbys of `DATABASE_READ_URL` (C13).
    pub fn standby_settings(&self) -> StandbySettings {
        StandbySettings {
            wait: Duration::from_millis(self.database_read_wait_ms),
            max_lag: Duration::from_millis(self.database_read_max_lag_ms),
            pool_size: self.database_pool_size,
            ..StandbySettings::default()
        }
    }

    /// The budget of one store operation (`DATABASE_STATEMENT_TIMEOUT_MS`).
    pub fn statement_timeout(&self) -> Duration {
        Duration::from_millis(self.database_statement_timeout_ms)
    }
}

impl From<&StoreConfig> for PostgresSettings {
    fn from(store: &StoreConfig) -> Self {
        Self {
            pool_size: store.database_pool_size,
            statement_timeout: store.statement_timeout(),
            changes_retention: store.changes_retention,
            ..Self::default()
        }
    }
}

/// The budget bounds both the wait for another process's lock on the file
/// (SQLite's busy timeout) and each write's wait for the writer.
impl From<&StoreConfig> for SqliteSettings {
    fn from(store: &StoreConfig) -> Self {
        Self {
            busy_timeout: store.statement_timeout(),
            changes_retention: store.changes_retention,
            ..Self::default()
        }
    }
}

/// The change feed's streams (C14): how many an instance serves, and how
/// often an idle one is sent a heartbeat.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Change feed")]
pub struct ChangesConfig {
    /// Change streams (`GET /items` with `Accept: text/event-stream`) one
    /// instance serves at once (1–100000); beyond, 503 with `Retry-After`.
    #[arg(long, env = "CHANGES_MAX_STREAMS", default_value_t = ChangeStreamSettings::DEFAULT_MAX_STREAMS as u32,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub changes_max_streams: u32,

    /// How often an idle change stream gets a heartbeat comment, in
    /// milliseconds (10–15000).
    #[arg(long, env = "CHANGES_HEARTBEAT_MS",
          default_value_t = ChangeStreamSettings::MAX_HEARTBEAT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(10..=15_000))]
    pub changes_heartbeat_ms: u64,
}

impl From<&ChangesConfig> for ChangeStreamSettings {
    fn from(changes: &ChangesConfig) -> Self {
        Self {
            max_streams: changes.changes_max_streams as usize,
            heartbeat: Duration::from_millis(changes.changes_heartbeat_ms),
            ..Self::default()
        }
    }
}

/// The longest `CHANGES_RETENTION`: a year and a day, past any sensible
/// need; its table grows with it.
const MAX_RETENTION: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// `CHANGES_RETENTION`: digits, then `s`, `m`, `h` or `d` (seconds without
/// one), from 1 s to [`MAX_RETENTION`].
fn parse_retention(raw: &str) -> Result<Duration, String> {
    const RULE: &str = "must be a duration such as 24h, 90m, 3600s or 7d (1 s to 366 d)";
    let (digits, unit) = match raw.char_indices().last() {
        Some((at, unit)) if unit.is_ascii_alphabetic() => (&raw[..at], unit),
        _ => (raw, 's'),
    };
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(RULE.to_owned());
    }
    let seconds_per = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => return Err(RULE.to_owned()),
    };
    let seconds = digits
        .parse::<u64>()
        .ok()
        .and_then(|count| count.checked_mul(seconds_per))
        .ok_or_else(|| RULE.to_owned())?;
    let retention = Duration::from_secs(seconds);
    match retention.is_zero() || retention > MAX_RETENTION {
        true => Err(RULE.to_owned()),
        false => Ok(retention),
    }
}

/// Rate limiting (C9): the budget, who the client is, where budgets live.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Rate limiting")]
pub struct LimiterConfig {
    /// Requests per client per window; 0 turns rate limiting off.
    #[arg(long, env = "RATE_LIMIT_MAX", default_value_t = limits::RATE_LIMIT_MAX)]
    pub rate_limit_max: u32,

    /// The rate-limit window in milliseconds.
    #[arg(long, env = "RATE_LIMIT_WINDOW_MS", default_value_t = limits::RATE_LIMIT_WINDOW_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub rate_limit_window_ms: u64,

    /// How many proxies of yours stand in front: `false`/`0` none, `true` =
    /// 1, or a number N; the client is then the Nth address from the right of
    /// `X-Forwarded-For` (or `Forwarded: for=`).
    #[arg(long, env = "TRUST_PROXY", default_value_t = limits::TRUST_PROXY, num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_trust_proxy)]
    pub trust_proxy: u32,

    /// Redis URL (`redis://…`, or `redis+unix:///path/to/socket`): rate-limit
    /// budgets shared by every instance using it; unset: budgets live in
    /// this process.
    #[arg(long, env = "REDIS_URL", value_parser = parse_redis_url)]
    pub redis_url: Option<String>,
}

impl From<&LimiterConfig> for RateLimitSettings {
    fn from(limiter: &LimiterConfig) -> Self {
        Self {
            max: NonZeroU32::new(limiter.rate_limit_max),
            window: Duration::from_millis(limiter.rate_limit_window_ms),
            trust_proxy: limiter.trust_proxy,
        }
    }
}

/// Uploaded files (C4, C5): where they are kept, how large one may be and
/// how much they may occupy together.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Uploads")]
pub struct UploadsConfig {
    /// Directory where uploads are stored; created at start if missing.
    #[arg(long, env = "UPLOADS_DIR", default_value = defaults::UPLOADS_DIR)]
    pub uploads_dir: PathBuf,

    /// Largest single uploaded file, in bytes.
    #[arg(long, env = "MAX_FILE_BYTES", default_value_t = limits::MAX_FILE_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_file_bytes: u64,

    /// The most bytes all stored uploads together may occupy (beyond it:
    /// 507); 0 = no bound but the disk's. Per instance (docs/operations.md).
    #[arg(long, env = "UPLOADS_MAX_BYTES", default_value_t = defaults::UPLOADS_MAX_BYTES)]
    pub uploads_max_bytes: u64,
}

impl From<&UploadsConfig> for UploadLimits {
    fn from(uploads: &UploadsConfig) -> Self {
        Self {
            max_file_bytes: uploads.max_file_bytes,
            ..Self::default()
        }
    }
}

/// The admin listener (C11) and the graceful stop it announces.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Admin")]
pub struct AdminConfig {
    /// Port of the admin listener (`/livez`, `/readyz`, `/metrics`) on
    /// ADMIN_HOST; unset: no admin listener (C11).
    #[arg(long, env = "ADMIN_PORT")]
    pub admin_port: Option<u16>,

    /// Address the admin listener binds (an IP address, or `localhost`);
    /// unset: HOST. `127.0.0.1` keeps probes and metrics off the network
    /// the public port serves (C11).
    #[arg(long, env = "ADMIN_HOST", value_parser = parse_host)]
    pub admin_host: Option<IpAddr>,

    /// With an admin listener: how long, after SIGINT/SIGTERM, `/readyz`
    /// answers 503 while requests are still served, so a load balancer
    /// stops sending before the server drains.
    #[arg(long, env = "SHUTDOWN_DRAIN_MS", default_value_t = defaults::SHUTDOWN_DRAIN_MS,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub shutdown_drain_ms: u64,
}

impl AdminConfig {
    /// Where the admin listener binds on `port`: ADMIN_HOST, else the public
    /// listener's `host` (C1, C11).
    pub fn address(&self, host: IpAddr, port: u16) -> SocketAddr {
        SocketAddr::new(self.admin_host.unwrap_or(host), port)
    }

    /// How long `/readyz` says 503 before the server drains.
    pub fn drain(&self) -> Duration {
        Duration::from_millis(self.shutdown_drain_ms)
    }
}

fn parse_host(raw: &str) -> Result<IpAddr, String> {
    if raw.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    raw.parse()
        .map_err(|_| "must be an IP address or `localhost`".to_owned())
}

/// `TRUST_PROXY`: a boolean (`true` is one proxy) or a hop count.
fn parse_trust_proxy(raw: &str) -> Result<u32, String> {
    match raw.to_ascii_lowercase().as_str() {
        "false" => Ok(0),
        "true" => Ok(1),
        number => number
            .parse()
            .map_err(|_| "must be `false`, `true` or a number of proxies".to_owned()),
    }
}

/// `REDIS_URL`: a `redis://` URL naming a server, or a `redis+unix://` (or
/// `unix://`) URL naming the socket of a Redis on this host, which spends
/// less CPU per call over its socket than over loopback TCP (a third less
/// for a small command, docs/performance.md "The Redis budget").
/// `rediss://` (TLS) is refused here, in one line, rather than at the first
/// connection: the Redis client is built without TLS support.
fn parse_redis_url(raw: &str) -> Result<String, String> {
    let scheme_is = |scheme: &str| {
        raw.get(..scheme.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
    };
    if scheme_is("rediss://") {
        return Err(
            "TLS to Redis (rediss://) is not supported; use redis:// on a trusted network"
                .to_owned(),
        );
    }
    // A scheme alone names neither a server nor a socket.
    match ["redis://", "redis+unix://", "unix://"]
        .into_iter()
        .any(|scheme| scheme_is(scheme) && raw.len() > scheme.len())
    {
        true => Ok(raw.to_owned()),
        false => Err("must be a redis:// URL, or redis+unix:// and a socket's path".to_owned()),
    }
}
