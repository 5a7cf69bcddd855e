//! No connection outlives its deadlines, measured at the descriptor limit
//! (C5): 300 connections that announce a chunked body and never send it,
//! against a process allowed 256 descriptors. Before,
//! each kept its connection after its response, the process ran out of
//! descriptors and a normal client timed out 6 times out of 6 over 30 s.
//! Now each is closed after its response: a normal client is served within
//! seconds and the descriptors return to where they were.
//! `docs/security.md` records the figures.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{Service, binary_with_fd_limit};

const FD_LIMIT: u32 = 256;
const FLOOD: usize = 300;

fn open_descriptors(service: &Service) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", service.child.id()))
        .unwrap()
        .count()
}

/// Reads until the server closes `stream`; whether it did within `limit`.
async fn closed_within(mut stream: TcpStream, limit: Duration) -> bool {
    let mut buffer = [0u8; 4096];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn endless_chunked_bodies_past_the_fd_limit_neither_keep_their_connections_nor_stop_others_c5()
 {
    let mut service =
        Service::start_command(binary_with_fd_limit(FD_LIMIT), &[("RATE_LIMIT_MAX", "0")]).await;
    let address = service.listening.address;
    let baseline = open_descriptors(&service);

    let mut flood = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: flood\r\nTransfer-Encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        flood.push(stream);
    }
    // A normal client, on a new connection, while the flood's sockets are
    // all still open on the client's side.
    let asked = Instant::now();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut served = false;
    while !served && asked.elapsed() < Duration::from_secs(10) {
        served = client
            .get(format!("http://{address}/"))
            .send()
            .await
            .is_ok_and(|response| response.status() == 200);
    }
    let served_after = asked.elapsed();
    let closes: Vec<_> = flood
        .into_iter()
        .map(|stream| tokio::spawn(closed_within(stream, Duration::from_secs(10))))
        .collect();
    let mut closed = 0;
    for close in closes {
        if close.await.unwrap() {
            closed += 1;
        }
    }
    let settled = Instant::now();
    let mut open = open_descriptors(&service);
    while open > baseline && settled.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        open = open_descriptors(&service);
    }
    eprintln!(
        "{FLOOD} endless chunked bodies, limit {FD_LIMIT}: a normal client served after \
         {served_after:?}; {closed} of {FLOOD} closed by the server; descriptors {open} (baseline {baseline})"
    );

    assert!(
        served && served_after < Duration::from_secs(5),
        "normal client: {served} after {served_after:?}"
    );
    assert_eq!(closed, FLOOD, "connections the server kept open");
    assert!(open <= baseline, "descriptors {open}, baseline {baseline}");
    service.terminate();
    assert!(service.wait(Duration::from_secs(35)).await.success());
}
