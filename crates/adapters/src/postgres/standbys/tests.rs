//! The routing's choices over standbys whose polls are set by hand (no
//! server is asked: pools open connections only when a read needs one).

use std::sync::Arc;
use std::time::Duration;

use items_domain::Position;
use tokio::time::Instant;

use super::pools::Standbys;
use super::seen::Seen;
use super::settings::StandbySettings;
use crate::postgres::PostgresUrl;

fn standbys(count: usize, wait: Duration) -> Arc<Standbys> {
    let hosts: Vec<String> = (0..count)
        .map(|at| format!("s{at}:{}", 5432 + at))
        .collect();
    let url = PostgresUrl::parse(&format!("postgres://u@{}/db", hosts.join(",")))
        .expect("a URL of standbys");
    let settings = StandbySettings {
        wait,
        max_lag: Duration::from_millis(1000),
        ..StandbySettings::default()
    };
    Standbys::new(&url, settings, "", Duration::from_secs(1))
}

fn set(standbys: &Standbys, at: usize, seen: Seen) {
    *standbys.standbys[at].seen.lock() = seen;
}

fn standby(replayed: Position, lag_ms: u64) -> Seen {
    Seen {
        replayed: Some(replayed),
        lag: Some(Duration::from_millis(lag_ms)),
        usable: true,
    }
}

#[tokio::test]
async fn a_read_without_a_token_goes_only_to_a_standby_lagging_at_most_the_max_lag_c13() {
    let standbys = standbys(2, Duration::ZERO);
    set(&standbys, 0, standby(Position::new(1, 100), 1500));
    set(&standbys, 1, standby(Position::new(1, 90), 1000));
    for _ in 0..4 {
        assert_eq!(standbys.choose(None).await, Some(1));
    }
    set(&standbys, 1, standby(Position::new(1, 90), 1001));
    assert_eq!(
        standbys.choose(None).await,
        None,
        "none usable: the primary"
    );
}

#[tokio::test]
async fn reads_without_a_token_take_turns_among_the_standbys_that_fit_c13() {
    let standbys = standbys(2, Duration::ZERO);
    set(&standbys, 0, standby(Position::new(1, 100), 0));
    set(&standbys, 1, standby(Position::new(1, 100), 0));
    let mut chosen = [0; 2];
    for _ in 0..10 {
        if let Some(at) = standbys.choose(None).await {
            chosen[at] += 1;
        }
    }
    assert_eq!(chosen, [5, 5]);
}

#[tokio::test]
async fn a_standby_promoted_down_or_on_another_timeline_is_never_chosen_c13() {
    let standbys = standbys(3, Duration::ZERO);
    set(&standbys, 0, Seen::default());
    set(
        &standbys,
        1,
        Seen {
            usable: false,
            ..standby(Position::new(2, 500), 0)
        },
    );
    set(&standbys, 2, Seen::default());
    assert_eq!(standbys.choose(None).await, None);
    assert_eq!(standbys.choose(Some(Position::new(2, 1))).await, None);
}

#[tokio::test]
async fn a_read_with_a_token_goes_to_a_standby_that_replayed_it_whatever_its_lag_c13() {
    let standbys = standbys(2, Duration::ZERO);
    set(&standbys, 0, standby(Position::new(1, 99), 0));
    set(&standbys, 1, standby(Position::new(1, 100), 5000));
    assert_eq!(standbys.choose(Some(Position::new(1, 100))).await, Some(1));
    assert_eq!(
        standbys.choose(Some(Position::new(2, 1))).await,
        None,
        "a token of another timeline: the primary judges it"
    );
}

#[tokio::test]
async fn a_read_with_a_token_waits_for_a_poll_that_shows_it_replayed_c13() {
    let standbys = standbys(1, Duration::from_secs(5));
    set(&standbys, 0, standby(Position::new(1, 50), 0));
    let polls = Arc::clone(&standbys);
    let poll = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(polls.eager(), "a read waits: the tracker polls eagerly");
        set(&polls, 0, standby(Position::new(1, 120), 0));
        polls.polled.notify_waiters();
    });
    let started = Instant::now();
    assert_eq!(standbys.choose(Some(Position::new(1, 100))).await, Some(0));
    assert!(started.elapsed() < Duration::from_secs(4));
    poll.await.expect("the poll ran");
    assert!(!standbys.eager(), "no read waits any more");
}

#[tokio::test]
async fn a_read_with_a_token_waits_at_most_the_read_wait_then_goes_to_the_primary_c13() {
    let standbys = standbys(1, Duration::from_millis(100));
    set(&standbys, 0, standby(Position::new(1, 50), 0));
    let started = Instant::now();
    assert_eq!(standbys.choose(Some(Position::new(1, 100))).await, None);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(100) && waited < Duration::from_millis(1000),
        "{waited:?}"
    );
    set(&standbys, 0, Seen::default());
    let started = Instant::now();
    assert_eq!(standbys.choose(Some(Position::new(1, 100))).await, None);
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "no standby could catch up: no wait"
    );
}
