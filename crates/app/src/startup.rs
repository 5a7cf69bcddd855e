//! Building the application from its configuration: the adapters are chosen
//! and wired into the HTTP adapter here, and nowhere else.
//!
//! The errors here never name the program: the binary puts
//! `items-service: ` in front of each, once.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use items_adapters::disk::DiskUploadStore;
use items_adapters::http::{
    AdminServer, ApiDocs, HttpServer, HttpSettings, Readiness, RenderMetrics, Services,
};
use items_adapters::memory::InMemoryRateLimitStore;
use items_adapters::redis::RedisRateLimitStore;
use items_domain::{HealthCheck, RateLimiter};

use crate::config::Config;
use crate::listening::Listening;
use crate::start_error::StartError;
use crate::store::{DATABASE_PATIENCE, Store};

/// A built application: its listeners are bound, so where it listens is
/// known before it runs ([`Application::listening`]; port 0 in the
/// configuration gets a port the system chose).
#[derive(Debug)]
pub struct Application {
    server: HttpServer,
    admin: Option<Admin>,
    listening: Listening,
    store: Store,
}

/// The admin listener (C11) and the upkeep its metrics need.
#[derive(Debug)]
struct Admin {
    server: AdminServer,
    address: SocketAddr,
    metrics: metrics_exporter_prometheus::PrometheusHandle,
}

impl Application {
    /// Opens the stores the configuration names (waiting up to 15 s for the
    /// database), binds the public listener and, with an admin port, the
    /// admin listener. `shutdown` completing starts the graceful stop: with
    /// an admin listener `/readyz` turns 503 at once and requests are still
    /// served for `SHUTDOWN_DRAIN_MS`, then the server stops accepting and
    /// lets requests in flight finish (C1, C11).
    ///
    /// # Errors
    /// A [`StartError`] naming what could not be used; its
    /// [`StartError::exit_code`] is the process's exit status.
    pub async fn build(
        config: &Config,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<Self, StartError> {
        // The uploads directory first: an unusable one is a bad setting (exit
        // 2), found before the port is taken.
        let uploads_dir = &config.uploads.uploads_dir;
        let uploads = DiskUploadStore::open_bounded(uploads_dir, config.uploads.uploads_max_bytes)
            .map_err(|error| {
                StartError::Setting(format!(
                    "invalid UPLOADS_DIR (--uploads-dir) {:?}: {error}",
                    uploads_dir.display().to_string()
                ))
            })?;
        let (listener, address) = bind(config.server.address())?;
        let settings = HttpSettings {
            body_limits: (&config.server).into(),
            rate_limit: (&config.limiter).into(),
            upload_limits: (&config.uploads).into(),
            changes: (&config.changes).into(),
            request_log: crate::telemetry::request_log(),
            tracer: crate::telemetry::request_tracer(),
            send_timeout: config.server.send_timeout(),
            ..HttpSettings::default()
        };
        let redis = config
            .limiter
            .redis_url
            .as_deref()
            .map(open_redis)
            .transpose()?;
        let store = Store::open(&config.store, DATABASE_PATIENCE).await?;
        let mut services = Services::new(
            store.repositories(),
            Arc::new(uploads.clone()),
            rate_limiter(redis.clone()),
        );
        if let Some(reads) = store.consistent_reads() {
            services = services.with_reads(reads);
        }
        let checks: Vec<Arc<dyn HealthCheck>> = store.health_check().into_iter().collect();
        // Without Redis the limiter falls back to local budgets (C9): the
        // instance stays ready, reported as degraded.
        let degradable: Vec<Arc<dyn HealthCheck>> = redis
            .into_iter()
            .map(|redis| redis as Arc<dyn HealthCheck>)
            .collect();
        let readiness = Readiness::with_details(
            checks,
            degradable,
            store.readiness_detail().into_iter().collect(),
        );
        let admin = match config.admin.admin_port {
            None => None,
            Some(port) => Some(admin(
                config,
                port,
                Arc::clone(&readiness),
                store.clone(),
                uploads,
                &ApiDocs::for_public_port(address.port()),
            )?),
        };
        // With an admin listener, a shutdown first turns `/readyz` to 503 and
        // keeps serving for the drain delay, so the load balancer stops
        // sending before the server stops accepting (C11). Without one nobody
        // watches readiness, and the server drains at once.
        let drain = match admin {
            Some(_) => config.admin.drain(),
            None => Duration::ZERO,
        };
        // From the signal on, every response says `Connection: close` (C1),
        // during the drain delay too.
        let draining = settings.draining.clone();
        let shutdown = async move {
            shutdown.await;
            draining.begin();
            readiness.begin_shutdown();
            if !drain.is_zero() {
                tracing::info!(
                    target: "items_service::startup",
                    drain_ms = drain.as_millis() as u64,
                    "not ready any more; serving until the load balancer notices"
                );
                tokio::time::sleep(drain).await;
            }
        };
        let server = HttpServer::bind(listener, settings, services, shutdown)
            .map_err(|source| StartError::Bind { address, source })?;
        let listening = Listening {
            address,
            admin_address: admin.as_ref().map(|admin| admin.address),
        };
        Ok(Self {
            server,
            admin,
            listening,
            store,
        })
    }

    /// The addresses bound, for the start-up line and for whoever started
    /// the application on port 0.
    pub fn listening(&self) -> Listening {
        self.listening
    }

    /// The public port actually bound.
    pub fn port(&self) -> u16 {
        self.listening.address.port()
    }

    /// The admin port actually bound, when `ADMIN_PORT` is set (C11).
    pub fn admin_port(&self) -> Option<u16> {
        self.listening.admin_address.map(|address| address.port())
    }

    /// Serves until shutdown completes: the public server drains first, then
    /// the store is closed (a SQLite store commits every write it accepted),
    /// and the admin listener (still answering `/readyz` 503) stops last.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let admin = self.admin.map(|admin| {
            let handle = admin.server.handle();
            let upkeep = tokio::spawn(crate::metrics::upkeep(admin.metrics));
            (handle, upkeep, tokio::spawn(admin.server.run()))
        });
        let result = self.server.run().await;
        self.store.close().await;
        if let Some((handle, upkeep, serving)) = admin {
            handle.stop(true).await;
            upkeep.abort();
            let _ = serving.await;
        }
        result
    }
}

/// Binds the admin listener on `ADMIN_HOST:port` (`HOST` unless set) and
/// installs the metrics recorder it serves; the store's and the uploads'
/// gauges are read at scrape time.
fn admin(
    config: &Config,
    port: u16,
    readiness: Arc<Readiness>,
    store: Store,
    uploads: DiskUploadStore,
    docs: &ApiDocs,
) -> Result<Admin, StartError> {
    let (listener, address) = bind(config.admin.address(config.server.host, port))?;
    let metrics = crate::metrics::install()?;
    let handle = metrics.clone();
    let render: RenderMetrics = Arc::new(move || {
        store.record_metrics();
        uploads.record_metrics();
        handle.render()
    });
    let server = AdminServer::bind(listener, readiness, render, docs)
        .map_err(|source| StartError::Bind { address, source })?;
    Ok(Admin {
        server,
        address,
        metrics,
    })
}

/// A listener on `address` and the address it got: the port the system
/// chose when `address` asks for port 0.
fn bind(address: SocketAddr) -> Result<(TcpListener, SocketAddr), StartError> {
    let listener =
        TcpListener::bind(address).map_err(|source| StartError::Bind { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| StartError::Bind { address, source })?;
    Ok((listener, bound))
}

/// The shared rate-limit store on `url` (C9).
fn open_redis(url: &str) -> Result<Arc<RedisRateLimitStore>, StartError> {
    RedisRateLimitStore::open(url, RedisRateLimitStore::DEFAULT_PREFIX)
        .map(Arc::new)
        .map_err(|cause| StartError::Setting(format!("invalid REDIS_URL (--redis-url): {cause}")))
}

/// Budgets in this process, shared through Redis when it is configured; the
/// local store is the fallback while Redis does not answer (C9).
fn rate_limiter(redis: Option<Arc<RedisRateLimitStore>>) -> RateLimiter {
    let local = Arc::new(InMemoryRateLimitStore::default());
    match redis {
        None => RateLimiter::local(local),
        Some(redis) => RateLimiter::shared(redis, local),
    }
}
