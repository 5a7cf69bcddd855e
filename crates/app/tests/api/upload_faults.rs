//! Uploads that end badly (C5): cut by a reset at any point, or refused
//! because the storage bound (`UPLOADS_MAX_BYTES`) or the disk is full (507).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use items_domain::{PendingUpload, StoredName, UploadStore, UploadStoreError};
use items_testkit::files::listing;
use reqwest::multipart::{Form, Part};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::*;

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
    if spread(n + 3).is_multiple_of(2) {
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

fn avatar(bytes: usize) -> Form {
    Form::new().part(
        "avatar",
        Part::bytes(vec![5u8; bytes])
            .file_name("a.png")
            .mime_str("image/png")
            .unwrap(),
    )
}

/// The sizes of the files in `directory`, by name.
fn sizes(directory: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let size = entry.metadata().unwrap().len();
            (entry.file_name().to_string_lossy().into_owned(), size)
        })
        .collect()
}

async fn bounded_app(max_bytes: u64) -> TestApp {
    TestApp::spawn(TestServices::in_memory().with_uploads_max_bytes(max_bytes)).await
}

#[tokio::test]
async fn an_upload_that_would_pass_uploads_max_bytes_is_507_and_leaves_the_directory_unchanged_c5_c6()
 {
    let app = bounded_app(250_000).await;
    assert_eq!(
        app.post_form("/profile", avatar(200_000)).await.status(),
        201
    );
    let before = sizes(app.uploads());

    let refused = assert_problem(app.post_form("/profile", avatar(100_000)).await, 507).await;
    assert_eq!(sizes(app.uploads()), before);
    assert!(
        refused["detail"].as_str().unwrap().contains("no room"),
        "{refused}"
    );

    // Two photos that fit one by one but not together: neither is kept.
    let photos = Form::new()
        .part("photos", Part::bytes(vec![1u8; 30_000]).file_name("1.png"))
        .part("photos", Part::bytes(vec![2u8; 30_000]).file_name("2.png"));
    assert_problem(app.post_form("/photos/upload", photos).await, 507).await;
    assert_eq!(sizes(app.uploads()), before);

    // Up to the bound exactly is still fine.
    assert_eq!(
        app.post_form("/profile", avatar(50_000)).await.status(),
        201
    );
    assert_eq!(sizes(app.uploads()).values().sum::<u64>(), 250_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_uploads_cannot_pass_the_bound_together_c5() {
    const BOUND: u64 = 1_000_000;
    let app = bounded_app(BOUND).await;

    let uploads: Vec<_> = (0..30)
        .map(|_| {
            let client = app.http.clone();
            let url = app.url("/profile");
            tokio::spawn(async move {
                let response = client.post(url).multipart(avatar(100_000)).send().await;
                response.unwrap().status().as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for upload in uploads {
        statuses.push(upload.await.unwrap());
    }

    let kept = statuses.iter().filter(|status| **status == 201).count();
    assert!(
        statuses.iter().all(|status| [201, 507].contains(status)),
        "{statuses:?}"
    );
    assert!((1..=10).contains(&kept), "{statuses:?}");
    let stored = sizes(app.uploads());
    assert_eq!(stored.len(), kept, "only the accepted files: {stored:?}");
    assert!(stored.values().sum::<u64>() <= BOUND);
}

#[tokio::test]
async fn files_already_stored_at_start_count_against_the_bound_c5() {
    let services = TestServices::in_memory();
    std::fs::write(
        services.uploads().join("0123456789abcdef0123456789abcdef"),
        vec![0u8; 200_000],
    )
    .unwrap();
    let app = TestApp::spawn(services.with_uploads_max_bytes(250_000)).await;

    assert_problem(app.post_form("/profile", avatar(60_000)).await, 507).await;
    assert_eq!(
        app.post_form("/profile", avatar(50_000)).await.status(),
        201
    );
    assert_eq!(sizes(app.uploads()).len(), 2);
}

/// A store whose files cannot be written because the disk is full, as the
/// disk store reports ENOSPC (its mapping has a unit test of its own).
struct FullDisk;

struct NoRoom;

#[async_trait::async_trait]
impl PendingUpload for NoRoom {
    async fn write(&mut self, _: &[u8]) -> Result<(), UploadStoreError> {
        Err(UploadStoreError::full(std::io::Error::from(
            std::io::ErrorKind::StorageFull,
        )))
    }

    async fn commit(self: Box<Self>) -> Result<StoredName, UploadStoreError> {
        Err(UploadStoreError::full("no room"))
    }
}

#[async_trait::async_trait]
impl UploadStore for FullDisk {
    async fn begin(&self) -> Result<Box<dyn PendingUpload>, UploadStoreError> {
        Ok(Box::new(NoRoom))
    }

    async fn remove(&self, _: &StoredName) -> Result<(), UploadStoreError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_store_out_of_space_is_507_never_500_c5_c6() {
    let app = TestApp::spawn(TestServices::in_memory().with_upload_store(Arc::new(FullDisk))).await;
    assert_problem(app.post_form("/profile", avatar(10)).await, 507).await;
    let empty = Form::new().part("avatar", Part::bytes(Vec::new()).file_name("a.png"));
    assert_problem(app.post_form("/profile", empty).await, 507).await;
}

/// A real full filesystem: a 1 MiB tmpfs mounted over a fresh directory.
/// Mounting needs root (`CAP_SYS_ADMIN`), as CI runs; like the browser
/// test, a test that cannot run fails rather than passing unseen.
#[tokio::test]
async fn a_real_full_filesystem_is_507_and_leaves_nothing_c5() {
    let services = TestServices::in_memory();
    let mount = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(services.uploads())
        .output();
    assert!(
        mount.as_ref().is_ok_and(|output| output.status.success()),
        "cannot mount a 1 MiB tmpfs (needs root, as CI runs the suite): {mount:?}"
    );
    let directory = services.uploads().to_owned();
    let unmount = Unmount(directory.clone());
    // No bound: only the filesystem's size stops the upload.
    let app = TestApp::spawn(services.with_uploads_max_bytes(0)).await;

    assert_eq!(
        app.post_form("/profile", avatar(300_000)).await.status(),
        201
    );
    let before = sizes(&directory);
    assert_problem(app.post_form("/profile", avatar(2_000_000)).await, 507).await;
    assert_eq!(sizes(&directory), before);
    drop(app);
    drop(unmount);
}

/// Unmounts on drop, also when an assertion failed.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}
