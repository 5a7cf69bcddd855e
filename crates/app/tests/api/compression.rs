//! Content coding (C7): bodies of at least 1 KiB go compressed with zstd,
//! br or gzip by `Accept-Encoding` (q-values honoured, identity respected),
//! with `Vary: Accept-Encoding` and a strong `ETag` of their own that
//! `If-None-Match` takes as it takes the identity one; smaller bodies are
//! never compressed; `HEAD` carries what `GET` would; the full listing is
//! compressed as it streams.

use std::io::Read;

use reqwest::Method;
use reqwest::Response;

use crate::support::*;

/// A server holding `count` items named `item-NNNNNNNNNNN`.
async fn with_items(count: usize) -> TestApp {
    let app = TestApp::in_memory().await;
    for index in 0..count {
        app.create_item(&format!("item-{index:011}")).await;
    }
    app
}

async fn get(app: &TestApp, path: &str, accept: Option<&str>) -> Response {
    let mut request = app.request(Method::GET, path);
    if let Some(accept) = accept {
        request = request.header("accept-encoding", accept);
    }
    request.send().await.unwrap()
}

/// `body` decoded from `coding`.
fn decoded(coding: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match coding {
        "zstd" => {
            zstd::stream::read::Decoder::new(body)
                .unwrap()
                .read_to_end(&mut out)
                .unwrap();
        }
        "br" => {
            brotli::Decompressor::new(body, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        "gzip" => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .unwrap();
        }
        other => panic!("no such coding: {other}"),
    }
    out
}

fn varies_by_encoding(response: &Response) -> bool {
    header(response, "vary")
        .to_ascii_lowercase()
        .contains("accept-encoding")
}

#[tokio::test]
async fn a_small_body_is_never_compressed_and_names_no_vary_on_encoding_c7() {
    let app = with_items(1).await;

    let response = get(&app, "/items/1", Some("gzip, br, zstd")).await;

    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-encoding"), "");
    assert!(!varies_by_encoding(&response), "{:?}", response.headers());
}

#[tokio::test]
async fn a_page_of_a_kib_or_more_goes_in_the_coding_the_client_prefers_c7() {
    let app = with_items(100).await;
    let identity = get(&app, "/items?limit=100", None).await;
    assert_eq!(header(&identity, "content-encoding"), "");
    assert!(
        varies_by_encoding(&identity),
        "a large body varies, compressed or not"
    );
    let identity_tag = header(&identity, "etag");
    let plain = identity.bytes().await.unwrap();
    assert!(plain.len() >= 1024);

    for (accept, coding) in [
        ("gzip, deflate, br, zstd", "zstd"),
        ("gzip, br", "br"),
        ("gzip", "gzip"),
        ("gzip;q=1, zstd;q=0.5", "gzip"),
        ("*", "zstd"),
        ("zstd;q=0, *;q=0.3", "br"),
    ] {
        let response = get(&app, "/items?limit=100", Some(accept)).await;
        assert_eq!(response.status(), 200, "{accept}");
        assert_eq!(header(&response, "content-encoding"), coding, "{accept}");
        assert!(varies_by_encoding(&response), "{accept}");
        let tag = header(&response, "etag");
        assert_eq!(
            tag,
            format!("{}-{coding}\"", identity_tag.trim_end_matches('"')),
            "a strong tag of its own"
        );
        let body = response.bytes().await.unwrap();
        assert!(
            body.len() * 5 < plain.len(),
            "{accept}: {} bytes",
            body.len()
        );
        assert_eq!(decoded(coding, &body), plain, "{accept}");
    }
    for accept in ["identity", "gzip;q=0.5, identity", "deflate", "*;q=0"] {
        let response = get(&app, "/items?limit=100", Some(accept)).await;
        assert_eq!(header(&response, "content-encoding"), "", "{accept}");
        assert_eq!(header(&response, "etag"), identity_tag, "{accept}");
    }
}

#[tokio::test]
async fn if_none_match_with_either_tag_answers_304_with_the_tag_it_would_send_c7() {
    let app = with_items(100).await;
    let identity_tag = header(&get(&app, "/items?limit=100", None).await, "etag");
    let gzip_tag = header(&get(&app, "/items?limit=100", Some("gzip")).await, "etag");

    for sent in [&identity_tag, &gzip_tag] {
        let response = app
            .request(Method::GET, "/items?limit=100")
            .header("accept-encoding", "gzip")
            .header("if-none-match", sent.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 304, "If-None-Match: {sent}");
        assert_eq!(header(&response, "etag"), gzip_tag);
        assert!(varies_by_encoding(&response));
    }
}

#[tokio::test]
async fn head_carries_the_headers_get_would_with_no_body_c7() {
    let app = with_items(100).await;
    let got = get(&app, "/items?limit=100", Some("br")).await;
    let head = app
        .request(Method::HEAD, "/items?limit=100")
        .header("accept-encoding", "br")
        .send()
        .await
        .unwrap();

    for name in ["content-encoding", "etag", "content-length", "vary"] {
        assert_eq!(header(&head, name), header(&got, name), "{name}");
    }
    assert!(head.bytes().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_full_listing_is_compressed_as_it_streams_and_decodes_to_the_same_array_c7_c10() {
    let app = with_items(1200).await;
    let identity = get(&app, "/items", None).await;
    let identity_tag = header(&identity, "etag");
    let plain = identity.bytes().await.unwrap();

    for coding in ["zstd", "br", "gzip"] {
        let response = get(&app, "/items", Some(coding)).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "content-encoding"), coding);
        assert_eq!(header(&response, "transfer-encoding"), "chunked");
        assert!(varies_by_encoding(&response));
        assert_eq!(
            header(&response, "etag"),
            format!("{}-{coding}\"", identity_tag.trim_end_matches('"'))
        );
        let body = response.bytes().await.unwrap();
        assert!(
            body.len() * 5 < plain.len(),
            "{coding}: {} bytes",
            body.len()
        );
        assert_eq!(decoded(coding, &body), plain, "{coding}");
    }
    let not_modified = app
        .request(Method::GET, "/items")
        .header("accept-encoding", "zstd")
        .header("if-none-match", identity_tag.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), 304);
}

#[tokio::test]
async fn a_small_full_listing_is_sent_as_it_is_c7() {
    let app = with_items(3).await;

    let response = get(&app, "/items", Some("gzip")).await;

    assert_eq!(header(&response, "content-encoding"), "");
    assert!(!varies_by_encoding(&response));
    assert_eq!(
        response
            .json::<Vec<serde_json::Value>>()
            .await
            .unwrap()
            .len(),
        3
    );
}

/// The compressed full listing is the identity one pushed through zstd
/// (level 3) in fixed pieces, one flush each: `[`, each batch of 1,000
/// items (every comma with the item after it), `]`. Its strong tag names
/// those bytes, so they must not depend on how the service moves them (a
/// spool, a stream) nor change from build to build (C7).
#[tokio::test]
async fn the_compressed_full_listing_is_the_same_bytes_whatever_moves_it_c7() {
    use std::io::Write;

    let app = with_items(2500).await;
    let identity = get(&app, "/items", None).await.bytes().await.unwrap();
    let compressed = get(&app, "/items", Some("zstd"))
        .await
        .bytes()
        .await
        .unwrap();

    let items = &identity[1..identity.len() - 1];
    let item_starts: Vec<usize> = std::iter::once(0)
        .chain(
            items
                .windows(2)
                .enumerate()
                .filter(|(_, w)| w == b"},")
                .map(|(at, _)| at + 1),
        )
        .collect();
    let mut pieces: Vec<&[u8]> = vec![b"["];
    let batch_starts: Vec<usize> = item_starts.iter().copied().step_by(1000).collect();
    for (n, &start) in batch_starts.iter().enumerate() {
        let end = batch_starts.get(n + 1).copied().unwrap_or(items.len());
        pieces.push(&items[start..end]);
    }
    pieces.push(b"]");
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    let mut expected = Vec::new();
    for piece in pieces {
        encoder.write_all(piece).unwrap();
        encoder.flush().unwrap();
        expected.append(encoder.get_mut());
    }
    expected.extend_from_slice(&encoder.finish().unwrap());

    assert_eq!(item_starts.len(), 2500);
    assert!(
        compressed[..] == expected[..],
        "the same bytes, piece by piece"
    );
}
