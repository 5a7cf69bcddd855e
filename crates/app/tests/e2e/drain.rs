//! The drain says goodbye (C1): once SIGTERM arrived, every response
//! carries `Connection: close`, so a keep-alive client
//! reconnects instead of sending its next request on a connection the
//! server is about to close. Before, responses during the drain kept their
//! connections, and keep-alive clients lost 3–7 requests when the listener
//! closed.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::*;

/// One `GET /` on `stream`: `Some(the response said Connection: close)`, or
/// `None` when the request was lost (the connection failed before a whole
/// response came back).
async fn ask(stream: &mut TcpStream) -> Option<bool> {
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: drain\r\n\r\n")
        .await
        .ok()?;
    let mut received = Vec::new();
    let mut buffer = [0u8; 1024];
    let answer = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let text = String::from_utf8_lossy(&received).to_ascii_lowercase();
            // `GET /` answers `Hello World!` (C4): the body ends the response.
            if text.ends_with("hello world!") {
                return Some(text.contains("\r\nconnection: close\r\n"));
            }
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return None,
                Ok(read) => received.extend_from_slice(&buffer[..read]),
            }
        }
    })
    .await;
    answer.ok().flatten()
}

#[tokio::test]
async fn keep_alive_clients_are_told_to_close_during_the_drain_and_lose_no_request_c1() {
    let mut service = Service::start(&[
        ("ADMIN_PORT", "0"),
        ("SHUTDOWN_DRAIN_MS", "1500"),
        ("RATE_LIMIT_MAX", "0"),
    ])
    .await;
    let address = service.listening.address;
    let mut stream = TcpStream::connect(address).await.unwrap();
    assert_eq!(ask(&mut stream).await, Some(false), "kept alive before");

    service.terminate();
    // The stop has begun once readiness says so (C11).
    let signalled = Instant::now();
    while service.admin().get("/readyz").await.status() != 503 {
        assert!(signalled.elapsed() < Duration::from_secs(2), "never 503");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A keep-alive client through the drain, until the listener closes.
    let (mut kept_alive, mut told_to_close, mut lost) = (0, 0, 0);
    let mut connection = Some(stream);
    while signalled.elapsed() < Duration::from_secs(10) {
        let mut stream = match connection.take() {
            Some(stream) => stream,
            None => match TcpStream::connect(address).await {
                Ok(stream) => stream,
                // The listener is closed: the drain is over.
                Err(_) => break,
            },
        };
        match ask(&mut stream).await {
            Some(true) => told_to_close += 1,
            Some(false) => {
                kept_alive += 1;
                connection = Some(stream);
            }
            None => lost += 1,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "after the stop began: {told_to_close} told to close, {kept_alive} kept alive, {lost} lost"
    );

    assert_eq!(kept_alive, 0, "responses after the stop began kept alive");
    assert_eq!(lost, 0, "requests lost");
    assert!(
        told_to_close >= 10,
        "only {told_to_close} answered during the drain"
    );
    assert!(service.wait(Duration::from_secs(35)).await.success());
}

#[tokio::test]
async fn as_an_unprivileged_user_the_stop_is_clean_and_names_what_a_refused_filter_needs_c1() {
    use std::os::unix::fs::PermissionsExt as _;

    let uploads = tempfile::tempdir().unwrap();
    std::fs::set_permissions(uploads.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut service = Service::start_command(
        binary_unprivileged(),
        &[("UPLOADS_DIR", uploads.path().to_str().unwrap())],
    )
    .await;
    let mut stream = TcpStream::connect(service.listening.address).await.unwrap();
    assert_eq!(
        ask(&mut stream).await,
        Some(false),
        "served before the stop"
    );

    service.terminate();

    assert!(service.wait(Duration::from_secs(35)).await.success());
    let log = service.log_once_it_contains("stopped").await;
    // Where the kernel refuses the listener's SYN filter to an unprivileged
    // process (Linux 6.18 asks for CAP_NET_ADMIN), the log says so and names
    // the capability; where it does not, the filter closed the door.
    if log.contains("could not close the listener") {
        assert!(log.contains("CAP_NET_ADMIN"), "{log}");
    }
}

#[tokio::test]
async fn sigterm_ends_every_change_stream_at_once_so_clients_reconnect_elsewhere_c1_c14() {
    let mut service = Service::start(&[
        ("ADMIN_PORT", "0"),
        ("SHUTDOWN_DRAIN_MS", "3000"),
        ("RATE_LIMIT_MAX", "0"),
    ])
    .await;
    let (mut stream, _, _) = crate::support::EventStream::subscribe(&service.client, None).await;

    service.terminate();
    let signalled = Instant::now();
    let end = loop {
        match stream.frame().await {
            Ok(frame) if !frame.is_event() => continue,
            Ok(frame) => panic!("C14: nothing was written, yet {frame:?}"),
            Err(end) => break end,
        }
    };
    assert_eq!(
        end,
        crate::support::Ended::Cleanly,
        "C14: the drain ends the stream cleanly"
    );
    assert!(
        signalled.elapsed() < Duration::from_secs(2),
        "C14: streams end when the drain begins, not when it is over: {:?}",
        signalled.elapsed()
    );
    let mut refused = crate::support::EventStream::open(&service.client, None).await;
    assert_eq!(
        refused.status, 200,
        "C14: a stopping instance answers a new stream 200 (an EventSource gives up on a 503)"
    );
    let only = refused.frame().await.expect("the retry frame");
    assert!(only.retry.is_some() && only.id.is_none(), "{only:?}");
    assert_eq!(
        refused.frame().await.expect_err("then the answer ends"),
        crate::support::Ended::Cleanly,
        "C14: a stopping instance opens no stream"
    );
    assert!(service.wait(Duration::from_secs(15)).await.success());
}
