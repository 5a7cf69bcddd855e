//! The store's standbys: a pool and the repositories over it per standby,
//! what its last poll found, and what reads and the tracker share.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::seen::{Samples, Seen};
use super::settings::StandbySettings;
use super::telemetry::READS;
use crate::postgres::hosts::Hosts;
use crate::postgres::items::PostgresItemRepository;
use crate::postgres::pool::{self, Manager, Pool};
use crate::postgres::positions::Latest;
use crate::postgres::products::PostgresProductRepository;
use crate::postgres::url::PostgresUrl;
use crate::sql::turns::ListingTurns;

/// One standby: its pool, its repositories and what its last poll found.
#[derive(Debug)]
pub(in crate::postgres) struct Standby {
    pub(in crate::postgres) label: String,
    pub(in crate::postgres) pool: Pool,
    pub(in crate::postgres) items: PostgresItemRepository,
    pub(in crate::postgres) products: PostgresProductRepository,
    pub(in crate::postgres) seen: Mutex<Seen>,
}

/// The store's standbys, shared by every request.
#[derive(Debug)]
pub(in crate::postgres) struct Standbys {
    pub(in crate::postgres) standbys: Vec<Standby>,
    pub(in crate::postgres) settings: StandbySettings,
    /// The primary's positions, sampled by the tracker.
    pub(in crate::postgres) samples: Mutex<Samples>,
    /// Woken after every poll of a standby: reads waiting for a token.
    pub(in crate::postgres) polled: Notify,
    /// Woken when a read starts waiting: the tracker's tasks poll at once.
    pub(in crate::postgres) hurry: Notify,
    /// Reads waiting for a standby now: the tracker polls eagerly.
    pub(in crate::postgres) waiting: AtomicUsize,
    /// Where the next read without a token starts looking (round robin).
    pub(in crate::postgres) next: AtomicUsize,
}

impl Standbys {
    /// A pool per host of `url`, each of at most `settings.pool_size`
    /// connections (opened as reads need them, not at start), with the
    /// primary's statement `options` and `budget`; the tracker not started
    /// ([`Standbys::start`] starts it too).
    pub(in crate::postgres) fn new(
        url: &PostgresUrl,
        settings: StandbySettings,
        options: &str,
        budget: Duration,
    ) -> Arc<Self> {
        let standbys = url
            .each_host()
            .into_iter()
            .map(|host| {
                let label = host.to_string();
                let manager = Manager {
                    hosts: Arc::new(Hosts::new(&host, options)),
                    budget,
                    latest: Arc::new(Latest::default()),
                };
                let pool = Pool::builder(manager)
                    .max_size(settings.pool_size.max(1) as usize)
                    .build()
                    .expect("a pool without timeouts needs no runtime");
                Standby {
                    items: PostgresItemRepository::on_standby(
                        pool.clone(),
                        ListingTurns::of(settings.pool_size),
                    ),
                    products: PostgresProductRepository::on_standby(pool.clone()),
                    pool,
                    label,
                    seen: Mutex::new(Seen::default()),
                }
            })
            .collect();
        Arc::new(Self {
            standbys,
            settings,
            samples: Mutex::new(Samples::default()),
            polled: Notify::new(),
            hurry: Notify::new(),
            waiting: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
        })
    }

    /// Counts a read served by `role` (C13's metric).
    pub(in crate::postgres) fn count(role: &'static str) {
        metrics::counter!(READS, "role" => role).increment(1);
    }

    /// Whether some read waits for a standby now.
    pub(super) fn eager(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) > 0
    }

    /// Closes every standby's connections.
    pub(in crate::postgres) async fn close(&self) {
        for standby in &self.standbys {
            pool::close(&standby.pool).await;
        }
    }
}
