//! The hub: the latest changes of one store in this process, in position
//! order, read by every subscriber of this process from where it stands.
//!
//! Invariants:
//! - positions only grow: every change with a position in
//!   `(floor, head]` is in the ring, every change at or below `floor` is
//!   gone from it, and none above `head` is known yet;
//! - a subscriber holds only its position: the ring is shared, so many
//!   subscribers cost no more memory than one, and the ring's capacity
//!   bounds what the hub holds whatever they do; a subscriber whose
//!   position fell below `floor` is told so ([`Read::Behind`]) instead of
//!   being waited for;
//! - a publisher never waits for a subscriber: it pushes, wakes those
//!   waiting and goes on.
//!
//! The in-memory store publishes under its own write lock, so position
//! order is commit order; the durable stores' pollers publish what their
//! database says is final, in position order.

use std::collections::{HashMap, VecDeque};
use std::task::{Context, Poll, Waker};
use std::time::SystemTime;

use items_domain::ItemChange;
use parking_lot::Mutex;

/// One change with its position in the store's order.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) position: u64,
    pub(crate) change: ItemChange,
    pub(crate) at: SystemTime,
}

/// What a subscriber reads from the hub.
#[derive(Debug)]
pub(crate) enum Read {
    /// The changes after the subscriber's position, in order (at most the
    /// number asked for).
    Changes(Vec<Entry>),
    /// The ring no longer holds what follows the subscriber's position.
    Behind,
}

/// The hub of one store (see the module's documentation).
#[derive(Debug)]
pub(crate) struct Hub {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    ring: VecDeque<Entry>,
    capacity: usize,
    /// Every change at or below it is gone from the ring.
    floor: u64,
    /// Every change at or below it that the store will ever have is known.
    head: u64,
    /// The subscribers waiting for a change, by their id.
    waiting: HashMap<u64, Waker>,
    next_waiter: u64,
}

impl Hub {
    /// An empty hub holding at most `capacity` changes, at `head`.
    pub(crate) fn new(capacity: usize, head: u64) -> Self {
        Self {
            state: Mutex::new(State {
                ring: VecDeque::new(),
                capacity: capacity.max(1),
                floor: head,
                head,
                waiting: HashMap::new(),
                next_waiter: 0,
            }),
        }
    }

    /// The floor and the head, read together.
    pub(crate) fn bounds(&self) -> (u64, u64) {
        let state = self.state.lock();
        (state.floor, state.head)
    }

    /// Appends the next change, at `head + 1`, and returns its position: the
    /// in-memory store, which numbers its changes itself.
    pub(crate) fn publish_next(&self, change: ItemChange, at: SystemTime) -> u64 {
        let mut state = self.state.lock();
        let position = state.head + 1;
        state.push(Entry {
            position,
            change,
            at,
        });
        state.head = position;
        let waiting = state.take_waiting();
        drop(state);
        wake(waiting);
        position
    }

    /// Appends `entries` (in position order, all above the head) and moves
    /// the head to `head`: what a durable store's poller read as final.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn publish(&self, entries: Vec<Entry>, head: u64) {
        let mut state = self.state.lock();
        if entries.is_empty() && head <= state.head {
            return;
        }
        for entry in entries {
            if entry.position > state.head {
                state.head = entry.position;
                state.push(entry);
            }
        }
        state.head = state.head.max(head);
        let waiting = state.take_waiting();
        drop(state);
        wake(waiting);
    }

    /// Forgets every change held and stands at `head`: a durable store's
    /// poller starting again after it stopped, which did not follow what
    /// was committed meanwhile. Subscribers behind `head` read the rest
    /// from the store.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn restart_at(&self, head: u64) {
        let mut state = self.state.lock();
        state.ring.clear();
        state.floor = head;
        state.head = head;
        let waiting = state.take_waiting();
        drop(state);
        wake(waiting);
    }

    /// A new waiter's id, for [`poll_after`](Self::poll_after).
    pub(crate) fn waiter(&self) -> u64 {
        let mut state = self.state.lock();
        state.next_waiter += 1;
        state.next_waiter
    }

    /// Forgets waiter `id` (its subscriber is gone).
    pub(crate) fn forget(&self, id: u64) {
        self.state.lock().waiting.remove(&id);
    }

    /// At most `max` changes after `after`; pending (waiter `id` woken at
    /// the next publish) while there are none.
    pub(crate) fn poll_after(
        &self,
        after: u64,
        max: usize,
        id: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Read> {
        let mut state = self.state.lock();
        if after < state.floor {
            return Poll::Ready(Read::Behind);
        }
        let start = state.ring.partition_point(|entry| entry.position <= after);
        if start < state.ring.len() {
            let changes = state.ring.range(start..).take(max).cloned().collect();
            return Poll::Ready(Read::Changes(changes));
        }
        match state.waiting.get_mut(&id) {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            Some(waker) => waker.clone_from(cx.waker()),
            None => {
                state.waiting.insert(id, cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl State {
    fn push(&mut self, entry: Entry) {
        if self.ring.len() == self.capacity
            && let Some(oldest) = self.ring.pop_front()
        {
            self.floor = oldest.position;
        }
        self.ring.push_back(entry);
    }

    /// The wakers of everyone waiting, to wake once the lock is let go.
    fn take_waiting(&mut self) -> Vec<Waker> {
        if self.waiting.is_empty() {
            return Vec::new();
        }
        self.waiting.drain().map(|(_, waker)| waker).collect()
    }
}

fn wake(waiting: Vec<Waker>) {
    for waker in waiting {
        waker.wake();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::Wake;

    use items_domain::Id;

    use super::*;

    fn deleted(hub: &Hub) -> u64 {
        hub.publish_next(ItemChange::Deleted(Id::new(1)), SystemTime::UNIX_EPOCH)
    }

    struct Counter(std::sync::atomic::AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn positions(read: Poll<Read>) -> Vec<u64> {
        match read {
            Poll::Ready(Read::Changes(entries)) => {
                entries.iter().map(|entry| entry.position).collect()
            }
            other => panic!("expected changes, got {other:?}"),
        }
    }

    #[test]
    fn subscribers_read_from_where_they_stand_and_wait_at_the_head() {
        let hub = Hub::new(4, 0);
        let counter = Arc::new(Counter(0.into()));
        let waker = Waker::from(Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        let id = hub.waiter();
        assert!(hub.poll_after(0, 10, id, &mut cx).is_pending());
        assert_eq!(deleted(&hub), 1);
        assert_eq!(counter.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        deleted(&hub);
        assert_eq!(positions(hub.poll_after(0, 10, id, &mut cx)), [1, 2]);
        assert_eq!(positions(hub.poll_after(1, 10, id, &mut cx)), [2]);
        assert_eq!(positions(hub.poll_after(0, 1, id, &mut cx)), [1]);
        assert!(hub.poll_after(2, 10, id, &mut cx).is_pending());
        assert!(
            hub.poll_after(7, 10, id, &mut cx).is_pending(),
            "ahead of the head: waits"
        );
    }

    #[test]
    fn the_ring_keeps_its_capacity_and_tells_a_subscriber_left_behind() {
        let hub = Hub::new(3, 10);
        for _ in 0..5 {
            deleted(&hub);
        }
        assert_eq!(hub.bounds(), (12, 15));
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(matches!(
            hub.poll_after(11, 10, 1, &mut cx),
            Poll::Ready(Read::Behind)
        ));
        assert_eq!(positions(hub.poll_after(12, 10, 1, &mut cx)), [13, 14, 15]);
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    #[test]
    fn a_durable_publish_moves_the_head_past_gaps_and_a_restart_forgets() {
        let hub = Hub::new(8, 0);
        let entry = |position| Entry {
            position,
            change: ItemChange::Deleted(Id::new(1)),
            at: SystemTime::UNIX_EPOCH,
        };
        hub.publish(vec![entry(3), entry(5)], 9);
        assert_eq!(hub.bounds(), (0, 9));
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert_eq!(positions(hub.poll_after(3, 10, 1, &mut cx)), [5]);
        assert!(hub.poll_after(5, 10, 1, &mut cx).is_pending());
        hub.restart_at(20);
        assert_eq!(hub.bounds(), (20, 20));
        assert!(matches!(
            hub.poll_after(9, 10, 1, &mut cx),
            Poll::Ready(Read::Behind)
        ));
    }
}
