//! The admin listener (C11): `GET /livez`, `GET /readyz` and `GET /metrics`
//! on a port of their own, so a load balancer and Prometheus can reach them
//! and clients of the public port never do; and the API's documents,
//! `GET /openapi.json` and `GET /docs` (`api_docs.rs`).

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderValue};
use actix_web::middleware::from_fn;
use actix_web::{App, HttpResponse, web};
use futures_util::future::join_all;
use items_domain::HealthCheck;
use serde_json::{Map, Value, json};

use super::api_docs::{self, ApiDocs, Served};
use super::routes;
use crate::http::edge::close_when_done;
use crate::http::metrics::READY;
use crate::http::support::Draining;
use crate::report::ErrorChain;

/// The longest a readiness check waits for one dependency. A balancer's
/// check times out after a few seconds; a dependency slower than this is as
/// good as down.
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);
/// Prometheus text exposition format, version 0.0.4.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the current metrics as Prometheus text; supplied by the binary,
/// which owns the recorder (this adapter only emits through the facade).
pub type RenderMetrics = Arc<dyn Fn() -> String + Send + Sync>;

/// What a dependency that answered adds to its `ok` in the readiness
/// report (the database host writes go to, say); `None`: just `ok`.
pub type Detail = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Whether the instance should receive traffic: not once a shutdown has
/// begun, and only while every dependency it cannot serve without answers.
pub struct Readiness {
    shutting_down: AtomicBool,
    needed: Vec<Arc<dyn HealthCheck>>,
    degradable: Vec<Arc<dyn HealthCheck>>,
    /// Details of answering dependencies, by name.
    details: Vec<(&'static str, Detail)>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |checks: &[Arc<dyn HealthCheck>]| -> Vec<&'static str> {
            checks.iter().map(|check| check.name()).collect()
        };
        f.debug_struct("Readiness")
            .field("shutting_down", &self.is_shutting_down())
            .field("needed", &names(&self.needed))
            .field("degradable", &names(&self.degradable))
            .finish()
    }
}

/// What one dependency answered.
type Outcome = (&'static str, Result<(), String>);

impl Readiness {
    /// Ready while each of `needed` answers (none: ready while serving).
    /// `degradable` dependencies are pinged and reported, but the instance
    /// stays ready without them: it serves correctly in a degraded mode (the
    /// rate limiter falls back to per-instance budgets when Redis is gone,
    /// C9), and taking every instance out of the balancer because of them
    /// would turn a partial outage into a full one.
    pub fn new(
        needed: Vec<Arc<dyn HealthCheck>>,
        degradable: Vec<Arc<dyn HealthCheck>>,
    ) -> Arc<Self> {
        Self::with_details(needed, degradable, Vec::new())
    }

    /// [`Readiness::new`], and for the dependencies named in `details`,
    /// what their `ok` says besides once they answered: `"ok: writing to
    /// db2:5432"`.
    pub fn with_details(
        needed: Vec<Arc<dyn HealthCheck>>,
        degradable: Vec<Arc<dyn HealthCheck>>,
        details: Vec<(&'static str, Detail)>,
    ) -> Arc<Self> {
        Arc::new(Self {
            shutting_down: AtomicBool::new(false),
            needed,
            degradable,
            details,
        })
    }

    /// What `name` says besides `ok`, if anything.
    fn detail(&self, name: &str) -> Option<String> {
        self.details
            .iter()
            .find(|(named, _)| *named == name)
            .and_then(|(_, detail)| detail())
    }

    /// From now on `/readyz` answers 503, whatever the dependencies say.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Pings every dependency at once, each bounded by [`CHECK_TIMEOUT`].
    async fn check(&self) -> (Vec<Outcome>, Vec<Outcome>) {
        tokio::join!(ping_all(&self.needed), ping_all(&self.degradable))
    }
}

async fn ping_all(checks: &[Arc<dyn HealthCheck>]) -> Vec<Outcome> {
    join_all(checks.iter().map(|check| async move {
        let outcome = match tokio::time::timeout(CHECK_TIMEOUT, check.ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(ErrorChain(&error).to_string()),
            Err(_) => Err(format!("no answer within {CHECK_TIMEOUT:?}")),
        };
        (check.name(), outcome)
    }))
    .await
}

/// A bound, not yet running, admin server.
pub struct AdminServer {
    server: actix_web::dev::Server,
    port: u16,
}

impl std::fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServer")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl AdminServer {
    /// Serves the probes and the metrics on `listener`. It reacts to no
    /// signal itself: the binary stops it after the public server has
    /// drained, so `/readyz` keeps saying 503 until the very end.
    pub fn bind(
        listener: TcpListener,
        readiness: Arc<Readiness>,
        render_metrics: RenderMetrics,
        docs: &ApiDocs,
    ) -> std::io::Result<Self> {
        let port = listener.local_addr()?.port();
        let readiness = web::Data::from(readiness);
        let render_metrics = web::Data::new(render_metrics);
        let served = web::Data::new(Served::new(docs));
        let server = actix_web::HttpServer::new(move || {
            App::new()
                .app_data(readiness.clone())
                .app_data(render_metrics.clone())
                .app_data(served.clone())
                .route("/livez", web::get().to(livez))
                .route("/readyz", web::get().to(readyz))
                .route("/metrics", web::get().to(metrics))
                .route(api_docs::OPENAPI_PATH, web::get().to(api_docs::openapi))
                .route("/docs", web::get().to(api_docs::page_handler))
                .route("/docs/", web::get().to(api_docs::page_handler))
                .route("/docs/{file}", web::get().to(api_docs::asset))
                .default_service(web::to(routes::not_found))
                // A body nobody reads closes its connection here too (C5);
                // the admin listener never says goodbye on a drain: it
                // answers `/readyz` 503 to the very end.
                .wrap(from_fn(|request, next| {
                    close_when_done(Draining::default(), request, next)
                }))
        })
        .workers(1)
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)?
        .run();
        Ok(Self { server, port })
    }

    /// The port actually bound.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A handle that stops the server.
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Serves until stopped through [`AdminServer::handle`].
    pub async fn run(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// Liveness: the process answers. No dependency is checked, so a database
/// outage never gets healthy instances restarted.
async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

/// Readiness: 200 when every needed dependency answers (`"degraded"` when a
/// degradable one does not); 503 naming the needed ones that do not, and 503
/// from the moment a shutdown begins.
async fn readyz(readiness: web::Data<Readiness>) -> HttpResponse {
    if readiness.is_shutting_down() {
        return HttpResponse::ServiceUnavailable().json(json!({ "status": "shutting down" }));
    }
    let (needed, degradable) = readiness.check().await;
    let failed = |outcomes: &[Outcome]| outcomes.iter().any(|(_, outcome)| outcome.is_err());
    let (status, word) = if failed(&needed) {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    } else if failed(&degradable) {
        (StatusCode::OK, "degraded")
    } else {
        (StatusCode::OK, "ready")
    };
    let checks: Map<String, Value> = needed
        .into_iter()
        .chain(degradable)
        .map(|(name, outcome)| {
            let said = outcome
                .err()
                .unwrap_or_else(|| match readiness.detail(name) {
                    Some(detail) => format!("ok: {detail}"),
                    None => "ok".to_owned(),
                });
            (name.to_owned(), Value::from(said))
        })
        .collect();
    HttpResponse::build(status).json(json!({ "status": word, "checks": checks }))
}

/// Every metric in Prometheus text format, [`READY`] checked first (the
/// same pings as `/readyz`, each bounded by [`CHECK_TIMEOUT`]).
async fn metrics(
    render: web::Data<RenderMetrics>,
    readiness: web::Data<Readiness>,
) -> HttpResponse {
    let ready = if readiness.is_shutting_down() {
        false
    } else {
        let (needed, _) = readiness.check().await;
        needed.iter().all(|(_, outcome)| outcome.is_ok())
    };
    metrics::gauge!(READY).set(if ready { 1.0 } else { 0.0 });
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HeaderValue::from_static(PROMETHEUS_TEXT)))
        .body(render())
}
