//! Where lines about one request are logged (C1): the edge's one line per
//! request goes there, and so does the line of a handler whose response
//! was cut after its status was sent (the streamed listing), so that
//! `RUST_LOG` keeps or silences them together.

/// The target of the request lines, as `RUST_LOG` names it
/// (`items_service::request=warn` silences them).
pub const REQUEST_TARGET: &str = "items_service::request";
