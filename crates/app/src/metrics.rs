//! The metrics recorder (C11): the Prometheus exporter behind the `metrics`
//! facade. The adapters emit through the facade; this binary installs the
//! recorder only when an admin listener will serve `/metrics`, so without
//! `ADMIN_PORT` every metric call is a no-op.

use std::time::Duration;

use items_adapters::http::metrics::{REQUEST_DURATION, REQUEST_DURATION_BUCKETS, describe};
use items_adapters::redis::STORE_ERRORS;
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

/// How often histogram samples are folded into their buckets between
/// scrapes, so memory stays bounded when nobody scrapes.
pub const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the process-wide recorder; the request-duration histogram gets
/// real buckets (the exporter would otherwise render a summary).
///
/// # Errors
/// When the buckets are refused or a recorder is already installed.
pub fn install() -> Result<PrometheusHandle, BuildError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(REQUEST_DURATION.to_owned()),
            REQUEST_DURATION_BUCKETS,
        )?
        .install_recorder()?;
    describe();
    metrics::describe_counter!(
        STORE_ERRORS,
        "Rate-limit requests the shared store (Redis) failed or answered too slowly; each was counted in the local budget."
    );
    metrics::counter!(STORE_ERRORS).increment(0);
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
