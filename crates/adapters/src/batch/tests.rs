//! The queue's batches, answers, deadlines and claims (C12).

use tokio::time::Instant;

use super::*;

#[tokio::test]
async fn a_batch_holds_every_request_queued_before_it_was_taken() {
    let (queue, mut batches) = queue::<u32, u32>(8);
    let callers: Vec<_> = (0..5)
        .map(|n| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.submit(n).await })
        })
        .collect();
    while queue.queued() < 5 {
        tokio::task::yield_now().await;
    }

    let batch = batches.next().await.unwrap();
    assert_eq!(batch.len(), 5);
    let replies: Vec<u32> = batch.work().map(|n| n + 10).collect();
    batch.answer(replies);
    for (n, caller) in callers.into_iter().enumerate() {
        assert_eq!(
            caller.await.unwrap(),
            Ok(n as u32 + 10),
            "each gets its own"
        );
    }
    assert_eq!(queue.queued(), 0);
}

#[tokio::test]
async fn a_batch_never_exceeds_the_queue_capacity() {
    let (queue, mut batches) = queue::<u32, ()>(3);
    let callers: Vec<_> = (0..6)
        .map(|n| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.submit(n).await })
        })
        .collect();
    while queue.queued() < 3 {
        tokio::task::yield_now().await;
    }

    let mut sizes = Vec::new();
    while sizes.iter().sum::<usize>() < 6 {
        let batch = batches.next().await.unwrap();
        sizes.push(batch.len());
        batch.answer_each(drop);
    }
    assert!(sizes.iter().all(|&size| size <= 3), "{sizes:?}");
    for caller in callers {
        assert_eq!(caller.await.unwrap(), Ok(()));
    }
}

#[tokio::test]
async fn a_request_past_its_deadline_before_it_is_claimed_is_never_applied_c12() {
    let (queue, mut batches) = queue::<u32, u32>(4);
    let deadline = Instant::now() + std::time::Duration::from_millis(50);
    let late = queue.submit_by(1, deadline).await;
    assert_eq!(late, Err(Unanswered::Late));

    // The writer takes it up only now: it is left out of the batch.
    let mut batch = batches.next().await.unwrap();
    batch.prune();
    assert!(batch.is_empty());
    batch.claim();
    assert_eq!(batch.work().count(), 0);
}

#[tokio::test]
async fn a_claimed_request_waits_for_its_batch_past_its_deadline_c12() {
    let (queue, mut batches) = queue::<u32, u32>(4);
    let deadline = Instant::now() + std::time::Duration::from_millis(50);
    let caller = tokio::spawn(async move { queue.submit_by(7, deadline).await });
    let mut batch = batches.next().await.unwrap();
    batch.claim();
    assert_eq!(batch.len(), 1);

    tokio::time::sleep_until(deadline + std::time::Duration::from_millis(50)).await;
    batch.answer_each(|n| n + 1);
    assert_eq!(caller.await.unwrap(), Ok(8), "the batch's fate, not Late");
}

#[tokio::test]
async fn a_request_left_unanswered_or_refused_gets_stopped() {
    let (queue, mut batches) = queue::<u32, u32>(4);
    let caller = tokio::spawn({
        let queue = queue.clone();
        async move { queue.submit(1).await }
    });
    let batch = batches.next().await.unwrap();
    batch.answer(std::iter::empty());
    assert_eq!(caller.await.unwrap(), Err(Stopped));

    batches.close();
    assert_eq!(queue.submit(2).await, Err(Stopped));
    assert!(batches.next().await.is_none());
}

#[tokio::test]
async fn a_request_whose_caller_left_is_never_applied() {
    let (queue, mut batches) = queue::<u32, u32>(4);
    let far = Instant::now() + std::time::Duration::from_secs(60);
    let kept = queue.enqueue_by(1, far).await.unwrap();
    let left = queue.enqueue_by(2, far).await.unwrap();
    drop(left);
    let mut batch = batches.try_next().expect("both queued");
    assert_eq!(batch.len(), 2);
    batch.prune();
    batch.claim();
    assert_eq!(batch.work().copied().collect::<Vec<_>>(), [1]);
    batch.answer_each(|n| n * 10);
    assert_eq!(kept.wait().await, Ok(10));
    assert!(batches.try_next().is_none(), "nothing is left queued");
}

#[tokio::test]
async fn a_request_past_its_deadline_when_claimed_is_left_out_and_its_caller_told_late_c12() {
    let (queue, mut batches) = queue::<u32, u32>(4);
    let now = Instant::now();
    let short = now + std::time::Duration::from_millis(20);
    let long = now + std::time::Duration::from_secs(60);
    let late = queue.enqueue_by(1, short).await.unwrap();
    let kept = queue.enqueue_by(2, long).await.unwrap();
    let mut batch = batches.try_next().expect("both queued");
    assert_eq!(batch.deadline(), Some(short), "the earliest");

    // The caller has not looked yet: the writer finds it late itself.
    tokio::time::sleep_until(short).await;
    batch.claim();
    assert_eq!(batch.work().copied().collect::<Vec<_>>(), [2]);
    assert_eq!(batch.deadline(), Some(long));
    batch.answer_each(|n| n + 1);
    assert_eq!(late.wait().await, Err(Unanswered::Late));
    assert_eq!(kept.wait().await, Ok(3));
}

#[tokio::test]
async fn requests_queued_at_once_are_taken_in_order_and_each_gets_its_own_answer() {
    let (queue, mut batches) = queue::<u32, u32>(8);
    let answers: Vec<Undated<u32>> = (1..=3)
        .map(|n| queue.try_enqueue(n).expect("room"))
        .collect();

    let batch = batches.next().await.unwrap();
    assert_eq!(batch.work().copied().collect::<Vec<_>>(), [1, 2, 3]);
    batch.answer([10, 20]);

    let mut answered = Vec::new();
    for answer in answers {
        answered.push(answer.await);
    }
    assert_eq!(
        answered,
        [Ok(10), Ok(20), Err(Stopped)],
        "past the replies given: stopped"
    );
}

#[tokio::test]
async fn a_batch_taken_at_most_n_is_topped_up_to_n_and_the_rest_waits_for_the_next() {
    let (queue, mut batches) = queue::<u32, ()>(8);
    let _answers: Vec<Undated<()>> = (1..=5)
        .map(|n| queue.try_enqueue(n).expect("room"))
        .collect();

    let mut batch = batches.next_at_most(2).await.unwrap();
    assert_eq!(batch.len(), 2);
    batches.top_up(&mut batch, 3);
    assert_eq!(batch.work().copied().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(queue.queued(), 2);
}

#[tokio::test]
async fn a_full_or_stopped_queue_refuses_at_once_and_gives_the_work_back() {
    let (queue, batches) = queue::<u32, u32>(1);
    let waiting = queue.try_enqueue(1).expect("room");
    assert_eq!(queue.try_enqueue(2).map(drop), Err(Refused::Full(2)));

    drop(batches);
    assert_eq!(waiting.await, Err(Stopped), "dropped unanswered");
    assert!(queue.is_stopped());
    assert_eq!(queue.try_enqueue(3).map(drop), Err(Refused::Stopped(3)));
}

#[tokio::test]
async fn once_every_callers_end_is_gone_what_was_queued_is_still_handed_out() {
    let (queue, mut batches) = queue::<u32, u32>(4);
    let waiting = queue.try_enqueue(7).expect("room");
    let other = queue.clone();
    assert!(queue.same_queue(&other));
    drop((queue, other));

    let batch = batches.next().await.expect("what was queued");
    batch.answer_each(|n| n + 1);
    assert_eq!(waiting.await, Ok(8));
    assert!(batches.next().await.is_none(), "then the writer's end ends");
}
