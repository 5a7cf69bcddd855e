//! The change feed of a durable store (C14): a poller per process that
//! copies what the store says is final into the hub while anyone
//! subscribes, and subscriptions that start from the hub or, for an older
//! cursor, from the store's history.
//!
//! Invariants:
//! - the store decides what is final ([`Source::poll`]): a change is
//!   published only once no change with a lower position can still
//!   commit, so subscribers see position order, which is commit order;
//! - the poller runs only while this process has subscribers: it reads
//!   the store at least every `poll_every` (and at once when this process
//!   committed a write, [`DurableFeed::wake`]), so a change committed by
//!   any process or instance reaches every subscriber within about two
//!   polls; idle, it reads nothing. When it starts again it begins at the
//!   store's present ([`Hub::restart_at`]): what was committed while it
//!   slept is read from the history by whoever resumes from before;
//! - a cursor is known while the store retains every change after it
//!   ([`Source::bounds`]: from the last position pruned to the last
//!   issued); any other gets a reset and starts at the present;
//! - the poller holds the store weakly: dropping the store ends it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use items_domain::{ChangeFeed, Cursor, FeedError, RepositoryError, Subscription};
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use super::cursor::{CursorFormat, retained};
use super::follow::{History, follow};
use super::hub::{Entry, Hub};
use crate::report::ErrorChain;

/// Changes the hub keeps: a burst of this many is absorbed without a
/// subscriber that keeps up falling out of it.
const HUB_CAPACITY: usize = 16_384;

/// Changes the poller reads per statement.
const POLL_LIMIT: usize = 1000;

/// What a durable store tells its feed.
#[async_trait]
pub(crate) trait Source: History + 'static {
    /// The changes after `head` that are final (no change below them can
    /// still commit), at most `limit`, in position order; the new head
    /// (every change at or below it that will ever exist is among those
    /// read or earlier); and the store's floor (the last position pruned).
    async fn poll(
        &self,
        head: u64,
        limit: usize,
    ) -> Result<(Vec<Entry>, u64, u64), RepositoryError>;

    /// A head at the present: every change at or below it is final, and
    /// every change committed before the call is at or below it.
    async fn present(&self) -> Result<u64, RepositoryError>;

    /// The floor (the last position pruned) and the last position issued:
    /// the cursors the store knows lie between them.
    async fn bounds(&self) -> Result<(u64, u64), RepositoryError>;
}

/// The change feed of a durable store; clones share it.
#[derive(Clone)]
pub(crate) struct DurableFeed {
    shared: Arc<Shared>,
    /// Wakes the poller; apart from `shared`, so the poller can wait on it
    /// without keeping the store alive.
    wake: Arc<Notify>,
}

impl std::fmt::Debug for DurableFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableFeed").finish_non_exhaustive()
    }
}

struct Shared {
    hub: Arc<Hub>,
    source: Arc<dyn Source>,
    cursors: CursorFormat,
    poll_every: Duration,
    /// How long a subscription waits for the poller to start.
    budget: Duration,
    activity: Mutex<Activity>,
    /// Whether the poller is following the store (so a subscription may
    /// start from the hub's head).
    synced: watch::Sender<bool>,
    /// Mirrors "someone subscribes", read by writers on every commit.
    active: AtomicBool,
    poller: Mutex<bool>,
}

#[derive(Debug, Default)]
struct Activity {
    subscribers: usize,
}

impl DurableFeed {
    /// The feed of `source`, whose cursors are written by `cursors`,
    /// polled every `poll_every` while subscribed; a subscription waits at
    /// most `budget` for the poller to start.
    pub(crate) fn new(
        source: Arc<dyn Source>,
        cursors: CursorFormat,
        poll_every: Duration,
        budget: Duration,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                hub: Arc::new(Hub::new(HUB_CAPACITY, 0)),
                source,
                cursors,
                poll_every,
                budget,
                activity: Mutex::new(Activity::default()),
                synced: watch::Sender::new(false),
                active: AtomicBool::new(false),
                poller: Mutex::new(false),
            }),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Tells the poller that this process committed a change, so local
    /// subscribers get it without waiting for the next poll. Costs one
    /// atomic read when nobody subscribes.
    pub(crate) fn wake(&self) {
        if self.shared.active.load(Ordering::Relaxed) {
            self.wake.notify_one();
        }
    }

    /// Starts the poller task unless it runs.
    fn ensure_poller(&self) {
        let mut started = self.shared.poller.lock();
        if !*started {
            *started = true;
            tokio::spawn(poll(Arc::downgrade(&self.shared), Arc::clone(&self.wake)));
        }
    }
}

/// A subscriber, counted while its stream lives.
struct Counted {
    shared: Arc<Shared>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut activity = self.shared.activity.lock();
        activity.subscribers -= 1;
    }
}

#[async_trait]
impl ChangeFeed for DurableFeed {
    async fn subscribe(&self, after: Option<Cursor>) -> Result<Subscription, RepositoryError> {
        let shared = &self.shared;
        let counted = {
            let mut activity = shared.activity.lock();
            activity.subscribers += 1;
            shared.active.store(true, Ordering::Relaxed);
            Counted {
                shared: Arc::clone(shared),
            }
        };
        self.ensure_poller();
        self.wake.notify_one();
        let mut synced = shared.synced.subscribe();
        let started = tokio::time::timeout(shared.budget, synced.wait_for(|synced| *synced));
        match started.await {
            Ok(Ok(_)) => {}
            _ => {
                return Err(RepositoryError::unavailable(
                    "the change feed could not read the store in time",
                ));
            }
        }
        let head = shared.hub.bounds().1;
        let asked = after
            .as_ref()
            .and_then(|cursor| shared.cursors.position(cursor));
        let known = match asked {
            None => None,
            Some(position) => {
                let (floor, issued) = shared.source.bounds().await?;
                retained(position, floor, issued.max(head)).then_some(position)
            }
        };
        // The present, read now: the hub's head may be a poll behind, and a
        // stream without a cursor gives nothing committed before it began.
        let from = match known {
            Some(position) => position,
            None => shared.source.present().await?.max(head),
        };
        let start = shared.cursors.cursor(from).map_err(|error| match error {
            FeedError::Unavailable(error) => error,
            FeedError::TooSlow => RepositoryError::unavailable("no cursor"),
        })?;
        let history: Arc<dyn History> = Arc::clone(&shared.source) as Arc<dyn History>;
        Ok(Subscription {
            start,
            reset: after.is_some() && known.is_none(),
            changes: follow(
                Arc::clone(&shared.hub),
                Some(history),
                shared.cursors.clone(),
                from,
                Some(Box::new(counted)),
            ),
        })
    }
}

/// The shortest time between two polls: the commits of a busy instance
/// wake the poller far more often than that, and each poll is a few
/// statements, so the wakes within it are served by one poll (measured:
/// with a poll per commit, ten subscribers more than doubled the database's
/// CPU per create).
const MIN_GAP: Duration = Duration::from_millis(10);

/// The poller (see the module's documentation); ends once the store is
/// dropped.
async fn poll(shared: Weak<Shared>, wake: Arc<Notify>) {
    /// How long an idle poller sleeps between looks at whether the store
    /// is still there.
    const IDLE: Duration = Duration::from_secs(1);
    let mut failing = false;
    let mut last = tokio::time::Instant::now();
    loop {
        let Some(feed) = shared.upgrade() else { return };
        let active = {
            let activity = feed.activity.lock();
            let active = activity.subscribers > 0;
            if !active {
                feed.active.store(false, Ordering::Relaxed);
                feed.synced.send_replace(false);
            }
            active
        };
        if !active {
            drop(feed);
            let _ = tokio::time::timeout(IDLE, wake.notified()).await;
            continue;
        }
        let every = feed.poll_every;
        let since = last.elapsed();
        if since < MIN_GAP {
            drop(feed);
            tokio::time::sleep(MIN_GAP - since).await;
            continue;
        }
        last = tokio::time::Instant::now();
        let more = match step(&feed).await {
            Ok(more) => {
                if failing {
                    tracing::info!("the change feed reads the store again");
                }
                failing = false;
                more
            }
            Err(error) => {
                if !failing {
                    tracing::warn!(error = %ErrorChain(&error), "the change feed cannot read the store; retrying");
                }
                failing = true;
                false
            }
        };
        drop(feed);
        if !more {
            let _ = tokio::time::timeout(every, wake.notified()).await;
        }
    }
}

/// One poll: starts at the present when not yet following, then reads what
/// became final; whether more is waiting.
async fn step(feed: &Shared) -> Result<bool, RepositoryError> {
    if !*feed.synced.borrow() {
        let head = feed.source.present().await?;
        feed.hub.restart_at(head);
        feed.synced.send_replace(true);
    }
    let head = feed.hub.bounds().1;
    let (entries, new_head, floor) = feed.source.poll(head, POLL_LIMIT).await?;
    if floor > head {
        // The store pruned past what this process followed (it could not
        // read the store for longer than the retention, or was a poll
        // behind a pruning that reached the newest changes): go on from
        // the floor, where the store's changes still start. Subscribers
        // below it missed what was pruned and are told they fell behind;
        // those at or above it, which started from the store's present,
        // lose nothing.
        feed.hub.restart_at(floor);
        return Ok(true);
    }
    let more = entries.len() == POLL_LIMIT;
    feed.hub.publish(entries, new_head);
    Ok(more)
}

#[cfg(test)]
#[path = "durable_tests.rs"]
mod tests;
