//! Moving the collections from one durable store to another (C12,
//! `items-service copy`): the two ports a store implements to take part,
//! and [`copy_store`], the use case that holds the rules.
//!
//! The rules, all here and none in an adapter:
//! - the destination is checked for items and products **before** anything
//!   is written, and a destination that holds any is refused;
//! - items and products travel in id order, in batches, so memory stays flat
//!   however large the store;
//! - every id and each id counter travel: a service on the destination gives
//!   the next item an id above every id the source ever handed out, also
//!   ids deleted at the source (the counter, never `max(id)`);
//! - the destination keeps all of it or none of it: any failure rolls it back.

use async_trait::async_trait;

use crate::entities::{Item, Product};
use crate::repository_error::RepositoryError;
use crate::values::Id;

/// The last id each collection handed out (0: none yet). The next id a
/// store gives is one above.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub items: i64,
    pub products: i64,
}

/// How many items and products: what a destination holds, or what a copy
/// has written so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub items: u64,
    pub products: u64,
}

/// One read snapshot of a store, opened by the adapter (a read transaction
/// held until the value is dropped). Every method reads that snapshot, so
/// writes made meanwhile are never mixed in.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait SnapshotSource: Send {
    /// The collections' counters as of the snapshot (or later: a counter
    /// read after the snapshot was taken is never below an id in it).
    ///
    /// # Errors
    /// [`RepositoryError::Unavailable`] when the store cannot answer.
    async fn counters(&mut self) -> Result<Counters, RepositoryError>;

    /// At most `limit` items with an id above `after` (all when `None`), in
    /// id order; fewer than `limit` means none follow.
    ///
    /// # Errors
    /// As [`SnapshotSource::counters`], also for a stored row that is no
    /// valid item.
    async fn items_after(
        &mut self,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Vec<Item>, RepositoryError>;

    /// As [`SnapshotSource::items_after`], for products.
    ///
    /// # Errors
    /// As [`SnapshotSource::items_after`].
    async fn products_after(
        &mut self,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Vec<Product>, RepositoryError>;
}

/// A store being filled in one unit of work, opened by the adapter: nothing
/// written through it is visible, or kept, before [`StoreSink::commit`].
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait StoreSink: Send {
    /// What the store holds now. The sink keeps others from writing until
    /// it commits or rolls back, so the answer stays true meanwhile.
    ///
    /// # Errors
    /// [`RepositoryError::Unavailable`] when the store cannot answer.
    async fn contents(&mut self) -> Result<Counts, RepositoryError>;

    /// Stores `items` with their ids.
    ///
    /// # Errors
    /// [`RepositoryError::Unavailable`] when the store refuses them.
    async fn write_items(&mut self, items: &[Item]) -> Result<(), RepositoryError>;

    /// Stores `products` with their ids.
    ///
    /// # Errors
    /// As [`StoreSink::write_items`].
    async fn write_products(&mut self, products: &[Product]) -> Result<(), RepositoryError>;

    /// Sets the counters, so the next ids are above them, and makes
    /// everything written visible and durable at once.
    ///
    /// # Errors
    /// [`RepositoryError::Unavailable`]: then nothing was kept.
    async fn commit(&mut self, counters: Counters) -> Result<(), RepositoryError>;

    /// Discards everything written: the store is as it was.
    ///
    /// # Errors
    /// [`RepositoryError::Unavailable`] when the store could not be told;
    /// an adapter still keeps nothing (a transaction never committed).
    async fn rollback(&mut self) -> Result<(), RepositoryError>;
}

/// What a finished copy moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub counts: Counts,
    pub counters: Counters,
}

/// Why a copy did not happen; the destination is as it was in each case.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// The destination already holds data: nothing was written.
    #[error(
        "the destination is not empty: it holds {} items and {} products",
        .0.items, .0.products
    )]
    NotEmpty(Counts),
    /// Reading the source failed.
    #[error("reading the source failed")]
    Source(#[source] RepositoryError),
    /// Writing the destination failed.
    #[error("writing the destination failed")]
    Destination(#[source] RepositoryError),
}

/// Copies every item and product of `source`, with its id, and the
/// counters, into the empty `sink`, `batch` rows at a time (at least one),
/// calling `progress` with the running counts after each batch written.
///
/// # Errors
/// [`CopyError::NotEmpty`] when the destination holds anything;
/// [`CopyError::Source`] or [`CopyError::Destination`] when a store fails.
/// In every case the sink was rolled back (or never written).
pub async fn copy_store(
    source: &mut dyn SnapshotSource,
    sink: &mut dyn StoreSink,
    batch: usize,
    progress: &mut (dyn FnMut(Counts) + Send),
) -> Result<Copied, CopyError> {
    let held = sink.contents().await.map_err(CopyError::Destination);
    let outcome = match held {
        Ok(held) if held != Counts::default() => Err(CopyError::NotEmpty(held)),
        Ok(_) => copy_rows(source, sink, batch.max(1), progress).await,
        Err(error) => Err(error),
    };
    match outcome {
        Ok(copied) => Ok(copied),
        Err(error) => {
            // The error that stopped the copy is the one to report; the
            // rollback is best effort (an uncommitted transaction keeps
            // nothing either way).
            let _ = sink.rollback().await;
            Err(error)
        }
    }
}

/// Items, then products, then the counters and the commit.
async fn copy_rows(
    source: &mut dyn SnapshotSource,
    sink: &mut dyn StoreSink,
    batch: usize,
    progress: &mut (dyn FnMut(Counts) + Send),
) -> Result<Copied, CopyError> {
    let mut counts = Counts::default();
    let mut last = Counters::default();
    let mut after = None;
    loop {
        let items = source
            .items_after(after, batch)
            .await
            .map_err(CopyError::Source)?;
        let Some(tail) = items.last() else { break };
        after = Some(tail.id);
        last.items = tail.id.get();
        sink.write_items(&items)
            .await
            .map_err(CopyError::Destination)?;
        counts.items += items.len() as u64;
        progress(counts);
        if items.len() < batch {
            break;
        }
    }
    let mut after = None;
    loop {
        let products = source
            .products_after(after, batch)
            .await
            .map_err(CopyError::Source)?;
        let Some(tail) = products.last() else { break };
        after = Some(tail.id);
        last.products = tail.id.get();
        sink.write_products(&products)
            .await
            .map_err(CopyError::Destination)?;
        counts.products += products.len() as u64;
        progress(counts);
        if products.len() < batch {
            break;
        }
    }
    let read = source.counters().await.map_err(CopyError::Source)?;
    // A counter is never below an id it handed out; should a store say
    // otherwise, the ids copied win, so the destination never reuses one.
    let counters = Counters {
        items: read.items.max(last.items),
        products: read.products.max(last.products),
    };
    sink.commit(counters)
        .await
        .map_err(CopyError::Destination)?;
    Ok(Copied { counts, counters })
}

#[cfg(test)]
#[path = "transfer_tests.rs"]
mod tests;
