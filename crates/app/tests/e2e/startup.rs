//! Start-up failures: exit statuses and one-line messages (C1).

use std::net::TcpListener;

use crate::helpers::*;

fn assert_one_line_naming(stderr: &str, setting: &str) {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr, got {stderr:?}");
    assert!(lines[0].contains(setting), "{:?} names {setting}", lines[0]);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Usage"),
        "{stderr:?}"
    );
}

#[test]
fn an_invalid_rate_limit_max_exits_2_with_one_line_naming_it_c1() {
    for value in ["abc", "-1", "4294967296", "1.5"] {
        let (status, _, stderr) = run_to_exit(&[("RATE_LIMIT_MAX", value)], &[]);
        assert_eq!(status.code(), Some(2), "RATE_LIMIT_MAX={value}");
        assert_one_line_naming(&stderr, "RATE_LIMIT_MAX");
    }
}

#[test]
fn every_invalid_setting_exits_2_with_one_line_naming_it_c1() {
    for (variable, value) in [
        ("PORT", "http"),
        ("HOST", "example invalid"),
        ("DATABASE_URL", "mysql://localhost/db"),
        ("RATE_LIMIT_WINDOW_MS", "0"),
        ("TRUST_PROXY", "perhaps"),
        ("MAX_FILE_BYTES", "-5"),
        ("UPLOADS_MAX_BYTES", "10G"),
        ("MAX_JSON_BYTES", "lots"),
        ("LOG_FORMAT", "yaml"),
        ("DATABASE_POOL_SIZE", "0"),
        ("DATABASE_POOL_SIZE", "1001"),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "0"),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "-5"),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "five seconds"),
        ("ADMIN_PORT", "admin"),
        ("SHUTDOWN_DRAIN_MS", "-1"),
    ] {
        let (status, _, stderr) = run_to_exit(&[(variable, value)], &[]);
        assert_eq!(status.code(), Some(2), "{variable}={value}");
        assert_one_line_naming(&stderr, variable);
    }
}

#[test]
fn a_flag_wins_over_its_environment_variable_c1() {
    // The environment value is invalid; the valid flag must take precedence,
    // so the process gets past configuration and fails on the next invalid flag.
    let (status, _, stderr) = run_to_exit(
        &[("PORT", "invalid")],
        &["--port", "0", "--log-format", "xml"],
    );
    assert_eq!(status.code(), Some(2));
    assert_one_line_naming(&stderr, "LOG_FORMAT");
}

#[test]
fn a_port_in_use_exits_1_with_one_line_c1() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();

    let (status, _, stderr) = run_to_exit(&[("HOST", "127.0.0.1"), ("PORT", &port)], &[]);

    assert_eq!(status.code(), Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains(&port), "{stderr:?}");
}

#[test]
fn help_prints_every_setting_and_exits_0_c1() {
    let (status, stdout, _) = run_to_exit(&[], &["--help"]);
    assert_eq!(status.code(), Some(0));
    for flag in [
        "--port",
        "--host",
        "--database-url",
        "--uploads-dir",
        "--rate-limit-max",
        "--rate-limit-window-ms",
        "--trust-proxy",
        "--max-file-bytes",
        "--max-json-bytes",
        "--log-format",
        "--send-timeout-ms",
    ] {
        assert!(stdout.contains(flag), "--help lists {flag}");
    }
}

#[test]
fn an_unusable_uploads_dir_exits_2_with_one_line_naming_it_c1_c5() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();

    let (status, _, stderr) = run_to_exit(&[("UPLOADS_DIR", path), ("PORT", "0")], &[]);

    assert_eq!(status.code(), Some(2));
    assert_one_line_naming(&stderr, "UPLOADS_DIR");
}

#[test]
fn a_broken_host_list_in_database_url_exits_2_naming_it_c1() {
    for url in [
        "postgres://u@db1:5432,,db2:5432/items",
        "postgres://u@db1:5432,db2:99999/items",
        "postgres://u@db1,::1/items?target_session_attrs=read-write",
        "postgres://u@db1,db2/items?target_session_attrs=writable",
        "postgres://u@db1,db2/items?port=5433",
    ] {
        let (status, _, stderr) = run_to_exit(&[("DATABASE_URL", url), ("PORT", "0")], &[]);

        assert_eq!(status.code(), Some(2), "{url}: {stderr}");
        assert_one_line_naming(&stderr, "DATABASE_URL");
    }
}

#[test]
fn every_start_up_failure_is_one_line_naming_the_program_once_c1() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().port().to_string();
    let file = tempfile::NamedTempFile::new().unwrap();
    let file = file.path().to_str().unwrap();
    let uploads = tempfile::tempdir().unwrap();
    let uploads = uploads.path().to_str().unwrap();
    for (settings, exit) in [
        (&[("PORT", "http")][..], 2),
        (&[("UPLOADS_DIR", file)][..], 2),
        (&[("REDIS_URL", "redis://:@")][..], 2),
        (
            &[("DATABASE_URL", "postgres://localhost:99999/items")][..],
            2,
        ),
        (&[("HOST", "127.0.0.1"), ("PORT", &taken)][..], 1),
        (&[("HOST", "192.0.2.1")][..], 1),
    ] {
        let mut all = vec![("PORT", "0"), ("UPLOADS_DIR", uploads)];
        all.extend_from_slice(settings);

        let (status, _, stderr) = run_to_exit(&all, &[]);

        assert_eq!(status.code(), Some(exit), "{settings:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{settings:?}: {stderr:?}");
        assert!(stderr.starts_with("items-service: "), "{stderr:?}");
        assert_eq!(stderr.matches("items-service:").count(), 1, "{stderr:?}");
    }
}
