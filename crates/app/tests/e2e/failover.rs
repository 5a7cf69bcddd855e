//! Losing the PostgreSQL primary loses nothing (C12): the built binary on
//! a `DATABASE_URL` listing a primary and its streaming standby
//! (`target_session_attrs=read-write`, a statement budget of 1 s), eight
//! writers creating, replacing and deleting items through it (the crash
//! tests' load and checker), the primary's postmaster killed with
//! `SIGKILL`, the standby promoted by the test (`pg_ctl promote`), and the
//! service left to find the new primary by itself. Each round then checks,
//! from the listing the service serves afterwards:
//!
//! - no acknowledged write is lost: every 2xx create is there with its
//!   name, every 2xx replace's name (or a later write's) is current, every
//!   2xx delete is gone; a 503 wrote nothing; a 504 may have;
//! - no id is handed out twice, over all rounds;
//! - every 2xx body reads as the write's answer;
//! - writes are answered 2xx again within [`RESUMED_WITHIN`] of the
//!   promotion;
//! - no request took longer than [`LONGEST_REQUEST`]: the budget, the
//!   commit's grace and the fate lookup's, and slack for HTTP;
//! - `/readyz` says 503 while no host takes writes, then names the new
//!   primary; `/metrics` counts the failovers.
//!
//! The old primary is then rebuilt as the new standby (`pg_basebackup`)
//! and the next round kills the other server. With asynchronous
//! replication the acknowledged writes lost per round are only reported.
//! A commit no synchronous standby confirmed (the standby stopped) is
//! answered 504, never 2xx, and stays invisible until the standby is back;
//! so is one whose wait someone cancelled or whose backend someone ended.
//! And an old primary started again beside the promoted one, while the
//! path to the new primary stalls, is fenced: no write reaches it.
//!
//! `FAILOVER_ROUNDS` sets the rounds (6 by default for synchronous
//! replication, 3 for asynchronous, so the four tests take under a minute
//! to two; `FAILOVER_ROUNDS=10` for the figures); run them alone with
//! `cargo test -p items-app --test e2e failover -- --nocapture` to see the
//! figures; `CRASH_SEED=<seed>` repeats a run's choices.

pub(crate) mod cluster;

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use items_testkit::tcp_proxy::TcpProxy;
use serde_json::Value;

use crate::crash::check::{Refusals, check};
use crate::crash::history::{Op, Outcome, Tally, Write};
use crate::crash::load::Load;
use crate::crash::rng::{self, Rng};
use crate::crash::rounds::read_all;
use crate::helpers::Service;
use cluster::{Pair, Replication};

/// The service's statement budget (`DATABASE_STATEMENT_TIMEOUT_MS`).
const BUDGET: Duration = Duration::from_millis(1000);

/// The longest a request may take: the budget, up to a budget more for a
/// sent commit's answer, up to a budget more for its fate (each of the two
/// at most 1 s), and 1 s for HTTP and a loaded machine.
const LONGEST_REQUEST: Duration = Duration::from_millis(4000);

/// Writes must be answered 2xx again this soon after the promotion.
const RESUMED_WITHIN: Duration = Duration::from_secs(5);

/// The rounds of a run: `FAILOVER_ROUNDS`, else `default`.
fn rounds(default: usize) -> usize {
    std::env::var("FAILOVER_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .filter(|rounds| *rounds > 0)
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_primary_under_synchronous_replication_loses_no_acknowledged_write_c12() {
    let report = failover_rounds(Replication::Synchronous, rounds(6)).await;

    assert_eq!(
        report.lost_per_round.iter().sum::<usize>(),
        0,
        "{report:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_primary_under_asynchronous_replication_resumes_and_reports_what_was_lost() {
    let report = failover_rounds(Replication::Asynchronous, rounds(3)).await;

    eprintln!(
        "asynchronous replication: acknowledged writes lost per round {:?} (not asserted: \
         at most the replication lag at the kill)",
        report.lost_per_round
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_no_synchronous_standby_confirmed_is_never_acknowledged_c12() {
    let pair = Pair::start(Replication::Synchronous).await;
    let url = pair.database_url();
    let budget = BUDGET.as_millis().to_string();
    let service = Service::start(&[
        ("DATABASE_URL", url.as_str()),
        ("DATABASE_STATEMENT_TIMEOUT_MS", budget.as_str()),
        ("RATE_LIMIT_MAX", "0"),
    ])
    .await;
    let before = service.client.create_item("before").await;
    pair.stop_standby();

    let started = Instant::now();
    let response = service
        .client
        .post_json("/items", &serde_json::json!({ "name": "unconfirmed" }))
        .await;
    let took = started.elapsed();
    let status = response.status();
    let problem: Value = response.json().await.unwrap_or_default();

    // PostgreSQL would have answered the commit as a success at the
    // statement timeout, committed on the primary only.
    assert_eq!(status, 504, "{problem}");
    assert!(
        problem["type"]
            .as_str()
            .is_some_and(|kind| kind.contains("outcome-unknown")),
        "{problem}"
    );
    assert!(took <= LONGEST_REQUEST, "answered after {took:?}");
    let direct = pair.primary().connect_to("items").await;
    let visible: i64 = direct
        .query_one("select count(*) from items where name = 'unconfirmed'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(visible, 0, "not visible before a standby has it");

    pair.start_standby();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let visible: i64 = direct
            .query_one("select count(*) from items where name = 'unconfirmed'", &[])
            .await
            .unwrap()
            .get(0);
        if visible == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the waiting commit never completed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(before["id"].as_i64().is_some());

    // Someone else ends the wait: a cancel (PostgreSQL then answers the
    // commit as a success, with a warning) or a terminated backend (the
    // connection ends; `pg_xact_status` then says committed). Committed on
    // the primary alone either way: 504, twice each.
    pair.stop_standby();
    let admin = pair.primary().connect().await;
    let ends = [
        "pg_cancel_backend",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_terminate_backend",
    ];
    for (round, end) in ends.into_iter().enumerate() {
        let client = service.client.clone();
        let name = format!("ended-{round}");
        let started = Instant::now();
        let write = tokio::spawn(async move {
            let response = client
                .post_json("/items", &serde_json::json!({ "name": name }))
                .await;
            let status = response.status();
            let problem: Value = response.json().await.unwrap_or_default();
            (status, problem)
        });
        let backend = waiting_for_the_standby(&admin).await;
        let ended: bool = admin
            .query_one(&format!("select {end}($1)"), &[&backend])
            .await
            .unwrap()
            .get(0);
        assert!(ended, "{end}({backend})");
        let (status, problem) = write.await.unwrap();
        let took = started.elapsed();

        assert_eq!(status, 504, "{end}: {problem}");
        assert!(
            problem["type"]
                .as_str()
                .is_some_and(|kind| kind.contains("outcome-unknown")),
            "{end}: {problem}"
        );
        // Answered on the end of the wait, not after the budget: it was the
        // ended wait that was judged.
        assert!(took < BUDGET, "{end}: answered after {took:?}");
    }
    pair.start_standby();
}

/// The pid of a backend of the service waiting for a synchronous standby,
/// once there is one.
async fn waiting_for_the_standby(admin: &tokio_postgres::Client) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let row = admin
            .query_opt(
                "select pid from pg_stat_activity \
                 where datname = 'items' and wait_event = 'SyncRep' limit 1",
                &[],
            )
            .await
            .unwrap();
        if let Some(row) = row {
            return row.get(0);
        }
        assert!(Instant::now() < deadline, "no write waits for the standby");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_primary_started_again_is_fenced_and_never_written_to_c12() {
    let mut pair = Pair::start(Replication::Asynchronous).await;
    let [a, b] = [pair.nodes[0].port, pair.nodes[1].port];
    // B behind a proxy, so the path to it can stall.
    let proxy = TcpProxy::start(([127, 0, 0, 1], b).into()).await;
    let to_b = proxy.port();
    let url = format!(
        "postgres://postgres@127.0.0.1:{a},127.0.0.1:{to_b}/items?target_session_attrs=read-write"
    );
    let budget = BUDGET.as_millis().to_string();
    let service = Service::start(&[
        ("DATABASE_URL", url.as_str()),
        ("DATABASE_STATEMENT_TIMEOUT_MS", budget.as_str()),
        ("RATE_LIMIT_MAX", "0"),
        ("ADMIN_PORT", "0"),
    ])
    .await;
    let admin = service.admin();
    service.client.create_item("on-a").await;

    // The failover: A stops, B is promoted, the service writes on B.
    pair.stop_node(0);
    pair.promote_standby().await;
    let on_b = write_until_acknowledged(&service.client, "on-b").await;
    let ready = wait_ready(&admin).await;
    assert_eq!(
        ready["checks"]["database"],
        format!("ok: writing to 127.0.0.1:{to_b}").as_str(),
        "{ready}"
    );

    // A starts again as a primary, still on timeline 1; the path to B stalls.
    pair.start_node(0);
    assert_eq!(
        (pair.timeline(0).await, pair.timeline(1).await),
        (1, 2),
        "A is on an older timeline than B"
    );
    let on_a = pair.nodes[0].connect_to("items").await;
    let rows_on_a = || async {
        let rows: i64 = on_a
            .query_one("select count(*) from items", &[])
            .await
            .unwrap()
            .get(0);
        rows
    };
    let on_a_before = rows_on_a().await;
    proxy.freeze();
    let stalled_until = Instant::now() + Duration::from_secs(4);
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let client = service.client.clone();
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                let mut n = 0;
                while Instant::now() < stalled_until {
                    let name = format!("stalled-{writer}-{n}");
                    let response = client
                        .post_json("/items", &serde_json::json!({ "name": name }))
                        .await;
                    statuses.push(response.status().as_u16());
                    n += 1;
                }
                statuses
            })
        })
        .collect();
    let readiness = not_ready_naming(&admin, "fenced").await;
    let mut statuses = Vec::new();
    for writer in writers {
        statuses.extend(writer.await.unwrap());
    }

    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    for status in &statuses {
        *by_status.entry(*status).or_default() += 1;
    }
    assert!(!statuses.is_empty());
    assert!(
        by_status
            .keys()
            .all(|status| *status == 503 || *status == 504),
        "while no primary but the old one answers, writes get 503; answers by status: \
         {by_status:?}"
    );
    assert_eq!(
        rows_on_a().await,
        on_a_before,
        "a write reached the old primary"
    );
    let database = readiness["checks"]["database"].as_str().unwrap_or_default();
    let fenced = format!(
        "fenced: 127.0.0.1:{a} (a primary on timeline 1, older than timeline 2 written on)"
    );
    assert!(database.contains(&fenced), "{readiness}");
    let log = service
        .log_once_it_contains("a database host is fenced")
        .await;
    let error = log
        .lines()
        .find(|line| line.contains("a database host is fenced"))
        .unwrap_or_default();
    assert!(
        error.contains("ERROR") && error.contains(&format!("127.0.0.1:{a}")),
        "{error}"
    );
    assert!(
        error.contains("timeline 1") && error.contains("timeline 2"),
        "{error}"
    );
    let metrics = admin.get("/metrics").await.text().await.unwrap_or_default();
    assert!(
        counter(&metrics, "database_fenced_hosts_total") >= 1.0,
        "{metrics}"
    );
    assert_eq!(counter(&metrics, "database_fenced_hosts"), 1.0, "{metrics}");
    assert!(metrics.contains("# HELP database_fenced_hosts_total"));

    // B answers again: writes resume there, and A is still fenced.
    proxy.thaw();
    let after = write_until_acknowledged(&service.client, "after").await;
    let ready = wait_ready(&admin).await;
    assert_eq!(
        ready["checks"]["database"],
        format!("ok: writing to 127.0.0.1:{to_b}; {fenced}").as_str(),
        "{ready}"
    );
    assert_eq!(
        rows_on_a().await,
        on_a_before,
        "a write reached the old primary"
    );
    let on_b_rows = pair.nodes[1].connect_to("items").await;
    for id in [on_b, after] {
        let found: i64 = on_b_rows
            .query_one("select count(*) from items where id = $1", &[&id])
            .await
            .unwrap()
            .get(0);
        assert_eq!(found, 1, "item {id} is on B");
    }
    eprintln!(
        "fencing: {} writes refused while B stalled ({} answered 504), none reached A",
        statuses.len(),
        statuses.iter().filter(|status| **status == 504).count()
    );

    // The operator rejoins A as B's standby: it is no longer fenced.
    drop(on_a);
    pair.stop_node(0);
    pair.rebuild_standby(0).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ready = wait_ready(&admin).await;
        if ready["checks"]["database"] == format!("ok: writing to 127.0.0.1:{to_b}").as_str() {
            break;
        }
        assert!(Instant::now() < deadline, "still reported fenced: {ready}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = admin.get("/metrics").await.text().await.unwrap_or_default();
    assert_eq!(counter(&metrics, "database_fenced_hosts"), 0.0, "{metrics}");
}

/// Creates items named `prefix-N` until one is answered 201 (at most 20 s),
/// and returns its id.
async fn write_until_acknowledged(client: &crate::helpers::Client, prefix: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    for n in 0.. {
        let response = client
            .post_json(
                "/items",
                &serde_json::json!({ "name": format!("{prefix}-{n}") }),
            )
            .await;
        if response.status() == 201 {
            let item: Value = response.json().await.unwrap();
            return item["id"].as_i64().unwrap();
        }
        assert!(Instant::now() < deadline, "no write acknowledged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    unreachable!("the loop returns or fails")
}

/// `/readyz` once it answers 503 with a database check that says `word`,
/// as JSON (at most 10 s).
async fn not_ready_naming(admin: &crate::helpers::Client, word: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = admin.get("/readyz").await;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or_default();
        let said = body["checks"]["database"].as_str().unwrap_or_default();
        if status == 503 && said.contains(word) {
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz {status}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The figures of a run.
#[derive(Debug, Default)]
struct Report {
    rounds: usize,
    tally: Tally,
    /// Acknowledged writes the new primary does not show, per round.
    lost_per_round: Vec<usize>,
    /// From the promotion to the first write answered 2xx, per round.
    gaps: Vec<Duration>,
    longest_request: Duration,
    /// 504s: writes whose fate the service could not learn.
    outcome_unknown: usize,
    elapsed: Duration,
}

async fn failover_rounds(replication: Replication, rounds: usize) -> Report {
    let started = Instant::now();
    let seed = rng::seed();
    let label = match replication {
        Replication::Synchronous => "synchronous",
        Replication::Asynchronous => "asynchronous",
    };
    println!("failover test, {label} replication: seed {seed} (CRASH_SEED={seed} repeats it)");
    let dice = Rng::new(seed);
    let mut pair = Pair::start(replication).await;
    let url = pair.database_url();
    let budget = BUDGET.as_millis().to_string();
    let service = Service::start(&[
        ("DATABASE_URL", url.as_str()),
        ("DATABASE_STATEMENT_TIMEOUT_MS", budget.as_str()),
        ("RATE_LIMIT_MAX", "0"),
        ("ADMIN_PORT", "0"),
    ])
    .await;
    let admin = service.admin();
    let mut report = Report::default();
    let mut items: BTreeMap<i64, String> = BTreeMap::new();
    let mut ids_seen: HashSet<i64> = HashSet::new();
    for round in 1..=rounds {
        let mut round_dice = dice.fork(round as u64);
        let load = Load::start(service.client.port, &items, round, &round_dice);
        load.until_first_acknowledged().await;
        tokio::time::sleep(round_dice.millis(300, 1200)).await;

        let killed = pair.primary().name;
        pair.kill_primary();
        let refused = not_ready_while_no_host_writes(&admin).await;
        pair.promote_standby().await;
        let promoted = Instant::now();
        let acknowledged = load.acknowledged();
        let deadline = promoted + RESUMED_WITHIN * 4;
        while load.acknowledged() == acknowledged && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let ops = load.finish().await;

        let primary = pair.primary();
        let ready = wait_ready(&admin).await;
        let expected = format!("ok: writing to 127.0.0.1:{}", primary.port);
        assert_eq!(ready["checks"]["database"], expected.as_str(), "{ready}");

        let listed = read_all(&service.client).await;
        let verdict = check(&items, &ops, Refusals::WroteNothing, &listed);
        let tally = Tally::of(&ops);
        let gap = first_answer_after(&ops, promoted);
        let longest = ops
            .iter()
            .filter_map(|op| op.receipt.as_ref())
            .map(|receipt| receipt.took)
            .max()
            .unwrap_or_default();
        let unknown = ops
            .iter()
            .filter(|op| matches!(op.outcome, Outcome::Refused { status: 504, .. }))
            .count();
        println!(
            "  {label} round {round}: killed {killed}, {} acknowledged, {} refused, {unknown} \
             outcome unknown (504), {} lost; 503 /readyz before the promotion: {refused}; \
             writes answered {} ms after the promotion; longest request {} ms",
            tally.acknowledged,
            tally.refused,
            verdict.lost.len(),
            gap.map_or("never".to_owned(), |gap| gap.as_millis().to_string()),
            longest.as_millis(),
        );

        if replication == Replication::Synchronous {
            assert!(
                verdict.is_clean(),
                "{label} round {round}, seed {seed}: {} acknowledged writes lost, {} phantoms\n{}",
                verdict.lost.len(),
                verdict.phantoms.len(),
                verdict.describe(50)
            );
        } else if !verdict.is_clean() {
            eprintln!("{}", verdict.describe(10));
        }
        let gap =
            gap.unwrap_or_else(|| panic!("round {round}: no write answered after the promotion"));
        assert!(
            gap <= RESUMED_WITHIN,
            "round {round}: writes answered again {gap:?} after the promotion"
        );
        assert!(
            longest <= LONGEST_REQUEST,
            "round {round}: a request took {longest:?}, over {LONGEST_REQUEST:?}"
        );
        let unreadable: Vec<String> = ops
            .iter()
            .filter_map(|op| op.receipt.as_ref()?.unreadable.clone())
            .collect();
        assert!(
            unreadable.is_empty(),
            "round {round}: 2xx bodies that do not read: {unreadable:?}"
        );
        if replication == Replication::Synchronous {
            let reused = reused_ids(&ops, &mut ids_seen);
            assert!(
                reused.is_empty(),
                "round {round}: ids handed out again: {reused:?}"
            );
        }
        ids_seen.extend(listed.iter().map(|(id, _)| *id));

        report.rounds += 1;
        report.tally.add(tally);
        report.lost_per_round.push(verdict.lost.len());
        report.gaps.push(gap);
        report.longest_request = report.longest_request.max(longest);
        report.outcome_unknown += unknown;
        items = listed.into_iter().collect();

        pair.rebuild_standby(1 - pair.primary).await;
    }

    let metrics = admin.get("/metrics").await.text().await.unwrap_or_default();
    let failovers = counter(&metrics, "database_failovers_total");
    let refusals = counter(&metrics, "database_read_only_refusals_total");
    assert!(
        failovers >= rounds as f64,
        "{failovers} failovers counted for {rounds} rounds:\n{metrics}"
    );
    assert!(metrics.contains("# HELP database_failovers_total"));
    assert!(metrics.contains("# HELP database_read_only_refusals_total"));
    drop(service);
    drop(pair);

    report.elapsed = started.elapsed();
    let mut gaps = report.gaps.clone();
    gaps.sort();
    println!(
        "failover test, {label} replication: {} rounds in {:.1} s; {} acknowledged, {} refused, \
         {} outcome unknown (504); acknowledged writes lost per round {:?}; writes answered \
         again after the promotion: p50 {} ms, max {} ms; longest request {} ms (bound {} ms); \
         failovers counted {failovers}, read-only refusals {refusals}",
        report.rounds,
        report.elapsed.as_secs_f64(),
        report.tally.acknowledged,
        report.tally.refused,
        report.outcome_unknown,
        report.lost_per_round,
        gaps.get(gaps.len() / 2).map_or(0, Duration::as_millis),
        gaps.last().map_or(0, Duration::as_millis),
        report.longest_request.as_millis(),
        LONGEST_REQUEST.as_millis(),
    );
    report
}

/// Polls `/readyz` until it answers 503 (no host takes writes: the
/// primary is dead, the standby read-only), at most a second; says whether
/// it did.
async fn not_ready_while_no_host_writes(admin: &crate::helpers::Client) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        let response = admin.get("/readyz").await;
        if response.status() == 503 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// `/readyz` once it answers 200, as JSON.
async fn wait_ready(admin: &crate::helpers::Client) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = admin.get("/readyz").await;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or_default();
        if status == 200 {
            return body;
        }
        assert!(Instant::now() < deadline, "/readyz still {status}: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How long after `promoted` the first write was answered 2xx.
fn first_answer_after(ops: &[Op], promoted: Instant) -> Option<Duration> {
    ops.iter()
        .filter(|op| op.outcome == Outcome::Acknowledged)
        .filter_map(|op| op.receipt.as_ref())
        .map(|receipt| receipt.answered())
        .filter(|answered| *answered >= promoted)
        .min()
        .map(|answered| answered - promoted)
}

/// Acknowledged creates whose id was seen before (acknowledged, or listed,
/// in an earlier round or this one); records the new ones.
fn reused_ids(ops: &[Op], seen: &mut HashSet<i64>) -> Vec<i64> {
    let mut reused = Vec::new();
    for op in ops {
        if let (Outcome::Acknowledged, Write::Create { id: Some(id), .. }) =
            (&op.outcome, &op.write)
            && !seen.insert(*id)
        {
            reused.push(*id);
        }
    }
    reused
}

/// The value of an unlabelled counter in Prometheus text.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}
