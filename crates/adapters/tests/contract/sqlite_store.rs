//! What the SQLite store promises beyond the kit's checks: a counter that
//! survives a restart (C2), group commit, a failing batch that stores
//! nothing and answers 503 (C12), a write past its budget never applied
//! (C12), writers that never see `SQLITE_BUSY`, and
//! a clear error for a file that cannot be opened.
//!
//! Some tests hold the file's write lock from a connection of their own
//! (`BEGIN IMMEDIATE`, as another process would): the writer then waits in
//! its own `BEGIN IMMEDIATE`, and the writes sent meanwhile queue up, so
//! what the next batch holds is known.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use futures_util::TryStreamExt;
use items_adapters::sqlite::{
    OpenError, SqliteSettings, SqliteStore, WRITES_PER_COMMIT, WRITES_PER_COMMIT_BUCKETS,
    describe_metrics,
};
use items_domain::{
    HealthCheck, Id, Item, ItemRepository, Name, Price, ProductRepository, RepositoryError,
};
use items_testkit::Fixture;
use rusqlite::Connection;

use super::sqlite_file::SqliteFile;

fn name(raw: &str) -> Name {
    Name::parse(raw).expect("a valid name")
}

/// A connection of the test's own to the store's file.
fn connect(path: &Path) -> Connection {
    Connection::open(path).expect("the test's own connection opens")
}

/// A connection holding the file's write lock until it commits.
fn hold_write_lock(path: &Path) -> Connection {
    let connection = connect(path);
    connection
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the write lock is free");
    connection
}

/// The budget of the tests of a write past it: the store's busy timeout.
const BUDGET: Duration = Duration::from_secs(1);

/// A store that waits at most [`BUDGET`] for the file's write lock, and a
/// connection holding that lock.
async fn budgeted_file_behind_a_lock() -> (SqliteFile, Connection) {
    let file = SqliteFile::create_with(SqliteSettings {
        busy_timeout: BUDGET,
        ..SqliteSettings::default()
    })
    .await;
    let lock = hold_write_lock(&file.path());
    (file, lock)
}

/// Sends `first`, which holds the writer in `BEGIN IMMEDIATE` until the
/// busy timeout (1 budget), and `late`, queued at half a budget, so it has
/// until 1.5 budgets; lets go of `lock` at 1.75 budgets, past `late`'s
/// deadline, and checks both were refused, `late` for its budget (C12).
/// Then gives whatever the writer still held time to commit.
async fn assert_first_and_late_refused<A, B>(
    lock: Connection,
    first: impl Future<Output = Result<A, RepositoryError>> + Send + 'static,
    late: impl Future<Output = Result<B, RepositoryError>> + Send + 'static,
) where
    A: std::fmt::Debug + Send + 'static,
    B: std::fmt::Debug + Send + 'static,
{
    let first = tokio::spawn(first);
    tokio::time::sleep(BUDGET / 2).await;
    let late = tokio::spawn(late);
    tokio::time::sleep(BUDGET * 5 / 4).await;
    lock.execute_batch("COMMIT").expect("the lock is let go");

    let first = first.await.expect("the first write's task ends");
    assert!(
        matches!(first, Err(RepositoryError::Unavailable(_))),
        "{first:?}"
    );
    let late = late.await.expect("the late write's task ends");
    let Err(RepositoryError::Unavailable(cause)) = late else {
        panic!("a write past its budget must be refused: {late:?}");
    };
    assert!(
        cause.to_string().contains("DATABASE_STATEMENT_TIMEOUT_MS"),
        "{cause}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Waits until `count` writes wait in the store's queue.
async fn until_queued(store: &SqliteStore, count: usize) {
    for _ in 0..500 {
        if store.queued_writes() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "{count} writes never queued (now {})",
        store.queued_writes()
    );
}

/// Sends `count` creates (`n0`, `n1`…) while another connection holds the
/// write lock: the first alone, which the writer takes and waits for the
/// lock with, then the others, which queue behind it (the writer runs on a
/// thread of its own, which may wake only after every create was queued:
/// then it would take them all in its first batch).
async fn creates_behind_the_lock(
    store: &SqliteStore,
    count: usize,
) -> Vec<tokio::task::JoinHandle<Result<Item, RepositoryError>>> {
    let mut creates = vec![spawn_create(store, "n0")];
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(store.queued_writes(), 0, "the writer took `n0`");
    creates.extend((1..count).map(|n| spawn_create(store, &format!("n{n}"))));
    until_queued(store, count - 1).await;
    creates
}

/// Sends a create from a task of its own.
fn spawn_create(
    store: &SqliteStore,
    raw: &str,
) -> tokio::task::JoinHandle<Result<Item, RepositoryError>> {
    let items = store.items();
    let name = name(raw);
    tokio::spawn(async move { items.create(name).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_never_reused_across_a_reopen_and_the_version_is_kept_c2_c7_c12() {
    let file = SqliteFile::create().await;
    let items = file.store.items();
    for raw in ["a", "b", "c"] {
        items.create(name(raw)).await.unwrap();
    }
    assert!(items.delete(Id::new(3)).await.unwrap());
    let products = file.store.products();
    products
        .create(name("pen"), Price::new(1.5).unwrap())
        .await
        .unwrap();
    let version = items.list_all().await.unwrap().version;
    file.store.close().await;

    let reopened = SqliteStore::open(file.path(), SqliteSettings::default())
        .await
        .unwrap();
    assert_eq!(reopened.items().list_all().await.unwrap().version, version);
    let item = reopened.items().create(name("d")).await.unwrap();
    let product = reopened
        .products()
        .create(name("ink"), Price::new(2.0).unwrap())
        .await
        .unwrap();

    assert_eq!(item.id, Id::new(4), "above every id handed out before");
    assert_eq!(product.id, Id::new(2));
    reopened.close().await;
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_share_commits_and_each_gets_its_own_id_c2_c12() {
    const CREATES: usize = 50;
    let file = SqliteFile::create().await;
    let lock = hold_write_lock(&file.path());
    let before = file.store.commits();

    let creates = creates_behind_the_lock(&file.store, CREATES).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    lock.execute_batch("COMMIT").unwrap();
    let mut ids = std::collections::BTreeSet::new();
    let mut answered = Vec::new();
    for create in creates {
        let item = create.await.unwrap().unwrap();
        ids.insert(item.id.get());
        answered.push(item);
    }

    let commits = file.store.commits() - before;
    assert_eq!(ids, (1..=CREATES as i64).collect(), "distinct, none lost");
    // A batch of creates is one multi-row insert: each caller must get the
    // id its own name was stored under.
    for item in &answered {
        let stored = file.store.items().get(item.id).await.unwrap();
        assert_eq!(stored.as_ref(), Some(item), "id {} answered", item.id.get());
    }
    assert!(
        commits < CREATES as u64 / 2,
        "{commits} commits for {CREATES} creates"
    );
    let page = file.store.items().list(&Default::default()).await.unwrap();
    assert_eq!(page.total, CREATES as u64);
    file.teardown().await;
}

/// A batch's creates are one multi-row insert: each caller must get the id
/// its name was stored under, also when another process wrote (and deleted)
/// an item with an id far above the store's own, which is never handed out
/// again (C2, C12).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_creates_after_a_foreign_high_id_gets_the_ids_its_names_are_stored_under_c2_c12()
{
    const CREATES: usize = 20;
    let file = SqliteFile::create().await;
    file.store.items().create(name("own")).await.unwrap();
    let lock = hold_write_lock(&file.path());
    lock.execute_batch("insert into items (id, name) values (1000, x'666f726569676e')")
        .unwrap();
    lock.execute_batch("delete from items where id = 1000")
        .unwrap();

    let creates = creates_behind_the_lock(&file.store, CREATES).await;
    lock.execute_batch("COMMIT").unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for create in creates {
        let item = create.await.unwrap().unwrap();
        let stored = file.store.items().get(item.id).await.unwrap();
        assert_eq!(
            stored.as_ref(),
            Some(&item),
            "id {} answered",
            item.id.get()
        );
        ids.insert(item.id.get());
    }

    assert_eq!(
        ids,
        (1001..=1000 + CREATES as i64).collect(),
        "never 1000 again"
    );
    let page = file.store.items().list(&Default::default()).await.unwrap();
    assert_eq!(page.total, CREATES as u64 + 1);
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_a_failing_write_stores_none_of_it_and_answers_each_unavailable_c12() {
    let file = SqliteFile::create().await;
    // A failure the store cannot foresee: a statement of the batch is
    // refused by the file itself (as a full disk or a broken page would).
    let admin = connect(&file.path());
    admin
        .execute_batch(
            "create trigger refuse_poison before insert on items \
             when new.name = cast('poison' as blob) \
             begin select raise(abort, 'injected failure'); end",
        )
        .unwrap();
    let lock = hold_write_lock(&file.path());
    let first = spawn_create(&file.store, "first");
    // The writer takes `first` alone and waits for the lock with it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(file.store.queued_writes(), 0, "the writer took `first`");

    let batch: Vec<_> = ["good", "poison", "also good"]
        .into_iter()
        .map(|raw| spawn_create(&file.store, raw))
        .collect();
    until_queued(&file.store, 3).await;
    lock.execute_batch("COMMIT").unwrap();

    assert_eq!(first.await.unwrap().unwrap().id, Id::new(1));
    for create in batch {
        assert!(matches!(
            create.await.unwrap(),
            Err(RepositoryError::Unavailable(_))
        ));
    }
    let items = file.store.items();
    let page = items.list(&Default::default()).await.unwrap();
    assert_eq!(page.items.len(), 1, "nothing of the failed batch is stored");
    assert_eq!(page.total, 1);
    let next = items.create(name("after")).await.unwrap();
    assert_eq!(
        next.id,
        Id::new(2),
        "no acknowledged id is handed out again"
    );
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_elsewhere_past_the_busy_timeout_gives_unavailable_and_stores_nothing_c12() {
    let file = SqliteFile::create_with(SqliteSettings {
        busy_timeout: Duration::from_millis(200),
        ..SqliteSettings::default()
    })
    .await;
    let lock = hold_write_lock(&file.path());

    let refused = file.store.items().create(name("blocked")).await;
    lock.execute_batch("COMMIT").unwrap();

    assert!(matches!(refused, Err(RepositoryError::Unavailable(_))));
    let items = file.store.items();
    assert_eq!(items.list(&Default::default()).await.unwrap().total, 0);
    assert_eq!(items.create(name("later")).await.unwrap().id, Id::new(1));
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_budget_passed_before_the_lock_was_free_is_answered_503_and_never_applied_c12()
 {
    let (file, lock) = budgeted_file_behind_a_lock().await;
    // The second write's batch waits for the lock past its deadline, so
    // the writer must leave it out rather than commit it.
    assert_first_and_late_refused(
        lock,
        {
            let items = file.store.items();
            async move { items.create(name("first")).await }
        },
        {
            let items = file.store.items();
            async move { items.create(name("late")).await }
        },
    )
    .await;
    let items = file.store.items();
    assert_eq!(items.list(&Default::default()).await.unwrap().total, 0);
    assert_eq!(items.create(name("after")).await.unwrap().id, Id::new(1));
    file.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_and_readers_never_see_a_busy_file_c12() {
    let file = SqliteFile::create().await;
    // A second store on the same file: another process of the service.
    let other = SqliteStore::open(file.path(), SqliteSettings::default())
        .await
        .unwrap();
    let mut listing = file.store.items().list_all().await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let items = if task % 2 == 0 {
                file.store.items()
            } else {
                other.items()
            };
            tokio::spawn(async move {
                for n in 0..40 {
                    let item = items.create(name(&format!("t{task}-{n}"))).await?;
                    let renamed = Item {
                        id: item.id,
                        name: name("renamed"),
                    };
                    items.replace(&renamed, Some(item.name)).await?;
                    items.get(item.id).await?;
                    if n % 3 == 0 {
                        items.delete(item.id).await?;
                    }
                }
                Ok::<_, RepositoryError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert!(
        listing.batches.try_next().await.unwrap().is_none(),
        "the empty snapshot"
    );

    let page = other.items().list(&Default::default()).await.unwrap();
    assert_eq!(page.total, 8 * 26);
    assert_eq!(page.items.len(), 8 * 26);
    other.close().await;
    file.teardown().await;
}

#[tokio::test]
async fn the_store_answers_its_health_check_until_it_is_closed_c11() {
    let file = SqliteFile::create().await;
    assert!(file.store.ping().await.is_ok());

    file.store.close().await;

    assert!(file.store.ping().await.is_err());
    assert!(matches!(
        file.store.items().create(name("late")).await,
        Err(RepositoryError::Unavailable(_))
    ));
    file.teardown().await;
}

/// The writer's metrics reach the process's recorder (C11): the queue depth
/// at scrape time, and one writes-per-commit sample per commit. Other tests
/// of this binary commit too, so the count is a lower bound.
#[tokio::test]
async fn the_writer_publishes_its_queue_depth_and_writes_per_commit_c11() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full(WRITES_PER_COMMIT.to_owned()),
            WRITES_PER_COMMIT_BUCKETS,
        )
        .unwrap()
        .install_recorder()
        .unwrap();
    describe_metrics();
    let file = SqliteFile::create().await;
    for raw in ["a", "b", "c"] {
        file.store.items().create(name(raw)).await.unwrap();
    }

    file.store.record_writer_metrics();
    let text = recorder.render();

    assert!(text.contains("sqlite_writer_queue_depth 0"), "{text}");
    let singles: u64 = text
        .lines()
        .find_map(|line| line.strip_prefix("sqlite_writes_per_commit_bucket{le=\"1\"} "))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no single-write bucket in {text}"));
    assert!(singles >= 3, "{text}");
    file.teardown().await;
}

#[tokio::test]
async fn a_file_in_a_missing_directory_is_a_clear_error_and_is_not_created() {
    let file = SqliteFile::create().await;
    let path = file.directory().join("missing").join("items.db");

    let error = SqliteStore::open(&path, SqliteSettings::default())
        .await
        .unwrap_err();

    assert!(matches!(error, OpenError::Open { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        format!("the SQLite database {} cannot be opened", path.display())
    );
    assert!(!path.exists());
    file.teardown().await;
}

#[tokio::test]
async fn a_file_that_is_no_database_is_refused() {
    let file = SqliteFile::create().await;
    let path = file.directory().join("notes.txt");
    std::fs::write(
        &path,
        "not a database, but long enough to look like a header ".repeat(4),
    )
    .unwrap();

    let error = SqliteStore::open(&path, SqliteSettings::default())
        .await
        .unwrap_err();

    assert!(
        matches!(error, OpenError::Open { .. } | OpenError::Migrate(_)),
        "{error:?}"
    );
    file.teardown().await;
}

#[tokio::test]
async fn the_file_is_in_wal_mode_c12() {
    let file = SqliteFile::create().await;
    let connection = connect(&file.path());

    let mode: String = connection
        .query_row("pragma journal_mode", [], |row| row.get(0))
        .unwrap();

    assert_eq!(mode, "wal");
    connection.close().map_err(|(_, error)| error).unwrap();
    file.teardown().await;
}

/// Two creates under one key in the same batch (C7): the writer applies a
/// batch's writes one after another in its transaction, so the second sees
/// the first's key and replays it, and a third with another name is a
/// mismatch; all in one commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_under_one_key_in_one_batch_make_one_item_c7() {
    let file = SqliteFile::create().await;
    let lock = hold_write_lock(&file.path());
    let first = spawn_create(&file.store, "first");
    // The writer takes `first` alone and waits for the lock with it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = file.store.commits();
    let key = items_domain::IdempotencyKey::parse(b"k").unwrap();
    let at = std::time::SystemTime::now();
    let mut keyed = Vec::new();
    // Queued one at a time, so the batch holds them in this order.
    for (n, raw) in ["pen", "pen", "ink"].into_iter().enumerate() {
        let items = file.store.items();
        let key = key.clone();
        keyed.push(tokio::spawn(async move {
            items.create_keyed(name(raw), &key, at).await
        }));
        until_queued(&file.store, n + 1).await;
    }
    lock.execute_batch("COMMIT").unwrap();
    first.await.unwrap().unwrap();
    let mut answers = Vec::new();
    for answer in keyed {
        answers.push(answer.await.unwrap().unwrap());
    }

    let pen = Item {
        id: Id::new(2),
        name: name("pen"),
    };
    assert_eq!(
        answers,
        [
            items_domain::Keyed::Created(pen.clone()),
            items_domain::Keyed::Replayed(pen),
            items_domain::Keyed::Mismatch,
        ]
    );
    assert_eq!(file.store.commits() - before, 2, "`first`, then one batch");
    let page = file.store.items().list(&Default::default()).await.unwrap();
    assert_eq!(page.total, 2, "first and pen");
    file.teardown().await;
}

mod keyed_budget;
