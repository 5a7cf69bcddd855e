//! Coalesced decisions: a lane's task takes every decision queued while its
//! previous script call ran and sends them in one `EVALSHA` of `gcra.lua`
//! (`script.rs`), then answers each caller. A batch goes as one group per
//! client (and policy): the key once and how many decisions it holds, so a
//! busy client's fifty decisions cost one key and three numbers out, two
//! numbers back, and Redis one `GET` and one `SET`.
//!
//! Invariants: no timer: a decision that finds the lane idle goes at once,
//! and a busy lane lets its thread run one more turn before it takes its
//! batch ([`next_batch`]); a call carries at most [`MOST_PER_CALL`]
//! decisions; the script takes a group's decisions in queue order, as
//! separate calls would have, and all of a batch see one reading of the
//! server's clock; a batch ends by its *oldest* decision's deadline, so no
//! decision waits past its bound, queueing included, unless the lane took
//! the batch up too late to leave Redis [`LEAST_ROUND_TRIP`] (that wait was
//! the worker's own); a batch that fails or runs out of time fails each of
//! its decisions, as a single call would have failed its one.
//!
//! Why: service CPU 20.5 → ~13 µs a request (docs/performance.md, "The Redis store, measured").

use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use items_domain::Spent;

use redis::Cmd;
use tracing::Instrument;

use super::health::Health;
use super::script::{Arguments, Connection};
use crate::batch::{self, Batch, Batches};

/// One GCRA step to take in Redis, and when its caller stops waiting.
#[derive(Debug)]
pub(super) struct Decision {
    pub(super) client: IpAddr,
    /// The GCRA's period and tolerance, in microseconds.
    pub(super) period: u64,
    pub(super) tolerance: u64,
    /// Asked at, plus the store's time bound.
    pub(super) deadline: Instant,
}

/// `duration` in whole microseconds, as a [`Decision`] holds the GCRA's
/// period and tolerance.
pub(super) fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// What Redis decided, or why it did not.
pub(super) type Reply = Result<Spent, Failure>;

/// A lane's queue: the callers' end.
pub(super) type Queue = batch::Queue<Decision, Reply>;

/// A decision Redis did not take.
#[derive(Debug, Clone)]
pub(super) enum Failure {
    /// The call failed or ran out of time: counted and logged.
    Failed(Arc<str>),
    /// Not sent: Redis failed a moment ago and is not asked again yet.
    Skipped,
}

impl Failure {
    pub(super) fn new(cause: impl Into<Arc<str>>) -> Self {
        Self::Failed(cause.into())
    }
}

/// The most decisions one script call carries; what is queued beyond
/// waits for the next call.
const MOST_PER_CALL: usize = 512;

/// The most decisions a lane's queue holds, waiting for a call: far above
/// the requests one worker serves at once (one decision each; actix-web
/// takes at most 25,000 connections per worker by default), so no decision
/// finds it full in practice.
const MOST_QUEUED: usize = 1 << 16;

/// A lane's queue: its callers' end and its task's.
pub(super) fn queue() -> (Queue, Batches<Decision, Reply>) {
    batch::queue(MOST_QUEUED)
}

/// The lane of one thread (`lanes.rs`): a batch, one script call, the
/// answers; until its store is gone and nothing is queued, or its runtime
/// drops it (then every decision still waiting is dropped unanswered, and
/// its caller fails at once).
pub(super) async fn lane(
    mut batches: Batches<Decision, Reply>,
    mut connection: Connection,
    script: Arc<redis::Script>,
    prefix: Arc<str>,
    health: Arc<Health>,
) {
    let mut busy = false;
    while let Some(batch) = next_batch(&mut batches, busy).await {
        busy = batch.len() > 1;
        if health.wait_before_retry(Instant::now()) {
            batch.answer_each(|_| Err(Failure::Skipped));
            continue;
        }
        let span = crate::traces::batch_operation("redis", Some("EVALSHA"), None);
        batch.trace(&span);
        match call(&mut connection, &script, &prefix, &batch)
            .instrument(span)
            .await
        {
            Ok(spent) => {
                health.answered();
                let short = Failure::new("the script answered too few decisions");
                let answers = spent.into_iter().map(Ok);
                batch.answer(answers.chain(std::iter::repeat_with(|| Err(short.clone()))));
            }
            Err(cause) => {
                // Marked here too, so the decisions already queued behind
                // this batch are not sent to a Redis that just failed.
                health.failed(&cause);
                let failure = Failure::new(cause);
                batch.answer_each(|_| Err(failure.clone()));
            }
        }
    }
}

/// The next decisions: waits for one and, when the lane is `busy` (its
/// last batch held more than one), lets the thread's other ready tasks run
/// once before it takes every decision queued by then. `None` once the
/// lane is to stop.
///
/// Under load the first decision wakes the lane while its worker is still
/// serving the requests it read in the same pass; their decisions come a
/// moment later. Taken at once, the batch would hold only the first, and
/// the others would wait behind its call for the next. After one turn of
/// the scheduler (`yield_now`, no timer: the lane runs again as soon as the
/// tasks ready before it have), they are in: about 23 → 40 decisions per
/// call (docs/performance.md, "The Redis store, measured"). A lane that is
/// not busy sends at once: that turn cost one client about 20 µs per
/// request.
async fn next_batch(
    batches: &mut Batches<Decision, Reply>,
    busy: bool,
) -> Option<Batch<Decision, Reply>> {
    let mut batch = batches.next_at_most(MOST_PER_CALL).await?;
    if busy {
        tokio::task::yield_now().await;
        batches.top_up(&mut batch, MOST_PER_CALL);
    }
    Some(batch)
}

/// The least time a batch is given in Redis once it is sent, even when its
/// oldest decision's bound is nearer: a lane shares its thread with the
/// requests it decides for (`lanes.rs`), so on a busy worker it may take a
/// batch up late, and that wait is the worker's, not Redis's. Far above a
/// round trip to a healthy Redis (well under a millisecond), far below the
/// bound itself.
const LEAST_ROUND_TRIP: Duration = Duration::from_millis(10);

/// One `EVALSHA` of `gcra.lua` over the batch's decisions, bounded by its
/// oldest decision's deadline (or [`LEAST_ROUND_TRIP`] from now, if later);
/// one [`Spent`] per decision, in order.
async fn call(
    connection: &mut Connection,
    script: &redis::Script,
    prefix: &str,
    batch: &Batch<Decision, Reply>,
) -> Result<Vec<Spent>, String> {
    let Some(oldest) = batch.work().map(|decision| decision.deadline).min() else {
        return Ok(Vec::new());
    };
    let deadline = oldest.max(Instant::now() + LEAST_ROUND_TRIP);
    // Each decision's group, and its place in the group's queue order.
    // The previous decision's group is tried first: a busy client's
    // decisions come in runs, and hashing each one cost more than the rest
    // of its share of the batch.
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: HashMap<Policy, usize> = HashMap::new();
    let mut places: Vec<(usize, u64)> = Vec::with_capacity(batch.len());
    let mut previous: Option<usize> = None;
    for decision in batch.work() {
        let policy = Policy::of(decision);
        let same_as_previous = previous.filter(|&group| groups[group].policy == policy);
        let group = same_as_previous.unwrap_or_else(|| {
            *group_of.entry(policy).or_insert_with(|| {
                groups.push(Group { policy, count: 0 });
                groups.len() - 1
            })
        });
        previous = Some(group);
        places.push((group, groups[group].count));
        groups[group].count += 1;
    }
    let arguments = Groups {
        prefix,
        groups: &groups,
    };
    let reply = connection
        .run(script, &arguments, deadline.into())
        .await
        .map_err(|error| error.to_string())?;
    if reply.len() != 2 * groups.len() {
        return Err(format!(
            "the script answered {} numbers for {} groups",
            reply.len(),
            groups.len()
        ));
    }
    let decided: Vec<(u64, u64)> = reply
        .chunks_exact(2)
        .map(|pair| (non_negative(pair[0]), non_negative(pair[1])))
        .collect();
    Ok(places
        .into_iter()
        .map(|(group, place)| {
            let (start, allowed) = decided[group];
            let period = groups[group].policy.period;
            // As separate calls would have answered: allowed while the
            // group's allowed ones last, each a period further from full.
            let owed = (place + 1).min(allowed);
            Spent {
                allowed: place < allowed,
                until_full: Duration::from_micros(
                    start.saturating_add(owed.saturating_mul(period)),
                ),
            }
        })
        .collect())
}

/// One client under one GCRA: what a batch's decisions are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Policy {
    client: IpAddr,
    period: u64,
    tolerance: u64,
}

impl Policy {
    fn of(decision: &Decision) -> Self {
        Self {
            client: decision.client,
            period: decision.period,
            tolerance: decision.tolerance,
        }
    }
}

/// One client's decisions under one policy, sent as one key.
struct Group {
    policy: Policy,
    count: u64,
}

/// A batch's groups as the script's keys and arguments (`gcra.lua`).
struct Groups<'a> {
    prefix: &'a str,
    groups: &'a [Group],
}

impl Arguments for Groups<'_> {
    fn keys(&self) -> usize {
        self.groups.len()
    }

    fn write(&self, command: &mut Cmd) {
        // The longest address `Display` writes is 45 bytes.
        let mut key = Vec::with_capacity(self.prefix.len() + 45);
        for group in self.groups {
            key.clear();
            key.extend_from_slice(self.prefix.as_bytes());
            write_address(&mut key, group.policy.client);
            command.arg(key.as_slice());
        }
        for group in self.groups {
            command
                .arg(group.policy.period)
                .arg(group.policy.tolerance)
                .arg(group.count);
        }
    }
}

/// `client` as `Display` writes it. An IPv4 address, the usual case, is
/// written octet by octet: through `core::fmt` it cost about 800
/// instructions, more than the rest of the batch's encoding.
fn write_address(out: &mut Vec<u8>, client: IpAddr) {
    match client {
        IpAddr::V4(address) => {
            let mut digits = itoa::Buffer::new();
            for (index, octet) in address.octets().into_iter().enumerate() {
                if index > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(digits.format(octet).as_bytes());
            }
        }
        IpAddr::V6(address) => {
            // Writing into a `Vec` cannot fail.
            let _ = write!(out, "{address}");
        }
    }
}

fn non_negative(number: i64) -> u64 {
    u64::try_from(number).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    //! The script over a batch, against the project's Redis on
    //! 127.0.0.1:6379 (these fail, never skip, without it).

    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::redis::RedisRateLimitStore;
    use crate::redis::shared::{connection_config, gcra};

    const SECOND: u64 = 1_000_000;

    fn decision(client: IpAddr, limit: u64) -> Decision {
        Decision {
            client,
            period: SECOND,
            tolerance: (limit - 1) * SECOND,
            deadline: Instant::now() + Duration::from_secs(5),
        }
    }

    fn connection() -> Connection {
        let redis = redis::Client::open("redis://127.0.0.1:6379/").unwrap();
        Connection::new(redis, connection_config(RedisRateLimitStore::TIMEOUT))
    }

    fn unique_prefix() -> String {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        format!("items-service-unit-test:{}:{nanos}:", std::process::id())
    }

    #[tokio::test]
    async fn a_batch_taken_up_after_its_oldest_bound_passed_is_still_decided_in_redis_c9() {
        // A lane that shares a busy worker's thread may take a batch up
        // late; the lateness is the worker's, so Redis still gets a round
        // trip's time rather than the decisions failing unasked.
        let mut connection = connection();
        let prefix = unique_prefix();
        let client = IpAddr::from([203, 0, 113, 3]);
        let (queue, mut batches) = queue();
        let late = Decision {
            deadline: Instant::now(),
            ..decision(client, 2)
        };
        let asked = queue.try_enqueue(late).expect("the lane is open");
        let batch = take(&mut batches).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let script = gcra();

        let spent = call(&mut connection, &script, &prefix, &batch).await;

        let spent = spent.expect("decided in Redis, not timed out");
        assert_eq!(spent.len(), 1);
        assert!(spent[0].allowed);
        assert_eq!(spent[0].until_full, Duration::from_secs(1));
        batch.answer(spent.into_iter().map(Ok));
        assert!(matches!(asked.await, Ok(Ok(_))));
    }

    #[tokio::test]
    async fn one_call_decides_each_decision_of_a_key_that_comes_many_times_in_order_c9() {
        let mut connection = connection();
        let prefix = unique_prefix();
        let clients = [
            IpAddr::from([203, 0, 113, 1]),
            IpAddr::from([203, 0, 113, 2]),
        ];
        let limit = 4;

        // Twenty decisions, the two clients alternating, all queued before the
        // lane takes them: one batch, one script call.
        let (queue, mut batches) = queue();
        let callers: Vec<batch::Undated<Reply>> = (0..20)
            .map(|n| queue.try_enqueue(decision(clients[n % 2], limit)).unwrap())
            .collect();
        let batch = take(&mut batches).await;
        assert_eq!(batch.len(), 20);
        let order: Vec<IpAddr> = batch.work().map(|decision| decision.client).collect();
        let script = gcra();
        let spent = call(&mut connection, &script, &prefix, &batch)
            .await
            .unwrap();
        batch.answer(spent.iter().copied().map(Ok));

        // Per key, in queue order: the budget's `limit` requests pass, each
        // a period further from full (one clock reading for the batch), and
        // the rest are refused with the budget `limit` periods from full.
        for client in &clients {
            let decided: Vec<(bool, u64)> = order
                .iter()
                .zip(&spent)
                .filter(|(of, _)| *of == client)
                .map(|(_, spent)| (spent.allowed, micros(spent.until_full)))
                .collect();
            let expected: Vec<(bool, u64)> = (1..=10)
                .map(|n| (n <= limit, n.min(limit) * SECOND))
                .collect();
            assert_eq!(decided, expected, "{client}");
        }
        for caller in callers {
            assert!(
                matches!(caller.await, Ok(Ok(_))),
                "every caller got its answer"
            );
        }
    }

    #[test]
    fn a_key_names_the_client_as_display_writes_it_c9() {
        for client in [
            IpAddr::from([0, 0, 0, 0]),
            IpAddr::from([203, 0, 113, 7]),
            IpAddr::from([255, 255, 255, 255]),
            "2001:db8::1".parse().unwrap(),
            "::ffff:192.0.2.1".parse().unwrap(),
        ] {
            let mut written = Vec::new();
            write_address(&mut written, client);
            assert_eq!(String::from_utf8(written).unwrap(), client.to_string());
        }
    }

    /// The clients of the batch [`next_batch`] takes when one decision is
    /// asked, and a second by a task that becomes ready only after the lane
    /// was woken, as the next request a worker read in the same pass. The
    /// runtime has one thread, as an actix-web worker has: the order is the
    /// scheduler's, not a matter of timing.
    async fn batch_of_two_asked_in_one_pass(busy: bool) -> Vec<IpAddr> {
        let (queue, mut batches) = queue();
        let lane = tokio::spawn(async move {
            let batch = next_batch(&mut batches, busy).await.expect("a batch");
            let clients: Vec<IpAddr> = batch.work().map(|decision| decision.client).collect();
            batch.answer_each(|_| Err(Failure::Skipped));
            clients
        });
        tokio::task::yield_now().await;
        let first = queue.try_enqueue(decision(FIRST, 2)).expect("queued");
        let second = tokio::spawn({
            let queue = queue.clone();
            async move {
                queue
                    .try_enqueue(decision(SECOND_CLIENT, 2))
                    .expect("queued")
                    .await
            }
        });
        let clients = lane.await.expect("the lane ran");
        assert!(
            matches!(first.await, Ok(Err(Failure::Skipped))),
            "the first was answered"
        );
        drop(second);
        clients
    }

    /// What the lane takes next, waiting for it.
    async fn take(batches: &mut Batches<Decision, Reply>) -> Batch<Decision, Reply> {
        next_batch(batches, false).await.expect("a batch")
    }

    const FIRST: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 4));
    const SECOND_CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 5));

    #[tokio::test]
    async fn a_busy_lanes_batch_takes_in_the_decisions_asked_during_one_more_turn_of_its_thread_c9()
    {
        assert_eq!(
            batch_of_two_asked_in_one_pass(true).await,
            [FIRST, SECOND_CLIENT],
            "both decisions in one batch, in the order asked"
        );
    }

    #[tokio::test]
    async fn an_idle_lane_sends_the_first_decision_at_once_c9() {
        assert_eq!(batch_of_two_asked_in_one_pass(false).await, [FIRST]);
    }
}
