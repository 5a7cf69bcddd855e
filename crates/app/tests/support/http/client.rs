//! Typed requests to a running service, and the checks of its answers.

use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;

/// How long an idle pooled connection is kept: well under the service's
/// 5 s keep-alive. A connection kept longer could be put to use just as
/// the service closes it, and a write sent on it fails with an incomplete
/// message (under load the window is wide enough to hit); writes are never
/// sent twice, so the client must not offer the service's side of that race.
const POOL_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A client of the service at `http://127.0.0.1:<port>`: a [`TestApp`](super::TestApp)'s,
/// or a process an end-to-end test started. Each request helper panics when
/// no answer comes, which fails the test.
#[derive(Debug, Clone)]
pub struct Client {
    /// `http://127.0.0.1:<port>`, without a trailing slash.
    pub address: String,
    pub port: u16,
    /// The underlying client, for requests the helpers do not cover.
    pub http: reqwest::Client,
}

impl Client {
    /// A client of the service listening on this loopback port.
    pub fn at(port: u16) -> Self {
        Self {
            address: format!("http://127.0.0.1:{port}"),
            port,
            http: reqwest::Client::builder()
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .build()
                .expect("a client with default TLS settings builds"),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http.request(method, self.url(path))
    }

    pub async fn get(&self, path: &str) -> Response {
        self.send(self.request(Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> Response {
        self.send(self.request(Method::DELETE, path)).await
    }

    /// The rows a `GET` of a collection (`/items`, `/products`) lists.
    pub async fn list(&self, path: &str) -> Vec<Value> {
        self.get(path)
            .await
            .json()
            .await
            .expect("a listing is a JSON array")
    }

    /// POST with a JSON body and `Content-Type: application/json`.
    pub async fn post_json(&self, path: &str, body: &Value) -> Response {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    /// PUT with a JSON body and `Content-Type: application/json`.
    pub async fn put_json(&self, path: &str, body: &Value) -> Response {
        self.send(self.request(Method::PUT, path).json(body)).await
    }

    /// POST with a JSON body under `Idempotency-Key: key` (C7).
    pub async fn post_keyed(&self, path: &str, key: &str, body: &Value) -> Response {
        let request = self
            .request(Method::POST, path)
            .header("idempotency-key", key)
            .json(body);
        self.send(request).await
    }

    /// POST of raw bytes with the given content type.
    pub async fn post_raw(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> Response {
        let request = self
            .request(Method::POST, path)
            .header("content-type", content_type)
            .body(body);
        self.send(request).await
    }

    /// POST of a `multipart/form-data` body (the upload routes, C5).
    pub async fn post_form(&self, path: &str, form: reqwest::multipart::Form) -> Response {
        self.send(self.request(Method::POST, path).multipart(form))
            .await
    }

    /// Creates an item, asserts 201, and returns its JSON.
    pub async fn create_item(&self, name: &str) -> Value {
        let response = self
            .post_json("/items", &serde_json::json!({ "name": name }))
            .await;
        assert_eq!(response.status(), 201, "creating {name:?}");
        response.json().await.expect("created item is JSON")
    }

    /// A raw connection that has sent the head of a `POST /profile`
    /// announcing an avatar of 1 MB, then its first `sent` bytes: an upload
    /// under way, for a test to cut (C5).
    pub async fn start_a_raw_avatar_upload(&self, sent: usize) -> tokio::net::TcpStream {
        use tokio::io::AsyncWriteExt as _;

        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("the service accepts a connection");
        let part_head =
            "--XYZ\r\nContent-Disposition: form-data; name=\"avatar\"; filename=\"a.png\"\r\n\r\n";
        let head = format!(
            "POST /profile HTTP/1.1\r\nHost: test\r\nContent-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: {}\r\n\r\n{part_head}",
            part_head.len() + 1_000_000
        );
        stream
            .write_all(head.as_bytes())
            .await
            .expect("the head is sent");
        stream
            .write_all(&vec![9u8; sent])
            .await
            .expect("the first bytes are sent");
        stream
    }

    /// Sends `request`; a GET or HEAD is sent once more when its first send
    /// fails, as any client does: a kept-alive connection the service
    /// closed while idle (after a failover's or a restart's wait) fails the
    /// next request put on it with an incomplete message. Writes are never
    /// sent twice.
    async fn send(&self, request: RequestBuilder) -> Response {
        let request = request.build().expect("a well-formed request");
        let safe = matches!(*request.method(), Method::GET | Method::HEAD);
        let again = request.try_clone().filter(|_| safe);
        match (self.http.execute(request).await, again) {
            (Ok(response), _) => response,
            (Err(error), Some(again)) if error.is_request() => {
                self.http.execute(again).await.expect("the service answers")
            }
            (Err(error), _) => panic!("the service answers: {error:?}"),
        }
    }
}

/// Asserts a problem document (C6) with this status (`type`, `status`, a
/// title and a detail, as `application/problem+json`) and returns it.
///
/// # Panics
/// When the response is not such a document.
pub async fn assert_problem(response: Response, status: u16) -> Value {
    assert_problem_of_type(response, status, "about:blank").await
}

/// [`assert_problem`] for a problem of type `kind` (C12's 504 is
/// `outcome-unknown`; every other problem is `about:blank`).
///
/// # Panics
/// When the response is not such a document.
pub async fn assert_problem_of_type(response: Response, status: u16, kind: &str) -> Value {
    assert_eq!(response.status(), status);
    assert_eq!(
        header(&response, "content-type"),
        "application/problem+json"
    );
    let body: Value = response.json().await.expect("problem is JSON");
    assert_eq!(body["type"], kind);
    assert_eq!(body["status"], status);
    assert!(
        body["title"]
            .as_str()
            .is_some_and(|title| !title.is_empty())
    );
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| !detail.is_empty())
    );
    body
}

/// The value of a response header, or "" when absent. A header sent more
/// than once reads as its values joined by ", " (what HTTP says it means),
/// so a test expecting one value also fails on a duplicate line.
pub fn header(response: &Response, name: &str) -> String {
    response
        .headers()
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect::<Vec<_>>()
        .join(", ")
}
