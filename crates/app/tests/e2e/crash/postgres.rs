//! The crash tests over PostgreSQL: the service killed (the database goes
//! on), and the database's side of the service's connections terminated
//! while the service goes on.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use items_testkit::postgres::{ScratchDatabase, test_database_url};

use super::ROUNDS;
use super::check::{Refusals, check};
use super::history::{Op, Outcome, Tally, Write};
use super::load::{Load, WRITERS, http_client, send};
use super::rng::{self, Rng};
use super::rounds::{Store, kill_rounds, read_all, start};

/// A scratch database of the test server.
struct Postgres {
    database: ScratchDatabase,
}

impl Postgres {
    async fn create() -> Self {
        let database = ScratchDatabase::create(&test_database_url())
            .await
            .expect("a scratch database on the test server");
        Self { database }
    }
}

impl Store for Postgres {
    fn label(&self) -> &'static str {
        "PostgreSQL"
    }

    fn database_url(&self) -> String {
        self.database.url()
    }

    /// Waits until every session of the killed process has ended. A
    /// `COMMIT` the process sent just before it died may still be carried
    /// out by its session; reading back before that would let the write
    /// appear only in the next round, where no write explains it.
    async fn after_kill(&self) {
        let connection = self
            .database
            .client()
            .await
            .expect("the test connects to its scratch database");
        let deadline = Instant::now() + SESSIONS_END_WITHIN;
        loop {
            let sessions: i64 = connection
                .query_one(OTHER_SESSIONS, &[])
                .await
                .expect("pg_stat_activity is readable")
                .get(0);
            if sessions == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{sessions} sessions of the killed service still open after {SESSIONS_END_WITHIN:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(connection);
    }
}

/// How long PostgreSQL may take to end the sessions of a killed client: it
/// notices the closed socket at once; generous for a loaded machine.
const SESSIONS_END_WITHIN: Duration = Duration::from_secs(30);

/// The client sessions on the scratch database other than the test's own
/// (an autovacuum worker there is no client's).
const OTHER_SESSIONS: &str = "select count(*) from pg_stat_activity \
     where datname = current_database() and pid <> pg_backend_pid() \
     and backend_type = 'client backend'";

#[tokio::test]
async fn sigkill_at_random_moments_loses_no_acknowledged_write_over_postgresql_c12() {
    let store = Postgres::create().await;

    let report = kill_rounds(&store, ROUNDS).await;

    assert_eq!(report.rounds, ROUNDS);
    assert!(report.tally.acknowledged >= ROUNDS, "{report}");
    assert_eq!(report.lost, 0, "{report}");
    store.database.drop().await;
}

/// How many times the service's connections are terminated.
const TERMINATIONS: usize = 5;

/// How long the service may take to write again after its connections were
/// terminated: generous, for a loaded machine; a healthy service takes
/// milliseconds.
const RECOVERY_LIMIT: Duration = Duration::from_secs(30);

/// Every client connection to the scratch database but the test's own.
const TERMINATE_THE_SERVICES_BACKENDS: &str = "select pg_terminate_backend(pid) \
     from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() \
     and backend_type = 'client backend'";

#[tokio::test]
async fn terminated_database_connections_give_503_lose_nothing_and_heal_without_a_restart_c12() {
    let store = Postgres::create().await;
    let service = start(&store).await;
    let admin = store
        .database
        .client()
        .await
        .expect("the test connects to its scratch database");
    let seed = rng::seed();
    println!(
        "terminating PostgreSQL backends: seed {seed} (CRASH_SEED={seed} repeats its choices)"
    );
    let mut dice = Rng::new(seed);
    let started = Instant::now();
    let load = Load::start(service.client.port, &BTreeMap::new(), 1, &dice.fork(0));
    load.until_first_acknowledged().await;

    let mut probes = Vec::new();
    let mut terminated = 0;
    let mut slowest_recovery = Duration::ZERO;
    for cut in 1..=TERMINATIONS {
        tokio::time::sleep(dice.millis(150, 600)).await;
        let cut_now: Vec<bool> = admin
            .query(TERMINATE_THE_SERVICES_BACKENDS, &[])
            .await
            .expect("the test may terminate its database's backends")
            .iter()
            .map(|row| row.get(0))
            .collect();
        terminated += cut_now.len();
        let recovery = first_write_after(&service.client.address, cut, &mut probes).await;
        slowest_recovery = slowest_recovery.max(recovery);
    }
    tokio::time::sleep(dice.millis(150, 600)).await;
    let mut ops = load.finish().await;
    ops.extend(probes);
    let listed = read_all(&service.client).await;
    let verdict = check(&BTreeMap::new(), &ops, Refusals::InDoubt, &listed);

    let tally = Tally::of(&ops);
    println!(
        "terminating PostgreSQL backends: {TERMINATIONS} times ({terminated} backends), \
         {} acknowledged writes, {} answered 503 ({} of those creates found applied), \
         {} unknown, {} lost; slowest recovery {:.0} ms; {:.1} s (seed {seed})",
        tally.acknowledged,
        tally.refused,
        verdict.uncertain_creates_applied,
        tally.unknown,
        verdict.lost.len(),
        slowest_recovery.as_secs_f64() * 1000.0,
        started.elapsed().as_secs_f64(),
    );
    let not_503: Vec<String> = ops
        .iter()
        .filter(|op| !is_acknowledged_or_503_with_retry_after(&op.outcome))
        .map(ToString::to_string)
        .collect();
    assert!(
        not_503.is_empty(),
        "every failed write gets 503 with Retry-After, never a 500 nor a hang (C12); seed {seed}:\n{}",
        not_503.join("\n")
    );
    assert!(
        tally.refused > 0,
        "terminating the backends cost no write a 503: nothing was tested"
    );
    assert!(
        verdict.is_clean(),
        "terminating backends, seed {seed}: {} acknowledged writes lost, {} phantoms\n{}",
        verdict.lost.len(),
        verdict.phantoms.len(),
        verdict.describe(50)
    );
    drop(service);
    drop(admin);
    store.database.drop().await;
}

fn is_acknowledged_or_503_with_retry_after(outcome: &Outcome) -> bool {
    matches!(
        outcome,
        Outcome::Acknowledged
            | Outcome::Refused {
                status: 503,
                retry_after: true
            }
    )
}

/// Creates items (`t<cut>.<attempt>`) until one is acknowledged; returns how
/// long that took. Each attempt is recorded, as a ninth writer's.
async fn first_write_after(base: &str, cut: usize, probes: &mut Vec<Op>) -> Duration {
    let http = http_client();
    let began = Instant::now();
    for attempt in 1.. {
        let mut write = Write::Create {
            name: format!("t{cut}.{attempt}"),
            id: None,
        };
        let outcome = send(&http, base, &mut write).await;
        let written = outcome == Outcome::Acknowledged;
        probes.push(Op {
            writer: WRITERS,
            write,
            outcome,
            receipt: None,
        });
        if written {
            break;
        }
        assert!(
            began.elapsed() < RECOVERY_LIMIT,
            "no write succeeded within {RECOVERY_LIMIT:?} of terminating the backends: \
             the service does not heal without a restart"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    began.elapsed()
}
