//! Names are `bytea` in PostgreSQL (U+0000 is a valid name character that
//! `text` cannot hold, `migrations/0001_collections.sql`); the views of
//! `migrations/0003_readable_names.sql` show them as text to a person at
//! psql (`docs/operations.md`, "Read the data by hand").

use crate::scratch_store::ScratchStore;
use items_domain::{ItemRepository, Name, Price, ProductRepository};
use items_testkit::Fixture;

#[tokio::test]
async fn items_and_products_read_as_text_in_their_readable_views_c3() {
    let scratch = ScratchStore::create().await;
    let items = scratch.store.items();
    for name in ["milk", "héllo ✓", "a\u{0}b"] {
        items.create(Name::parse(name).unwrap()).await.unwrap();
    }
    scratch
        .store
        .products()
        .create(Name::parse("tea").unwrap(), Price::new(2.5).unwrap())
        .await
        .unwrap();

    let psql = scratch.database.client().await.unwrap();
    let names: Vec<(i64, String)> = psql
        .query("select id, name from items_readable order by id", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(
        names,
        [
            (1, "milk".to_owned()),
            (2, "héllo ✓".to_owned()),
            // U+0000 cannot be text: it shows as U+2400, SYMBOL FOR NULL.
            (3, "a\u{2400}b".to_owned()),
        ]
    );
    let found: Vec<String> = psql
        .query(
            "select name from items_readable where name like 'mil%'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(found, ["milk"]);
    let products: Vec<(i64, String, f64)> = psql
        .query("select id, name, price from products_readable", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    assert_eq!(products, [(1, "tea".to_owned(), 2.5)]);

    // Bytes only another writer could store are shown, not an error.
    psql.batch_execute("insert into items (name) values ('\\xff61'::bytea)")
        .await
        .unwrap();
    let raw: String = psql
        .query_one("select name from items_readable where id = 4", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(raw, "\\xff61");

    drop(psql);
    scratch.teardown().await;
}
