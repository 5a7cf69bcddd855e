//! The load: eight writers, each a task with its own connection, sending
//! creates, replaces (`PUT`) and deletes as fast as the service answers,
//! and recording every outcome ([`Op`]). A writer replaces and deletes only
//! the items it owns (those it created, and those of the round's starting
//! state whose id it was dealt), so the writes to one item form one
//! sequence whose order the checker knows. After a write with an uncertain
//! fate a writer leaves that item alone for the rest of the round, and after
//! an unknown one, or a request that found no process (the service is
//! gone, or did not answer), it stops.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::header::{LOCATION, RETRY_AFTER};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::history::{Op, Outcome, Receipt, Write};
use super::rng::Rng;

/// How many writers run at once.
pub const WRITERS: usize = 8;

/// Longer than any answer a working service takes, even on a loaded
/// machine; a request still unanswered then counts as a hang.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Writers at work against one running service.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    acknowledged: Arc<AtomicUsize>,
    writers: Vec<JoinHandle<Vec<Op>>>,
}

impl Load {
    /// Starts [`WRITERS`] writers against the service on `port`. `items`
    /// is what the store holds now; writer `w` owns the items whose id is
    /// `w` modulo [`WRITERS`]. Names carry `round` so that no two writes of
    /// the whole test send the same one.
    pub fn start(port: u16, items: &BTreeMap<i64, String>, round: usize, rng: &Rng) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let acknowledged = Arc::new(AtomicUsize::new(0));
        let writers = (0..WRITERS)
            .map(|number| {
                let writer = Writer {
                    number,
                    round,
                    http: http_client(),
                    base: format!("http://127.0.0.1:{port}"),
                    owned: items
                        .keys()
                        .copied()
                        .filter(|id| id.rem_euclid(WRITERS as i64) == number as i64)
                        .collect(),
                    rng: rng.fork(number as u64),
                    sent: 0,
                };
                tokio::spawn(writer.run(stop.clone(), acknowledged.clone()))
            })
            .collect();
        Self {
            stop,
            acknowledged,
            writers,
        }
    }

    /// How many writes have been acknowledged so far.
    pub fn acknowledged(&self) -> usize {
        self.acknowledged.load(Ordering::SeqCst)
    }

    /// Waits until at least one write has been acknowledged, so that every
    /// round has something to lose.
    pub async fn until_first_acknowledged(&self) {
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        while self.acknowledged() == 0 {
            assert!(
                Instant::now() < deadline,
                "no write acknowledged in {REQUEST_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops the writers and returns what each did, writer by writer (each
    /// writer's writes in the order it sent them).
    pub async fn finish(self) -> Vec<Op> {
        self.stop.store(true, Ordering::SeqCst);
        let mut ops = Vec::new();
        for writer in self.writers {
            // A writer ends after its current request, which ends within
            // REQUEST_TIMEOUT; twice that is a writer that hangs.
            let done = tokio::time::timeout(REQUEST_TIMEOUT * 2, writer)
                .await
                .expect("a writer ends once stopped")
                .expect("a writer does not panic");
            ops.extend(done);
        }
        ops
    }
}

/// A client with one connection per writer and a bound on each request.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("a plain HTTP client builds")
}

struct Writer {
    number: usize,
    round: usize,
    http: reqwest::Client,
    base: String,
    /// The items this writer may replace or delete: present, as far as it
    /// knows, and with no write of uncertain fate on them.
    owned: Vec<i64>,
    rng: Rng,
    sent: usize,
}

impl Writer {
    async fn run(mut self, stop: Arc<AtomicBool>, acknowledged: Arc<AtomicUsize>) -> Vec<Op> {
        let mut ops = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let mut write = self.choose();
            let sent = Instant::now();
            let (outcome, unreadable) = send_and_read(&self.http, &self.base, &mut write).await;
            let receipt = Receipt {
                sent,
                took: sent.elapsed(),
                unreadable,
            };
            match (&outcome, &write) {
                (Outcome::Acknowledged, Write::Create { id: Some(id), .. }) => self.owned.push(*id),
                (Outcome::Acknowledged, Write::Delete { id }) => self.disown(*id),
                (Outcome::Acknowledged, _) => {}
                (Outcome::Refused { .. }, _) => {
                    if let Some(id) = write.target() {
                        self.disown(id);
                    }
                    // The store is down for a moment: no need to spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                (Outcome::Unknown { .. } | Outcome::NotSent, _) => {}
            }
            if outcome == Outcome::Acknowledged {
                acknowledged.fetch_add(1, Ordering::SeqCst);
            }
            let gone = matches!(outcome, Outcome::Unknown { .. } | Outcome::NotSent);
            ops.push(Op {
                writer: self.number,
                write,
                outcome,
                receipt: Some(receipt),
            });
            if gone {
                break;
            }
        }
        ops
    }

    /// Half creates, then replaces and deletes of owned items (3 : 2), so
    /// the collection grows slowly and every kind of write is in flight
    /// when the process dies.
    fn choose(&mut self) -> Write {
        self.sent += 1;
        let dice = self.rng.below(10);
        if self.owned.is_empty() || dice < 5 {
            let name = format!("c{}.{}.{}", self.round, self.number, self.sent);
            return Write::Create { name, id: None };
        }
        let id = self.owned[self.rng.below(self.owned.len() as u64) as usize];
        if dice < 8 {
            let name = format!("p{}.{}.{}", self.round, self.number, self.sent);
            Write::Replace { id, name }
        } else {
            Write::Delete { id }
        }
    }

    fn disown(&mut self, id: i64) {
        self.owned.retain(|owned| *owned != id);
    }
}

/// Sends `write` to the service at `base` and says what came of it; a
/// create's id is filled in from the answer's `Location`.
pub async fn send(http: &reqwest::Client, base: &str, write: &mut Write) -> Outcome {
    send_and_read(http, base, write).await.0
}

/// [`send`], and what was wrong with a 2xx body that does not read as the
/// write's answer (the item as written; nothing after a `DELETE`).
pub async fn send_and_read(
    http: &reqwest::Client,
    base: &str,
    write: &mut Write,
) -> (Outcome, Option<String>) {
    let outcome = send_only(http, base, write).await;
    match outcome {
        Answered::Body(status, body) => (Outcome::Acknowledged, unreadable(write, status, &body)),
        Answered::Not(outcome) => (outcome, None),
    }
}

/// A 2xx status and its body as read (or why it could not be), or any
/// other outcome.
enum Answered {
    Body(u16, Result<Vec<u8>, String>),
    Not(Outcome),
}

/// What is wrong with `body`, the answer to the acknowledged `write`.
fn unreadable(write: &Write, status: u16, body: &Result<Vec<u8>, String>) -> Option<String> {
    let body = match body {
        Ok(body) => body,
        Err(error) => return Some(format!("{status}: the body was cut: {error}")),
    };
    let item = || serde_json::from_slice::<Value>(body).ok();
    let fits = match write {
        Write::Create { name, id } => item().is_some_and(|item| {
            status == 201 && item["name"] == name.as_str() && item["id"].as_i64() == *id
        }),
        Write::Replace { id, name } => item().is_some_and(|item| {
            status == 200 && item["name"] == name.as_str() && item["id"].as_i64() == Some(*id)
        }),
        Write::Delete { .. } => status == 204 && body.is_empty(),
    };
    (!fits).then(|| {
        format!(
            "{status} {:?} does not answer {write}",
            String::from_utf8_lossy(body)
        )
    })
}

async fn send_only(http: &reqwest::Client, base: &str, write: &mut Write) -> Answered {
    let request = match write {
        // Every create carries a key, its unique name, so one of unknown
        // outcome can be retried safely after the restart (C7, `retry.rs`).
        Write::Create { name, .. } => http
            .post(format!("{base}/items"))
            .header("idempotency-key", name.as_str())
            .json(&json!({ "name": name })),
        Write::Replace { id, name } => http
            .put(format!("{base}/items/{id}"))
            .json(&json!({ "name": name })),
        Write::Delete { id } => http.delete(format!("{base}/items/{id}")),
    };
    let response = match request.send().await {
        Ok(response) => response,
        // No connection: hyper sends nothing before it has one.
        Err(error) if error.is_connect() => return Answered::Not(Outcome::NotSent),
        Err(error) => {
            return Answered::Not(Outcome::Unknown {
                reason: no_answer(&error),
            });
        }
    };
    let status = response.status();
    if !status.is_success() {
        let retry_after = response.headers().contains_key(RETRY_AFTER);
        // Read to the end so the connection can carry the next request.
        let _ = response.bytes().await;
        return Answered::Not(Outcome::Refused {
            status: status.as_u16(),
            retry_after,
        });
    }
    if let Write::Create { id, .. } = write {
        *id = response
            .headers()
            .get(LOCATION)
            .and_then(|location| location.to_str().ok())
            .and_then(|location| location.strip_prefix("/items/"))
            .and_then(|id| id.parse().ok());
        if id.is_none() {
            // Committed, but under an id nobody can name: leave it to the
            // checker as a create of unknown fate.
            return Answered::Not(Outcome::Unknown {
                reason: format!("{status} without a Location"),
            });
        }
    }
    let body = response
        .bytes()
        .await
        .map(|body| body.to_vec())
        .map_err(|error| error.to_string());
    Answered::Body(status.as_u16(), body)
}

fn no_answer(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        format!("no answer in {REQUEST_TIMEOUT:?}")
    } else {
        "connection lost".to_owned()
    }
}
