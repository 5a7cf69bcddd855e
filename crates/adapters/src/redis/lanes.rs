//! One lane per thread: each thread that asks for decisions has its own
//! queue, its own coalescing task and its own connection to Redis, all on
//! that thread's runtime.
//!
//! Why per thread. An actix-web worker is a single-threaded runtime. With
//! one lane on a thread of the store's own (the first form, issue 21),
//! every batch crossed threads twice: the worker woke the lane's thread, and
//! the lane woke the worker's runtime once per answered decision (an
//! `eventfd` write each, and a context switch whenever both threads share a
//! core). Measured with `bench/limiter_redis.sh`, a request decided in
//! Redis cost the service 4.6 µs of CPU more than one with the limiter off.
//! With the lane on the asking worker's own runtime, the decisions, the call
//! and the answers never leave the thread. The extra cost fell to 1.1–2.2 µs,
//! and the shared budget went from 0.56 to about 0.72 of the limiter-off
//! throughput (0.69–0.81 over three runs; docs/performance.md).
//!
//! What it costs: one connection to Redis per worker thread and store
//! (workers default to the number of cores), and a lane shares its thread
//! with the requests it decides for. A lane is polled in turn with them, so
//! a burst on a busy worker may take up a batch late; the lane then still
//! gives the batch a round trip's worth of time in Redis (`coalesce.rs`),
//! rather than failing decisions that Redis was never given the chance to
//! take.
//!
//! A lane ends when its runtime does (its task is dropped with it) or when
//! the store is dropped and the thread next looks for a lane; a thread that
//! finds its lane ended starts a new one.

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use redis::aio::ConnectionManager;

use super::Shared;
use super::coalesce::{self, Answer, Decision};
use super::link::Link;
use crate::batch;

/// The most decisions queued at once on one thread, and so in one script
/// call: a caller finding the queue full waits for room, which the lane
/// makes within one call's time bound.
const QUEUE_CAPACITY: usize = 512;

/// A thread's way to Redis for one store.
pub(super) struct Lane {
    /// Where the thread's decisions queue for the next script call.
    pub(super) queue: batch::Queue<Decision, Answer>,
    /// The lane's connection, for the health check's `PING`.
    pub(super) connection: ConnectionManager,
}

thread_local! {
    /// This thread's lanes, one per live store (a process has one store;
    /// tests have several).
    static LANES: RefCell<Vec<(Weak<Shared>, Arc<Lane>)>> = const { RefCell::new(Vec::new()) };
}

/// This thread's lane for `store`, started on the current runtime when the
/// thread has none (or its lane has ended).
///
/// # Errors
/// When the connection cannot be set up (never for a URL that opened).
pub(super) fn of_this_thread(store: &Arc<Shared>) -> redis::RedisResult<Arc<Lane>> {
    LANES.with_borrow_mut(|lanes| {
        // A pointer comparison, not `Arc::downgrade`: that would write the
        // store's reference count, shared by every worker, per decision. A
        // `Weak` keeps its allocation, so no later store can take the
        // address of one whose lane is still listed here.
        let mine = |owner: &Weak<Shared>| std::ptr::eq(owner.as_ptr(), Arc::as_ptr(store));
        if let Some((_, lane)) = lanes.iter().find(|(owner, _)| mine(owner))
            && !lane.queue.is_stopped()
        {
            return Ok(Arc::clone(lane));
        }
        // Lanes of dropped stores, and lanes whose runtime ended, go.
        lanes.retain(|(owner, lane)| owner.strong_count() > 0 && !lane.queue.is_stopped());
        let lane = Arc::new(start(store)?);
        lanes.push((Arc::downgrade(store), Arc::clone(&lane)));
        Ok(lane)
    })
}

fn start(store: &Shared) -> redis::RedisResult<Lane> {
    let connection =
        ConnectionManager::new_lazy_with_config(store.client.clone(), store.config.clone())?;
    let link = Link::new(store.client.get_connection_info().clone());
    let (queue, batches) = batch::queue(QUEUE_CAPACITY);
    tokio::spawn(coalesce::lane(
        batches,
        link,
        Arc::clone(&store.script),
        Arc::clone(&store.prefix),
        Arc::clone(&store.health),
    ));
    Ok(Lane { queue, connection })
}

#[cfg(test)]
mod tests {
    //! Against the project's Redis on 127.0.0.1:6379 (these fail, never
    //! skip, without it).

    use std::net::IpAddr;
    use std::num::NonZeroU32;
    use std::time::Duration;

    use items_domain::{Gcra, RateLimitStore};

    use super::*;
    use crate::redis::RedisRateLimitStore;

    fn store() -> RedisRateLimitStore {
        RedisRateLimitStore::open("redis://127.0.0.1:6379/", "items-service-unit-test:lanes:")
            .unwrap()
    }

    fn lanes_here() -> usize {
        LANES.with_borrow(Vec::len)
    }

    fn on_a_new_runtime<T>(work: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work)
    }

    async fn spend(store: &RedisRateLimitStore) -> bool {
        let gcra = Gcra::new(NonZeroU32::MAX, Duration::from_secs(1));
        store
            .spend(IpAddr::from([198, 51, 100, 7]), gcra)
            .await
            .is_ok()
    }

    #[test]
    fn each_thread_has_its_own_lane_and_a_thread_reuses_its_lane_c9() {
        let store = Arc::new(store());
        let (here, twice_here) = on_a_new_runtime(async {
            assert!(spend(&store).await, "Redis must answer on 127.0.0.1:6379");
            let here = of_this_thread(&store.shared).unwrap();
            let again = of_this_thread(&store.shared).unwrap();
            (here, again)
        });
        assert!(Arc::ptr_eq(&here, &twice_here));
        let elsewhere = {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                on_a_new_runtime(async move {
                    assert!(spend(&store).await);
                    of_this_thread(&store.shared).unwrap()
                })
            })
            .join()
            .unwrap()
        };
        assert!(!Arc::ptr_eq(&here, &elsewhere));
    }

    #[test]
    fn a_lane_whose_runtime_ended_is_replaced_and_decides_again_c9() {
        let store = store();
        let first = on_a_new_runtime(async {
            assert!(spend(&store).await, "Redis must answer on 127.0.0.1:6379");
            of_this_thread(&store.shared).unwrap()
        });
        // The runtime is gone, and the lane's task with it.
        assert!(first.queue.is_stopped());

        let (second, decided) = on_a_new_runtime(async {
            let decided = spend(&store).await;
            (of_this_thread(&store.shared).unwrap(), decided)
        });

        assert!(decided, "decided in Redis, not failed on the ended lane");
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(
            lanes_here(),
            1,
            "the ended lane was replaced, not kept beside"
        );
    }

    #[test]
    fn the_lane_of_a_dropped_store_goes_when_the_thread_next_looks_c9() {
        on_a_new_runtime(async {
            let dropped = store();
            assert!(spend(&dropped).await, "Redis must answer on 127.0.0.1:6379");
            drop(dropped);
            assert_eq!(lanes_here(), 1);

            let kept = store();
            assert!(spend(&kept).await);

            assert_eq!(lanes_here(), 1, "only the live store's lane is left");
        });
    }
}
