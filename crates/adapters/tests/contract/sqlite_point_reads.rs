//! The SQLite store's reads by id (`ItemRepository::get`), which run on the
//! calling thread on connections of their own, outside the reader pool:
//! each sees every write acknowledged before it, also while other writes
//! commit (C12), and none is answered after the store is closed.

use items_domain::{Item, ItemRepository, Name, RepositoryError};
use items_testkit::Fixture;

use super::sqlite_file::SqliteFile;

fn name(raw: &str) -> Name {
    Name::parse(raw).expect("a valid name")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_after_an_acknowledged_write_sees_it_while_others_write_c12() {
    let file = SqliteFile::create().await;
    let tasks: Vec<_> = (0..8)
        .map(|task| {
            let items = file.store.items();
            tokio::spawn(async move {
                for n in 0..25 {
                    let created = items.create(name(&format!("t{task}-{n}"))).await?;
                    assert_eq!(
                        items.get(created.id).await?,
                        Some(created.clone()),
                        "read after its create"
                    );
                    let renamed = Item {
                        id: created.id,
                        name: name(&format!("renamed t{task}-{n}")),
                    };
                    items.replace(&renamed, Some(created.name)).await?;
                    assert_eq!(
                        items.get(created.id).await?,
                        Some(renamed),
                        "read after its replace"
                    );
                    assert!(items.delete(created.id).await?);
                    assert_eq!(items.get(created.id).await?, None, "read after its delete");
                }
                Ok::<_, RepositoryError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    file.teardown().await;
}

#[tokio::test]
async fn a_read_by_id_after_the_store_is_closed_is_unavailable_not_a_panic() {
    let file = SqliteFile::create().await;
    let items = file.store.items();
    let item = items.create(name("kept")).await.unwrap();
    file.store.close().await;
    assert!(matches!(
        items.get(item.id).await,
        Err(RepositoryError::Unavailable(_))
    ));
}
