//! What an operator reads: the start-up line, the messages of a failed start,
//! and commands that end early because their reader went away (C1).

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use items_app::Listening;
use items_testkit::postgres::{ScratchDatabase, test_database_url};

use crate::helpers::*;

#[test]
fn openapi_into_a_reader_that_stops_early_ends_quietly_with_status_0_c1() {
    // The document (over 100 KiB) is larger than a pipe's buffer, so the
    // command is still writing when the reader closes its end.
    let mut child = binary()
        .arg("openapi")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);

    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "", "a closed stdout is not an error to report");
}

#[test]
fn openapi_ignores_server_settings_it_does_not_use_c1() {
    let (status, stdout, stderr) =
        run_to_exit(&[("PORT", "abc"), ("HOST", "nowhere")], &["openapi"]);

    assert_eq!(status.code(), Some(0), "{stderr}");
    let document: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
}

#[test]
fn an_unknown_option_exits_2_with_one_line_naming_it_and_pointing_to_help_c1() {
    let (status, _, stderr) = run_to_exit(&[], &["--bogus"]);

    assert_eq!(status.code(), Some(2));
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("\"--bogus\""), "{stderr:?}");
    assert!(stderr.contains("--help"), "{stderr:?}");
}

#[tokio::test]
async fn the_start_up_line_names_the_store_and_the_ports_the_system_chose_for_port_0_c1_c11() {
    let service = Service::start(&[("ADMIN_PORT", "0")]).await;

    let log = service.log_once_it_contains("listening").await;

    let line = log.lines().find(|line| line.contains("listening")).unwrap();
    let Listening {
        address,
        admin_address: Some(admin_address),
    } = service.listening
    else {
        panic!("no admin address in {line}")
    };
    assert_ne!(address.port(), 0, "{line}");
    assert_ne!(admin_address.port(), 0, "{line}");
    assert!(
        line.contains(&format!(
            "listening address={address} admin_address={admin_address} store=memory"
        )),
        "{line}"
    );
    // The ports named are the ones served: the API on one, the probes on the other.
    let root = service.client.get("/").await;
    assert_eq!(root.status(), 200);
    let live = service.admin().get("/livez").await;
    assert_eq!(live.status(), 200);
}

#[tokio::test]
async fn a_second_instance_on_a_migrated_database_logs_no_postgresql_notice() {
    let url = test_database_url();
    let database = ScratchDatabase::create(&url).await.unwrap();
    let database_url = database.url();
    let settings = [
        ("DATABASE_URL", database_url.as_str()),
        ("RUST_LOG", "info"),
    ];
    let first = Service::start(&settings).await;
    let second = Service::start(&settings).await;

    // The second instance finds the schema in place: PostgreSQL's notices
    // about it ("already exists, skipping") are not the operator's business.
    let log = second.log_once_it_contains("listening").await;

    assert!(!log.contains("already exists"), "{log}");
    drop((first, second));
    database.drop().await;
}

#[test]
fn a_database_that_does_not_exist_fails_at_once_with_one_clear_line() {
    let server = test_database_url();
    let (server, _) = server.split_once('?').unwrap_or((&server, ""));
    let (server, _) = server.rsplit_once('/').unwrap();
    let missing = format!("{server}/items_no_such_database");

    let uploads = tempfile::tempdir().unwrap();
    let uploads = uploads.path().to_str().unwrap();

    let started = Instant::now();
    let (status, _, stderr) = run_to_exit(
        &[
            ("DATABASE_URL", &missing),
            ("PORT", "0"),
            ("UPLOADS_DIR", uploads),
        ],
        &[],
    );

    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("does not exist"), "{stderr:?}");
    assert!(stderr.contains("refused"), "{stderr:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a permanent error is not retried as an outage (took {:?})",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_first_line_of_the_default_log_is_the_start_up_line_c1_c11() {
    // The README promises it: with RUST_LOG unset, over PostgreSQL and with
    // an admin listener (each adds lines at start), nothing comes before it.
    let url = test_database_url();
    let database = ScratchDatabase::create(&url).await.unwrap();
    let database_url = database.url();
    let service = Service::start_with_the_default_log(&[
        ("DATABASE_URL", database_url.as_str()),
        ("ADMIN_PORT", "0"),
    ])
    .await;

    let log = service.log_once_it_contains("listening").await;

    let first = log.lines().next().unwrap_or_default();
    assert_eq!(
        Listening::from_log_line(first),
        Some(service.listening),
        "{log}"
    );
    assert!(first.contains("store=PostgreSQL"), "{first}");
    drop(service);
    database.drop().await;
}
