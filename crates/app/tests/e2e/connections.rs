//! The binary at its file-descriptor limit: a flood of idle
//! keep-alive connections may keep new clients waiting while it lasts, but
//! the process survives it and serves new clients as soon as it stops.
//! `docs/security.md` records what was seen.

use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::helpers::{Service, binary_with_fd_limit};

/// Low enough that the flood below runs the process out of descriptors.
const FD_LIMIT: u32 = 64;
const FLOOD: usize = 300;

/// One GET / on a new connection (no pool), answered within `limit`.
async fn served_within(base: &str, limit: Duration) -> bool {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(limit)
        .build()
        .unwrap();
    client
        .get(format!("{base}/"))
        .send()
        .await
        .is_ok_and(|response| response.status() == 200)
}

#[tokio::test]
async fn after_a_flood_of_idle_connections_past_the_fd_limit_new_clients_are_served() {
    let mut service =
        Service::start_command(binary_with_fd_limit(FD_LIMIT), &[("RATE_LIMIT_MAX", "0")]).await;
    let address = service.listening.address.to_string();

    // Each connection sends one keep-alive request and then stays idle; the
    // ones past the limit wait in the listen backlog.
    let mut flood = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        let mut stream = TcpStream::connect(&address).await.unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: flood\r\n\r\n")
            .await
            .unwrap();
        flood.push(stream);
    }
    let served_during = served_within(&service.client.address, Duration::from_secs(2)).await;
    // The flood did reach the limit: the process holds (nearly) all it may.
    let open = std::fs::read_dir(format!("/proc/{}/fd", service.child.id()))
        .unwrap()
        .count();
    eprintln!("descriptors open in the service during the flood: {open} of {FD_LIMIT}");
    assert!(open as u32 >= FD_LIMIT - 2, "only {open} descriptors open");
    eprintln!("a new client served while {FLOOD} idle connections are open: {served_during}");

    drop(flood);
    let stopped = Instant::now();
    let mut recovered = false;
    while !recovered && stopped.elapsed() < Duration::from_secs(20) {
        recovered = served_within(&service.client.address, Duration::from_secs(2)).await;
    }

    assert!(
        recovered,
        "no new client was served within 20 s of the flood stopping"
    );
    eprintln!(
        "served again {:?} after the flood stopped",
        stopped.elapsed()
    );
    assert!(
        service.child.try_wait().unwrap().is_none(),
        "the process exited"
    );
    service.terminate();
    assert!(service.wait(Duration::from_secs(35)).await.success());
}
