//! One lane per thread: each thread that asks for decisions has its own
//! queue, coalescing task and connection to Redis, all on that thread's
//! runtime, so a decision, its script call and its answer never cross
//! threads.
//!
//! Invariants: a thread has at most one open lane per live store, and the
//! lane holds the only callers' end of its queue. A lane ends when its
//! runtime does (its task is dropped with every decision queued or in
//! flight, whose callers then fail at once and count locally) or when its
//! store is dropped and the thread next looks for a lane (the queue closes,
//! the task answers what was queued, then ends); a thread that finds its
//! lane ended starts a new one. A lane shares its thread with the requests
//! it decides for, so a busy worker may take a batch up late; Redis still
//! gets a round trip for it (`coalesce.rs`). Costs one connection to Redis
//! per worker thread and store.
//!
//! Why: shared ÷ limiter-off 0.56 → 0.73 (docs/performance.md, "The Redis store, measured").

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use super::coalesce::{self, Decision, Queue, Reply};
use super::script::Connection;
use super::shared::Shared;
use crate::batch::{self, Refused};

/// Why a decision of a lane that has stopped was not taken.
pub(super) const STOPPED: &str = "the Redis lane has stopped";

/// Why a decision was not queued on a lane that holds all it may.
const FULL: &str = "the Redis lane's queue is full";

/// A thread's way to Redis for one store. Dropped (its store gone, or its
/// thread ended), it closes its queue (it holds the only callers' end),
/// and its task ends once it has answered what was queued.
pub(super) struct Lane {
    /// Where the thread's decisions queue for the next script call.
    decisions: Queue,
}

thread_local! {
    /// This thread's lanes, one per live store (a process has one store;
    /// tests have several).
    static LANES: RefCell<Vec<(Weak<Shared>, Lane)>> = const { RefCell::new(Vec::new()) };
}

/// Queues `decision` on this thread's lane for `store`, started on the
/// current runtime when the thread has none (or its lane has ended).
///
/// # Errors
/// When the lane's queue is full.
pub(super) fn ask(
    store: &Arc<Shared>,
    decision: Decision,
) -> redis::RedisResult<batch::Undated<Reply>> {
    LANES.with_borrow_mut(|lanes| {
        let decision = match lanes.iter().find(|(owner, _)| is_of(owner, store)) {
            Some((_, lane)) => match lane.decisions.try_enqueue(decision) {
                Ok(answer) => return Ok(answer),
                Err(Refused::Stopped(decision)) => decision,
                Err(full @ Refused::Full(_)) => return Err(refused(&full)),
            },
            None => decision,
        };
        let lane = open_lane(lanes, store);
        lane.decisions
            .try_enqueue(decision)
            .map_err(|refusal| refused(&refusal))
    })
}

/// Whether a lane listed for `owner` is `store`'s. A pointer comparison,
/// not `Arc::downgrade`: that would write the store's reference count,
/// shared by every worker, per decision. A `Weak` keeps its allocation, so
/// no later store can take the address of one whose lane is still listed.
fn is_of(owner: &Weak<Shared>, store: &Arc<Shared>) -> bool {
    std::ptr::eq(owner.as_ptr(), Arc::as_ptr(store))
}

/// `store`'s open lane on this thread, started when there is none; lanes
/// of dropped stores, and lanes that ended, go.
fn open_lane<'a>(lanes: &'a mut Vec<(Weak<Shared>, Lane)>, store: &Arc<Shared>) -> &'a Lane {
    let open = |owner: &Weak<Shared>, lane: &Lane| {
        owner.strong_count() > 0 && !lane.decisions.is_stopped()
    };
    lanes.retain(|(owner, lane)| open(owner, lane));
    let index = match lanes.iter().position(|(owner, _)| is_of(owner, store)) {
        Some(index) => index,
        None => {
            lanes.push((Arc::downgrade(store), start(store)));
            lanes.len() - 1
        }
    };
    &lanes[index].1
}

fn start(store: &Shared) -> Lane {
    let (decisions, batches) = coalesce::queue();
    tokio::spawn(coalesce::lane(
        batches,
        Connection::new(store.client.clone(), store.connection.clone()),
        Arc::clone(&store.script),
        Arc::clone(&store.prefix),
        Arc::clone(&store.health),
    ));
    Lane { decisions }
}

fn refused<W>(refusal: &Refused<W>) -> redis::RedisError {
    let why = match refusal {
        Refused::Full(_) => FULL,
        Refused::Stopped(_) => STOPPED,
    };
    redis::RedisError::from((redis::ErrorKind::Io, why))
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

    /// The queue of this thread's lane for `store`.
    fn lane_here(store: &RedisRateLimitStore) -> Queue {
        LANES.with_borrow(|lanes| {
            let (_, lane) = lanes
                .iter()
                .find(|(owner, _)| is_of(owner, &store.shared))
                .expect("a lane on this thread");
            lane.decisions.clone()
        })
    }

    fn on_a_new_runtime<T>(work: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work)
    }

    /// Spends until Redis decides, for up to 5 s: the first decision on a
    /// new lane also connects, within the store's 50 ms budget, which a
    /// loaded machine may miss once or twice (C9 then answers without
    /// Redis). What these tests check comes after.
    async fn spend_once_decided(store: &RedisRateLimitStore) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if spend(store).await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    async fn spend(store: &RedisRateLimitStore) -> bool {
        let gcra = Gcra::new(NonZeroU32::MAX, Duration::from_secs(1));
        store
            .spend(
                IpAddr::from([198, 51, 100, 7]),
                gcra,
                std::time::Instant::now(),
            )
            .await
            .is_ok()
    }

    #[test]
    fn each_thread_has_its_own_lane_and_a_thread_reuses_its_lane_c9() {
        let store = Arc::new(store());
        let (here, twice_here) = on_a_new_runtime(async {
            assert!(
                spend_once_decided(&store).await,
                "Redis must answer on 127.0.0.1:6379"
            );
            let here = lane_here(&store);
            assert!(spend_once_decided(&store).await);
            (here, lane_here(&store))
        });
        assert!(here.same_queue(&twice_here));
        let elsewhere = {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                on_a_new_runtime(async move {
                    assert!(spend_once_decided(&store).await);
                    lane_here(&store)
                })
            })
            .join()
            .unwrap()
        };
        assert!(!here.same_queue(&elsewhere));
    }

    #[test]
    fn a_lane_whose_runtime_ended_is_replaced_and_decides_again_c9() {
        let store = store();
        let first = on_a_new_runtime(async {
            assert!(
                spend_once_decided(&store).await,
                "Redis must answer on 127.0.0.1:6379"
            );
            lane_here(&store)
        });
        // The runtime is gone, and the lane's task with it.
        assert!(first.is_stopped());

        let (second, decided) = on_a_new_runtime(async {
            let decided = spend_once_decided(&store).await;
            (lane_here(&store), decided)
        });

        assert!(decided, "decided in Redis, not failed on the ended lane");
        assert!(!first.same_queue(&second));
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
            assert!(
                spend_once_decided(&dropped).await,
                "Redis must answer on 127.0.0.1:6379"
            );
            drop(dropped);
            assert_eq!(lanes_here(), 1);

            let kept = store();
            assert!(spend_once_decided(&kept).await);

            assert_eq!(lanes_here(), 1, "only the live store's lane is left");
        });
    }
}
