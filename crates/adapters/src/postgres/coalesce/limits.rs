//! How much one kind of request coalesces: requests a statement serves,
//! statements it runs at once, batches in flight on one connection.

/// The most requests one statement serves (and one queue holds): an array
/// parameter of 1,024 ids or names is still one small message.
pub(super) const MAX_BATCH: usize = 1024;

/// The statement slots of one kind, the statements it runs at once at most:
/// one per ten connections of the pool (at least one), so batches fill
/// under load and the rest of the pool stays for the other kinds and for
/// listings and updates.
pub(in crate::postgres) fn statement_slots(pool_size: u32) -> usize {
    (pool_size as usize / 10).max(1)
}

/// Batches of a pipelined kind in flight on one connection at most.
pub(super) const PIPELINE_DEPTH: usize = 2;
