//! The run itself: the store, the `items-service` processes over it, the
//! writers and subscribers, and the disasters (a kill of an instance, a
//! failover of the primary) at fixed fractions of the run.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::oneshot;

use super::subscribers::{SubscriberLog, subscribe};
use super::verify::{Figures, Table, verify};
use super::writers::{Pace, SENTINEL_NAME, SHARED_NAME, WRITERS, WriterLog, write};
use crate::crash::rng::{self, Rng};
use crate::failover::cluster::{Pair, Replication};
use crate::helpers::{Client, Service};

/// Subscribers reading at once.
const SUBSCRIBERS: usize = 2;

/// The base URLs of the running instances, by index; an instance killed
/// and started again gets a new port, and everyone reads it from here.
#[derive(Debug, Clone)]
pub struct Instances(Arc<RwLock<Vec<String>>>);

impl Instances {
    pub fn base(&self, index: usize) -> String {
        self.0.read().expect("not poisoned")[index].clone()
    }

    pub fn len(&self) -> usize {
        self.0.read().expect("not poisoned").len()
    }

    fn set(&self, index: usize, base: String) {
        self.0.write().expect("not poisoned")[index] = base;
    }
}

/// The store a run is over.
pub enum Store {
    /// One process, everything in memory: no kill (it would lose the
    /// store), no change table.
    Memory,
    /// Two processes on one file.
    Sqlite(tempfile::TempDir),
    /// Two instances over the test's own primary and synchronous standby,
    /// `DATABASE_URL` naming both.
    Postgres(Pair),
}

impl Store {
    pub async fn postgres() -> Self {
        Self::Postgres(Pair::start(Replication::Synchronous).await)
    }

    pub fn sqlite() -> Self {
        Self::Sqlite(tempfile::tempdir().expect("a temporary directory"))
    }

    fn label(&self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Sqlite(_) => "SQLite",
            Self::Postgres(_) => "PostgreSQL",
        }
    }

    fn instances(&self) -> usize {
        match self {
            Self::Memory => 1,
            _ => 2,
        }
    }

    fn settings(&self) -> Vec<(&'static str, String)> {
        let mut settings = vec![("RATE_LIMIT_MAX", "0".to_owned())];
        match self {
            Self::Memory => {}
            Self::Sqlite(directory) => settings.push((
                "DATABASE_URL",
                format!("sqlite://{}", directory.path().join("items.db").display()),
            )),
            Self::Postgres(pair) => {
                settings.push(("DATABASE_URL", pair.database_url()));
                // As the failover tests run it: writes refused within a
                // second while no host takes them.
                settings.push(("DATABASE_STATEMENT_TIMEOUT_MS", "1000".to_owned()));
            }
        }
        settings
    }

    /// The change table's rows after `after`: position, kind, item id.
    async fn table(&self, after: u64) -> Option<Table> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        match self {
            Self::Memory => None,
            Self::Sqlite(directory) => {
                let connection = rusqlite::Connection::open_with_flags(
                    directory.path().join("items.db"),
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .expect("the store file opens");
                let mut statement = connection
                    .prepare(
                        "select position, kind, item_id from changes where position > ?1 \
                         order by position",
                    )
                    .expect("the change table reads");
                let rows = statement
                    .query_map([after], |row| {
                        Ok((row.get::<_, i64>(0)? as u64, row.get(1)?, row.get(2)?))
                    })
                    .expect("the change table reads")
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .expect("the change table reads");
                Some(rows)
            }
            Self::Postgres(pair) => {
                let client = pair.primary().connect_to("items").await;
                let rows = client
                    .query(
                        "select position, kind, item_id from changes where position > $1 \
                         order by position",
                        &[&after],
                    )
                    .await
                    .expect("the change table reads");
                Some(
                    rows.iter()
                        .map(|row| (row.get::<_, i64>(0) as u64, row.get(1), row.get(2)))
                        .collect(),
                )
            }
        }
    }
}

/// How a run is sized: `FEED_RUN_EVENTS` acknowledged writes (about as
/// many events), `default` when unset.
pub fn sized(default: usize) -> usize {
    std::env::var("FEED_RUN_EVENTS")
        .ok()
        .and_then(|events| events.parse().ok())
        .filter(|events| *events > 0)
        .unwrap_or(default)
}

/// How fast the writers go: `FEED_RUN_RATE` writes a second between
/// them all (to measure the delivery latency of a load the machine keeps
/// up with), else as fast as the service answers.
fn pace() -> Pace {
    let rate = std::env::var("FEED_RUN_RATE")
        .ok()
        .and_then(|rate| rate.parse::<f64>().ok())
        .filter(|rate| *rate > 0.0);
    Pace(rate.map(|rate| Duration::from_secs_f64(WRITERS as f64 / rate)))
}

/// Starts an instance over `store`.
async fn start(settings: &[(&'static str, String)]) -> Service {
    let settings: Vec<(&str, &str)> = settings
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    Service::start(&settings).await
}

fn base(service: &Service) -> String {
    format!("http://127.0.0.1:{}", service.listening.address.port())
}

/// Runs writers and subscribers over `store` until `events` writes were
/// acknowledged, killing an instance at 40 % (two instances) and failing
/// the primary over at 70 % (PostgreSQL); then checks what every subscriber
/// saw and returns the figures (printed).
pub async fn run(mut store: Store, events: usize) -> Figures {
    let seed = rng::seed();
    let dice = Rng::new(seed);
    let label = store.label();
    println!("feed run over {label}: {events} writes, seed {seed} (CRASH_SEED={seed} repeats it)");
    let settings = store.settings();
    let mut services = Vec::new();
    for _ in 0..store.instances() {
        // One after the other: each migrates the store on its way up.
        services.push(start(&settings).await);
    }
    let instances = Instances(Arc::new(RwLock::new(services.iter().map(base).collect())));
    // A reconnection every `every` events on average: at least 1,000 in a
    // run of a million, and as many per event in a short one.
    let every = (events / 2000).clamp(10, 500);

    let mut subscribers = Vec::new();
    for number in 0..SUBSCRIBERS {
        let (ready, opened) = oneshot::channel();
        subscribers.push(tokio::spawn(subscribe(
            number,
            instances.clone(),
            every,
            dice.fork(100 + number as u64),
            ready,
        )));
        tokio::time::timeout(Duration::from_secs(20), opened)
            .await
            .expect("a subscriber's first stream opens within 20 s")
            .expect("the subscriber runs");
    }
    let started = Instant::now();
    let first = Client::at(services[0].listening.address.port());
    let shared = first.create_item(SHARED_NAME).await["id"]
        .as_i64()
        .expect("an id");

    let pace = pace();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (1..=WRITERS)
        .map(|number| {
            tokio::spawn(write(
                number,
                number as usize % instances.len(),
                instances.clone(),
                shared,
                Arc::clone(&stop),
                Arc::clone(&acked),
                dice.fork(number),
                pace,
            ))
        })
        .collect();

    let mut kills = 0;
    let mut failovers = 0;
    let mut reported = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let done = acked.load(Ordering::Relaxed);
        if done >= events {
            break;
        }
        if services.len() > 1 && kills == 0 && done >= events * 4 / 10 {
            let killed = Instant::now();
            let _ = services[1].child.kill();
            let _ = services[1].child.wait();
            tokio::time::sleep(Duration::from_millis(200)).await;
            services[1] = start(&settings).await;
            instances.set(1, base(&services[1]));
            kills += 1;
            println!(
                "  {label}: instance 2 killed (SIGKILL) after {done} writes and serving again in \
                 {} ms",
                killed.elapsed().as_millis()
            );
        }
        if let Store::Postgres(pair) = &mut store
            && failovers == 0
            && done >= events * 7 / 10
        {
            let killed = Instant::now();
            let name = pair.primary().name;
            pair.kill_primary();
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(pair.promote_standby());
            });
            failovers += 1;
            println!(
                "  {label}: primary {name} killed after {done} writes, standby promoted in {} ms",
                killed.elapsed().as_millis()
            );
        }
        if reported.elapsed() >= Duration::from_secs(30) {
            reported = Instant::now();
            println!(
                "  {label}: {done} writes acknowledged in {:.0} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut logs: Vec<WriterLog> = Vec::new();
    for writer in writers {
        logs.push(
            tokio::time::timeout(Duration::from_secs(60), writer)
                .await
                .expect("a writer ends once stopped")
                .expect("a writer does not panic"),
        );
    }
    let written = started.elapsed();
    let sentinel = write_until_acknowledged(&first, SENTINEL_NAME).await;
    let mut seen: Vec<SubscriberLog> = Vec::new();
    for subscriber in subscribers {
        seen.push(
            tokio::time::timeout(Duration::from_secs(120), subscriber)
                .await
                .expect("C14: every subscriber gets the last write within 120 s")
                .expect("a subscriber does not panic"),
        );
    }
    let elapsed = started.elapsed();
    let listing = read_listing(&first).await;
    let start = seen.iter().map(|log| log.start).min().unwrap_or_default();
    let table = store.table(start).await;
    let mut figures = verify(
        &logs,
        &seen,
        &listing,
        table.as_ref(),
        (shared, sentinel),
        (started, written),
        failovers > 0,
    );
    figures.label = label;
    figures.kills = kills;
    figures.failovers = failovers;
    figures.written = written;
    figures.elapsed = elapsed;
    figures.seed = seed;
    println!("{figures}");
    drop(services);
    figures
}

/// Creates the item `name` until a 201 comes (a 503 while the store
/// recovers), at most 30 s; its id.
async fn write_until_acknowledged(client: &Client, name: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = client
            .post_json("/items", &serde_json::json!({ "name": name }))
            .await;
        if response.status() == 201 {
            let item: Value = response.json().await.expect("JSON");
            return item["id"].as_i64().expect("an id");
        }
        assert!(
            Instant::now() < deadline,
            "the last write is not acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every item, `(id, name)`, as one `GET /items` lists them.
async fn read_listing(client: &Client) -> Vec<(i64, String)> {
    crate::crash::rounds::read_all(client).await
}
