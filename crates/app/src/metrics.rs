//! The metrics recorder (C11): the Prometheus exporter behind the `metrics`
//! facade. The adapters emit through the facade; the recorder is installed
//! only when an admin listener will serve `/metrics`, so without
//! `ADMIN_PORT` every metric call is a no-op.
//!
//! The facade has one recorder per process: every application built in the
//! process (tests build several) serves the same one.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use items_adapters::disk;
use items_adapters::http::metrics::{
    REQUEST_DURATION, REQUEST_DURATION_BUCKETS, changes, describe,
};
use items_adapters::postgres::{self, REQUESTS_PER_STATEMENT, REQUESTS_PER_STATEMENT_BUCKETS};
use items_adapters::redis::STORE_ERRORS;
use items_adapters::sqlite::{self, WRITES_PER_COMMIT, WRITES_PER_COMMIT_BUCKETS};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// How often histogram samples are folded into their buckets between
/// scrapes, so memory stays bounded when nobody scrapes.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The recorder this crate installed, once it has.
static INSTALLED: Mutex<Option<PrometheusHandle>> = Mutex::new(None);

/// Installs the process-wide recorder, or returns the one installed by an
/// earlier call; the request-duration, SQLite writes-per-commit,
/// PostgreSQL requests-per-statement and change-feed lag histograms get
/// real buckets (the exporter would otherwise render a summary).
///
/// # Errors
/// When the buckets are refused or another recorder is already installed.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(handle) = installed.as_ref() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(REQUEST_DURATION.to_owned()),
            REQUEST_DURATION_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(WRITES_PER_COMMIT.to_owned()),
            WRITES_PER_COMMIT_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(REQUESTS_PER_STATEMENT.to_owned()),
            REQUESTS_PER_STATEMENT_BUCKETS,
        )?
        .set_buckets_for_metric(Matcher::Full(changes::LAG.to_owned()), changes::LAG_BUCKETS)?
        .install_recorder()?;
    describe();
    sqlite::describe_metrics();
    postgres::describe_metrics();
    disk::usage::describe_metrics();
    metrics::describe_counter!(
        STORE_ERRORS,
        "Rate-limit requests the shared store (Redis) failed or answered too slowly; each was counted in the local budget."
    );
    metrics::counter!(STORE_ERRORS).increment(0);
    // Spans dropped (C11): shown from the first scrape while traces are on.
    #[cfg(feature = "otel")]
    if crate::telemetry::request_tracer().is_some() {
        crate::telemetry::traces::describe_metrics();
    }
    *installed = Some(handle.clone());
    Ok(handle)
}

/// Folds histogram samples every [`UPKEEP_EVERY`], until aborted.
pub async fn upkeep(handle: PrometheusHandle) {
    let mut ticks = tokio::time::interval(UPKEEP_EVERY);
    loop {
        ticks.tick().await;
        handle.run_upkeep();
    }
}
