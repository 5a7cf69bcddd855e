//! Uploads that end badly (C5): cut by a reset at any point, or refused
//! because the storage bound (`UPLOADS_MAX_BYTES`) or the disk is full (507).

use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use items_testkit::http::*;

fn listing(directory: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Waits until `directory` holds exactly `expected`, failing with what it
/// holds after 15 s; then checks it stays so (nothing appears late, as a
/// file created by an operation still running after its request was gone).
async fn settles_to(directory: &Path, expected: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while listing(directory) != expected {
        assert!(
            Instant::now() < deadline,
            "{} left behind: {:?}",
            listing(directory).len(),
            listing(directory)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(listing(directory), expected, "files appeared late");
}

/// A small deterministic spread of numbers, so a failing run can be replayed.
fn spread(n: u64) -> u64 {
    n.wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407)
        >> 33
}

/// Sends a multipart upload of `POST /photos/upload` up to a point chosen by
/// `n` (the head only, into the first file's part head, just past it, or
/// megabytes into a second file), then resets the connection (`SO_LINGER` 0:
/// an RST, not a FIN).
pub(crate) async fn upload_cut_by_a_reset(port: u16, n: u64) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return;
    };
    let part = |name: &str| {
        format!(
            "--XYZ\r\nContent-Disposition: form-data; name=\"photos\"; filename=\"{name}\"\r\nContent-Type: image/png\r\n\r\n"
        )
    };
    let mut body = part("a.png").into_bytes();
    body.extend_from_slice(&[7u8; 2_000]);
    body.extend_from_slice(b"\r\n");
    body.extend_from_slice(part("b.png").as_bytes());
    body.extend_from_slice(&vec![8u8; 300_000]);
    let head = format!(
        "POST /photos/upload HTTP/1.1\r\nHost: test\r\nContent-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: {}\r\n\r\n",
        body.len() + 1_000_000
    );
    let first_part = part("a.png").len();
    let cut = match spread(n) % 5 {
        0 => 0,
        1 => first_part - 10,
        2 => first_part,
        3 => first_part + 1 + (spread(n + 1) as usize % 2_000),
        _ => first_part + 2_000 + (spread(n + 2) as usize % 300_000),
    };
    if stream.write_all(head.as_bytes()).await.is_err()
        || stream.write_all(&body[..cut]).await.is_err()
    {
        return;
    }
    // Sometimes a moment for the server to start on what it got.
    if spread(n + 3) % 2 == 0 {
        tokio::time::sleep(Duration::from_micros(spread(n + 4) % 3_000)).await;
    }
    let _ = stream.set_zero_linger();
    drop(stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_cut_by_resets_at_any_point_leave_no_file_without_a_restart_c5() {
    let app = TestApp::in_memory().await;

    for round in 0..3u64 {
        let cuts: Vec<_> = (0..300u64)
            .map(|n| tokio::spawn(upload_cut_by_a_reset(app.port, round * 1_000 + n)))
            .collect();
        for cut in cuts {
            cut.await.unwrap();
        }
        settles_to(app.uploads(), &[]).await;
    }
}
