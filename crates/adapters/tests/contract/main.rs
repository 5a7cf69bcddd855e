//! The repository contract suite: the MUST sentences of the ports
//! (`items_domain::ports`), written once and run against every adapter —
//! in memory always, PostgreSQL when `TEST_DATABASE_URL` is set (each test
//! on a database of its own).

#![allow(clippy::unwrap_used)]

mod checks;

use std::sync::Arc;
use std::time::Duration;

use items_adapters::memory::{
    InMemoryItemRepository, InMemoryProductRepository, InMemoryUserRepository,
};
use items_adapters::postgres::scratch::{ScratchDatabase, test_database_url};
use items_adapters::postgres::{DEFAULT_POOL_SIZE, PostgresStore};
use items_domain::{ItemRepository, ProductRepository, UserRepository};

/// One adapter's repositories.
#[allow(missing_debug_implementations)] // holds trait objects without Debug
pub struct Repositories {
    pub items: Arc<dyn ItemRepository>,
    pub products: Arc<dyn ProductRepository>,
    pub users: Arc<dyn UserRepository>,
}

fn in_memory() -> Repositories {
    Repositories {
        items: Arc::new(InMemoryItemRepository::new()),
        products: Arc::new(InMemoryProductRepository::new()),
        users: Arc::new(InMemoryUserRepository::seeded()),
    }
}

/// Runs `check` against fresh PostgreSQL repositories (on the server of
/// `test_database_url`; a server that does not answer fails the test).
async fn on_postgres<F, Fut>(check: F)
where
    F: FnOnce(Repositories) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let url = test_database_url();
    let database = ScratchDatabase::create(&url)
        .await
        .expect("a scratch database");
    let store = PostgresStore::connect(
        database.options(),
        DEFAULT_POOL_SIZE,
        Duration::from_secs(5),
    )
    .await
    .expect("connects and migrates");
    check(Repositories {
        items: Arc::new(store.items()),
        products: Arc::new(store.products()),
        users: Arc::new(store.users()),
    })
    .await;
    store.close().await;
    database.drop().await;
}

/// Declares each check once per adapter.
macro_rules! contract {
    ($($check:ident),* $(,)?) => {
        mod in_memory {
            $( #[tokio::test] async fn $check() { crate::checks::$check(crate::in_memory()).await } )*
        }
        mod postgres {
            $( #[tokio::test] async fn $check() { crate::on_postgres(crate::checks::$check).await } )*
        }
    };
}

contract!(
    ids_start_at_1_and_count_up_c2,
    ids_are_never_reused_after_a_delete_c2,
    concurrent_creates_get_distinct_ids_and_none_is_lost_c2,
    get_returns_the_stored_item_or_none,
    replace_without_expectation_writes_or_reports_not_found,
    replace_with_expectation_is_a_compare_and_swap_c7,
    delete_reports_whether_the_item_existed,
    list_returns_everything_in_id_order_with_the_total_c10,
    list_pages_with_after_and_limit_and_says_when_more_follow_c10,
    list_filters_by_exact_name_and_counts_all_matches_c10,
    names_are_stored_exactly_c3,
    products_get_counter_ids_and_keep_their_price_c2_c3,
    users_are_the_two_seeded_users_c4,
    totals_stay_exact_under_concurrent_creates_and_deletes_c10,
    every_write_changes_the_listing_version_c7_c10,
    the_full_listing_streams_every_item_in_id_order_c10,
    a_write_during_a_listing_never_mixes_into_it_c7_c10,
);
