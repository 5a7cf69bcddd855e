//! The full listing (`GET /items` with no query, C10): every item in id
//! order, read on a blocking thread from one read transaction and handed to
//! the port's stream through a bounded channel.
//!
//! Invariants:
//! - the version and total are the tally row's, read first in the same
//!   transaction as every row (SQLite's snapshot begins at that first
//!   read; WAL keeps it while the writer goes on), so a listing holds
//!   exactly the items of its version (C7) and [`open`] returns only once
//!   that snapshot is taken;
//! - batches of [`BATCH`] items, never an empty one; at most one read
//!   ahead waits in the channel, so memory does not grow with the
//!   collection (C10);
//! - a failure mid-listing is the stream's last element;
//! - dropping the stream ends the thread at its next hand-off, which rolls
//!   the transaction back and gives its reader back: the snapshot is
//!   released promptly;
//! - a listing takes its turn (`sql/turns.rs`) before its reader, and gives
//!   it back right after the reader: listings hold at most a quarter of
//!   the readers, so pages, products and users always find one (C12).

use futures_util::stream;
use items_domain::{Item, ItemBatch, ItemListing, RepositoryError};
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::readers::{Reader, Readers};
use super::rows;
use crate::sql::turns::ListingTurns;

/// Items per batch (the port asks for batches when there are many).
const BATCH: usize = 1000;

/// Batches read ahead of the one the caller holds.
const READ_AHEAD: usize = 1;

/// The tally's `(version, total)`, as the listing's head.
type Head = Result<(u64, u64), RepositoryError>;

/// Waits for the listing's turn, takes a reader (within the budget),
/// begins the listing's transaction on a blocking thread
/// and returns once its version and total are read; the rows follow
/// through the stream.
///
/// # Errors
/// [`RepositoryError::Unavailable`] when no reader is free within the
/// budget or the tally cannot be read.
pub(super) async fn open(
    turns: &ListingTurns,
    readers: &Readers,
) -> Result<ItemListing, RepositoryError> {
    let turn = turns.wait().await?;
    let reader = readers.acquire().await?;
    let (head, headed) = oneshot::channel();
    let (batches, mut received) = mpsc::channel(READ_AHEAD);
    // Detached: the thread ends when the listing is read or dropped.
    drop(tokio::task::spawn_blocking(move || {
        read(reader, head, &batches);
        drop(turn);
    }));
    let (version, total) = headed
        .await
        .map_err(|_| RepositoryError::unavailable("the SQLite listing's reader stopped"))??;
    Ok(ItemListing {
        version,
        total,
        batches: Box::pin(stream::poll_fn(move |context| received.poll_recv(context))),
    })
}

/// The listing's thread: the head, then every batch, until the end, a
/// failure, or a caller gone.
fn read(reader: Reader, head: oneshot::Sender<Head>, batches: &mpsc::Sender<ItemBatch>) {
    let began = begin(&reader);
    let opened = began.is_ok();
    if head.send(began).is_ok()
        && opened
        && let Err(error) = send_rows(&reader, batches)
    {
        // The caller may be gone too; then nobody needs it.
        let _ = batches.blocking_send(Err(error));
    }
    // Ends the read transaction (a rollback: it wrote nothing).
    reader.release();
}

/// Begins the read transaction and reads the tally row in it.
fn begin(connection: &Connection) -> Head {
    let unavailable = RepositoryError::unavailable;
    connection.execute_batch("BEGIN").map_err(unavailable)?;
    let (version, total): (i64, i64) = connection
        .prepare_cached("select version, items from item_tally")
        .and_then(|mut statement| statement.query_row([], |row| Ok((row.get(0)?, row.get(1)?))))
        .map_err(unavailable)?;
    Ok((
        u64::try_from(version).unwrap_or(0),
        u64::try_from(total).unwrap_or(0),
    ))
}

/// Every row in id order, a batch at a time; stops early (`Ok`) when the
/// caller dropped the stream.
fn send_rows(
    connection: &Connection,
    batches: &mpsc::Sender<ItemBatch>,
) -> Result<(), RepositoryError> {
    let unavailable = RepositoryError::unavailable;
    let mut statement = connection
        .prepare_cached("select id, name from items order by id")
        .map_err(unavailable)?;
    let mut cursor = statement.query([]).map_err(unavailable)?;
    let mut batch: Vec<Item> = Vec::with_capacity(BATCH);
    while let Some(row) = cursor.next().map_err(unavailable)? {
        batch.push(rows::item(row)?);
        if batch.len() == BATCH {
            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if batches.blocking_send(Ok(full)).is_err() {
                return Ok(());
            }
        }
    }
    if !batch.is_empty() {
        let _ = batches.blocking_send(Ok(batch));
    }
    Ok(())
}
