//! Keyed creates (`Idempotency-Key`, C7) under the statement budget (C12):
//! one answered 503 is never stored afterwards, on PostgreSQL (its
//! transaction is committed only before the deadline) and on SQLite (the
//! writer leaves out a write whose requester gave up before it was
//! claimed), so the key stays free and the client's retry with it creates
//! the row, once.

use reqwest::Response;
use serde_json::{Value, json};

use super::*;

/// The retry of a keyed create whose first attempt got 503: a `201` that is
/// not a replay (nothing was stored under the key), with `body`'s values.
async fn assert_created_not_replayed(what: &str, response: Response, body: &Value) -> Value {
    assert_eq!(response.status(), 201, "{what}");
    assert!(
        response.headers().get("idempotent-replayed").is_none(),
        "{what}: the key was free, so this is no replay"
    );
    let created: Value = response.json().await.unwrap();
    assert_eq!(created["name"], body["name"], "{what}");
    created
}

/// One keyed create of `path` (`/items` on `table` `items`, or
/// `/products`) caught by a frozen server while its insert waits for a lock
/// taken outside the proxy: answered 503, never stored, and its key left
/// free for the retry.
///
/// The pool holds one connection, and a keyed create of the same path runs
/// on it first, so the key lookup and the insert are prepared statements
/// already: the insert is then sent whole (bind, execute, sync) and waits
/// for the lock at the server, not while being prepared (a statement
/// waiting there is never run once the client is cut off, which would hide
/// a write committed after its 503). When the lock is let go with the proxy
/// frozen, the server runs the insert while nothing reaches the client:
/// committed on its own (autocommit) it would be stored though answered
/// 503; in a transaction, the `commit` is never sent (`postgres/keys.rs`).
async fn cut_in_flight(
    service: &Service,
    database: &ScratchDatabase,
    proxy: &TcpProxy,
    (path, table): (&str, &str),
    body: &Value,
) {
    let client = &service.client;
    let mut warm_up = body.clone();
    warm_up["name"] = json!(format!("warm-up of {path}"));
    let response = client
        .post_keyed(path, &format!("warm-up:{path}"), &warm_up)
        .await;
    assert_eq!(response.status(), 201, "warm-up of {path}");

    let holder = lock_table(database, table).await;
    let key = format!("in-flight:{path}");
    let what = format!("keyed POST {path} in flight");
    let in_flight = timed(&what, client.post_keyed(path, &key, body));
    let freeze = async {
        let waiting = wait_for_lock_waiters(database, 1).await;
        proxy.freeze();
        holder.batch_execute("rollback").await.unwrap();
        waiting
    };
    let (posted, waiting) = tokio::join!(in_flight, freeze);
    assert!(waiting, "{what}: waiting at the server");
    assert_over_budget(&what, posted).await;

    proxy.thaw();
    recovered(service).await;
    // Time for anything the freeze held back to reach the server.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let name = body["name"].as_str().unwrap();
    assert_eq!(
        rows_where(database, table, "name", name.as_bytes()).await,
        0,
        "{what}: answered 503, yet stored"
    );
    let keys = format!("{}_keys", table.trim_end_matches('s'));
    assert_eq!(rows_where(database, &keys, "key", key.as_str()).await, 0);

    // The key is free: the retry creates, once.
    let retried = client.post_keyed(path, &key, body).await;
    assert_created_not_replayed(&what, retried, body).await;
    let replayed = client.post_keyed(path, &key, body).await;
    assert_eq!(replayed.status(), 201);
    assert_eq!(header(&replayed, "idempotent-replayed"), "true");
    assert_eq!(
        rows_where(database, table, "name", name.as_bytes()).await,
        1
    );
    drop(holder);
}

#[tokio::test]
async fn a_keyed_create_cut_by_a_frozen_postgres_is_never_committed_and_its_retry_creates_c7_c12() {
    let database = ScratchDatabase::create(&test_database_url()).await.unwrap();
    let proxy = TcpProxy::start(test_server_address().await).await;
    let url = through(&database, proxy.port());
    let service = start_with_kept_item(&url, &[("DATABASE_POOL_SIZE", "1")]).await;

    let item = json!({"name": "keyed in flight"});
    cut_in_flight(&service, &database, &proxy, ("/items", "items"), &item).await;
    let product = json!({"name": "keyed product in flight", "price": 2.5});
    cut_in_flight(
        &service,
        &database,
        &proxy,
        ("/products", "products"),
        &product,
    )
    .await;

    // A keyed create that arrives while the server stalls.
    proxy.freeze();
    let frozen = json!({"name": "keyed while frozen"});
    let posted = timed(
        "keyed POST /items while frozen",
        service.client.post_keyed("/items", "while-frozen", &frozen),
    )
    .await;
    assert_over_budget("keyed POST /items while frozen", posted).await;
    proxy.thaw();
    recovered(&service).await;
    let retried = service
        .client
        .post_keyed("/items", "while-frozen", &frozen)
        .await;
    assert_created_not_replayed("keyed POST /items after the thaw", retried, &frozen).await;
    drop(service);
    database.drop().await;
}

#[tokio::test]
async fn a_keyed_create_past_its_budget_behind_the_sqlite_write_lock_is_never_applied_c7_c12() {
    let directory = tempfile::tempdir().unwrap();
    let (service, holder) = sqlite_behind_a_lock(&directory).await;
    let client = &service.client;
    let item = json!({"name": "keyed behind the lock"});
    let product = json!({"name": "keyed product behind the lock", "price": 3});
    let (posted_item, posted_product) = tokio::join!(
        timed(
            "keyed POST /items behind the lock",
            client.post_keyed("/items", "item-behind-the-lock", &item)
        ),
        queued(
            "keyed POST /products queued behind the lock",
            client.post_keyed("/products", "product-behind-the-lock", &product),
        ),
    );
    assert_over_budget("keyed POST /items behind the lock", posted_item).await;
    assert_over_budget(
        "keyed POST /products queued behind the lock",
        posted_product,
    )
    .await;

    holder.execute_batch("ROLLBACK").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let items = client.list("/items").await;
    assert_eq!(items, [json!({"id": 1, "name": "kept"})]);
    let products = client.list("/products").await;
    assert_eq!(products, Vec::<Value>::new());

    // Nothing was stored under the keys: each retry creates, once.
    let retried = client
        .post_keyed("/items", "item-behind-the-lock", &item)
        .await;
    let created = assert_created_not_replayed("retried item", retried, &item).await;
    assert_eq!(created["id"], 2);
    let retried = client
        .post_keyed("/products", "product-behind-the-lock", &product)
        .await;
    assert_created_not_replayed("retried product", retried, &product).await;
    let replayed = client
        .post_keyed("/products", "product-behind-the-lock", &product)
        .await;
    assert_eq!(header(&replayed, "idempotent-replayed"), "true");
    holder.close().map_err(|(_, error)| error).unwrap();
}
