//! Logs an operator can trust: what a client does wrong — here
//! 100 malformed requests — writes no `ERROR` line, only rate-limited
//! warnings that count what they left out. Before, each malformed request
//! wrote one `ERROR` from actix-http, so any client could flood the log and
//! bury the service's own faults.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use items_app::telemetry::client_faults::LINES_PER_SECOND;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::*;

const MALFORMED: usize = 100;
const WARNING: &str = "a client's request or connection failed";

/// One request with an unparsable `Content-Length`: actix-http answers 400.
async fn send_malformed(address: SocketAddr) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(answer.starts_with(b"HTTP/1.1 400"), "{answer:?}");
}

/// The client-fault warnings in `log`: how many lines, and how many faults
/// they account for (each line's own plus the `suppressed=N` before it).
fn warnings(log: &str) -> (usize, usize) {
    let lines: Vec<&str> = log.lines().filter(|line| line.contains(WARNING)).collect();
    let suppressed: usize = lines
        .iter()
        .filter_map(|line| line.split("suppressed=").nth(1))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .filter_map(|count| count.parse::<usize>().ok())
        .sum();
    (lines.len(), lines.len() + suppressed)
}

#[tokio::test]
async fn malformed_requests_write_no_error_and_only_rate_limited_warnings() {
    let service = Service::start(&[("RATE_LIMIT_MAX", "0")]).await;
    let address = service.listening.address;
    let started = Instant::now();
    for _ in 0..MALFORMED {
        send_malformed(address).await;
    }
    let burst = started.elapsed();
    // One more in a later second: its line counts the ones left out.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    send_malformed(address).await;

    let mut log = service.log_once_it_contains(WARNING).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while warnings(&log).1 < MALFORMED + 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        log = service.log_once_it_contains(WARNING).await;
    }

    let errors: Vec<&str> = log.lines().filter(|line| line.contains("ERROR")).collect();
    assert!(
        errors.is_empty(),
        "{} ERROR lines: {errors:?}",
        errors.len()
    );
    let (lines, accounted) = warnings(&log);
    eprintln!(
        "{MALFORMED} + 1 malformed requests ({MALFORMED} in {burst:?}): {lines} warning lines"
    );
    let allowed = LINES_PER_SECOND as usize * (burst.as_secs() as usize + 3);
    assert!(lines <= allowed, "{lines} warning lines, at most {allowed}");
    assert_eq!(
        accounted,
        MALFORMED + 1,
        "every fault written or counted: {log}"
    );
}
