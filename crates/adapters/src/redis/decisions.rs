//! A lane's decisions: asked by the requests of its thread, taken by its
//! task in batches, answered in place.
//!
//! Why not the group-commit queue of [`crate::batch`] that the stores use.
//! That queue serves callers on any thread and gives each request a
//! bounded channel's permit, a reply channel and a claim of its own: three
//! shared allocations and a dozen atomic operations per decision. A lane's
//! callers are the requests of its own worker, each asking once and
//! waiting for one answer, and nobody's work is to be undone when a caller
//! leaves (a decision sent is spent, like any request the client sent and
//! then left). So here a decision is a slot in one table under one lock
//! that nobody else contends for: asked, taken, answered, read back, and
//! the slot used again. Measured with callgrind under 50 concurrent
//! clients: docs/performance.md, "An own connection and a table of
//! slots".
//!
//! A slot carries a generation, so an answer for a caller that left,
//! whose slot a later decision has taken since, is dropped rather than
//! given to the wrong caller.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::coalesce::{Answer, Decision, Failure};

/// Why a decision of a lane that has stopped was not taken.
pub(super) const STOPPED: &str = "the Redis lane has stopped";

/// The decisions of one lane.
#[derive(Debug, Default)]
pub(super) struct Decisions {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// Asked and not yet taken by the lane, in the order asked.
    queued: Vec<Taken>,
    /// As many as the most decisions ever waiting at once on the lane's
    /// thread (one per request its worker serves at once), kept for reuse.
    slots: Vec<Slot>,
    /// Slots no caller holds.
    free: Vec<usize>,
    /// The lane's task, while it waits for a first decision.
    lane: Option<Waker>,
    /// The lane has stopped (its task ended) or is to stop (its store is
    /// gone): nothing more is taken.
    closed: bool,
}

#[derive(Debug, Default)]
struct Slot {
    generation: u64,
    state: State,
}

#[derive(Debug, Default)]
enum State {
    #[default]
    Free,
    /// Asked; the caller's waker once it has polled.
    Waiting(Option<Waker>),
    Answered(Answer),
}

/// A decision as the lane takes it, and the slot its answer goes to.
#[derive(Debug)]
pub(super) struct Taken {
    pub(super) decision: Decision,
    slot: usize,
    generation: u64,
}

impl Decisions {
    /// Queues `decision` for the lane; the answer comes to the returned
    /// future. Wakes the lane if it was waiting for work.
    ///
    /// # Errors
    /// The decision back, when the lane has stopped or is to stop.
    pub(super) fn ask(self: &Arc<Self>, decision: Decision) -> Result<Asked, Decision> {
        let mut table = self.table.lock();
        if table.closed {
            return Err(decision);
        }
        let slot = table.free.pop().unwrap_or_else(|| {
            table.slots.push(Slot::default());
            table.slots.len() - 1
        });
        let entry = &mut table.slots[slot];
        entry.generation += 1;
        entry.state = State::Waiting(None);
        let generation = entry.generation;
        table.queued.push(Taken {
            decision,
            slot,
            generation,
        });
        let lane = table.lane.take();
        drop(table);
        if let Some(lane) = lane {
            lane.wake();
        }
        Ok(Asked {
            decisions: Some(Arc::clone(self)),
            slot,
            generation,
        })
    }

    /// Moves every queued decision, up to `most`, into `batch` (which is
    /// cleared first); when none is queued, remembers `waker` to be woken
    /// by the next. `Ready(false)` once the lane is to stop.
    pub(super) fn poll_take(
        &self,
        waker: &Waker,
        batch: &mut Vec<Taken>,
        most: usize,
    ) -> Poll<bool> {
        batch.clear();
        let mut table = self.table.lock();
        if table.queued.is_empty() {
            if table.closed {
                return Poll::Ready(false);
            }
            match &mut table.lane {
                Some(lane) => lane.clone_from(waker),
                None => table.lane = Some(waker.clone()),
            }
            return Poll::Pending;
        }
        take_queued(&mut table.queued, batch, most);
        Poll::Ready(true)
    }

    /// Moves what was queued since, up to `most` in all, behind `batch`'s
    /// own, without waiting.
    pub(super) fn take_more(&self, batch: &mut Vec<Taken>, most: usize) {
        let mut table = self.table.lock();
        take_queued(&mut table.queued, batch, most);
    }

    /// Answers the decisions of `batch` in order with `answers`, and wakes
    /// their callers. A decision past the answers given is answered with
    /// `otherwise`.
    pub(super) fn answer(
        &self,
        batch: &mut Vec<Taken>,
        answers: impl IntoIterator<Item = Answer>,
        otherwise: &Failure,
    ) {
        let mut wakers = Vec::with_capacity(batch.len());
        {
            let mut table = self.table.lock();
            let mut answers = answers.into_iter();
            for taken in batch.drain(..) {
                let answer = answers.next().unwrap_or_else(|| Err(otherwise.clone()));
                if let Some(waker) = table.answer(taken.slot, taken.generation, answer) {
                    wakers.push(waker);
                }
            }
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Stops the lane: nothing more is asked of it. What is queued is still
    /// taken; the lane's task ends once it finds nothing left.
    pub(super) fn close(&self) {
        let lane = {
            let mut table = self.table.lock();
            table.closed = true;
            table.lane.take()
        };
        if let Some(lane) = lane {
            lane.wake();
        }
    }

    /// Whether the lane has stopped or is to stop.
    pub(super) fn is_closed(&self) -> bool {
        self.table.lock().closed
    }

    /// The lane's task has ended (or its runtime dropped it): every
    /// decision still queued or waiting fails, and nothing more is taken.
    pub(super) fn fail_all(&self) {
        let failure = Failure::new(STOPPED);
        let mut wakers = Vec::new();
        {
            let mut table = self.table.lock();
            table.closed = true;
            table.lane = None;
            table.queued.clear();
            for slot in &mut table.slots {
                if let State::Waiting(waker) = &mut slot.state {
                    wakers.extend(waker.take());
                    slot.state = State::Answered(Err(failure.clone()));
                }
            }
        }
        wakers.into_iter().for_each(Waker::wake);
    }

    /// How many decisions are queued and not yet taken.
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.table.lock().queued.len()
    }
}

fn take_queued(queued: &mut Vec<Taken>, batch: &mut Vec<Taken>, most: usize) {
    let room = most.saturating_sub(batch.len()).min(queued.len());
    batch.extend(queued.drain(..room));
}

impl Table {
    /// The waker of the caller `answer` goes to, if it still waits.
    fn answer(&mut self, slot: usize, generation: u64, answer: Answer) -> Option<Waker> {
        let entry = self.slots.get_mut(slot)?;
        if entry.generation != generation {
            return None;
        }
        match &mut entry.state {
            State::Waiting(waker) => {
                let waker = waker.take();
                entry.state = State::Answered(answer);
                waker
            }
            State::Free | State::Answered(_) => None,
        }
    }
}

/// One decision's answer, to wait for. Dropping it frees its slot; the
/// decision itself, if already sent, is spent all the same.
#[derive(Debug)]
pub(super) struct Asked {
    decisions: Option<Arc<Decisions>>,
    slot: usize,
    generation: u64,
}

impl Future for Asked {
    type Output = Answer;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        let Some(decisions) = &self.decisions else {
            // Polled again after its answer.
            return Poll::Ready(Err(Failure::new(STOPPED)));
        };
        let mut table = decisions.table.lock();
        let (slot, generation) = (self.slot, self.generation);
        let answered = match table.slots.get_mut(slot) {
            Some(entry) if entry.generation == generation => match &mut entry.state {
                State::Waiting(Some(waker)) => {
                    waker.clone_from(cx.waker());
                    None
                }
                State::Waiting(waker) => {
                    *waker = Some(cx.waker().clone());
                    None
                }
                State::Answered(_) => match std::mem::take(&mut entry.state) {
                    State::Answered(answer) => Some(answer),
                    _ => None,
                },
                State::Free => Some(Err(Failure::new(STOPPED))),
            },
            _ => Some(Err(Failure::new(STOPPED))),
        };
        let Some(answer) = answered else {
            return Poll::Pending;
        };
        table.free.push(slot);
        drop(table);
        self.decisions = None;
        Poll::Ready(answer)
    }
}

impl Drop for Asked {
    fn drop(&mut self) {
        let Some(decisions) = self.decisions.take() else {
            return;
        };
        let mut table = decisions.table.lock();
        if let Some(entry) = table.slots.get_mut(self.slot)
            && entry.generation == self.generation
        {
            entry.state = State::Free;
            table.free.push(self.slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::time::{Duration, Instant};

    use futures_util::FutureExt;
    use items_domain::Spent;

    use super::*;

    fn decision(last_octet: u8) -> Decision {
        Decision {
            client: IpAddr::from([203, 0, 113, last_octet]),
            period: 1,
            tolerance: 1,
            deadline: Instant::now() + Duration::from_secs(5),
        }
    }

    fn spent(seconds: u64) -> Answer {
        Ok(Spent {
            allowed: true,
            until_full: Duration::from_secs(seconds),
        })
    }

    fn seconds(answer: Answer) -> u64 {
        answer.expect("answered").until_full.as_secs()
    }

    fn take(decisions: &Decisions, most: usize) -> Vec<Taken> {
        let mut batch = Vec::new();
        let waker = futures_util::task::noop_waker();
        assert_eq!(
            decisions.poll_take(&waker, &mut batch, most),
            Poll::Ready(true)
        );
        batch
    }

    #[test]
    fn each_caller_gets_the_answer_given_for_its_own_decision_c9() {
        let decisions = Arc::new(Decisions::default());
        let mut asked: Vec<Asked> = (1..=3)
            .map(|n| decisions.ask(decision(n)).unwrap())
            .collect();
        for waiting in &mut asked {
            assert!(waiting.now_or_never_ref().is_none(), "not answered yet");
        }
        let mut batch = take(&decisions, 8);
        let clients: Vec<u8> = batch
            .iter()
            .map(|taken| match taken.decision.client {
                IpAddr::V4(address) => address.octets()[3],
                IpAddr::V6(_) => 0,
            })
            .collect();
        assert_eq!(clients, [1, 2, 3], "in the order asked");

        decisions.answer(&mut batch, [spent(10), spent(20)], &Failure::new("short"));

        let answers: Vec<Answer> = asked
            .into_iter()
            .map(|asked| asked.now_or_never().expect("answered"))
            .collect();
        assert_eq!(seconds(answers[0].clone()), 10);
        assert_eq!(seconds(answers[1].clone()), 20);
        assert!(
            matches!(&answers[2], Err(Failure::Failed(cause)) if &**cause == "short"),
            "a decision past the answers given gets the failure"
        );
    }

    #[test]
    fn a_batch_takes_at_most_what_it_may_and_the_rest_waits_for_the_next_c9() {
        let decisions = Arc::new(Decisions::default());
        let _asked: Vec<Asked> = (1..=5)
            .map(|n| decisions.ask(decision(n)).unwrap())
            .collect();
        let mut batch = take(&decisions, 2);
        assert_eq!(batch.len(), 2);
        decisions.take_more(&mut batch, 3);
        assert_eq!(batch.len(), 3);
        assert_eq!(decisions.queued(), 2);
    }

    #[test]
    fn a_slot_freed_by_a_caller_that_left_takes_no_answer_meant_for_it_c9() {
        let decisions = Arc::new(Decisions::default());
        let left = decisions.ask(decision(1)).unwrap();
        let mut batch = take(&decisions, 8);
        drop(left);
        // The freed slot goes to the next decision.
        let next = decisions.ask(decision(2)).unwrap();
        assert_eq!(next.slot, batch[0].slot);

        decisions.answer(&mut batch, [spent(10)], &Failure::new("unused"));
        let mut next = next;
        assert!(
            next.now_or_never_ref().is_none(),
            "the answer for the caller that left is dropped"
        );
        let mut batch = take(&decisions, 8);
        decisions.answer(&mut batch, [spent(20)], &Failure::new("unused"));
        assert_eq!(seconds(next.now_or_never().expect("answered")), 20);
    }

    #[test]
    fn a_lane_that_stopped_fails_what_waits_and_what_is_asked_later_c9() {
        let decisions = Arc::new(Decisions::default());
        let waiting = decisions.ask(decision(1)).unwrap();
        decisions.fail_all();
        assert!(decisions.is_closed());
        assert!(waiting.now_or_never().expect("answered").is_err());
        assert!(decisions.ask(decision(2)).is_err(), "refused at once");
    }

    #[test]
    fn a_closed_lane_hands_out_what_was_queued_then_ends_c9() {
        let decisions = Arc::new(Decisions::default());
        let _waiting = decisions.ask(decision(1)).unwrap();
        decisions.close();
        let waker = futures_util::task::noop_waker();
        let mut batch = Vec::new();
        assert_eq!(
            decisions.poll_take(&waker, &mut batch, 8),
            Poll::Ready(true)
        );
        assert_eq!(batch.len(), 1);
        assert_eq!(
            decisions.poll_take(&waker, &mut batch, 8),
            Poll::Ready(false)
        );
    }

    /// Polls once without consuming the future.
    trait PollOnce {
        fn now_or_never_ref(&mut self) -> Option<Answer>;
    }

    impl PollOnce for Asked {
        fn now_or_never_ref(&mut self) -> Option<Answer> {
            let waker = futures_util::task::noop_waker();
            match Pin::new(self).poll(&mut Context::from_waker(&waker)) {
                Poll::Ready(answer) => Some(answer),
                Poll::Pending => None,
            }
        }
    }
}
