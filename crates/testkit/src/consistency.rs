//! The contract of [`ConsistentReads`] (C13): one check per MUST, each on a
//! fresh store. A store with one copy of its data (memory, SQLite:
//! [`Unpositioned`]) passes them by recording nothing; a store that gives
//! positions passes them by recording positions that never go back.

use std::sync::Arc;

use items_domain::{ConsistentReads, Name, Position, ReadScope, Repositories, Unpositioned};

use crate::Fixture;

/// A store under test that serves reads at or after a position: what
/// `contract_tests!(consistent_reads …)` builds once per check.
pub trait ConsistentReadsFixture: Fixture {
    /// The store's consistent reads; every call shares the same data.
    fn reads(&self) -> Arc<dyn ConsistentReads>;
}

/// A store of one copy in memory needs nothing undone after a test.
impl Fixture for Unpositioned {}

impl ConsistentReadsFixture for Unpositioned {
    fn reads(&self) -> Arc<dyn ConsistentReads> {
        Arc::new(self.clone())
    }
}

/// Whether `later` is at or after `earlier`: a newer era, or further
/// along the same one (what the positions of one history are).
fn at_or_after(later: Position, earlier: Position) -> bool {
    (later.era(), later.offset()) >= (earlier.era(), earlier.offset())
}

fn name(text: &str) -> Name {
    Name::parse(text).unwrap_or_else(|refused| panic!("{text:?} is a valid name: {refused}"))
}

/// The scope of one request, at `at`.
fn scope(reads: &Arc<dyn ConsistentReads>, at: Option<Position>) -> (Repositories, ReadScope) {
    let scope = reads.scope(at);
    (scope.repositories.clone(), scope)
}

/// C13: a read made with the position a write reported sees the write, and
/// reports a position at or after it; a store that reports nothing for the
/// write reports nothing for the read either.
pub async fn a_read_at_a_writes_position_sees_the_write_c13(reads: &Arc<dyn ConsistentReads>) {
    let (repositories, write) = scope(reads, None);
    let pen = repositories
        .items
        .create(name("pen"))
        .await
        .unwrap_or_else(|error| panic!("C13: a create through a scope succeeds: {error}"));
    let written = write.report.position();
    assert!(!write.report.is_unmet(), "C13: a write is never unmet");
    let (repositories, read) = scope(reads, written);
    let found = repositories
        .items
        .get(pen.id)
        .await
        .unwrap_or_else(|error| panic!("C13: a read at the write's position succeeds: {error}"));
    assert_eq!(
        found.as_ref(),
        Some(&pen),
        "C13: a read at the write's position {written:?} sees the item it created"
    );
    match (written, read.report.position()) {
        (Some(written), Some(served)) => assert!(
            at_or_after(served, written),
            "C13: the read's position {served} is at or after the write's {written}"
        ),
        (Some(written), None) => {
            panic!("C13: a store that gave the write a position ({written}) gives the read one")
        }
        (None, Some(served)) => {
            panic!("C13: a store that gave the write no position gives the read none ({served})")
        }
        (None, None) => {}
    }
}

/// C13: positions served one after another never go back (monotonic
/// reads): each read made with the last position served reports one at or
/// after it, over every kind of read.
pub async fn positions_served_never_go_back_c13(reads: &Arc<dyn ConsistentReads>) {
    let mut last: Option<Position> = None;
    for round in 0..5 {
        let (repositories, scope) = scope(reads, last);
        let item = repositories
            .items
            .create(name(&format!("item {round}")))
            .await
            .unwrap_or_else(|error| panic!("C13: a create succeeds: {error}"));
        let _ = repositories.items.get(item.id).await;
        let _ = repositories.items.listing_head().await;
        let _ = repositories.products.list().await;
        assert!(!scope.report.is_unmet(), "C13: a position served is met");
        let served = scope.report.position();
        if let (Some(before), Some(now)) = (last, served) {
            assert!(
                at_or_after(now, before),
                "C13: round {round} served {now}, before {before} served earlier"
            );
        }
        assert!(
            last.is_none() || served.is_some(),
            "C13: a store that gave a position gives one to every later answer"
        );
        last = served;
    }
}
