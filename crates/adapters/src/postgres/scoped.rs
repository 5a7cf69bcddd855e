//! One request's repositories (C13): each read returns the position of
//! the server once it read (sent in the read's own round trip,
//! `positions.rs`), which must meet the request's token, else the request
//! is unmet (a 409 at the edge) and nothing read is answered; each write
//! reports the latest position a commit was seen at, at or after its own.
//! The report keeps the latest of them: the answer's token.

use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use items_domain::{
    ConsistentReads, Id, IdempotencyKey, Item, ItemListing, ItemPage, ItemQuery, ItemRepository,
    Keyed, ListingHead, Name, Position, Price, Product, ProductRepository, ReadReport, ReadScope,
    Replaced, RepositoryError,
};

use super::histories::Histories;
use super::items::PostgresItemRepository;
use super::pool::Pool;
use super::positions::{self, Latest, Read};
use super::products::PostgresProductRepository;
use super::standbys::{Standby, Standbys};
use super::store::PostgresStore;

/// What one request asked and what its answers were served at.
#[derive(Debug)]
struct Scope {
    /// The request's token.
    at: Option<Position>,
    report: Arc<ReadReport>,
    /// The store's latest commit position.
    latest: Arc<Latest>,
    /// The primary's timeline histories, and its pool to read them with.
    histories: Arc<Histories>,
    primary: Pool,
    /// The standbys that may serve reads (`DATABASE_READ_URL`).
    standbys: Option<Arc<Standbys>>,
}

/// A read served at a position that does not meet the request's token.
#[derive(Debug, thiserror::Error)]
#[error("the state read ({now}) does not meet the request's consistency token ({at})")]
struct Unmet {
    at: Position,
    now: Position,
}

impl Scope {
    /// Records a read made at `now`; when `now` does not meet the
    /// request's token, marks the report unmet and fails: what was read is
    /// not answered.
    async fn read<T>(&self, read: Read<T>) -> Result<T, RepositoryError> {
        let now = read.after;
        if let Some(at) = self.at
            && !self.histories.meets(&self.primary, now, at).await
        {
            self.report.unmet();
            return Err(RepositoryError::unavailable(Unmet { at, now }));
        }
        self.report.served(now);
        Ok(read.value)
    }

    /// A read on a standby the routing chose, if one fits, whose position
    /// before the read (on its own connection) meets the token; else (none
    /// fits, the standby has not replayed the token after all, or it
    /// failed) on the primary (C13).
    async fn route<'s, T, S, SF, P, PF>(
        &'s self,
        on_standby: S,
        on_primary: P,
    ) -> Result<T, RepositoryError>
    where
        S: FnOnce(&'s Standby) -> SF,
        SF: Future<Output = Result<Read<T>, RepositoryError>>,
        P: FnOnce() -> PF,
        PF: Future<Output = Result<Read<T>, RepositoryError>>,
    {
        if let Some(standbys) = &self.standbys
            && let Some(chosen) = standbys.choose(self.at).await
            && let Some(standby) = standbys.standbys.get(chosen)
        {
            match on_standby(standby).await {
                Ok(read)
                    if self.at.is_none_or(|at| {
                        read.before
                            .is_some_and(|before| positions::meets(before, at))
                    }) =>
                {
                    Standbys::count("standby");
                    return self.read(read).await;
                }
                // Not replayed there after all: what was read is dropped.
                Ok(_) => {}
                Err(error) => tracing::debug!(
                    standby = %standby.label,
                    error = %crate::report::ErrorChain(&error),
                    "a standby's read failed; the primary serves it"
                ),
            }
        }
        if self.standbys.is_some() {
            Standbys::count("primary");
        }
        self.read(on_primary().await?).await
    }

    /// Records a write that returned `result`: its token is the latest
    /// commit position, which its own commit's is at or before.
    fn wrote<T>(&self, result: Result<T, RepositoryError>) -> Result<T, RepositoryError> {
        if result.is_ok()
            && let Some(latest) = self.latest.get()
        {
            self.report.served(latest);
        }
        result
    }
}

/// The item repository of one request.
#[derive(Debug)]
struct ScopedItems {
    items: PostgresItemRepository,
    scope: Arc<Scope>,
}

#[async_trait]
impl ItemRepository for ScopedItems {
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        self.scope
            .route(
                |standby| standby.items.list_at(query),
                || self.items.list_at(query),
            )
            .await
    }

    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        self.scope
            .route(
                |standby| standby.items.list_all_at(),
                || self.items.list_all_at(),
            )
            .await
    }

    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        self.scope
            .route(
                |standby| standby.items.listing_head_at(),
                || self.items.listing_head_at(),
            )
            .await
    }

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        self.scope
            .route(|standby| standby.items.get_at(id), || self.items.get_at(id))
            .await
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        self.scope.wrote(self.items.create(name).await)
    }

    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        self.scope
            .wrote(self.items.create_keyed(name, key, at).await)
    }

    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        self.scope.wrote(self.items.replace(item, expected).await)
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        self.scope.wrote(self.items.delete(id).await)
    }
}

/// The product repository of one request.
#[derive(Debug)]
struct ScopedProducts {
    products: PostgresProductRepository,
    scope: Arc<Scope>,
}

#[async_trait]
impl ProductRepository for ScopedProducts {
    async fn list(&self) -> Result<Vec<Product>, RepositoryError> {
        self.scope
            .route(
                |standby| standby.products.list_at(),
                || self.products.list_at(),
            )
            .await
    }

    async fn create(&self, name: Name, price: Price) -> Result<Product, RepositoryError> {
        self.scope.wrote(self.products.create(name, price).await)
    }

    async fn create_keyed(
        &self,
        name: Name,
        price: Price,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Product>, RepositoryError> {
        self.scope
            .wrote(self.products.create_keyed(name, price, key, at).await)
    }
}

/// Every request of a PostgreSQL-backed instance is scoped: its answer
/// carries the position it reflects (C13), with or without a token.
impl ConsistentReads for PostgresStore {
    fn scope(&self, at: Option<Position>) -> ReadScope {
        let report = Arc::new(ReadReport::default());
        let scope = Arc::new(Scope {
            at,
            report: Arc::clone(&report),
            latest: Arc::clone(&self.pool.manager().latest),
            histories: Arc::clone(&self.histories),
            primary: self.pool.clone(),
            standbys: self.standbys.clone(),
        });
        let repositories = crate::sql::traced::repositories(
            "postgresql",
            ScopedItems {
                items: self.items(),
                scope: Arc::clone(&scope),
            },
            ScopedProducts {
                products: self.products(),
                scope,
            },
            self.users(),
        );
        ReadScope {
            repositories,
            report,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use items_domain::{ConsistentReads, Id, Name, Position};
    use items_testkit::postgres::{ScratchDatabase, test_database_url};

    use crate::postgres::{PostgresSettings, PostgresStore, PostgresUrl, StandbySettings};

    async fn store() -> (PostgresStore, ScratchDatabase, PostgresUrl) {
        let database = ScratchDatabase::create(&test_database_url())
            .await
            .expect("a scratch database");
        let url = PostgresUrl::parse(&database.url()).expect("a valid URL");
        let store =
            PostgresStore::connect(&url, PostgresSettings::default(), Duration::from_secs(5))
                .await
                .expect("connects and migrates");
        (store, database, url)
    }

    /// Waits until every standby of `store` was polled once.
    async fn polled(store: &PostgresStore) {
        let standbys = store.standbys.as_ref().expect("standbys");
        tokio::time::timeout(Duration::from_secs(5), async {
            while standbys.samples.lock().timeline().is_none() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            standbys.polled.notified().await;
        })
        .await
        .expect("the tracker polled");
    }

    #[tokio::test]
    async fn a_read_url_naming_a_server_not_in_recovery_is_never_read_from_c13() {
        let (store, database, url) = store().await;
        // The primary itself named as a standby: it is not in recovery, so
        // it is taken for a promoted standby and not used.
        let store = store.with_standbys(&url, StandbySettings::default());
        polled(&store).await;
        let standbys = store.standbys.clone().expect("standbys");
        assert!(
            standbys
                .standbys
                .iter()
                .all(|standby| !standby.seen.lock().usable),
            "C13: a server not in recovery serves no reads"
        );
        let scope = store.scope(None);
        let pen = scope
            .repositories
            .items
            .create(Name::parse("pen").expect("a name"))
            .await
            .expect("created");
        let written = scope.report.position().expect("C13: a write's token");
        let read = store.scope(Some(written));
        let found = read.repositories.items.get(pen.id).await.expect("read");
        assert_eq!(found, Some(pen), "the primary serves it");
        let served = read.report.position().expect("C13: a read's token");
        assert!(served.era() == written.era() && served.offset() >= written.offset());
        store.close().await;
        database.drop().await;
    }

    #[tokio::test]
    async fn a_read_whose_token_the_primary_never_reached_is_unmet_and_answers_nothing_c13() {
        let (store, database, _) = store().await;
        let scope = store.scope(None);
        scope
            .repositories
            .items
            .create(Name::parse("pen").expect("a name"))
            .await
            .expect("created");
        let now = scope.report.position().expect("a write's token");
        for wanted in [
            Position::new(now.era(), now.offset() + 1_000_000),
            Position::new(now.era() + 1, 0),
            Position::new(now.era().saturating_sub(1), 0),
        ] {
            let read = store.scope(Some(wanted));
            let answer = read.repositories.items.get(Id::new(1)).await;
            assert!(answer.is_err(), "{wanted}: nothing read is answered");
            assert!(read.report.is_unmet(), "{wanted}: C13: unmet");
            assert_eq!(read.report.position(), None);
        }
        store.close().await;
        database.drop().await;
    }

    /// The routing's last step, with the reads themselves made up: what
    /// the standby's connection said before its read decides.
    mod routing {
        use std::sync::Arc;
        use std::time::Duration;

        use items_domain::{Position, RepositoryError};

        use super::super::Scope;
        use crate::postgres::PostgresUrl;
        use crate::postgres::positions::Read;
        use crate::postgres::standbys::{Seen, StandbySettings, Standbys};

        const TOKEN: Position = Position::new(1, 100);

        /// A scope at `TOKEN` over one standby the tracker saw past it.
        fn scope() -> Scope {
            let url = PostgresUrl::parse("postgres://u@nowhere:5432/db").expect("a URL");
            let settings = StandbySettings {
                wait: Duration::ZERO,
                ..StandbySettings::default()
            };
            let standbys = Standbys::new(&url, settings, "", Duration::from_secs(1));
            *standbys.standbys[0].seen.lock() = Seen {
                replayed: Some(Position::new(1, 200)),
                lag: Some(Duration::ZERO),
                usable: true,
            };
            Scope {
                at: Some(TOKEN),
                report: Arc::default(),
                latest: Arc::default(),
                histories: Arc::default(),
                // Never used: no token of an older timeline here.
                primary: standbys.standbys[0].pool.clone(),
                standbys: Some(standbys),
            }
        }

        fn read(value: &'static str, before: Option<u64>, after: u64) -> Read<&'static str> {
            Read {
                value,
                before: before.map(|offset| Position::new(1, offset)),
                after: Position::new(1, after),
            }
        }

        async fn served(
            scope: &Scope,
            on_standby: Result<Read<&'static str>, RepositoryError>,
        ) -> &'static str {
            scope
                .route(
                    |_| async { on_standby },
                    || async { Ok(read("primary", None, 150)) },
                )
                .await
                .expect("served")
        }

        #[tokio::test]
        async fn a_standby_read_whose_position_before_misses_the_token_goes_to_the_primary_c13() {
            let scope = scope();
            // Replayed past the token after the read began: its snapshot
            // may be older than the token, whatever it says after.
            let answer = served(&scope, Ok(read("standby", Some(99), 300))).await;
            assert_eq!(answer, "primary");
            assert_eq!(scope.report.position(), Some(Position::new(1, 150)));
        }

        #[tokio::test]
        async fn a_standby_read_whose_position_before_meets_the_token_is_answered_c13() {
            let scope = scope();
            let answer = served(&scope, Ok(read("standby", Some(100), 300))).await;
            assert_eq!(answer, "standby");
            assert_eq!(
                scope.report.position(),
                Some(Position::new(1, 300)),
                "the token returned is the position after the read"
            );
        }

        #[tokio::test]
        async fn a_standby_read_that_fails_goes_to_the_primary_c13() {
            let scope = scope();
            let failed = Err(RepositoryError::unavailable("the standby went away"));
            assert_eq!(served(&scope, failed).await, "primary");
            assert!(!scope.report.is_unmet());
        }
    }
}
