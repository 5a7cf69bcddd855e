//! The whole item lifecycle against the real binary, and graceful shutdown (C1).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::*;

#[tokio::test]
async fn the_binary_serves_the_item_lifecycle_and_exits_0_on_sigterm_c1() {
    let mut service = Service::start(&[]).await;
    let client = &service.client;

    let created = client.create_item("e2e").await;
    assert_eq!(created, json!({ "id": 1, "name": "e2e" }));
    let read: Value = client.get("/items/1").await.json().await.unwrap();
    assert_eq!(read, created);
    let replaced = client
        .put_json("/items/1", &json!({ "name": "renamed" }))
        .await;
    assert_eq!(replaced.status(), 200);
    let listed: Value = client.get("/items").await.json().await.unwrap();
    assert_eq!(listed, json!([{ "id": 1, "name": "renamed" }]));
    assert_eq!(client.delete("/items/1").await.status(), 204);
    let gone = client.get("/items/1").await;
    assert_eq!(gone.status(), 404);
    assert_eq!(gone.text().await.unwrap(), "Item not found");

    service.terminate();
    let status = service.wait(Duration::from_secs(35)).await;

    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn a_request_in_flight_at_sigterm_is_finished_before_exit_0_c1() {
    let mut service = Service::start(&[]).await;
    let address = service.listening.address.to_string();
    let body = r#"{"name":"late"}"#;
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    // Send the head and half the body, then stop the service mid-request.
    let head = format!(
        "POST /items HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body.as_bytes()[..5]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    service.terminate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stream.write_all(&body.as_bytes()[5..]).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();

    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    assert_eq!(service.wait(Duration::from_secs(35)).await.code(), Some(0));
}

#[tokio::test]
async fn sigint_is_graceful_too_and_exits_0_c1() {
    let mut service = Service::start(&[]).await;
    let pid = service.child.id().to_string();

    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();

    assert_eq!(service.wait(Duration::from_secs(35)).await.code(), Some(0));
}
