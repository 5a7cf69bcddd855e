//! The command line's unit tests: flags, environment names, defaults and
//! the one-line errors (C1).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use super::*;

fn parse(args: &[&str]) -> Result<Config, Early> {
    Config::try_parse_from(std::iter::once("items-service").chain(args.iter().copied())).map_err(
        |error| match error.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Early::Print(error.to_string()),
            _ => Early::Invalid(one_line(&error)),
        },
    )
}

fn invalid(args: &[&str]) -> String {
    match parse(args) {
        Err(Early::Invalid(line)) => line,
        other => panic!("expected an invalid setting, got {other:?}"),
    }
}

#[test]
fn defaults_follow_the_c1_table() {
    let config = parse(&[]).unwrap();
    assert_eq!(config.server.port, 3000);
    assert_eq!(config.server.host, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    assert_eq!(config.store.database_url, None);
    assert_eq!(config.uploads.uploads_dir, PathBuf::from("uploads"));
    assert_eq!(config.limiter.rate_limit_max, 100);
    assert_eq!(config.limiter.rate_limit_window_ms, 900_000);
    assert_eq!(config.limiter.trust_proxy, 0);
    assert_eq!(config.limiter.redis_url, None);
    assert_eq!(config.uploads.max_file_bytes, 10_485_760);
    assert_eq!(config.uploads.uploads_max_bytes, 10_737_418_240);
    assert_eq!(config.server.max_json_bytes, 102_400);
    assert_eq!(config.server.log_format, LogFormat::Text);
    assert_eq!(config.store.database_pool_size, 10);
    assert_eq!(config.store.database_statement_timeout_ms, 5000);
    assert_eq!(config.admin.admin_port, None);
    assert_eq!(config.admin.shutdown_drain_ms, 5000);
    assert_eq!(config.server.send_timeout_ms, 30_000);
    assert_eq!(
        config.store.changes_retention,
        std::time::Duration::from_secs(24 * 3600)
    );
    assert_eq!(config.changes.changes_max_streams, 1000);
    assert_eq!(config.changes.changes_heartbeat_ms, 15_000);
}

#[test]
fn the_send_timeout_is_1_ms_to_an_hour_c1_c12() {
    let server = |args: &[&str]| parse(args).unwrap().server;
    assert_eq!(
        server(&["--send-timeout-ms", "1"]).send_timeout(),
        std::time::Duration::from_millis(1)
    );
    assert_eq!(
        server(&["--send-timeout-ms=3600000"]).send_timeout(),
        std::time::Duration::from_secs(3600)
    );
}

#[test]
fn the_change_retention_is_a_duration_with_a_unit_c1_c14() {
    let retention = |raw: &str| {
        parse(&["--changes-retention", raw])
            .unwrap()
            .store
            .changes_retention
            .as_secs()
    };
    assert_eq!(retention("24h"), 86_400);
    assert_eq!(retention("90m"), 5400);
    assert_eq!(retention("3600s"), 3600);
    assert_eq!(retention("3600"), 3600);
    assert_eq!(retention("7d"), 604_800);
    assert_eq!(retention("366d"), 366 * 86_400);
    for refused in [
        "0",
        "0h",
        "h",
        "",
        "1.5h",
        "-1h",
        "1w",
        "24 h",
        "367d",
        "99999999999999999999d",
    ] {
        let line = invalid(&[&format!("--changes-retention={refused}")]);
        assert!(
            line.starts_with("items-service: invalid CHANGES_RETENTION (--changes-retention)"),
            "{refused:?}: {line}"
        );
        assert!(!line.contains('\n'));
    }
}

#[test]
fn the_change_streams_are_bounded_and_beat_at_least_every_15_s_c1_c14() {
    for refused in [
        &["--changes-max-streams", "0"][..],
        &["--changes-max-streams", "100001"],
        &["--changes-max-streams", "many"],
        &["--changes-heartbeat-ms", "15001"],
        &["--changes-heartbeat-ms", "9"],
    ] {
        let line = invalid(refused);
        let variable = refused[0]
            .trim_start_matches("--")
            .replace('-', "_")
            .to_uppercase();
        assert!(line.contains(&format!("invalid {variable}")), "{line}");
    }
    let config = parse(&["--changes-max-streams", "3", "--changes-heartbeat-ms", "50"]).unwrap();
    let settings = items_adapters::http::ChangeStreamSettings::from(&config.changes);
    assert_eq!(settings.max_streams, 3);
    assert_eq!(settings.heartbeat, std::time::Duration::from_millis(50));
}

#[test]
fn the_pool_size_is_between_1_and_1000_c1() {
    assert_eq!(
        parse(&["--database-pool-size", "1"])
            .unwrap()
            .store
            .database_pool_size,
        1
    );
    assert_eq!(
        parse(&["--database-pool-size=1000"])
            .unwrap()
            .store
            .database_pool_size,
        1000
    );
}

#[test]
fn the_admin_port_is_off_unless_set_c11() {
    assert_eq!(
        parse(&["--admin-port", "9090"]).unwrap().admin.admin_port,
        Some(9090)
    );
}

#[test]
fn the_statement_budget_is_1_ms_to_an_hour_and_reaches_both_durable_stores_c1_c12() {
    use items_adapters::postgres::PostgresSettings;
    use items_adapters::sqlite::SqliteSettings;

    let store = |args: &[&str]| parse(args).unwrap().store;
    assert_eq!(
        store(&["--database-statement-timeout-ms", "1"]).statement_timeout(),
        std::time::Duration::from_millis(1)
    );
    let store = store(&[
        "--database-statement-timeout-ms=3600000",
        "--database-pool-size=3",
    ]);
    let postgres = PostgresSettings::from(&store);
    assert_eq!(
        postgres.statement_timeout,
        std::time::Duration::from_secs(3600)
    );
    assert_eq!(postgres.pool_size, 3);
    assert_eq!(
        SqliteSettings::from(&store).busy_timeout,
        std::time::Duration::from_secs(3600)
    );
}

#[test]
fn invalid_values_give_one_line_naming_the_setting_c1() {
    for (args, variable) in [
        (&["--port", "abc"][..], "PORT"),
        (&["--port", "70000"][..], "PORT"),
        (&["--host", "not a host"][..], "HOST"),
        (&["--database-url", "mysql://x"][..], "DATABASE_URL"),
        (&["--rate-limit-max=-1"][..], "RATE_LIMIT_MAX"),
        (&["--rate-limit-max", "4294967296"][..], "RATE_LIMIT_MAX"),
        (&["--rate-limit-window-ms", "0"][..], "RATE_LIMIT_WINDOW_MS"),
        (&["--trust-proxy", "maybe"][..], "TRUST_PROXY"),
        (&["--trust-proxy=-1"][..], "TRUST_PROXY"),
        (&["--redis-url", "http://x"][..], "REDIS_URL"),
        (&["--redis-url", "redis://"][..], "REDIS_URL"),
        (&["--redis-url", "redis+unix://"][..], "REDIS_URL"),
        (&["--redis-url", "unix://"][..], "REDIS_URL"),
        (&["--max-file-bytes=0"][..], "MAX_FILE_BYTES"),
        (&["--uploads-max-bytes=-1"][..], "UPLOADS_MAX_BYTES"),
        (&["--uploads-max-bytes", "10GiB"][..], "UPLOADS_MAX_BYTES"),
        (&["--max-json-bytes", "x"][..], "MAX_JSON_BYTES"),
        (&["--log-format", "xml"][..], "LOG_FORMAT"),
        (&["--database-pool-size", "0"][..], "DATABASE_POOL_SIZE"),
        (&["--database-pool-size", "1001"][..], "DATABASE_POOL_SIZE"),
        (&["--database-pool-size", "ten"][..], "DATABASE_POOL_SIZE"),
        (
            &["--database-statement-timeout-ms", "0"][..],
            "DATABASE_STATEMENT_TIMEOUT_MS",
        ),
        (
            &["--database-statement-timeout-ms=-1"][..],
            "DATABASE_STATEMENT_TIMEOUT_MS",
        ),
        (
            &["--database-statement-timeout-ms", "5s"][..],
            "DATABASE_STATEMENT_TIMEOUT_MS",
        ),
        (
            &["--database-statement-timeout-ms", "1.5"][..],
            "DATABASE_STATEMENT_TIMEOUT_MS",
        ),
        (
            &["--database-statement-timeout-ms", "3600001"][..],
            "DATABASE_STATEMENT_TIMEOUT_MS",
        ),
        (&["--admin-port", "70000"][..], "ADMIN_PORT"),
        (&["--admin-host", "admin.internal"][..], "ADMIN_HOST"),
        (&["--shutdown-drain-ms", "60001"][..], "SHUTDOWN_DRAIN_MS"),
        (&["--send-timeout-ms", "0"][..], "SEND_TIMEOUT_MS"),
        (&["--send-timeout-ms", "3600001"][..], "SEND_TIMEOUT_MS"),
        (&["--send-timeout-ms", "30s"][..], "SEND_TIMEOUT_MS"),
    ] {
        let line = invalid(args);
        assert!(!line.contains('\n'), "{line:?} must be one line");
        assert!(line.contains(variable), "{line:?} must name {variable}");
    }
}

#[test]
fn trust_proxy_is_a_flag_a_boolean_or_a_hop_count_c1() {
    let hops = |args: &[&str]| parse(args).unwrap().limiter.trust_proxy;
    assert_eq!(hops(&["--trust-proxy"]), 1);
    assert_eq!(hops(&["--trust-proxy=true"]), 1);
    assert_eq!(hops(&["--trust-proxy=TRUE"]), 1);
    assert_eq!(hops(&["--trust-proxy=false"]), 0);
    assert_eq!(hops(&["--trust-proxy=0"]), 0);
    assert_eq!(hops(&["--trust-proxy=3"]), 3);
}

#[test]
fn redis_urls_must_be_redis_over_tcp_or_a_unix_socket_c1() {
    for given in [
        "redis://127.0.0.1:6379/0",
        "redis+unix:///run/redis/redis.sock?db=3",
        "unix:///run/redis/redis.sock",
    ] {
        let url = parse(&["--redis-url", given]).unwrap().limiter.redis_url;
        assert_eq!(url.as_deref(), Some(given));
    }
}

#[test]
fn tls_to_redis_is_refused_in_one_line_since_the_client_has_no_tls_c1() {
    for url in ["rediss://cache.internal:6380", "REDISS://h"] {
        let line = invalid(&["--redis-url", url]);
        assert!(line.contains("REDIS_URL"), "{line}");
        assert!(line.contains("TLS to Redis"), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }
}

#[test]
fn an_unknown_option_is_named_with_a_pointer_to_help_c1() {
    let line = invalid(&["--bogus"]);
    assert_eq!(
        line,
        "items-service: unknown option \"--bogus\"; `items-service --help` lists every setting"
    );
}

#[test]
fn a_missing_flag_of_a_subcommand_is_named_on_one_line_c1_c12() {
    let line = invalid(&["copy", "--from", "sqlite:a.db"]);
    assert_eq!(line, "items-service: missing --to <TO>");
}

#[test]
fn an_invalid_log_format_lists_the_accepted_values_c1() {
    let line = invalid(&["--log-format", "xml"]);
    assert!(line.contains("LOG_FORMAT"), "{line}");
    assert!(line.ends_with("must be one of: text, json"), "{line}");
}

#[test]
fn a_flag_without_its_value_is_named_as_needing_one_c1() {
    assert_eq!(
        invalid(&["--port"]),
        "items-service: invalid PORT (--port): needs a value"
    );
    assert_eq!(
        invalid(&["--admin-host"]),
        "items-service: invalid ADMIN_HOST (--admin-host): needs a value"
    );
    assert_eq!(
        invalid(&["--log-format"]),
        "items-service: invalid LOG_FORMAT (--log-format): must be one of: text, json"
    );
}

#[test]
fn the_admin_listener_binds_on_admin_host_else_on_host_c1_c11() {
    let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let config = parse(&["--host", "0.0.0.0", "--admin-port", "9090"]).unwrap();
    assert_eq!(config.admin.admin_host, None);
    assert_eq!(
        config.admin.address(config.server.host, 9090),
        "0.0.0.0:9090".parse().unwrap()
    );

    let config = parse(&["--admin-host", "localhost", "--admin-port", "9090"]).unwrap();
    assert_eq!(config.admin.admin_host, Some(loopback));
    assert_eq!(
        config.admin.address(config.server.host, 9090),
        "127.0.0.1:9090".parse().unwrap()
    );
}

#[test]
fn help_opens_with_what_the_service_is() {
    let Err(Early::Print(help)) = parse(&["--help"]) else {
        panic!("--help prints");
    };
    assert!(
        help.starts_with("A JSON-over-HTTP service for items, products and users."),
        "{help}"
    );
}

#[test]
fn database_urls_must_be_postgres_or_sqlite_c1() {
    let config = parse(&["--database-url", "postgresql://localhost/test"]).unwrap();
    assert_eq!(
        config
            .store
            .database()
            .map(|url| crate::listening::store_description(Some(url)))
            .as_deref(),
        Some("PostgreSQL postgresql://localhost/test")
    );
    assert!(parse(&["--database-url", "postgres://u@h:5432/db"]).is_ok());
    assert!(parse(&["--database-url", "postgres://"]).is_err());
    assert!(parse(&["--database-url", "localhost:5432"]).is_err());
    let config = parse(&["--database-url", "sqlite:///srv/items.db"]).unwrap();
    assert_eq!(
        config.store.database(),
        Some(&DatabaseUrl::Sqlite("/srv/items.db".into()))
    );
    assert_eq!(parse(&[]).unwrap().store.database(), None);
    let line = invalid(&["--database-url", "sqlite::memory:"]);
    assert!(line.contains("DATABASE_URL"), "{line}");
    assert!(!line.contains('\n'), "{line}");
}

#[test]
fn flags_alone_give_a_configuration_with_the_other_settings_at_their_defaults_c1() {
    let config = Config::from_flags(["--port", "0", "--admin-port", "0"]).unwrap();

    assert_eq!(config.server.port, 0);
    assert_eq!(config.admin.admin_port, Some(0));
    assert_eq!(config.limiter.rate_limit_max, 100);
    assert!(Config::from_flags(["--port", "http"]).is_err());
}

#[test]
fn localhost_is_accepted_as_a_host() {
    assert_eq!(
        parse(&["--host", "localhost"]).unwrap().server.host,
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    );
}

#[test]
fn standbys_are_named_by_a_postgres_url_with_a_wait_and_a_max_lag_c1_c13() {
    let config = parse(&[]).unwrap();
    assert_eq!(config.store.database_read_url, None);
    assert_eq!(config.store.database_read_wait_ms, 100);
    assert_eq!(config.store.database_read_max_lag_ms, 1000);
    let config = parse(&[
        "--database-read-url",
        "postgres://u@s1:5432,s2:5433/db",
        "--database-read-wait-ms=0",
        "--database-read-max-lag-ms=3600000",
    ])
    .unwrap();
    let standbys = config.store.standby_settings();
    assert_eq!(standbys.wait, std::time::Duration::ZERO);
    assert_eq!(standbys.max_lag, std::time::Duration::from_secs(3600));
    assert!(config.store.database_read_url.is_some());
}

#[test]
fn a_read_url_or_read_setting_out_of_range_is_refused_in_one_line_c1_c13() {
    for args in [
        ["--database-read-url", "sqlite://items.db"],
        ["--database-read-url", "mysql://h/db"],
        [
            "--database-read-url",
            "postgres://h/db?target_session_attrs=sometimes",
        ],
        ["--database-read-wait-ms", "60001"],
        ["--database-read-wait-ms", "soon"],
        ["--database-read-max-lag-ms", "3600001"],
        ["--database-read-max-lag-ms", "soon"],
    ] {
        let line = invalid(&args);
        assert!(!line.contains('\n'), "{args:?}: {line}");
        assert!(line.contains(&args[0][2..]), "{args:?} is named: {line}");
    }
}
