//! What a client costs the store (C12: "a client never holds the store",
//! "`HEAD` costs only the headers"): a `HEAD` of the full listing reads no
//! row of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures_util::StreamExt;
use items_adapters::memory::{
    InMemoryItemRepository, InMemoryProductRepository, InMemoryUserRepository,
};
use items_domain::{
    Id, IdempotencyKey, Item, ItemListing, ItemPage, ItemQuery, ItemRepository, Keyed, ListingHead,
    Name, Replaced, RepositoryError,
};
use items_testkit::Repositories;
use reqwest::Method;

use crate::support::*;

/// In-memory items that count what their full listings cost: listings
/// opened and batches handed out.
#[derive(Clone, Default)]
struct Counted {
    items: Arc<InMemoryItemRepository>,
    listings: Arc<AtomicUsize>,
    batches: Arc<AtomicUsize>,
}

impl Counted {
    async fn with(count: usize) -> Self {
        let counted = Self::default();
        for n in 1..=count {
            counted
                .items
                .create(Name::parse(&format!("item-{n}")).unwrap())
                .await
                .unwrap();
        }
        counted
    }

    fn spent(&self) -> (usize, usize) {
        (
            self.listings.load(Ordering::SeqCst),
            self.batches.load(Ordering::SeqCst),
        )
    }

    async fn serve(&self) -> TestApp {
        TestApp::spawn(TestServices::over(Repositories::new(
            self.clone(),
            InMemoryProductRepository::new(),
            InMemoryUserRepository::seeded(),
        )))
        .await
    }
}

#[async_trait]
impl ItemRepository for Counted {
    async fn list(&self, query: &ItemQuery) -> Result<ItemPage, RepositoryError> {
        self.items.list(query).await
    }

    async fn list_all(&self) -> Result<ItemListing, RepositoryError> {
        self.listings.fetch_add(1, Ordering::SeqCst);
        let listing = self.items.list_all().await?;
        let batches = Arc::clone(&self.batches);
        Ok(ItemListing {
            batches: listing
                .batches
                .inspect(move |_| {
                    batches.fetch_add(1, Ordering::SeqCst);
                })
                .boxed(),
            ..listing
        })
    }

    async fn listing_head(&self) -> Result<ListingHead, RepositoryError> {
        self.items.listing_head().await
    }

    async fn get(&self, id: Id) -> Result<Option<Item>, RepositoryError> {
        self.items.get(id).await
    }

    async fn create(&self, name: Name) -> Result<Item, RepositoryError> {
        self.items.create(name).await
    }

    async fn create_keyed(
        &self,
        name: Name,
        key: &IdempotencyKey,
        at: SystemTime,
    ) -> Result<Keyed<Item>, RepositoryError> {
        self.items.create_keyed(name, key, at).await
    }

    async fn replace(
        &self,
        item: &Item,
        expected: Option<Name>,
    ) -> Result<Replaced, RepositoryError> {
        self.items.replace(item, expected).await
    }

    async fn delete(&self, id: Id) -> Result<bool, RepositoryError> {
        self.items.delete(id).await
    }
}

/// Lets the server finish with the connection: actix-web reads a `HEAD`'s
/// body (to throw it away) after the client already has the headers.
async fn settled(app: &TestApp) {
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(app.get("/").await.status(), 200);
}

#[tokio::test]
async fn head_of_the_full_listing_reads_none_of_its_rows_and_sends_gets_headers_c7_c12() {
    let counted = Counted::with(1500).await;
    let app = counted.serve().await;

    for coding in ["identity", "zstd"] {
        let head = app
            .request(Method::HEAD, "/items")
            .header("accept-encoding", coding)
            .send()
            .await
            .unwrap();
        settled(&app).await;
        assert_eq!(
            counted.spent(),
            (0, 0),
            "HEAD /items ({coding}) opened no listing and read no batch"
        );
        let get = app
            .request(Method::GET, "/items")
            .header("accept-encoding", coding)
            .send()
            .await
            .unwrap();
        for name in [
            "etag",
            "content-type",
            "content-encoding",
            "vary",
            "x-total-count",
            "transfer-encoding",
            "content-length",
        ] {
            assert_eq!(header(&head, name), header(&get, name), "{coding}: {name}");
        }
        assert_eq!(header(&head, "x-total-count"), "1500");
        assert!(head.bytes().await.unwrap().is_empty());
        assert!(get.bytes().await.unwrap().len() > 1024);
        settled(&app).await;
        assert_eq!(counted.spent(), (1, 2), "GET /items read its two batches");
        counted.listings.store(0, Ordering::SeqCst);
        counted.batches.store(0, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_get_whose_if_none_match_names_the_listings_tag_reads_none_of_its_rows_c7_c12() {
    let counted = Counted::with(1500).await;
    let app = counted.serve().await;
    let tag = header(
        &app.request(Method::HEAD, "/items").send().await.unwrap(),
        "etag",
    );

    let cached = app
        .request(Method::GET, "/items")
        .header("if-none-match", tag.as_str())
        .send()
        .await
        .unwrap();

    assert_eq!(cached.status(), 304);
    assert_eq!(header(&cached, "etag"), tag);
    settled(&app).await;
    assert_eq!(counted.spent(), (0, 0), "a 304 needs no row");
}

#[tokio::test]
async fn head_of_a_listing_too_short_to_know_its_size_reads_its_few_rows_only_c7_c12() {
    // 51 items may be under 1 KiB or over it (long names): the rows decide
    // whether GET compresses, so HEAD reads them, one batch, and no more.
    let counted = Counted::with(51).await;
    let app = counted.serve().await;

    let head = app
        .request(Method::HEAD, "/items")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    settled(&app).await;
    let get = app
        .request(Method::GET, "/items")
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();

    for name in ["etag", "content-encoding", "vary", "x-total-count"] {
        assert_eq!(header(&head, name), header(&get, name), "{name}");
    }
    assert_eq!(header(&get, "content-encoding"), "gzip");
    assert!(counted.spent().1 <= 2, "one batch for HEAD, one for GET");
}
