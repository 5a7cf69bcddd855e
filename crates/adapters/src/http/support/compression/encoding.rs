//! The decision: which coding a body is sent in, by the request's
//! `Accept-Encoding` and the body's length, under which tag, and what its
//! response names (`Vary`, `Content-Encoding`).
//!
//! Invariants:
//! - a response body of at least [`MIN_BYTES`] is sent compressed with
//!   `zstd`, `br` or `gzip` when the request's `Accept-Encoding` allows
//!   it; the coding is the acceptable one with the highest q-value, the
//!   server's preference (zstd, br, gzip) breaking ties; `identity` wins
//!   over a coding only with a higher q-value; a coding with `q=0`, or not
//!   named when `*` is absent or `*;q=0`, is never used; no
//!   `Accept-Encoding` at all means identity;
//! - a smaller body is never compressed and names no `Vary: Accept-Encoding`
//!   (it is the same whatever was accepted); a body of at least
//!   [`MIN_BYTES`] names it, compressed or not, and so does its `304`;
//! - a body its handler already encoded is left as it is;
//! - a compressed representation's strong `ETag` is the identity one with
//!   the coding's name appended inside the quotes (`"…-zstd"`), so tags of
//!   different codings differ and each still names its identity tag; an
//!   `If-None-Match` with either matches ([`same_representation`]);
//! - a stream is compressed as it streams, each chunk flushed at once
//!   ([`StreamEncoder`]), so memory stays flat whatever the body's length.

use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::ServiceResponse;
use actix_web::http::header::{self, HeaderMap, HeaderValue};
use actix_web::web::Bytes;

use super::encoder::{Coding, StreamEncoder};
use crate::http::support::header_list;

/// Bodies shorter than this are sent as they are (C7).
pub(crate) const MIN_BYTES: usize = 1024;

/// `Vary: Accept-Encoding`, on every response whose body may be compressed.
static VARY: HeaderValue = HeaderValue::from_static("Accept-Encoding");

/// The strong tag of `coding`'s representation of the one whose identity
/// tag is `identity` (`"abc"` → `"abc-zstd"`).
fn tag_in(coding: Coding, identity: &str) -> String {
    let inner = identity.strip_suffix('"').unwrap_or(identity);
    format!("{inner}-{}\"", coding.name())
}

/// Whether `listed` (a tag from `If-None-Match`, `W/` already stripped)
/// names the representation whose identity tag is `identity`, in any
/// coding (C7: either tag answers 304).
pub(crate) fn same_representation(listed: &[u8], identity: &[u8]) -> bool {
    if listed == identity {
        return true;
    }
    let Some(inner) = identity.strip_suffix(b"\"") else {
        return false;
    };
    Coding::PREFERRED.iter().any(|coding| {
        listed.len() == inner.len() + coding.name().len() + 2
            && listed.starts_with(inner)
            && listed[inner.len()] == b'-'
            && listed[inner.len() + 1..listed.len() - 1] == *coding.name().as_bytes()
            && listed.ends_with(b"\"")
    })
}

/// The coding to send a body of at least [`MIN_BYTES`] in, by the
/// request's `Accept-Encoding`; `None` for identity.
fn chosen(headers: &HeaderMap) -> Option<Coding> {
    let mut star: Option<f32> = None;
    let mut identity: Option<f32> = None;
    let mut named: [Option<f32>; 3] = [None; 3];
    let mut any = false;
    for (name, q) in header_list::weighted(headers, &header::ACCEPT_ENCODING) {
        any = true;
        if name == "*" {
            star = Some(q);
        } else if name.eq_ignore_ascii_case("identity") {
            identity = Some(q);
        } else if let Some(index) = Coding::PREFERRED
            .iter()
            .position(|coding| name.eq_ignore_ascii_case(coding.name()))
        {
            named[index] = Some(q);
        }
    }
    if !any {
        return None;
    }
    let q_of = |index: usize| named[index].or(star).unwrap_or(0.0);
    let (best, best_q) = (0..Coding::PREFERRED.len())
        .map(|index| (index, q_of(index)))
        .fold((0, 0.0_f32), |best, candidate| {
            if candidate.1 > best.1 {
                candidate
            } else {
                best
            }
        });
    if best_q <= 0.0 {
        return None;
    }
    // Identity wins only when named with a higher q than the best coding:
    // on a tie, or unnamed, the coding saves bytes.
    let identity_q = identity.unwrap_or(0.0);
    (best_q >= identity_q).then_some(Coding::PREFERRED[best])
}

/// The content coding of one response body (C7), as this module decides
/// it; its users apply it to their headers, tag and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Encoding {
    /// The body is large enough to be compressed, so it varies by
    /// `Accept-Encoding`, compressed or not.
    varies: bool,
    /// The coding it is sent in; `None`: as it is.
    coding: Option<Coding>,
}

impl Encoding {
    /// A body sent as it is whatever the request accepts.
    const UNCHANGED: Self = Self {
        varies: false,
        coding: None,
    };

    /// The encoding of a body of `length` bytes for a request with the
    /// headers `request`.
    pub(crate) fn for_length(request: &HeaderMap, length: usize) -> Self {
        if length < MIN_BYTES {
            Self::UNCHANGED
        } else {
            Self::for_large_body(request)
        }
    }

    /// The encoding of a body known to be at least [`MIN_BYTES`] long
    /// before it is written (a long listing).
    pub(crate) fn for_large_body(request: &HeaderMap) -> Self {
        Self {
            varies: true,
            coding: chosen(request),
        }
    }

    /// The encoding of a response's body of `length` bytes, for a request
    /// with the headers `request`: as [`Encoding::for_length`] says, unless
    /// its handler already encoded it (its headers `response` name a
    /// `Content-Encoding`).
    pub(crate) fn for_response(request: &HeaderMap, response: &HeaderMap, length: usize) -> Self {
        if length < MIN_BYTES || response.contains_key(header::CONTENT_ENCODING) {
            Self::UNCHANGED
        } else {
            Self::for_large_body(request)
        }
    }

    /// The strong tag of the representation in this encoding, whose
    /// identity tag is `identity`: that tag itself when the body goes as it
    /// is, the coding's own otherwise (see the module's documentation).
    pub(crate) fn tag(self, identity: String) -> String {
        match self.coding {
            Some(coding) => tag_in(coding, &identity),
            None => identity,
        }
    }

    /// Names `Vary: Accept-Encoding` in `headers` when the body may be
    /// compressed: on its `200`, compressed or not, and on its `304`.
    pub(crate) fn name_vary(self, headers: &mut HeaderMap) {
        if self.varies {
            headers.append(header::VARY, VARY.clone());
        }
    }

    /// Names the coding in `Content-Encoding`, for a body that is sent in
    /// one; a `304` has no body and names none.
    pub(crate) fn name_coding(self, headers: &mut HeaderMap) {
        if let Some(coding) = self.coding {
            headers.insert(header::CONTENT_ENCODING, coding.header_value());
        }
    }

    /// `bytes` in this encoding, its `Content-Encoding` named in `headers`;
    /// as they are when there is no coding, or when compressing fails
    /// (then the client gets the identity body, which it accepts unless it
    /// said `identity;q=0`).
    pub(crate) fn encode(self, bytes: Bytes, headers: &mut HeaderMap) -> Bytes {
        let Some(coding) = self.coding else {
            return bytes;
        };
        match coding.encode(&bytes) {
            Ok(compressed) => {
                self.name_coding(headers);
                compressed
            }
            Err(error) => {
                tracing::warn!(%error, coding = coding.name(), "a body could not be compressed; sent as it is");
                bytes
            }
        }
    }

    /// An encoder for a body written chunk by chunk in this encoding.
    pub(crate) fn stream_encoder(self) -> std::io::Result<StreamEncoder> {
        match self.coding {
            Some(coding) => StreamEncoder::new(coding),
            None => Ok(StreamEncoder::identity()),
        }
    }
}

/// A response to any other request than `GET` or `HEAD` (a `POST` that
/// answers many uploaded files, say) compressed as a tagged body is (C7);
/// a body that is not in memory already is left as it is.
pub(crate) fn compress(response: ServiceResponse<BoxBody>) -> ServiceResponse<BoxBody> {
    let large =
        matches!(response.response().body().size(), BodySize::Sized(n) if n >= MIN_BYTES as u64);
    if !large {
        return response;
    }
    let (request, response) = response.into_parts();
    let (mut response, body) = response.into_parts();
    match body.try_into_bytes() {
        Ok(bytes) => {
            let encoding =
                Encoding::for_response(request.headers(), response.headers(), bytes.len());
            encoding.name_vary(response.headers_mut());
            let body = encoding.encode(bytes, response.headers_mut());
            ServiceResponse::new(request, response.set_body(BoxBody::new(body)))
        }
        Err(body) => ServiceResponse::new(request, response.set_body(body)),
    }
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::HeaderName;

    use super::*;

    fn accepting(values: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(
                HeaderName::from_static("accept-encoding"),
                HeaderValue::from_static(value),
            );
        }
        headers
    }

    #[test]
    fn the_coding_follows_q_values_then_the_servers_preference_c7() {
        let chosen_for = |values: &[&'static str]| chosen(&accepting(values));
        assert_eq!(chosen_for(&[]), None, "no header: identity");
        assert_eq!(chosen_for(&["gzip, deflate, br, zstd"]), Some(Coding::Zstd));
        assert_eq!(chosen_for(&["gzip, br"]), Some(Coding::Brotli));
        assert_eq!(chosen_for(&["gzip"]), Some(Coding::Gzip));
        assert_eq!(chosen_for(&["gzip;q=1.0, zstd;q=0.5"]), Some(Coding::Gzip));
        assert_eq!(chosen_for(&["zstd;q=0, gzip"]), Some(Coding::Gzip));
        assert_eq!(
            chosen_for(&["gzip;q=0.5", "br;q=0.8"]),
            Some(Coding::Brotli)
        );
        assert_eq!(chosen_for(&["*"]), Some(Coding::Zstd));
        assert_eq!(chosen_for(&["*;q=0.5, zstd;q=0"]), Some(Coding::Brotli));
        assert_eq!(chosen_for(&["*;q=0"]), None);
        assert_eq!(chosen_for(&["identity"]), None);
        assert_eq!(chosen_for(&["deflate"]), None, "a coding the service lacks");
        assert_eq!(
            chosen_for(&["gzip;q=0.5, identity;q=1"]),
            None,
            "identity with a higher q wins"
        );
        assert_eq!(
            chosen_for(&["gzip, identity;q=0"]),
            Some(Coding::Gzip),
            "identity excluded"
        );
        assert_eq!(chosen_for(&["GZIP;Q=0.9"]), Some(Coding::Gzip));
    }

    #[test]
    fn each_coding_tags_its_representation_apart_and_if_none_match_takes_either_c7() {
        let identity = "\"0123456789abcdef\"";
        assert_eq!(tag_in(Coding::Gzip, identity), "\"0123456789abcdef-gzip\"");
        assert_ne!(
            tag_in(Coding::Zstd, identity),
            tag_in(Coding::Brotli, identity)
        );
        for coding in Coding::PREFERRED {
            assert!(same_representation(
                tag_in(coding, identity).as_bytes(),
                identity.as_bytes()
            ));
        }
        assert!(same_representation(
            identity.as_bytes(),
            identity.as_bytes()
        ));
        assert!(!same_representation(
            b"\"0123456789abcdef-deflate\"",
            identity.as_bytes()
        ));
        assert!(!same_representation(
            b"\"0123456789abcdee\"",
            identity.as_bytes()
        ));
    }

    #[test]
    fn only_a_body_of_at_least_min_bytes_varies_and_is_compressed_c7() {
        let request = accepting(&["gzip"]);
        let small = Encoding::for_length(&request, MIN_BYTES - 1);
        let large = Encoding::for_length(&request, MIN_BYTES);
        assert_eq!(small, Encoding::UNCHANGED);
        assert_eq!(small.tag("\"abc\"".to_owned()), "\"abc\"");
        assert_eq!(large.tag("\"abc\"".to_owned()), "\"abc-gzip\"");
        let mut headers = HeaderMap::new();
        small.name_vary(&mut headers);
        assert!(
            headers.is_empty(),
            "a small body is the same for every client"
        );
        large.name_vary(&mut headers);
        assert_eq!(headers.get(header::VARY).unwrap(), "Accept-Encoding");
        assert_eq!(
            Encoding::for_length(&accepting(&["identity"]), MIN_BYTES),
            Encoding {
                varies: true,
                coding: None
            },
            "varies, though sent as it is"
        );
        let mut encoded = HeaderMap::new();
        encoded.insert(header::CONTENT_ENCODING, HeaderValue::from_static("br"));
        assert_eq!(
            Encoding::for_response(&request, &encoded, MIN_BYTES),
            Encoding::UNCHANGED,
            "a body its handler encoded is left alone"
        );
    }

    #[test]
    fn a_body_sent_as_it_is_streams_through_unchanged_c7() {
        let mut encoder = Encoding::UNCHANGED.stream_encoder().unwrap();
        assert_eq!(encoder.push(b"[1,").unwrap(), b"[1,");
        assert_eq!(encoder.push(b"2]").unwrap(), b"2]");
        assert!(encoder.finish().unwrap().is_empty());
    }
}
