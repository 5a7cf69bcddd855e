//! `POST /profile` and `POST /photos/upload`: contract C4, C5, C6.

use std::time::{Duration, Instant};

use items_adapters::http::{HttpSettings, UploadLimits};
use items_testkit::files::listing;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::support::*;

fn file(name: &str, bytes: Vec<u8>) -> Part {
    Part::bytes(bytes)
        .file_name(name.to_owned())
        .mime_str("image/png")
        .unwrap()
}

fn is_stored_name(name: &str) -> bool {
    name.len() == 32
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

async fn small_file_app(max_file_bytes: u64) -> TestApp {
    let settings = HttpSettings {
        upload_limits: UploadLimits {
            max_file_bytes,
            idle_timeout: Duration::from_secs(5),
        },
        ..test_settings()
    };
    TestApp::spawn_with(settings, TestServices::in_memory()).await
}

#[tokio::test]
async fn an_avatar_is_stored_under_a_random_name_with_its_exact_bytes_c4_c5() {
    let app = TestApp::in_memory().await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    let form = Form::new()
        .text("nickname", "ada")
        .part("avatar", file("me.png", bytes.clone()));

    let response = app.post_form("/profile", form).await;

    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    let stored = body["file"]["filename"].as_str().unwrap().to_owned();
    assert!(is_stored_name(&stored), "{stored}");
    assert_eq!(
        body,
        json!({
            "file": { "fieldname": "avatar", "originalname": "me.png", "mimetype": "image/png",
                      "filename": stored, "size": 100_000 },
            "fields": { "nickname": "ada" }
        })
    );
    assert_eq!(listing(app.uploads()), [stored.as_str()]);
    assert_eq!(std::fs::read(app.uploads().join(&stored)).unwrap(), bytes);
}

#[tokio::test]
async fn twelve_photos_are_accepted_with_their_text_fields_c5() {
    let app = TestApp::in_memory().await;
    let mut form = Form::new()
        .text("album", "trip")
        .text("tag", "a")
        .text("tag", "b");
    for n in 0..12u8 {
        form = form.part(
            "photos",
            file(&format!("p{n}.png"), vec![n; 1000 + usize::from(n)]),
        );
    }

    let response = app.post_form("/photos/upload", form).await;

    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["fields"],
        json!({ "album": "trip", "tag": ["a", "b"] })
    );
    let files = body["files"].as_array().unwrap();
    assert_eq!(files.len(), 12);
    for (n, file) in files.iter().enumerate() {
        let stored = file["filename"].as_str().unwrap();
        assert_eq!(file["originalname"], format!("p{n}.png"));
        assert_eq!(file["size"], 1000 + n);
        assert_eq!(
            std::fs::read(app.uploads().join(stored)).unwrap(),
            vec![n as u8; 1000 + n]
        );
    }
    assert_eq!(listing(app.uploads()).len(), 12);
}

#[tokio::test]
async fn a_thirteenth_photo_is_refused_and_nothing_is_stored_c5() {
    let app = TestApp::in_memory().await;
    let mut form = Form::new();
    for n in 0..13u8 {
        form = form.part("photos", file("p.png", vec![n; 5000]));
    }

    let response = app.post_form("/photos/upload", form).await;

    assert_problem(response, 400).await;
    assert!(listing(app.uploads()).is_empty());
}

#[tokio::test]
async fn refused_uploads_leave_the_directory_unchanged_c5_c6() {
    let app = TestApp::in_memory().await;
    // One accepted upload first, so "unchanged" is not merely "empty".
    app.post_form(
        "/profile",
        Form::new().part("avatar", file("kept.png", vec![1; 10])),
    )
    .await;
    let before = listing(app.uploads());

    let cases: Vec<(&str, Form, u16)> = vec![
        ("/profile", Form::new().text("nickname", "no file"), 400),
        (
            "/profile",
            Form::new().part("photo", file("x.png", vec![2; 10])),
            400,
        ),
        (
            "/profile",
            Form::new()
                .part("avatar", file("a.png", vec![3; 10]))
                .part("avatar", file("b.png", vec![4; 10])),
            400,
        ),
        (
            "/profile",
            Form::new()
                .part("avatar", file("a.png", vec![5; 10]))
                .part("other", file("b.png", vec![6; 10])),
            400,
        ),
        ("/photos/upload", Form::new(), 400),
        (
            "/photos/upload",
            Form::new().part("avatar", file("a.png", vec![7; 10])),
            400,
        ),
    ];
    for (path, form, status) in cases {
        let response = app.post_form(path, form).await;
        assert_problem(response, status).await;
        assert_eq!(
            listing(app.uploads()),
            before,
            "after a refused POST {path}"
        );
    }
}

#[tokio::test]
async fn a_file_over_max_file_bytes_is_a_413_the_client_reads_and_nothing_stays_c5() {
    let app = small_file_app(1000).await;

    let exact = app
        .post_form(
            "/profile",
            Form::new().part("avatar", file("ok.png", vec![0; 1000])),
        )
        .await;
    assert_eq!(exact.status(), 201);
    let before = listing(app.uploads());

    // The first photo is fine and already written when the second one
    // overflows: it must go too.
    let form = Form::new()
        .part("photos", file("ok.png", vec![1; 500]))
        .part("photos", file("big.png", vec![2; 300_000]));
    let response = app.post_form("/photos/upload", form).await;

    assert_problem(response, 413).await;
    assert_eq!(listing(app.uploads()), before);
}

#[tokio::test]
async fn a_body_that_is_not_multipart_is_415_c5() {
    let app = TestApp::in_memory().await;

    for (path, content_type) in [
        ("/profile", "application/json"),
        ("/photos/upload", "text/plain"),
    ] {
        assert_problem(app.post_raw(path, content_type, "{}").await, 415).await;
    }
    let bare = app
        .request(reqwest::Method::POST, "/profile")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_problem(bare, 415).await;
    assert!(listing(app.uploads()).is_empty());
}

#[tokio::test]
async fn a_malformed_multipart_body_is_400_and_leaves_nothing_c5() {
    let app = TestApp::in_memory().await;
    let body = "--XYZ\r\nContent-Disposition: form-data; name=\"avatar\"; filename=\"a.png\"\r\n\r\nsome bytes but no closing boundary";

    let response = app
        .post_raw("/profile", "multipart/form-data; boundary=XYZ", body)
        .await;

    assert_problem(response, 400).await;
    assert!(listing(app.uploads()).is_empty());
}

#[tokio::test]
async fn the_client_file_name_is_reported_never_used_as_a_path_c4() {
    let app = TestApp::in_memory().await;
    let form = Form::new().part("avatar", file("../../etc/passwd", b"not really".to_vec()));

    let response = app.post_form("/profile", form).await;

    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["file"]["originalname"], "../../etc/passwd");
    let stored = body["file"]["filename"].as_str().unwrap();
    assert!(is_stored_name(stored));
    assert_eq!(listing(app.uploads()), [stored]);
}

#[tokio::test]
async fn a_client_that_disconnects_mid_upload_leaves_nothing_behind_c5() {
    let app = TestApp::in_memory().await;
    let stream = app.start_a_raw_avatar_upload(300_000).await;
    // Wait until the server has started writing the file, then vanish.
    let deadline = Instant::now() + Duration::from_secs(5);
    while listing(app.uploads()).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !listing(app.uploads()).is_empty(),
        "the upload was being written"
    );
    drop(stream);

    let deadline = Instant::now() + Duration::from_secs(5);
    while !listing(app.uploads()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            listing(app.uploads())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn concurrent_uploads_do_not_collide_c5() {
    let app = TestApp::in_memory().await;

    let uploads = (0..20u8).map(|n| {
        let client = app.http.clone();
        let url = app.url("/profile");
        tokio::spawn(async move {
            let form = Form::new().part("avatar", file("same-name.png", vec![n; 20_000]));
            let body: Value = client
                .post(url)
                .multipart(form)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (n, body["file"]["filename"].as_str().unwrap().to_owned())
        })
    });
    let mut stored = Vec::new();
    for upload in uploads.collect::<Vec<_>>() {
        stored.push(upload.await.unwrap());
    }

    assert_eq!(listing(app.uploads()).len(), 20);
    for (n, name) in stored {
        assert_eq!(
            std::fs::read(app.uploads().join(name)).unwrap(),
            vec![n; 20_000]
        );
    }
}

#[tokio::test]
async fn multipart_bodies_the_parser_rejects_get_400_never_a_dropped_connection_c5() {
    let app = TestApp::in_memory().await;

    for (path, content_type, body) in [
        ("/photos/upload", "multipart/form-data", ""),
        ("/profile", "multipart/form-data", "--x\r\n"),
        ("/profile", "multipart/form-data; boundary=", "--\r\n"),
        ("/profile", "multipart/form-data; boundary=XYZ", ""),
        (
            "/profile",
            "multipart/form-data; boundary=XYZ",
            "garbage without any boundary",
        ),
    ] {
        let response = app.post_raw(path, content_type, body).await;
        assert_problem(response, 400).await;
    }
    // The worker that parsed them is still serving.
    assert_eq!(app.get("/").await.status(), 200);
    assert!(listing(app.uploads()).is_empty());
}

#[tokio::test]
async fn text_fields_that_are_not_utf8_are_echoed_with_replacement_characters_c5() {
    let app = TestApp::in_memory().await;
    let form = Form::new()
        .part("note", Part::bytes(vec![b'o', b'k', 0xff, 0xfe]))
        .part("avatar", file("a.png", vec![1; 10]));

    let response = app.post_form("/profile", form).await;

    assert_eq!(response.status(), 201);
    assert_eq!(
        response.json::<Value>().await.unwrap()["fields"]["note"],
        "ok\u{fffd}\u{fffd}"
    );
}

/// An app with one accepted upload already stored (so "unchanged" is not
/// merely "empty"), and the directory's listing at that point.
async fn app_with_one_upload() -> (TestApp, Vec<String>) {
    let app = TestApp::in_memory().await;
    let kept = app
        .post_form(
            "/profile",
            Form::new().part("avatar", file("kept.png", vec![1; 10])),
        )
        .await;
    assert_eq!(kept.status(), 201);
    let before = listing(app.uploads());
    (app, before)
}

/// A form that starts with an avatar, so a file is already being written
/// when a later part breaks a bound: it must be deleted too, then `count`
/// text parts named `name`, each holding `value_bytes` bytes.
fn avatar_then_texts(name: &str, count: usize, value_bytes: usize) -> Form {
    let value = "v".repeat(value_bytes);
    (0..count).fold(
        Form::new().part("avatar", file("a.png", vec![7; 1000])),
        |form, _| form.text(name.to_owned(), value.clone()),
    )
}

#[tokio::test]
async fn a_repeated_text_name_cannot_carry_more_than_1_mib_of_text_c5() {
    let (app, before) = app_with_one_upload().await;
    // 20 values of 60,000 bytes under one name: each value is within 64 KiB,
    // the names are one, but together they are 1.2 MB.
    let response = app
        .post_form("/profile", avatar_then_texts("tag", 20, 60_000))
        .await;

    let body = assert_problem(response, 413).await;
    assert!(body["detail"].as_str().unwrap().contains("together"));
    assert_eq!(listing(app.uploads()), before);
}

#[tokio::test]
async fn text_values_up_to_1_mib_together_are_echoed_c5() {
    let app = TestApp::in_memory().await;
    // 16 values of exactly 64 KiB: 1 MiB of text, the most a form may carry.
    let response = app
        .post_form("/profile", avatar_then_texts("tag", 16, 64 * 1024))
        .await;

    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    let tags = body["fields"]["tag"].as_array().unwrap();
    assert_eq!(tags.len(), 16);
    assert!(
        tags.iter()
            .all(|tag| tag.as_str().unwrap().len() == 64 * 1024)
    );
}

#[tokio::test]
async fn a_form_of_1001_parts_is_refused_however_small_they_are_c5() {
    let (app, before) = app_with_one_upload().await;
    // The avatar and 1,000 empty text parts under one name.
    let response = app
        .post_form("/profile", avatar_then_texts("t", 1000, 0))
        .await;

    let body = assert_problem(response, 413).await;
    assert!(body["detail"].as_str().unwrap().contains("1000 parts"));
    assert_eq!(listing(app.uploads()), before);

    // 1,000 parts in all is still a form.
    let response = app
        .post_form("/profile", avatar_then_texts("t", 999, 0))
        .await;
    assert_eq!(response.status(), 201);
}

#[tokio::test]
async fn one_text_value_of_64_kib_and_one_byte_is_refused_c5() {
    let (app, before) = app_with_one_upload().await;

    let response = app
        .post_form(
            "/photos/upload",
            Form::new()
                .part("photos", file("p.png", vec![3; 1000]))
                .text("note", "n".repeat(64 * 1024 + 1)),
        )
        .await;

    assert_problem(response, 413).await;
    assert_eq!(listing(app.uploads()), before);
}
