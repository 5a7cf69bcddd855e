//! The run's check (C14), per subscriber, of the events as they came
//! (deduplicated by nothing):
//!
//! - their positions only grow: nothing repeated, nothing out of order;
//! - replayed from an empty store they give exactly the final listing,
//!   each applying to the state before it (a `created` of a new id, a
//!   `replaced` or `deleted` of a present one);
//! - every acknowledged write's event is among them, and no write refused
//!   with a 503 (which wrote nothing) has one;
//! - over a durable store, they are exactly the change table's rows after
//!   the subscription began, position for position, kind and item alike
//!   (but for the changes committed on a lost primary alone, of writes of
//!   unknown outcome: counted apart, see [`Figures::lost_with_the_primary`]);
//!
//! and the figures: events, reconnections, the delivery latency (from the
//! writer's 2xx to the subscriber's arrival, so an approximation from
//! above of commit to arrival; an event that came before its 2xx counts
//! as 0), kills and failovers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

use super::subscribers::{Kind, Seen, SubscriberLog};
use super::writers::{Key, WriterLog};

/// A change table's rows: position, kind, item id.
pub type Table = Vec<(u64, String, i64)>;

/// What broke the contract, summed over the subscribers.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Violations {
    /// Events whose position is not above the one before.
    pub out_of_order: usize,
    /// Events whose position came before.
    pub duplicated: usize,
    /// Acknowledged writes with no event.
    pub missed_acknowledged: usize,
    /// Rows of the change table with no event.
    pub missed_rows: usize,
    /// Events with no row, or another row than theirs.
    pub unknown_events: usize,
    /// Events of writes refused with a 503.
    pub phantoms: usize,
    /// Events that did not apply to the state the events before made.
    pub misapplied: usize,
    /// Items on which the replayed state and the final listing differ.
    pub state_differs: usize,
    /// Resumptions with a reset, or at another cursor than the one sent.
    pub bad_resumptions: usize,
    /// Events that did not read as changes.
    pub malformed: usize,
}

impl Violations {
    fn total(&self) -> usize {
        self.out_of_order
            + self.duplicated
            + self.missed_acknowledged
            + self.missed_rows
            + self.unknown_events
            + self.phantoms
            + self.misapplied
            + self.state_differs
            + self.bad_resumptions
            + self.malformed
    }
}

/// A run's figures.
#[derive(Debug, Default)]
pub struct Figures {
    pub label: &'static str,
    pub seed: u64,
    pub acknowledged: usize,
    pub refused: usize,
    pub unknown: usize,
    pub unexpected: Vec<String>,
    /// Events each subscriber got.
    pub events: Vec<usize>,
    pub reconnects: usize,
    pub broken: usize,
    pub latencies: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub over_a_second: usize,
    /// The p99 of the events acknowledged in each tenth of the writing
    /// time: where the slow ones were (the kill at 40 %, the failover at
    /// 70 %, or all along).
    pub p99_by_tenth: Vec<Duration>,
    /// Events of writes of unknown outcome that the promoted standby does
    /// not have (their rows are not in its change table): committed on the
    /// lost primary alone, published, then lost with it. Counted, not
    /// asserted, while the feed publishes commits no synchronous standby
    /// confirmed (`promoted.rs` reproduces it); the items they touched are
    /// left out of the replay's comparison.
    pub lost_with_the_primary: usize,
    pub kills: usize,
    pub failovers: usize,
    /// From the first write to the writers' stop.
    pub written: Duration,
    /// From the first write to the last subscriber's last event.
    pub elapsed: Duration,
    pub violations: Violations,
    /// The first few violations, described.
    pub examples: Vec<String>,
}

impl Figures {
    /// Fails the test with the figures unless nothing broke C14.
    pub fn assert_clean(&self) {
        assert_eq!(
            self.violations.total(),
            0,
            "C14 broken over {}: {:?}\n{}\n{self}",
            self.label,
            self.violations,
            self.examples.join("\n")
        );
        assert!(
            self.unexpected.is_empty(),
            "answers no write should get: {:?}",
            self.unexpected
        );
    }
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let events = self.events.iter().sum::<usize>();
        write!(
            f,
            "feed run over {}: {} events to {} subscribers ({:?}) in {:.1} s ({:.0} events/s per \
             subscriber; writes {:.1} s); writes {} acknowledged, {} refused (503), {} of \
             unknown outcome; {} reconnections with Last-Event-ID, {} more after a broken or \
             refused stream; {} kills (SIGKILL), {} failovers; delivery after the 2xx over {} \
             events: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {} over 1 s; p99 by tenth of the \
             run {:?} ms; {} events of changes lost with the primary; violations {:?} (seed {})",
            self.label,
            events,
            self.events.len(),
            self.events,
            self.elapsed.as_secs_f64(),
            events as f64 / self.events.len().max(1) as f64 / self.elapsed.as_secs_f64(),
            self.written.as_secs_f64(),
            self.acknowledged,
            self.refused,
            self.unknown,
            self.reconnects,
            self.broken,
            self.kills,
            self.failovers,
            self.latencies,
            millis(self.p50),
            millis(self.p99),
            millis(self.max),
            self.over_a_second,
            self.p99_by_tenth
                .iter()
                .map(|p99| millis(*p99).round() as u64)
                .collect::<Vec<_>>(),
            self.lost_with_the_primary,
            self.violations,
            self.seed,
        )
    }
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Checks each subscriber's events (see the module's documentation).
/// `shared` and `sentinel` are the ids of the run's first and last items;
/// the writers wrote from `started` for `written`; `failed_over` says
/// whether the primary was lost.
pub fn verify(
    writers: &[WriterLog],
    subscribers: &[SubscriberLog],
    listing: &[(i64, String)],
    table: Option<&Table>,
    (shared, sentinel): (i64, i64),
    (started, written): (Instant, Duration),
    failed_over: bool,
) -> Figures {
    let mut figures = Figures::default();
    let mut acked: HashMap<Key, Instant> = HashMap::new();
    let mut refused: HashSet<Key> = HashSet::new();
    for log in writers {
        acked.extend(log.acked.iter().copied());
        refused.extend(log.refused.iter().copied());
        figures.unknown += log.unknown;
        figures.unexpected.extend(log.unexpected.iter().cloned());
    }
    figures.acknowledged = acked.len();
    figures.refused = refused.len();
    let listed: BTreeMap<i64, &str> = listing
        .iter()
        .map(|(id, name)| (*id, name.as_str()))
        .collect();
    let mut latencies = Vec::new();
    let mut by_tenth: Vec<Vec<Duration>> = vec![Vec::new(); 10];
    let tenth = |ack: Instant| {
        let into = ack.saturating_duration_since(started).as_secs_f64();
        ((into / written.as_secs_f64().max(1e-9) * 10.0) as usize).min(9)
    };
    let v = &mut figures.violations;
    let mut examples = Vec::new();
    let mut example = |text: String| {
        if examples.len() < 20 {
            examples.push(text);
        }
    };
    for (number, log) in subscribers.iter().enumerate() {
        figures.events.push(log.events.len());
        figures.reconnects += log.reconnects;
        figures.broken += log.broken;
        v.bad_resumptions += log.resets + log.misplaced;
        v.malformed += log.malformed.len();
        for malformed in log.malformed.iter().take(3) {
            example(format!("subscriber {number}: malformed {malformed}"));
        }

        let mut positions = HashSet::new();
        let mut previous = log.start;
        for seen in &log.events {
            if !positions.insert(seen.position) {
                v.duplicated += 1;
                example(format!(
                    "subscriber {number}: position {} again",
                    seen.position
                ));
            } else if seen.position <= previous {
                v.out_of_order += 1;
                example(format!(
                    "subscriber {number}: position {} after {previous}",
                    seen.position
                ));
            }
            previous = previous.max(seen.position);
        }

        // Changes committed on the lost primary alone (see
        // `lost_with_the_primary`): their items are left out below.
        let lost: HashSet<u64> = match table {
            Some(table) if failed_over => lost_with_the_primary(&log.events, table, &acked),
            _ => HashSet::new(),
        };
        figures.lost_with_the_primary += lost.len();
        let lost_items: HashSet<i64> = log
            .events
            .iter()
            .filter(|seen| lost.contains(&seen.position))
            .map(|seen| seen.id)
            .collect();
        for seen in log
            .events
            .iter()
            .filter(|seen| lost.contains(&seen.position))
        {
            example(format!(
                "subscriber {number}: {seen:?} was lost with the primary"
            ));
        }
        let mut state: BTreeMap<i64, &str> = BTreeMap::new();
        for seen in &log.events {
            if lost_items.contains(&seen.id) {
                continue;
            }
            let applies = match (seen.kind, &seen.name) {
                (Kind::Created, Some(name)) => state.insert(seen.id, name).is_none(),
                (Kind::Replaced, Some(name)) => state.insert(seen.id, name).is_some(),
                (Kind::Deleted, _) => state.remove(&seen.id).is_some(),
                _ => false,
            };
            if !applies {
                v.misapplied += 1;
                example(format!("subscriber {number}: {seen:?} does not apply"));
            }
        }
        let ids: HashSet<i64> = state
            .keys()
            .chain(listed.keys())
            .copied()
            .filter(|id| !lost_items.contains(id))
            .collect();
        for id in ids {
            if state.get(&id) != listed.get(&id) {
                v.state_differs += 1;
                example(format!(
                    "subscriber {number}: item {id} replays to {:?}, is {:?}",
                    state.get(&id),
                    listed.get(&id)
                ));
            }
        }
        for id in [shared, sentinel] {
            if !state.contains_key(&id) {
                example(format!("subscriber {number}: item {id} never created"));
            }
        }

        let mut keys = HashSet::new();
        for seen in &log.events {
            let Some(key) = seen.key() else { continue };
            keys.insert(key);
            if refused.contains(&key) {
                v.phantoms += 1;
                example(format!("subscriber {number}: {seen:?} of a refused write"));
            }
            if let Some(ack) = acked.get(&key) {
                let latency = seen.arrived.saturating_duration_since(*ack);
                latencies.push(latency);
                by_tenth[tenth(*ack)].push(latency);
            }
        }
        for key in acked.keys() {
            if !keys.contains(key) {
                v.missed_acknowledged += 1;
                example(format!(
                    "subscriber {number}: no event of acknowledged write {key:#x}"
                ));
            }
        }

        if let Some(table) = table {
            compare(number, &log.events, table, &lost, v, &mut example);
        }
    }
    latencies.sort_unstable();
    figures.p50 = quantile(&latencies, 0.50);
    figures.p99 = quantile(&latencies, 0.99);
    figures.p99_by_tenth = by_tenth
        .iter_mut()
        .map(|latencies| {
            latencies.sort_unstable();
            quantile(latencies, 0.99)
        })
        .collect();
    figures.max = latencies.last().copied().unwrap_or_default();
    figures.over_a_second = latencies
        .iter()
        .filter(|latency| **latency > Duration::from_secs(1))
        .count();
    figures.latencies = latencies.len();
    figures.examples = examples;
    figures
}

/// The positions of the events that are not the change table's, of
/// writes no 2xx acknowledged.
fn lost_with_the_primary(
    events: &[Seen],
    table: &Table,
    acked: &HashMap<Key, Instant>,
) -> HashSet<u64> {
    let rows: HashMap<u64, (&str, i64)> = table
        .iter()
        .map(|(position, kind, id)| (*position, (kind.as_str(), *id)))
        .collect();
    events
        .iter()
        .filter(|seen| rows.get(&seen.position) != Some(&(kind(seen.kind), seen.id)))
        .filter(|seen| seen.key().is_none_or(|key| !acked.contains_key(&key)))
        .map(|seen| seen.position)
        .collect()
}

fn kind(kind: Kind) -> &'static str {
    match kind {
        Kind::Created => "created",
        Kind::Replaced => "replaced",
        Kind::Deleted => "deleted",
    }
}

/// The `fraction` quantile of `sorted`.
fn quantile(sorted: &[Duration], fraction: f64) -> Duration {
    let at = (sorted.len() as f64 * fraction) as usize;
    sorted
        .get(at.min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// The events against the change table's rows, position by position.
fn compare(
    number: usize,
    events: &[Seen],
    table: &Table,
    lost: &HashSet<u64>,
    v: &mut Violations,
    example: &mut impl FnMut(String),
) {
    let rows: HashMap<u64, (&str, i64)> = table
        .iter()
        .map(|(position, kind, id)| (*position, (kind.as_str(), *id)))
        .collect();
    // The rows up to the last event (the sentinel): later ones, if any,
    // were never waited for.
    let last = events.last().map_or(0, |seen| seen.position);
    let mut given = HashSet::new();
    for seen in events {
        given.insert(seen.position);
        let kind = kind(seen.kind);
        if rows.get(&seen.position) != Some(&(kind, seen.id)) && !lost.contains(&seen.position) {
            v.unknown_events += 1;
            example(format!(
                "subscriber {number}: {seen:?}, the table says {:?}",
                rows.get(&seen.position)
            ));
        }
    }
    for (position, kind, id) in table {
        if *position <= last && !given.contains(position) {
            v.missed_rows += 1;
            example(format!(
                "subscriber {number}: no event of row {position} ({kind} of item {id})"
            ));
        }
    }
}
