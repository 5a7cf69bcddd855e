//! The poller against a store of the test's own: what it does when the
//! store pruned past what it followed.

use std::time::SystemTime;

use futures_util::StreamExt;
use items_domain::{Change, Id, ItemChange};

use super::*;

/// A store whose changes, floor and present the test sets.
#[derive(Default)]
struct Kept {
    state: Mutex<KeptState>,
}

#[derive(Default)]
struct KeptState {
    /// Positions retained (every one final), each a delete of item 1.
    positions: Vec<u64>,
    /// The last position pruned.
    floor: u64,
}

impl Kept {
    fn commit(&self, position: u64) {
        self.state.lock().positions.push(position);
    }

    fn prune_through(&self, floor: u64) {
        let mut state = self.state.lock();
        state.positions.retain(|position| *position > floor);
        state.floor = floor;
    }

    fn after(&self, after: u64, upto: u64, limit: usize) -> (Vec<Entry>, u64) {
        let state = self.state.lock();
        let entries = state
            .positions
            .iter()
            .filter(|position| **position > after && **position <= upto)
            .take(limit)
            .map(|position| Entry {
                position: *position,
                change: ItemChange::Deleted(Id::new(1)),
                at: SystemTime::UNIX_EPOCH,
            })
            .collect();
        (entries, state.floor)
    }

    fn last(&self) -> u64 {
        let state = self.state.lock();
        state.positions.last().copied().unwrap_or(state.floor)
    }
}

#[async_trait]
impl History for Kept {
    async fn read(
        &self,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<(Vec<Entry>, u64), RepositoryError> {
        Ok(self.after(after, upto, limit))
    }
}

#[async_trait]
impl Source for Kept {
    async fn poll(
        &self,
        head: u64,
        limit: usize,
    ) -> Result<(Vec<Entry>, u64, u64), RepositoryError> {
        let (entries, floor) = self.after(head, u64::MAX, limit);
        let new_head = entries.last().map_or(head, |entry| entry.position);
        Ok((entries, new_head, floor))
    }

    async fn present(&self) -> Result<u64, RepositoryError> {
        Ok(self.last())
    }

    async fn bounds(&self) -> Result<(u64, u64), RepositoryError> {
        Ok((self.state.lock().floor, self.last()))
    }
}

fn feed_of(kept: &Arc<Kept>) -> DurableFeed {
    DurableFeed::new(
        Arc::clone(kept) as Arc<dyn Source>,
        CursorFormat::new('t', "0123456789abcdef"),
        Duration::from_secs(3600),
        Duration::from_secs(5),
    )
}

#[tokio::test]
async fn a_pruning_past_the_hub_cuts_only_the_subscribers_below_what_it_pruned_c14() {
    let kept = Arc::new(Kept::default());
    for position in 1..=3 {
        kept.commit(position);
    }
    let feed = feed_of(&kept);
    let shared = &feed.shared;
    step(shared).await.unwrap();
    assert_eq!(shared.hub.bounds().1, 3, "the poller starts at the present");

    // Committed and pruned through 5 before the poller looked again: a
    // stream that started at the store's present (6) missed nothing; one
    // that stood at 3 missed 4 and 5.
    for position in 4..=6 {
        kept.commit(position);
    }
    kept.prune_through(5);
    let history = || Some(Arc::clone(&shared.source) as Arc<dyn History>);
    let cursors = shared.cursors.clone();
    let at_the_present = follow(Arc::clone(&shared.hub), history(), cursors.clone(), 6, None);
    let behind = follow(Arc::clone(&shared.hub), history(), cursors, 3, None);
    // Both read on their own: they follow the hub, waiting for its next
    // change, when the poller finds the pruning.
    let at_the_present = tokio::spawn(first_of(at_the_present));
    let behind = tokio::spawn(first_of(behind));
    tokio::time::sleep(Duration::from_millis(50)).await;
    kept.commit(7);

    while step(shared).await.unwrap() {}

    let next = tokio::time::timeout(Duration::from_secs(5), at_the_present)
        .await
        .expect("the change after the present comes")
        .unwrap()
        .expect("C14: a stream at or above what was pruned is not cut");
    assert_eq!(feed.shared.cursors.position(&next.cursor), Some(7));
    let cut = tokio::time::timeout(Duration::from_secs(5), behind)
        .await
        .expect("the stream behind ends at once")
        .unwrap();
    assert!(
        matches!(cut, Err(FeedError::TooSlow)),
        "C14: a stream below what was pruned missed changes and must be cut, got {cut:?}"
    );
}

async fn first_of(mut stream: items_domain::ChangeStream) -> Result<Change, FeedError> {
    stream
        .next()
        .await
        .expect("a stream gives a change or ends with an error")
}
