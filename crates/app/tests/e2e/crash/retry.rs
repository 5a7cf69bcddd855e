//! After each restart, the retries a careful client makes (C7):
//! every create whose outcome was unknown is sent again with its
//! `Idempotency-Key` (every create of the load carries one, its unique
//! name). The answer settles its fate: a replay (`Idempotent-Replayed:
//! true`) says the first one was committed before the kill, a fresh `201`
//! that it was not. Either way the create is then acknowledged with the id
//! answered, and the listing must show each key's name exactly once, under
//! that id: a retry never makes a duplicate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use reqwest::header::LOCATION;
use serde_json::json;

use super::history::{Op, Outcome, Write};
use super::load::{REQUEST_TIMEOUT, http_client};

/// The retries of one round.
#[derive(Debug, Default, Clone)]
pub struct Retries {
    /// Creates whose outcome was unknown, each retried with its key.
    pub retried: usize,
    /// Of them, answered as replays: committed before the kill. Without
    /// keys each of these would have been a duplicate.
    pub replayed: usize,
    /// Names of retried creates that the listing shows more than once.
    pub duplicates: usize,
    /// The names (and keys) of the retried creates.
    pub names: Vec<String>,
}

impl Retries {
    /// Adds a round's counts (not its names).
    pub fn add(&mut self, other: &Self) {
        self.retried += other.retried;
        self.replayed += other.replayed;
        self.duplicates += other.duplicates;
    }

    /// Counts the retried names the listing shows more than once (C7: each
    /// key ends up as exactly one item; one missing is the checker's "lost").
    pub fn count_duplicates(&mut self, listed: &[(i64, String)]) {
        let mut shown: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, name) in listed {
            *shown.entry(name.as_str()).or_default() += 1;
        }
        self.duplicates = self
            .names
            .iter()
            .filter(|name| shown.get(name.as_str()).is_some_and(|count| *count > 1))
            .count();
    }
}

/// Sends every create of `ops` with an unknown outcome again, with its
/// key, to the service on `port`, and turns each into the acknowledged
/// create the answer says it is.
pub async fn retry_unknown_creates(port: u16, ops: &mut [Op]) -> Retries {
    let http = http_client();
    let base = format!("http://127.0.0.1:{port}");
    let mut retries = Retries::default();
    for op in ops.iter_mut() {
        let (Write::Create { name, id }, Outcome::Unknown { .. }) = (&mut op.write, &op.outcome)
        else {
            continue;
        };
        let (answered, replayed) = retry(&http, &base, name).await;
        retries.retried += 1;
        retries.replayed += usize::from(replayed);
        retries.names.push(name.clone());
        *id = Some(answered);
        op.outcome = Outcome::Acknowledged;
    }
    retries
}

/// One create retried until it gets its `201` (a restarted service may
/// still answer 503 for a moment): the id and whether it was a replay.
async fn retry(http: &reqwest::Client, base: &str, name: &str) -> (i64, bool) {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    loop {
        let response = http
            .post(format!("{base}/items"))
            .header("idempotency-key", name)
            .json(&json!({ "name": name }))
            .send()
            .await;
        if let Ok(response) = response
            && response.status() == 201
        {
            let id = response
                .headers()
                .get(LOCATION)
                .and_then(|location| location.to_str().ok())
                .and_then(|location| location.strip_prefix("/items/"))
                .and_then(|id| id.parse().ok())
                .expect("a 201 names the item in Location");
            let replayed = response.headers().get("idempotent-replayed").is_some();
            return (id, replayed);
        }
        assert!(
            Instant::now() < deadline,
            "the retry of {name:?} got no 201 within {REQUEST_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retried_name_listed_twice_is_a_duplicate_and_once_is_not() {
        let mut retries = Retries {
            names: vec!["a".to_owned(), "b".to_owned(), "c".to_owned()],
            ..Retries::default()
        };
        let listed = [(1, "a"), (2, "b"), (3, "a"), (4, "x"), (5, "x")]
            .map(|(id, name)| (id, name.to_owned()));
        retries.count_duplicates(&listed);
        assert_eq!(
            retries.duplicates, 1,
            "only a: b once, c absent, x not retried"
        );
    }
}
