//! The test kit of items-service: prove an adapter right against the ports
//! of [`items_domain`], with the same checks the service's own adapters pass.
//!
//! - [`repositories`]: one check per MUST of `ItemRepository`
//!   ([`repositories::items`]), `ProductRepository`
//!   ([`repositories::products`]) and `UserRepository`
//!   ([`repositories::users`]);
//! - [`uploads`]: one check per MUST of `UploadStore` and `PendingUpload`;
//! - [`changes`]: one check per MUST of `ChangeFeed` (C14);
//! - [`contract_tests!`]: every check of one contract as a test, for one
//!   adapter, in one line;
//!
//! A failed check says which rule broke, what it did, what it expected and
//! what came back: "C7: the listing version changes on every write and on
//! nothing else: after deleting item 2 the version was still 3".
//!
//! Behind features, for tests of adapters over real servers (an outside
//! adapter needs none of them):
//! - `postgres`: `postgres::ScratchDatabase`, a database per test;
//! - `tcp-proxy`: `tcp_proxy::TcpProxy`, a proxy a test can stall or cut,
//!   to see what an adapter does while its store is unreachable;
//! - `log` (on with `postgres`): `init_test_log`, `TEST_LOG=1` shows
//!   tracing output.
//!
//! The kit depends on the domain alone: the HTTP fixtures of the service's
//! own tests live beside those tests (`crates/app/tests/support`), so no
//! crate depends on the adapters and is depended on by them.
//!
//! # Checking an adapter
//!
//! With only `items-testkit` among the dev-dependencies (the macro brings
//! its own tokio runtime):
//!
//! ```text
//! // tests/contract.rs of a crate with a `BTreeMap` adapter:
//! items_testkit::contract_tests!(repositories btreemap = Repositories::new(
//!     MapItems::default(), MapProducts::default(), MapUsers::seeded(),
//! ));
//! // or, for a store that has only items:
//! items_testkit::contract_tests!(items btreemap_items = Arc::new(MapItems::default()));
//! ```
//!
//! A store that needs setting up and tearing down (a database per test)
//! implements [`Fixture`] and [`RepositoryFixture`] (or
//! [`ItemRepositoryFixture`]) and is built by an async expression:
//! `contract_tests!(repositories postgres = Scratch::create().await)`.
//! The crate `items-btreemap-adapter` (`crates/btreemap-adapter`) is a whole
//! adapter, written against the domain's public API only, whose tests pass
//! the kit with `items-testkit` as their only dev-dependency.

mod answer;
pub mod changes;
pub mod consistency;
pub mod files;
pub mod repositories;
pub mod uploads;

#[cfg(feature = "log")]
mod log;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "tcp-proxy")]
pub mod tcp_proxy;

use std::future::Future;

pub use changes::ChangeFeedFixture;
pub use consistency::ConsistentReadsFixture;
#[cfg(feature = "log")]
pub use log::init_test_log;
pub use repositories::{ItemRepositoryFixture, Repositories, RepositoryFixture};
pub use uploads::UploadStoreFixture;

/// What a check runs against, and what is undone after it.
pub trait Fixture: Sized {
    /// Undoes what building the fixture did (drops a scratch database, say).
    /// [`contract_tests!`] calls it after every check, also after one that
    /// failed. Nothing, unless overridden.
    fn teardown(self) -> impl Future<Output = ()> {
        async {}
    }
}

/// Declares every check of one contract as a test in a module of its own,
/// each on a fixture built afresh by `setup`:
///
/// ```text
/// contract_tests!(repositories in_memory = Repositories::new(items, products, users));
/// contract_tests!(items map = Arc::new(MapItems::default()));
/// contract_tests!(repositories postgres = ScratchStore::create().await);
/// contract_tests!(upload_store disk = DiskFixture::open());
/// ```
///
/// - `repositories`: `setup` is a [`RepositoryFixture`] (plain
///   [`Repositories`] are one); the checks of [`repositories::items`],
///   [`repositories::products`], [`repositories::users`] and
///   [`repositories::stores`] (those that need the whole store, such as
///   idempotency keys of items and products kept apart, C7) run.
/// - `items`: `setup` is an [`ItemRepositoryFixture`] (an `Arc` of an
///   `ItemRepository` is one), for a store that has only items; the checks
///   of [`repositories::items`] run.
/// - `upload_store`: `setup` is an [`UploadStoreFixture`]; the checks of
///   [`uploads`] run.
/// - `changes`: `setup` is a [`ChangeFeedFixture`]; the checks of
///   [`changes`] run (C14).
///
/// `setup` is written inside each async test, so it may `.await`, and it
/// sees the items of the module the macro is called in. After the check,
/// pass or fail, the fixture's [`Fixture::teardown`] runs. Each test runs on
/// a tokio runtime the kit builds (a current-thread one, as `#[tokio::test]`
/// builds), so the calling crate needs only `items-testkit` among its
/// dev-dependencies, not `tokio`.
#[macro_export]
macro_rules! contract_tests {
    (repositories $module:ident = $setup:expr) => {
        mod $module {
            #[allow(unused_imports)] // `setup` may name nothing of the caller's
            use super::*;
            $crate::__checks!(items, tests $setup, items,
                |fixture| $crate::RepositoryFixture::repositories(&fixture).items);
            $crate::__checks!(products, tests $setup, products,
                |fixture| $crate::RepositoryFixture::repositories(&fixture).products);
            $crate::__checks!(users, tests $setup, users,
                |fixture| $crate::RepositoryFixture::repositories(&fixture).users);
            $crate::__checks!(stores, tests $setup, stores,
                |fixture| $crate::RepositoryFixture::repositories(&fixture));
        }
    };
    (items $module:ident = $setup:expr) => {
        mod $module {
            #[allow(unused_imports)] // `setup` may name nothing of the caller's
            use super::*;
            $crate::__checks!(items, tests $setup, items,
                |fixture| $crate::ItemRepositoryFixture::items(&fixture));
        }
    };
    (consistent_reads $module:ident = $setup:expr) => {
        mod $module {
            #[allow(unused_imports)] // `setup` may name nothing of the caller's
            use super::*;
            $crate::__checks!(consistent_reads, tests $setup, consistent_reads,
                |fixture| &$crate::ConsistentReadsFixture::reads(&fixture));
        }
    };
    (upload_store $module:ident = $setup:expr) => {
        mod $module {
            #[allow(unused_imports)] // `setup` may name nothing of the caller's
            use super::*;
            $crate::__checks!(upload_store, tests $setup, upload_store, |fixture| &fixture);
        }
    };
    (changes $module:ident = $setup:expr) => {
        mod $module {
            #[allow(unused_imports)] // `setup` may name nothing of the caller's
            use super::*;
            $crate::__checks!(changes, tests $setup, changes, |fixture| &fixture);
        }
    };
}

/// The checks of each contract, once: [`contract_tests!`] declares a test
/// per name, and a unit test of this crate fails when a public check of
/// [`repositories::items`], [`repositories::products`],
/// [`repositories::users`] or [`uploads`] is missing here (so none is
/// silently left out). Not part of the kit's API.
#[doc(hidden)]
#[macro_export]
macro_rules! __checks {
    (items, $($then:tt)*) => {
        $crate::__checks! { @apply [
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
            totals_stay_exact_under_concurrent_creates_and_deletes_c10,
            every_write_changes_the_listing_version_c7_c10,
            the_full_listing_streams_every_item_in_id_order_c10,
            a_write_during_a_listing_never_mixes_into_it_c7_c10,
            a_repeated_key_replays_the_item_as_first_created_and_creates_nothing_c7,
            a_key_repeated_with_another_name_is_a_mismatch_and_creates_nothing_c7,
            keys_expire_after_24_hours_and_may_then_be_reused_c7,
            concurrent_creates_under_one_key_create_one_item_c7,
        ] $($then)* }
    };
    (products, $($then:tt)*) => {
        $crate::__checks! { @apply [
            products_get_counter_ids_and_keep_their_price_c2_c3,
            a_repeated_product_key_replays_the_first_product_and_refuses_other_values_c7,
            product_keys_expire_after_24_hours_c7,
        ] $($then)* }
    };
    (stores, $($then:tt)*) => {
        $crate::__checks! { @apply [
            keys_of_items_and_products_are_apart_c7,
        ] $($then)* }
    };
    (users, $($then:tt)*) => {
        $crate::__checks! { @apply [
            users_are_the_two_seeded_users_c4,
        ] $($then)* }
    };
    (consistent_reads, $($then:tt)*) => {
        $crate::__checks! { @apply [
            a_read_at_a_writes_position_sees_the_write_c13,
            positions_served_never_go_back_c13,
        ] $($then)* }
    };
    (upload_store, $($then:tt)*) => {
        $crate::__checks! { @apply [
            a_committed_upload_holds_exactly_the_written_bytes_under_its_name_c4_c5,
            a_dropped_upload_leaves_nothing_behind_c5,
            an_upload_abandoned_mid_begin_or_mid_write_leaves_nothing_c5,
            each_commit_gets_a_new_name_and_keeps_the_others_c4,
            remove_deletes_a_committed_file_and_ignores_a_missing_one,
        ] $($then)* }
    };
    (changes, $($then:tt)*) => {
        $crate::__checks! { @apply [
            every_committed_change_reaches_a_subscriber_once_in_order_c14,
            a_subscription_starts_at_the_present_c14,
            resuming_after_a_cursor_misses_and_repeats_nothing_c14,
            an_unknown_cursor_is_reset_to_the_present_c14,
            an_expired_cursor_is_reset_to_the_present_c14,
            a_write_that_wrote_nothing_is_no_change_c14,
            concurrent_writes_reach_every_subscriber_once_in_commit_order_c14,
            a_subscriber_that_does_not_read_never_delays_writes_c14,
        ] $($then)* }
    };
    (@apply [$($check:ident),* $(,)?] names) => {
        [$(stringify!($check)),*]
    };
    (@apply [$($check:ident),* $(,)?] tests $setup:expr, $checks:ident,
        |$fixture:ident| $argument:expr) => {
        $(
            #[test]
            fn $check() {
                $crate::__private::run(async {
                    let $fixture = $setup;
                    let outcome = $crate::__private::catch_unwind(
                        $crate::__private::$checks::$check($argument),
                    )
                    .await;
                    $crate::__private::finish($fixture, outcome).await;
                });
            }
        )*
    };
}

/// What [`contract_tests!`] expands to calls; not part of the kit's API.
#[doc(hidden)]
pub mod __private {
    use std::future::Future;
    use std::panic::AssertUnwindSafe;

    use futures_util::FutureExt;

    use crate::Fixture;
    pub use crate::changes;
    pub use crate::consistency as consistent_reads;
    pub use crate::repositories::{items, products, stores, users};
    pub use crate::uploads as upload_store;

    /// Runs one check to its end on a runtime of its own, the one
    /// `#[tokio::test]` builds: so the caller needs no `tokio` of its own.
    pub fn run(test: impl Future<Output = ()>) {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(test),
            Err(error) => panic!("the kit could not build a tokio runtime: {error}"),
        }
    }

    /// Runs a check, catching its panic so the fixture is still torn down.
    pub fn catch_unwind(
        check: impl Future<Output = ()>,
    ) -> impl Future<Output = std::thread::Result<()>> {
        AssertUnwindSafe(check).catch_unwind()
    }

    /// Tears the fixture down, then fails the test if the check did.
    pub async fn finish(fixture: impl Fixture, outcome: std::thread::Result<()>) {
        fixture.teardown().await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The names of the `pub async fn`s of a module's source: its checks.
    fn public_checks(source: &str) -> BTreeSet<&str> {
        source
            .lines()
            .filter_map(|line| line.strip_prefix("pub async fn "))
            .filter_map(|rest| rest.split(['(', '<']).next())
            .collect()
    }

    /// The names of the `pub mod`s of a module's source.
    fn public_modules(source: &str) -> BTreeSet<&str> {
        source
            .lines()
            .filter_map(|line| line.strip_prefix("pub mod "))
            .map(|rest| rest.trim_end_matches(';'))
            .collect()
    }

    #[test]
    fn contract_tests_runs_every_public_item_repository_check() {
        let listed = BTreeSet::from(crate::__checks!(items, names));
        let public: BTreeSet<&str> = [
            include_str!("repositories/items.rs"),
            include_str!("repositories/items/ids.rs"),
            include_str!("repositories/items/writes.rs"),
            include_str!("repositories/items/pages.rs"),
            include_str!("repositories/items/full_listing.rs"),
            include_str!("repositories/items/keys.rs"),
        ]
        .into_iter()
        .flat_map(public_checks)
        .collect();
        assert_eq!(
            listed, public,
            "`__checks!(items)` must list exactly the public checks of repositories/items/*.rs"
        );
    }

    #[test]
    fn contract_tests_runs_every_public_product_repository_check() {
        let listed = BTreeSet::from(crate::__checks!(products, names));
        let public = public_checks(include_str!("repositories/products.rs"));
        assert_eq!(
            listed, public,
            "`__checks!(products)` must list exactly the public checks of repositories/products.rs"
        );
    }

    #[test]
    fn contract_tests_runs_every_public_whole_store_check() {
        let listed = BTreeSet::from(crate::__checks!(stores, names));
        let public = public_checks(include_str!("repositories/stores.rs"));
        assert_eq!(
            listed, public,
            "`__checks!(stores)` must list exactly the public checks of repositories/stores.rs"
        );
    }

    #[test]
    fn contract_tests_runs_every_public_user_repository_check() {
        let listed = BTreeSet::from(crate::__checks!(users, names));
        let public = public_checks(include_str!("repositories/users.rs"));
        assert_eq!(
            listed, public,
            "`__checks!(users)` must list exactly the public checks of repositories/users.rs"
        );
    }

    /// A check written in a module the guards above do not read would be
    /// run by no `contract_tests!`: the checks live only in the modules
    /// they read.
    #[test]
    fn every_repository_check_lives_in_a_module_the_guards_read() {
        let repositories = include_str!("repositories.rs");
        let items = include_str!("repositories/items.rs");
        assert_eq!(
            public_modules(repositories),
            BTreeSet::from(["items", "products", "stores", "users"]),
            "the repository checks are in the modules `contract_tests!` runs"
        );
        assert_eq!(
            public_modules(items),
            BTreeSet::from(["full_listing", "ids", "keys", "pages", "writes"]),
            "the item checks are in the files the item guard reads"
        );
        assert_eq!(
            public_checks(repositories),
            BTreeSet::new(),
            "repositories.rs holds no checks of its own"
        );
    }

    #[test]
    fn contract_tests_runs_every_public_change_feed_check() {
        let listed = BTreeSet::from(crate::__checks!(changes, names));
        let public = public_checks(include_str!("changes.rs"));
        assert_eq!(
            listed, public,
            "`__checks!(changes)` must list exactly the public checks of changes.rs"
        );
    }

    #[test]
    fn contract_tests_runs_every_public_consistent_reads_check() {
        let listed = BTreeSet::from(crate::__checks!(consistent_reads, names));
        let public = public_checks(include_str!("consistency.rs"));
        assert_eq!(
            listed, public,
            "`__checks!(consistent_reads)` must list exactly the public checks of consistency.rs"
        );
    }

    #[test]
    fn contract_tests_runs_every_public_upload_store_check() {
        let listed = BTreeSet::from(crate::__checks!(upload_store, names));
        let public = public_checks(include_str!("uploads.rs"));
        assert_eq!(
            listed, public,
            "`__checks!(upload_store)` must list exactly the public checks of uploads.rs"
        );
    }
}
