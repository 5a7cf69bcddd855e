//! A client of the change feed (C14): `GET /items` with
//! `Accept: text/event-stream`, read frame by frame as Server-Sent Events.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use reqwest::Response;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::Client;

/// How long a test waits for a frame it expects.
pub const FRAME_PATIENCE: Duration = Duration::from_secs(10);

/// One frame of the stream: the fields it set (`None` when absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: Option<String>,
    pub retry: Option<String>,
    /// Comment lines (without their `:`).
    pub comments: Vec<String>,
}

impl Frame {
    /// The `data:` as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(self.data.as_deref().expect("the frame has data"))
            .expect("the data is JSON")
    }

    /// `(event, data as JSON)`, what a change event says.
    pub fn change(&self) -> (String, Value) {
        (
            self.event.clone().expect("the frame names its event"),
            self.json(),
        )
    }

    /// Whether the frame is an event (it has data, so a browser fires it).
    pub fn is_event(&self) -> bool {
        self.data.is_some()
    }
}

/// How a stream stopped giving frames.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// The body ended as a body should (the last chunk was sent).
    Cleanly,
    /// The body was cut (the connection closed mid-body).
    Cut,
    /// Nothing came within the patience.
    Silent,
}

/// An open change stream.
pub struct EventStream {
    pub status: u16,
    pub headers: HeaderMap,
    body: BoxStream<'static, Result<actix_web::web::Bytes, reqwest::Error>>,
    buffer: String,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

impl EventStream {
    /// Opens the feed of `client`'s service, resuming after `last_event_id`.
    pub async fn open(client: &Client, last_event_id: Option<&str>) -> Self {
        let mut request = client
            .request(reqwest::Method::GET, "/items")
            .header("accept", "text/event-stream");
        if let Some(cursor) = last_event_id {
            request = request.header("last-event-id", cursor);
        }
        Self::from_response(request.send().await.expect("the service answers"))
    }

    /// Opens the feed and asserts it is one (200, `text/event-stream`);
    /// returns it with the cursor its opening frame names, and whether that
    /// opening was a `reset`.
    pub async fn subscribe(client: &Client, last_event_id: Option<&str>) -> (Self, String, bool) {
        let mut stream = Self::open(client, last_event_id).await;
        assert_eq!(stream.status, 200, "C14: the feed answers 200");
        assert_eq!(
            stream.header("content-type"),
            "text/event-stream",
            "C14: the feed is text/event-stream"
        );
        let opening = stream
            .frame()
            .await
            .expect("C14: the stream opens with a frame");
        assert!(
            opening.retry.is_some(),
            "C14: the opening sets retry: {opening:?}"
        );
        let start = opening.id.clone().expect("C14: the opening names a cursor");
        let reset = opening.event.as_deref() == Some("reset");
        (stream, start, reset)
    }

    /// Wraps a response (of any status).
    pub fn from_response(response: Response) -> Self {
        Self {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    pub fn header(&self, name: &str) -> String {
        self.headers
            .get_all(name)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The next frame within [`FRAME_PATIENCE`], or how the stream ended.
    pub async fn frame(&mut self) -> Result<Frame, Ended> {
        self.frame_within(FRAME_PATIENCE).await
    }

    /// The next frame within `patience`, or how the stream ended.
    pub async fn frame_within(&mut self, patience: Duration) -> Result<Frame, Ended> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                return Ok(parse(&block));
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => return Err(Ended::Silent),
                Ok(None) => return Err(Ended::Cleanly),
                Ok(Some(Err(_))) => return Err(Ended::Cut),
                Ok(Some(Ok(bytes))) => {
                    self.buffer
                        .push_str(std::str::from_utf8(&bytes).expect("UTF-8 frames"));
                }
            }
        }
    }

    /// The next event (comments skipped), which must come.
    pub async fn event(&mut self) -> Frame {
        loop {
            match self.frame().await {
                Ok(frame) if frame.is_event() => return frame,
                Ok(_) => continue,
                Err(ended) => panic!("C14: an event was due, the stream {ended:?}"),
            }
        }
    }

    /// The next `count` events.
    pub async fn events(&mut self, count: usize) -> Vec<Frame> {
        let mut frames = Vec::with_capacity(count);
        for _ in 0..count {
            frames.push(self.event().await);
        }
        frames
    }

    /// Asserts no event comes within `quiet` (comments may).
    pub async fn assert_no_event_within(&mut self, quiet: Duration, why: &str) {
        let deadline = tokio::time::Instant::now() + quiet;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.frame_within(left).await {
                Ok(frame) if frame.is_event() => panic!("C14: {why}, yet {frame:?} came"),
                Ok(_) => continue,
                Err(Ended::Silent) => return,
                Err(ended) => panic!("C14: {why}; the stream {ended:?}"),
            }
        }
    }
}

/// A frame's lines, as an `EventSource` reads them.
fn parse(block: &str) -> Frame {
    let mut frame = Frame::default();
    for line in block.lines().filter(|line| !line.is_empty()) {
        if let Some(comment) = line.strip_prefix(':') {
            frame.comments.push(comment.trim_start().to_owned());
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value).to_owned();
        match field {
            "event" => frame.event = Some(value),
            "id" => frame.id = Some(value),
            "data" => frame.data = Some(value),
            "retry" => frame.retry = Some(value),
            other => panic!("C14: an unknown field {other:?} in {block:?}"),
        }
    }
    frame
}
