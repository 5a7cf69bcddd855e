//! The harness pointed at a store that does lose writes: the in-memory
//! default forgets everything when the process dies, and the checker must
//! say so, item by item. Without this, a checker that passes everything
//! would look like a durable store.

use std::collections::BTreeMap;
use std::time::Duration;

use super::check::{Refusals, check};
use super::history::Tally;
use super::load::Load;
use super::rng::{self, Rng};
use super::rounds::{read_all, sigkill};
use crate::helpers::Service;

#[tokio::test]
async fn the_crash_check_reports_the_writes_the_in_memory_store_loses_on_sigkill() {
    let settings = [("RATE_LIMIT_MAX", "0")];
    let mut service = Service::start(&settings).await;
    let load = Load::start(
        service.client.port,
        &BTreeMap::new(),
        1,
        &Rng::new(rng::seed()),
    );
    load.until_first_acknowledged().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    sigkill(&mut service);
    let ops = load.finish().await;
    drop(service);

    let restarted = Service::start(&settings).await;
    let listed = read_all(&restarted.client).await;
    let verdict = check(&BTreeMap::new(), &ops, Refusals::WroteNothing, &listed);

    assert!(listed.is_empty(), "a new process starts empty in memory");
    assert!(Tally::of(&ops).acknowledged > 0);
    assert!(!verdict.lost.is_empty(), "{verdict:?}");
    assert!(
        verdict.describe(5).contains("LOST: item "),
        "a failure names what was lost: {}",
        verdict.describe(5)
    );
}
