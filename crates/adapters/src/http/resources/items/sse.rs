//! The change feed as Server-Sent Events (C14): which requests ask for it,
//! and the bytes of each frame.
//!
//! Invariants:
//! - a change is one event: `event:` its kind, `id:` its cursor, `data:`
//!   the item as `GET /items/{id}` writes it (`{"id":7}` when deleted), on
//!   one line: JSON escapes every line break, so no `data:` line is split;
//! - the stream opens with `retry:` and an `id:` naming where it begins,
//!   with no `data:`, so a browser's `EventSource` keeps that cursor (and
//!   resumes from it) without firing an event; after an unknown cursor the
//!   opening is the `reset` event, carrying the same `id:`;
//! - a heartbeat is a comment line, which every client ignores.

use std::time::Duration;

use actix_web::http::header::{self, HeaderMap};
use actix_web::web::Bytes;
use items_domain::{Change, Cursor, ItemChange};

use super::listing_json::write_item;
use crate::http::support::header_list;

/// The media type of the change feed.
pub(crate) const EVENT_STREAM: &str = "text/event-stream";

/// A heartbeat: a comment line and the blank line ending it.
pub(crate) static HEARTBEAT: Bytes = Bytes::from_static(b":\n\n");

/// Whether `Accept` asks for the change feed: it names `text/event-stream`
/// with a q-value above 0, and names no `application/json` it prefers.
/// Wildcards decide nothing: `*/*` keeps the JSON listing, the spec's
/// answer, and a browser's `EventSource` names the type itself.
pub(crate) fn wanted(headers: &HeaderMap) -> bool {
    let mut stream: Option<f32> = None;
    let mut json: Option<f32> = None;
    for (media, q) in header_list::weighted(headers, &header::ACCEPT) {
        if media.eq_ignore_ascii_case(EVENT_STREAM) {
            stream = Some(stream.map_or(q, |known| known.max(q)));
        } else if media.eq_ignore_ascii_case("application/json") {
            json = Some(json.map_or(q, |known| known.max(q)));
        }
    }
    match (stream, json) {
        (Some(stream), json) => stream > 0.0 && json.is_none_or(|json| json <= stream),
        (None, _) => false,
    }
}

/// The whole answer of an instance that opens no stream: the reconnection
/// delay alone, no `id:`, so the client keeps the cursor it has.
pub(crate) fn retry_only(retry: Duration) -> Bytes {
    Bytes::from(format!("retry: {}\n\n", retry.as_millis()))
}

/// The first frame: the reconnection delay, and where the stream begins
/// (as the `reset` event when the cursor asked for was unknown).
pub(crate) fn opening(start: &Cursor, reset: bool, retry: Duration) -> Bytes {
    let mut frame = format!("retry: {}\n", retry.as_millis());
    if reset {
        frame.push_str("event: reset\n");
    }
    frame.push_str("id: ");
    frame.push_str(start.as_str());
    frame.push('\n');
    if reset {
        frame.push_str("data: {}\n");
    }
    frame.push('\n');
    Bytes::from(frame)
}

/// The event of one change, whole.
#[cfg(test)]
fn event(change: &Change) -> Result<Bytes, serde_json::Error> {
    let mut frame = Vec::with_capacity(96);
    write_event(&mut frame, change)?;
    Ok(Bytes::from(frame))
}

/// Appends the event of one change to `frame`.
pub(crate) fn write_event(frame: &mut Vec<u8>, change: &Change) -> Result<(), serde_json::Error> {
    frame.extend_from_slice(b"event: ");
    frame.extend_from_slice(change.change.kind().as_bytes());
    frame.extend_from_slice(b"\nid: ");
    frame.extend_from_slice(change.cursor.as_str().as_bytes());
    frame.extend_from_slice(b"\ndata: ");
    match &change.change {
        ItemChange::Created(item) | ItemChange::Replaced(item) => write_item(frame, item)?,
        ItemChange::Deleted(id) => {
            frame.extend_from_slice(b"{\"id\":");
            frame.extend_from_slice(id.get().to_string().as_bytes());
            frame.push(b'}');
        }
    }
    frame.extend_from_slice(b"\n\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use actix_web::http::header::HeaderValue;
    use items_domain::{Id, Item, Name};

    use super::*;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn the_feed_is_chosen_by_naming_its_type_c14() {
        for chosen in [
            "text/event-stream",
            "Text/Event-Stream",
            "text/event-stream, application/json",
            "application/json;q=0.5, text/event-stream",
            "*/*, text/event-stream",
        ] {
            assert!(wanted(&accept(chosen)), "{chosen}");
        }
        for listing in [
            "application/json",
            "*/*",
            "text/*",
            "text/event-stream;q=0",
            "text/event-stream;q=0.5, application/json",
        ] {
            assert!(!wanted(&accept(listing)), "{listing}");
        }
        assert!(!wanted(&HeaderMap::new()));
    }

    fn change(change: ItemChange) -> Change {
        Change {
            cursor: Cursor::parse(b"m1.7").unwrap(),
            change,
            at: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn an_event_is_its_kind_cursor_and_item_on_one_data_line_c14() {
        let item = Item {
            id: Id::new(7),
            name: Name::parse("a\nb\r\"c\"").unwrap(),
        };
        assert_eq!(
            event(&change(ItemChange::Created(item.clone()))).unwrap(),
            "event: created\nid: m1.7\ndata: {\"id\":7,\"name\":\"a\\nb\\r\\\"c\\\"\"}\n\n"
        );
        assert_eq!(
            event(&change(ItemChange::Replaced(item))).unwrap()[..16],
            *b"event: replaced\n"
        );
        assert_eq!(
            event(&change(ItemChange::Deleted(Id::new(7)))).unwrap(),
            "event: deleted\nid: m1.7\ndata: {\"id\":7}\n\n"
        );
    }

    #[test]
    fn the_opening_names_where_the_stream_begins_c14() {
        let start = Cursor::parse(b"m1.3").unwrap();
        let retry = Duration::from_millis(1000);
        assert_eq!(opening(&start, false, retry), "retry: 1000\nid: m1.3\n\n");
        assert_eq!(retry_only(retry), "retry: 1000\n\n");
        assert_eq!(
            opening(&start, true, retry),
            "retry: 1000\nevent: reset\nid: m1.3\ndata: {}\n\n"
        );
    }
}
