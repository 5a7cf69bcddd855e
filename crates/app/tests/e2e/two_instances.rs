//! Several instances on one PostgreSQL database (issue: shared by many
//! instances): what one writes the other reads, and concurrent creates across
//! both get distinct ids with nothing lost (C2). Both are built in this
//! process through the library.

use std::collections::HashSet;

use items_testkit::postgres::{ScratchDatabase, test_database_url};
use serde_json::Value;

use crate::helpers::*;

#[tokio::test]
async fn two_instances_on_one_database_share_items_and_never_share_an_id_c2() {
    let url = test_database_url();
    let database = ScratchDatabase::create(&url).await.unwrap();
    let database_url = database.url();
    let settings = [
        ("DATABASE_URL", database_url.as_str()),
        ("RATE_LIMIT_MAX", "0"),
    ];
    let first = App::start(&settings).await;
    let second = App::start(&settings).await;

    let created = first.client.create_item("shared").await;
    let read: Value = second.client.get("/items/1").await.json().await.unwrap();
    assert_eq!(read, created);

    let creates: Vec<_> = (0..200)
        .map(|n| {
            let instance = if n % 2 == 0 { &first } else { &second };
            let client = instance.client.clone();
            tokio::spawn(async move {
                client.create_item(&format!("n{n}")).await["id"]
                    .as_i64()
                    .unwrap()
            })
        })
        .collect();
    let mut ids = HashSet::from([1]);
    for create in creates {
        assert!(
            ids.insert(create.await.unwrap()),
            "an id was handed out twice"
        );
    }

    for service in [&first, &second] {
        let listed: Vec<Value> = service.client.get("/items").await.json().await.unwrap();
        let listed: HashSet<i64> = listed
            .iter()
            .map(|item| item["id"].as_i64().unwrap())
            .collect();
        assert_eq!(listed, ids, "both instances see all 201 items");
    }
    drop((first, second));
    database.drop().await;
}
