//! The kill rounds, the same for every durable store: start the binary on
//! the store, let the writers loose, `SIGKILL` the process at a moment the
//! dice choose, restart it on the same store, read everything back and
//! check it ([`check`]); then check that the next id is above every id seen
//! before (C2), and go again from what the store now holds.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::check::{Refusals, Verdict, check};
use super::history::{Op, Outcome, Tally, Write};
use super::load::Load;
use super::retry::{Retries, retry_unknown_creates};
use super::rng::{self, Rng};
use crate::helpers::{Client, Service};

/// A durable store the service can be started on, again and again.
pub trait Store {
    /// How the report names it.
    fn label(&self) -> &'static str;

    /// The service's `DATABASE_URL`.
    fn database_url(&self) -> String;

    /// Checks the store while no process has it open, after a kill.
    async fn after_kill(&self) {}
}

/// The figures of a run, for the report and `docs/testing.md`.
#[derive(Debug, Default)]
pub struct Report {
    pub label: &'static str,
    pub seed: u64,
    pub rounds: usize,
    pub tally: Tally,
    pub lost: usize,
    /// Creates of unknown outcome retried with their key after the restart.
    pub retries: Retries,
    pub items_at_end: usize,
    pub elapsed: Duration,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "crash test over {}: {} rounds, {} acknowledged writes, {} unknown outcomes \
             ({} of them creates, retried with their key: {} replayed, as committed before the \
             kill; {} duplicates), {} refused, {} not sent, {} lost; \
             {} items at the end; {:.1} s (seed {})",
            self.label,
            self.rounds,
            self.tally.acknowledged,
            self.tally.unknown,
            self.retries.retried,
            self.retries.replayed,
            self.retries.duplicates,
            self.tally.refused,
            self.tally.not_sent,
            self.lost,
            self.items_at_end,
            self.elapsed.as_secs_f64(),
            self.seed,
        )
    }
}

impl Report {
    /// Adds a round's figures; fails the test, naming every violation and
    /// the seed, when the round lost or invented anything.
    /// `ops` are the round's writes after the retries, `unknown` how many
    /// had an unknown outcome before them.
    pub fn add_round(
        &mut self,
        round: usize,
        unknown: usize,
        ops: &[Op],
        verdict: &Verdict,
        retries: &Retries,
    ) {
        let mut tally = Tally::of(ops);
        tally.acknowledged -= retries.retried;
        tally.unknown = unknown;
        println!(
            "  {} round {round}: {} acknowledged, {} unknown ({} creates retried, {} replayed), \
             {} refused",
            self.label,
            tally.acknowledged,
            tally.unknown,
            retries.retried,
            retries.replayed,
            tally.refused
        );
        self.rounds += 1;
        self.tally.add(tally);
        self.retries.add(retries);
        assert_eq!(
            retries.duplicates, 0,
            "crash test over {}, round {round}, seed {}: a create retried with its key made a \
             second item (C7)",
            self.label, self.seed
        );
        self.lost += verdict.lost.len();
        assert!(
            verdict.is_clean(),
            "crash test over {}, round {round}, seed {} (CRASH_SEED={} repeats the choices): \
             {} acknowledged writes lost, {} phantoms\n{}",
            self.label,
            self.seed,
            self.seed,
            verdict.lost.len(),
            verdict.phantoms.len(),
            verdict.describe(50),
        );
    }
}

/// Runs `rounds` kill rounds on `store` and returns the figures.
pub async fn kill_rounds(store: &impl Store, rounds: usize) -> Report {
    let seed = rng::seed();
    println!(
        "crash test over {}: seed {seed} (CRASH_SEED={seed} repeats its choices)",
        store.label()
    );
    let dice = Rng::new(seed);
    let mut report = Report {
        label: store.label(),
        seed,
        ..Report::default()
    };
    let started = Instant::now();
    let mut items = BTreeMap::new();
    let mut highest_id = 0;
    let mut service = start(store).await;
    for round in 1..=rounds {
        let mut round_dice = dice.fork(round as u64);
        let load = Load::start(service.client.port, &items, round, &round_dice);
        load.until_first_acknowledged().await;
        tokio::time::sleep(round_dice.millis(200, 1200)).await;
        sigkill(&mut service);
        let ops = load.finish().await;
        drop(service);

        store.after_kill().await;
        service = start(store).await;
        let unknown = Tally::of(&ops).unknown;
        let mut ops = ops;
        let mut retries = retry_unknown_creates(service.client.port, &mut ops).await;
        let listed = read_all(&service.client).await;
        retries.count_duplicates(&listed);
        // The retried creates are acknowledged now: the checker holds the
        // store to the id each retry answered, and a second item under a
        // retried name is a phantom.
        let verdict = check(&items, &ops, Refusals::WroteNothing, &listed);
        report.add_round(round, unknown, &ops, &verdict, &retries);

        highest_id = highest_id
            .max(highest_acknowledged_id(&ops))
            .max(listed.last().map_or(0, |(id, _)| *id));
        let (next_id, name) = create_probe(&service.client, round).await;
        assert!(
            next_id > highest_id,
            "{}: after restart {round} the next id is {next_id}, not above {highest_id} (C2)",
            store.label()
        );
        highest_id = next_id;
        items = listed.into_iter().collect();
        items.insert(next_id, name);
    }
    drop(service);
    report.items_at_end = items.len();
    report.elapsed = started.elapsed();
    println!("{report}");
    report
}

/// Kills the service with SIGKILL (`Child::kill`): no shutdown, no flush,
/// no goodbye.
pub fn sigkill(service: &mut Service) {
    service.child.kill().expect("the service is running");
    service.child.wait().expect("the killed service is reaped");
}

/// The binary on `store`, with no rate limit in the writers' way.
pub async fn start(store: &impl Store) -> Service {
    let url = store.database_url();
    Service::start(&[("DATABASE_URL", url.as_str()), ("RATE_LIMIT_MAX", "0")]).await
}

/// Every item, as `GET /items` lists it; checks that `X-Total-Count` is
/// the listing's length and the ids ascend (C10).
pub async fn read_all(client: &Client) -> Vec<(i64, String)> {
    let response = tokio::time::timeout(Duration::from_secs(60), client.get("/items"))
        .await
        .expect("GET /items answers within 60 s");
    assert_eq!(response.status(), 200, "GET /items");
    let total: usize = response
        .headers()
        .get("x-total-count")
        .and_then(|total| total.to_str().ok())
        .and_then(|total| total.parse().ok())
        .expect("GET /items carries X-Total-Count");
    let body: Vec<Value> = response.json().await.expect("GET /items is JSON");
    let listed: Vec<(i64, String)> = body
        .iter()
        .map(|item| {
            let id = item["id"].as_i64().expect("an item has an integer id");
            let name = item["name"].as_str().expect("an item has a name");
            (id, name.to_owned())
        })
        .collect();
    assert_eq!(total, listed.len(), "X-Total-Count is the listing's length");
    assert!(
        listed.windows(2).all(|pair| pair[0].0 < pair[1].0),
        "GET /items lists ids in ascending order, each once (C10)"
    );
    listed
}

/// The highest id an acknowledged create got.
pub fn highest_acknowledged_id(ops: &[Op]) -> i64 {
    ops.iter()
        .filter(|op| op.outcome == Outcome::Acknowledged)
        .filter_map(|op| match op.write {
            Write::Create { id, .. } => id,
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Creates the item `probe<round>` and returns its id and name.
async fn create_probe(client: &Client, round: usize) -> (i64, String) {
    let name = format!("probe{round}");
    let created = client.create_item(&name).await;
    let id = created["id"].as_i64().expect("a created item has an id");
    (id, name)
}
