//! Write-then-read probes at several replay lags and across a failover
//! (C13): a primary `a` with two standbys, `b` synchronous (named alone in
//! `synchronous_standby_names`, so every acknowledged commit is on it) and
//! `c` asynchronous, both applying what they receive
//! `recovery_min_apply_delay` late. Instance A writes (and reads, on the
//! primary, for the latency to compare with); instance B reads each write
//! with A's token; instance C reads it without one. B and C only read, so
//! their `database_reads_total` split token reads and token-less reads.
//!
//! For each lag of `STANDBY_RUN_LAGS` (default `0,10ms,100ms,1s`), in that
//! order, `STANDBY_RUN_PROBES` probes (default 300) run on
//! `STANDBY_RUN_TASKS` tasks (default 8); then as many at lag 0, mid-way
//! through which the primary is killed (`SIGKILL`) and `b` promoted (last,
//! since `c` may not follow it). The instances' `DATABASE_URL` names both,
//! so they follow. A write answered 503, 504 or
//! not at all has an unknown outcome and is not read back; every other
//! write must read back through B exactly as written, never older, never
//! 404, and never 409 `consistency-unmet`: under synchronous replication
//! the promoted standby has every acknowledged commit.
//!
//! Each phase prints its figures (share of reads served by standbys,
//! latencies); only correctness is asserted, the timings depend on the
//! machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{metric, token};
use crate::failover::cluster::{Node, Pair, Replication};
use crate::helpers::Service;

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn lags() -> Vec<String> {
    std::env::var("STANDBY_RUN_LAGS")
        .unwrap_or_else(|_| "0,10ms,100ms,1s".into())
        .split(',')
        .map(|lag| lag.trim().to_owned())
        .filter(|lag| !lag.is_empty())
        .collect()
}

/// What the probes of one phase saw.
#[derive(Default)]
struct Tally {
    probes: usize,
    /// Writes answered 503, 504 or not at all: not read back.
    unknown: usize,
    stale: usize,
    /// Acknowledged writes whose token got 409: must stay 0.
    unmet: usize,
    token_reads: Vec<Duration>,
    primary_reads: Vec<Duration>,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.probes += other.probes;
        self.unknown += other.unknown;
        self.stale += other.stale;
        self.unmet += other.unmet;
        self.token_reads.extend(other.token_reads);
        self.primary_reads.extend(other.primary_reads);
    }
}

/// The three instances.
struct Instances {
    a: Service,
    b: Service,
    c: Service,
}

/// Whether a write's outcome is unknown (the service could not learn it,
/// or no primary took it), rather than a failure of the test.
fn unknown(status: StatusCode) -> bool {
    status == 503 || status == 504
}

/// GETs `path` on `service` (with `token`, if any) until it is answered
/// other than 503 or 504 (no primary yet, during the failover), for at
/// most 30 s. Returns the status, the body and how long the first try
/// took, if it was the answer.
async fn read(
    service: &Service,
    path: &str,
    token: Option<&str>,
) -> (u16, Value, Option<Duration>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut first = true;
    loop {
        let started = Instant::now();
        let mut request = service.client.request(Method::GET, path);
        if let Some(token) = token {
            request = request.header("consistency-token", token);
        }
        let answer = request.send().await;
        let took = started.elapsed();
        if let Ok(response) = answer {
            let status = response.status();
            if !unknown(status) || Instant::now() > deadline {
                let body = response.json::<Value>().await.unwrap_or(Value::Null);
                return (status.as_u16(), body, first.then_some(took));
            }
        }
        assert!(Instant::now() < deadline, "{path} unanswered for 30 s");
        first = false;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One task's probes: claims probe numbers from `next` until `count`,
/// writing its own item (a new one every fourth probe).
async fn probe_task(
    services: Arc<Instances>,
    task: usize,
    next: Arc<AtomicUsize>,
    count: usize,
) -> Tally {
    let mut tally = Tally::default();
    let mut id: Option<i64> = None;
    loop {
        let round = next.fetch_add(1, Ordering::SeqCst);
        if round >= count {
            return tally;
        }
        tally.probes += 1;
        let name = format!("task {task} probe {round}");
        let body = json!({ "name": name });
        let (method, path) = match id {
            Some(id) if !round.is_multiple_of(4) => (Method::PUT, format!("/items/{id}")),
            _ => (Method::POST, "/items".to_owned()),
        };
        let written = services
            .a
            .client
            .request(method, &path)
            .json(&body)
            .send()
            .await;
        let response = match written {
            Ok(response) if !unknown(response.status()) => response,
            _ => {
                tally.unknown += 1;
                continue;
            }
        };
        let status = response.status();
        assert!(
            status == 200 || status == 201,
            "C13: a write is acknowledged, or its outcome is unknown: {status}"
        );
        let written_at = token(&response);
        let served = response.json::<Value>().await.unwrap();
        let item = served["id"].as_i64().expect("the item's id");
        id = Some(item);
        let path = format!("/items/{item}");

        let (status, body, took) = read(&services.b, &path, Some(&written_at)).await;
        if status == 409 {
            tally.unmet += 1;
            eprintln!("unmet: acknowledged {name} at {written_at}: {body}");
        } else if status != 200 || body["name"] != json!(name) {
            tally.stale += 1;
            eprintln!("stale: {status} {body} for {name} at {written_at}");
        } else if let Some(took) = took {
            tally.token_reads.push(took);
        }
        // Token-less: counted by C's metric only; it may be older.
        let _ = read(&services.c, &path, None).await;
        let (status, _, took) = read(&services.a, &path, None).await;
        if let (200, Some(took)) = (status, took) {
            tally.primary_reads.push(took);
        }
    }
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let at = ((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len());
    sorted[at - 1]
}

/// `database_reads_total` of `service` by role: (standby, primary).
async fn reads(service: &Service) -> (f64, f64) {
    (
        metric(service, "database_reads_total{role=\"standby\"}").await,
        metric(service, "database_reads_total{role=\"primary\"}").await,
    )
}

/// Transactions committed in `items` on `node`, from `pg_stat_database`;
/// `None` once it is down.
async fn commits(node: &Node) -> Option<i64> {
    let url = format!("postgres://postgres@127.0.0.1:{}/items", node.port);
    let client = items_testkit::postgres::connect(&url).await.ok()?;
    let row = client
        .query_one(
            "select xact_commit from pg_stat_database where datname = 'items'",
            &[],
        )
        .await
        .ok()?;
    Some(row.get(0))
}

/// Sets `recovery_min_apply_delay` on the standby behind `node`.
async fn delay(node: &Node, lag: &str) {
    let admin = node.connect().await;
    // One statement a call: a batch runs in one transaction, which ALTER
    // SYSTEM refuses.
    for statement in [
        format!("alter system set recovery_min_apply_delay = '{lag}'"),
        "select pg_reload_conf()".to_owned(),
    ] {
        admin
            .batch_execute(&statement)
            .await
            .expect("the standby takes the delay");
    }
}

/// `b` (application name `walreceiver`, `c` has its own) alone as the
/// synchronous standby: with `*` either could be, and promoting `b` would
/// then lose commits acknowledged by `c`.
async fn only_b_synchronous(pair: &Pair) {
    let admin = pair.primary().connect().await;
    for statement in [
        "alter system set synchronous_standby_names = 'walreceiver'",
        "select pg_reload_conf()",
    ] {
        admin
            .batch_execute(statement)
            .await
            .expect("synchronous_standby_names");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let sync: i64 = admin
            .query_one(
                "select count(*) from pg_stat_replication \
                 where application_name = 'walreceiver' and sync_state = 'sync'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if sync == 1 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "b becomes the synchronous standby"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn probes_at_each_lag_and_across_a_failover_never_read_an_older_state_c13() {
    let started = Instant::now();
    let mut pair = Pair::start(Replication::Synchronous).await;
    let c = pair.add_standby("c", "cluster_name = 'c'").await;
    only_b_synchronous(&pair).await;
    let primary = pair.database_url();
    let standbys = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/items",
        pair.nodes[1].port, pair.nodes[c].port
    );
    let reader = [
        ("DATABASE_URL", primary.as_str()),
        ("RATE_LIMIT_MAX", "0"),
        ("DATABASE_READ_URL", standbys.as_str()),
        ("ADMIN_PORT", "0"),
    ];
    let services = Arc::new(Instances {
        a: Service::start(&[("DATABASE_URL", &primary), ("RATE_LIMIT_MAX", "0")]).await,
        b: Service::start(&reader).await,
        c: Service::start(&reader).await,
    });
    let count = setting("STANDBY_RUN_PROBES", 300usize);
    let tasks = setting("STANDBY_RUN_TASKS", 8usize);
    // The lags, then the failover's phase (`true`).
    let phases = lags()
        .into_iter()
        .map(|lag| (lag, false))
        .chain([("0".to_owned(), true)]);
    let mut total = Tally::default();

    for (lag, failover) in phases {
        for standby in [1, c] {
            delay(&pair.nodes[standby], &lag).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before_b = reads(&services.b).await;
        let before_c = reads(&services.c).await;
        let before_commits = (commits(&pair.nodes[1]).await, commits(&pair.nodes[c]).await);
        let phase_started = Instant::now();
        let next = Arc::new(AtomicUsize::new(0));
        let running: Vec<_> = (0..tasks)
            .map(|task| tokio::spawn(probe_task(services.clone(), task, next.clone(), count)))
            .collect();
        if failover {
            while next.load(Ordering::SeqCst) < count / 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            pair.kill_primary();
            pair.promote_standby().await;
            // `c` follows the new primary if it had not received past
            // where the new timeline begins; either way B must stay right.
            let follow = format!(
                "alter system set primary_conninfo = 'host=127.0.0.1 port={} user=postgres'",
                pair.nodes[1].port
            );
            let admin = pair.nodes[c].connect().await;
            let _ = admin.batch_execute(&follow).await;
            let _ = admin.batch_execute("select pg_reload_conf()").await;
            eprintln!(
                "failover at probe {} of {count}",
                next.load(Ordering::SeqCst)
            );
        }
        let mut tally = Tally::default();
        for task in running {
            tally.add(task.await.unwrap());
        }
        let took = phase_started.elapsed();
        let after_b = reads(&services.b).await;
        let after_c = reads(&services.c).await;
        let share = |before: (f64, f64), after: (f64, f64)| {
            let standby = after.0 - before.0;
            let primary = after.1 - before.1;
            100.0 * standby / (standby + primary).max(1.0)
        };
        let commits_b = commits(&pair.nodes[1]).await.zip(before_commits.0);
        let commits_c = commits(&pair.nodes[c]).await.zip(before_commits.1);
        tally.token_reads.sort();
        tally.primary_reads.sort();
        eprintln!(
            "lag {lag}{}: {} probes in {took:.1?} ({:.0}/s), {} outcome unknown, {} stale, {} unmet; \
             token reads by standbys {:.1}%, token-less {:.1}%; \
             token read p50 {:.2?} p99 {:.2?}, primary read p50 {:.2?} p99 {:.2?}; \
             xact_commit in items: b +{:?}, c +{:?}",
            if failover { " with failover" } else { "" },
            tally.probes,
            tally.probes as f64 / took.as_secs_f64(),
            tally.unknown,
            tally.stale,
            tally.unmet,
            share(before_b, after_b),
            share(before_c, after_c),
            percentile(&tally.token_reads, 0.5),
            percentile(&tally.token_reads, 0.99),
            percentile(&tally.primary_reads, 0.5),
            percentile(&tally.primary_reads, 0.99),
            commits_b.map(|(after, before)| after - before),
            commits_c.map(|(after, before)| after - before),
        );
        total.add(tally);
    }
    eprintln!(
        "{} probes in {:.1?}: {} stale, {} unmet, {} outcome unknown",
        total.probes,
        started.elapsed(),
        total.stale,
        total.unmet,
        total.unknown
    );
    assert_eq!(
        total.stale, 0,
        "C13: no read with a token sees an older state"
    );
    assert_eq!(
        total.unmet, 0,
        "C13: under synchronous replication an acknowledged write's token is met"
    );
    assert!(
        total.unknown < total.probes / 2,
        "most writes are acknowledged: {} of {} unknown",
        total.unknown,
        total.probes
    );
}
