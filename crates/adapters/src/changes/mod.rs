//! What the stores' change feeds (C14) share: the hub of recent changes
//! every subscriber of a process reads from ([`hub`]), the subscription's
//! stream over it and a store's history ([`follow`]), the cursors
//! naming a store and a position ([`cursor`]), and, for the durable
//! stores, the poller that fills the hub from the store (`durable`).
//!
//! A store decides the order of its changes and records them with its
//! writes; what it hands this module is positions that only grow, in that
//! order, each published once it is final.

pub(crate) mod cursor;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) mod durable;
pub(crate) mod follow;
pub(crate) mod hub;
