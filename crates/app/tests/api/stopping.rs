//! Stopping an embedded server through its handle (C1): the port stops
//! listening as soon as actix-server lets the listener go, even while a
//! request is still in flight. The second handle the shutdown keeps on the
//! socket (`http/server/front_door.rs`) must not hold the port open with nobody
//! accepting: a client would then connect and wait for nothing.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::support::TestServices;
use items_adapters::http::{HttpServer, HttpSettings};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test]
async fn a_graceful_handle_stop_closes_the_port_while_a_request_is_still_in_flight_c1() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let test_services = TestServices::in_memory();
    let server = HttpServer::bind(
        listener,
        HttpSettings::default(),
        test_services.services,
        std::future::pending(),
    )
    .unwrap();
    let handle = server.handle();
    let running = tokio::spawn(server.run());

    // A request in flight: its body announced, one byte of it sent.
    let mut in_flight = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    in_flight
        .write_all(
            b"POST /items HTTP/1.1\r\nHost: stopping\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{",
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let stopping = tokio::spawn(handle.stop(true));
    let asked = Instant::now();
    let refused = loop {
        match TcpStream::connect(("127.0.0.1", port)).await {
            Err(_) => break true,
            Ok(_) if asked.elapsed() > Duration::from_secs(2) => break false,
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    assert!(
        refused,
        "the port still accepted connections 2 s into the stop, with nobody to serve them"
    );
    assert!(
        !stopping.is_finished(),
        "the request in flight held the stop"
    );

    drop(in_flight);
    stopping.await.unwrap();
    running.await.unwrap().unwrap();
}
