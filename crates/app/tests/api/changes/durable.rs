//! The feed over the durable stores (C14): SQLite and PostgreSQL, one
//! instance and two sharing a store (two SQLite stores on one file are
//! two processes as far as the file knows; two PostgreSQL stores on one
//! database, two instances).

use std::time::{Duration, Instant};

use items_adapters::postgres::{PostgresSettings, PostgresStore};
use items_adapters::sqlite::{SqliteSettings, SqliteStore};
use items_testkit::Fixture;
use tempfile::TempDir;

use super::concurrency::{assert_in_order, positions, writers_and_a_reconnecting_subscriber};
use super::{created, delete, deleted, rename, replaced, said};
use crate::support::*;

/// Two servers, each over its own store on one SQLite file.
struct TwoOnOneFile {
    first: TestApp,
    second: TestApp,
    stores: [SqliteStore; 2],
    directory: TempDir,
}

impl TwoOnOneFile {
    async fn start() -> Self {
        let directory = tempfile::tempdir().expect("a temporary directory");
        let path = directory.path().join("items.db");
        let first_store = SqliteStore::open(&path, SqliteSettings::default())
            .await
            .unwrap();
        let second_store = SqliteStore::open(&path, SqliteSettings::default())
            .await
            .unwrap();
        let first = TestApp::spawn(TestServices::sqlite(&first_store)).await;
        let second = TestApp::spawn(TestServices::sqlite(&second_store)).await;
        Self {
            first,
            second,
            stores: [first_store, second_store],
            directory,
        }
    }

    fn count(&self, sql: &str) -> i64 {
        rusqlite::Connection::open(self.directory.path().join("items.db"))
            .unwrap()
            .query_row(sql, [], |row| row.get(0))
            .unwrap()
    }

    async fn close(self) {
        for store in &self.stores {
            store.close().await;
        }
    }
}

/// Events, resumption and reset through one instance, then a change made
/// through `writer` reaching a subscriber of `reader` within a second.
async fn events_resume_reset_and_cross_instances(writer: &Client, reader: &Client) {
    let (mut stream, _, _) = EventStream::subscribe(reader, None).await;
    writer.create_item("pen").await;
    rename(writer, 1, "quill").await;
    delete(writer, 1).await;
    let events = stream.events(3).await;
    assert_eq!(
        events.iter().map(said).collect::<Vec<_>>(),
        [created(1, "pen"), replaced(1, "quill"), deleted(1)],
        "C14: every change, in commit order, whichever instance wrote it"
    );
    let first = events[0].id.clone().unwrap();
    let (mut resumed, _, reset) = EventStream::subscribe(writer, Some(&first)).await;
    assert!(
        !reset,
        "C14: a cursor from one instance resumes on the other"
    );
    assert_eq!(resumed.events(2).await, events[1..]);
    let (_, _, reset) = EventStream::subscribe(writer, Some("s0000000000000000.1")).await;
    assert!(reset, "C14: a cursor of another store gets a reset");

    for round in 0..3 {
        let written = Instant::now();
        let item = writer.create_item(&format!("round {round}")).await;
        let event = stream.event().await;
        let took = written.elapsed();
        assert_eq!(said(&event), ("created".to_owned(), item));
        assert!(
            took < Duration::from_secs(1),
            "C14: a change made through one instance reaches the other's subscribers within 1 s: \
             {took:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_sqlite_two_processes_on_one_file_see_each_others_changes_within_a_second_c14() {
    let pair = TwoOnOneFile::start().await;
    events_resume_reset_and_cross_instances(&pair.first, &pair.second).await;
    pair.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_sqlite_eight_writers_through_two_processes_miss_repeat_and_reorder_nothing_c14() {
    let pair = TwoOnOneFile::start().await;
    let clients = [(*pair.first).clone(), (*pair.second).clone()];
    let outcome = writers_and_a_reconnecting_subscriber(&clients, &clients).await;
    assert_in_order(&outcome.events);
    let table: Vec<u64> = rusqlite::Connection::open(pair.directory.path().join("items.db"))
        .unwrap()
        .prepare("select position from changes order by position")
        .unwrap()
        .query_map([], |row| row.get::<_, i64>(0))
        .unwrap()
        .map(|position| position.unwrap() as u64)
        .collect();
    assert_eq!(
        table[1..],
        positions(&outcome.events),
        "C14: the events are the change table's rows after the subscription began, in its order"
    );
    let recorded = pair.count("select count(*) from changes") as usize;
    assert_eq!(
        recorded,
        outcome.events.len() + 1,
        "C14: one event per row of the change table (and the shared item's create before the \
         subscription)"
    );
    pair.close().await;
}

/// Two servers, each over its own store (pool, feed, poller) on one
/// PostgreSQL database: two instances.
struct TwoOnOneDatabase {
    first: TestApp,
    second: TestApp,
    other: PostgresStore,
    scratch: ScratchStore,
}

impl TwoOnOneDatabase {
    async fn start() -> Self {
        let scratch = ScratchStore::create().await;
        let other = PostgresStore::connect(
            &scratch.url(),
            PostgresSettings::default(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        let first = TestApp::spawn(TestServices::postgres(&scratch.store)).await;
        let second = TestApp::spawn(TestServices::postgres(&other)).await;
        Self {
            first,
            second,
            other,
            scratch,
        }
    }

    async fn count(&self, sql: &str) -> i64 {
        let client = self.scratch.database.client().await.unwrap();
        client.query_one(sql, &[]).await.unwrap().get(0)
    }

    async fn finish(self) {
        drop(self.first);
        drop(self.second);
        self.other.close().await;
        self.scratch.teardown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_postgres_two_instances_see_each_others_changes_within_a_second_c14() {
    let pair = TwoOnOneDatabase::start().await;
    events_resume_reset_and_cross_instances(&pair.first, &pair.second).await;
    pair.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_postgres_eight_writers_through_two_instances_miss_repeat_and_reorder_nothing_c14() {
    let pair = TwoOnOneDatabase::start().await;
    let clients = [(*pair.first).clone(), (*pair.second).clone()];
    let outcome = writers_and_a_reconnecting_subscriber(&clients, &clients).await;
    assert_in_order(&outcome.events);
    let recorded = pair.count("select count(*) from changes").await as usize;
    assert_eq!(
        recorded,
        outcome.events.len() + 1,
        "C14: one event per row of the change table (and the shared item's create before the \
         subscription)"
    );
    let client = pair.scratch.database.client().await.unwrap();
    let table: Vec<u64> = client
        .query("select position from changes order by position", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get::<_, i64>(0) as u64)
        .collect();
    assert_eq!(
        table[1..],
        positions(&outcome.events),
        "C14: the events are the change table's rows after the subscription began, in its order"
    );
    pair.finish().await;
}
