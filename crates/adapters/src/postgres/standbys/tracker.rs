//! The tracker (C13): a task samples the primary's position, and a task
//! per standby asks it whether it is still a standby, its replayed
//! position and its timeline, every interval (eagerly while a read waits
//! for a standby). A task per standby, so one that hangs delays no other's
//! poll; each waits for its answer at most [`POLL_WITHIN`].
//!
//! Lag is how long ago the primary reached the position a standby has
//! replayed: the time of the last sample of the primary below it (so at
//! most one interval long, never short: a standby is judged within
//! `DATABASE_READ_MAX_LAG_MS` only when it is), and 0 for a standby at or
//! past the latest sample, however long ago the last write was.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::super::pool::{Pool, lease};
use super::super::positions::{self, POSITION, STANDBY_STATE};
use super::pools::Standbys;
use super::seen::Seen;
use super::settings::StandbySettings;
use super::telemetry::{STANDBY_LAG, STANDBY_USABLE};
use crate::postgres::url::PostgresUrl;

/// How long one poll may take: a standby that does not answer by then is
/// not used until it does.
const POLL_WITHIN: Duration = Duration::from_millis(500);

impl Standbys {
    /// The standbys of `url` ([`Standbys::new`]) with the tracker's tasks
    /// started (polling `primary` too). Here rather than with the pools
    /// (`pools.rs`): the tracker reads the pools, so the pools starting the
    /// tracker would make the two modules depend on each other.
    pub(in crate::postgres) fn start(
        url: &PostgresUrl,
        settings: StandbySettings,
        options: &str,
        budget: Duration,
        primary: Pool,
    ) -> Arc<Self> {
        let standbys = Self::new(url, settings, options, budget);
        spawn(&standbys, primary);
        standbys
    }
}

/// Starts the tracker's tasks; each ends once the store is dropped.
fn spawn(standbys: &Arc<Standbys>, primary: Pool) {
    tokio::spawn(sample_primary(Arc::downgrade(standbys), primary));
    for at in 0..standbys.standbys.len() {
        tokio::spawn(poll_standby(Arc::downgrade(standbys), at));
    }
}

/// How long a task sleeps before its next poll.
fn pause(standbys: &Standbys) -> Duration {
    if standbys.eager() {
        standbys.settings.eager_interval
    } else {
        standbys.settings.interval
    }
}

/// Sleeps `pause`, or less once a read starts waiting for a standby.
async fn sleep(standbys: &Standbys, pause: Duration) {
    let hurried = standbys.hurry.notified();
    tokio::select! {
        () = tokio::time::sleep(pause) => {}
        () = hurried => {}
    }
}

/// Samples the primary's flushed position, every interval.
async fn sample_primary(standbys: Weak<Standbys>, primary: Pool) {
    loop {
        let Some(standbys) = standbys.upgrade() else {
            return;
        };
        let asked = async {
            let mut connection = lease(&primary).await?;
            let row = connection.query_one(POSITION, &[]).await?;
            positions::read(&row, 0)
        };
        if let Ok(Ok(position)) = tokio::time::timeout(POLL_WITHIN, asked).await {
            let keep = (standbys.settings.max_lag * 2).max(Duration::from_secs(10));
            standbys
                .samples
                .lock()
                .record(Instant::now(), position, keep);
        }
        let pause = pause(&standbys);
        sleep(&standbys, pause).await;
    }
}

/// Polls standby `at`, every interval.
async fn poll_standby(standbys: Weak<Standbys>, at: usize) {
    loop {
        let Some(standbys) = standbys.upgrade() else {
            return;
        };
        let Some(standby) = standbys.standbys.get(at) else {
            return;
        };
        let asked = async {
            let mut connection = lease(&standby.pool).await?;
            let row = connection.query_one(STANDBY_STATE, &[]).await?;
            let in_recovery: bool = super::super::decode::column(&row, 0)?;
            Ok::<_, items_domain::RepositoryError>((in_recovery, positions::read(&row, 1)?))
        };
        let answer = tokio::time::timeout(POLL_WITHIN, asked).await;
        let seen = {
            let samples = standbys.samples.lock();
            match answer {
                Ok(Ok((true, replayed))) => {
                    let lag = samples.lag(replayed, Instant::now());
                    Seen {
                        replayed: Some(replayed),
                        lag,
                        usable: samples.timeline() == Some(replayed.era()),
                    }
                }
                // Promoted, or not answering: not used until it is a
                // standby of this primary again.
                Ok(Ok((false, _))) | Ok(Err(_)) | Err(_) => Seen::default(),
            }
        };
        *standby.seen.lock() = seen;
        let label = standby.label.clone();
        if let Some(lag) = seen.lag {
            metrics::gauge!(STANDBY_LAG, "standby" => label.clone()).set(lag.as_secs_f64());
        }
        metrics::gauge!(STANDBY_USABLE, "standby" => label).set(f64::from(u8::from(seen.usable)));
        standbys.polled.notify_waiters();
        let pause = pause(&standbys);
        sleep(&standbys, pause).await;
    }
}
