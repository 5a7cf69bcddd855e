//! STUB until the shared runner lands.
#[derive(Debug, thiserror::Error)]
#[error("stub")]
pub struct MigrateError(#[from] tokio_postgres::Error);
pub(crate) async fn run_postgres(client: &tokio_postgres::Client) -> Result<(), MigrateError> {
    let exists = client
        .query_one("select to_regclass('items') is not null", &[])
        .await?
        .get::<_, bool>(0);
    if !exists {
        for sql in [
            include_str!("../../migrations/0001_collections.sql"),
            include_str!("../../migrations/0002_item_tally.sql"),
            include_str!("../../migrations/0003_readable_names.sql"),
            include_str!("../../migrations/0004_idempotency_keys.sql"),
        ] {
            client.batch_execute(sql).await?;
        }
    }
    Ok(())
}
