//! Configuration (C1): every setting is a flag and an environment variable,
//! the flag wins. An invalid value stops the process with exit status 2 and
//! one line on stderr naming the setting.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use items_domain::defaults;

/// A JSON-over-HTTP service for items, products and users. Every setting is
/// a flag or an environment variable; the flag wins.
#[derive(Debug, Clone, Parser)]
#[command(name = "items-service", version)]
pub struct Config {
    /// What to do instead of serving, if anything.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// TCP port to listen on.
    #[arg(long, env = "PORT", default_value_t = defaults::PORT)]
    pub port: u16,

    /// Address to bind (an IP address, or `localhost`).
    #[arg(long, env = "HOST", default_value_t = defaults::HOST, value_parser = parse_host)]
    pub host: IpAddr,

    /// PostgreSQL URL (`postgres://…`); unset keeps everything in memory.
    #[arg(long, env = "DATABASE_URL", value_parser = parse_database_url)]
    pub database_url: Option<String>,

    /// Directory where uploads are stored; created at start if missing.
    #[arg(long, env = "UPLOADS_DIR", default_value = defaults::UPLOADS_DIR)]
    pub uploads_dir: PathBuf,

    /// Requests per client per window; 0 turns rate limiting off.
    #[arg(long, env = "RATE_LIMIT_MAX", default_value_t = defaults::RATE_LIMIT_MAX)]
    pub rate_limit_max: u32,

    /// The rate-limit window in milliseconds.
    #[arg(long, env = "RATE_LIMIT_WINDOW_MS", default_value_t = defaults::RATE_LIMIT_WINDOW_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub rate_limit_window_ms: u64,

    /// How many proxies of yours stand in front: `false`/`0` none, `true` =
    /// 1, or a number N; the client is then the Nth address from the right of
    /// `X-Forwarded-For` (or `Forwarded: for=`).
    #[arg(long, env = "TRUST_PROXY", default_value_t = defaults::TRUST_PROXY, num_args = 0..=1,
          default_missing_value = "true", value_parser = parse_trust_proxy)]
    pub trust_proxy: u32,

    /// Redis URL (`redis://…`): rate-limit budgets shared by every instance
    /// using it; unset: budgets live in this process.
    #[arg(long, env = "REDIS_URL", value_parser = parse_redis_url)]
    pub redis_url: Option<String>,

    /// Largest single uploaded file, in bytes.
    #[arg(long, env = "MAX_FILE_BYTES", default_value_t = defaults::MAX_FILE_BYTES,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_file_bytes: u64,

    /// Largest JSON or form body, in bytes.
    #[arg(long, env = "MAX_JSON_BYTES", default_value_t = defaults::MAX_JSON_BYTES,
          value_parser = clap::value_parser!(u64).range(1..=1_073_741_824))]
    pub max_json_bytes: u64,

    /// PostgreSQL connections per instance (1–1000).
    #[arg(long, env = "DATABASE_POOL_SIZE", default_value_t = defaults::DATABASE_POOL_SIZE,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub database_pool_size: u32,

    /// Port of the admin listener (`/livez`, `/readyz`, `/metrics`) on HOST;
    /// unset: no admin listener (C11).
    #[arg(long, env = "ADMIN_PORT")]
    pub admin_port: Option<u16>,

    /// With an admin listener: how long, after SIGINT/SIGTERM, `/readyz`
    /// answers 503 while requests are still served, so a load balancer
    /// stops sending before the server drains.
    #[arg(long, env = "SHUTDOWN_DRAIN_MS", default_value_t = defaults::SHUTDOWN_DRAIN_MS,
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub shutdown_drain_ms: u64,

    /// Log format: one line per request; the level comes from `RUST_LOG`.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = defaults::LOG_FORMAT)]
    pub log_format: LogFormat,
}

/// The subcommands: things the binary does instead of serving.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Print the OpenAPI document and exit.
    Openapi,
}

/// How log lines are written (`LOG_FORMAT`): as text or as one JSON object
/// per line.
// Doc comments on the variants would become `--help` text, replacing the
// one-line `[possible values: text, json]`.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

fn parse_host(raw: &str) -> Result<IpAddr, String> {
    if raw.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    raw.parse()
        .map_err(|_| "must be an IP address or `localhost`".to_owned())
}

/// `TRUST_PROXY`: a boolean (`true` is one proxy) or a hop count.
fn parse_trust_proxy(raw: &str) -> Result<u32, String> {
    match raw.to_ascii_lowercase().as_str() {
        "false" => Ok(0),
        "true" => Ok(1),
        number => number
            .parse()
            .map_err(|_| "must be `false`, `true` or a number of proxies".to_owned()),
    }
}

fn parse_redis_url(raw: &str) -> Result<String, String> {
    url_with_scheme(raw, ["redis", "rediss"])
}

fn parse_database_url(raw: &str) -> Result<String, String> {
    url_with_scheme(raw, ["postgres", "postgresql"])
}

/// `raw` when it starts with `<scheme>://` for one of `schemes` (in any case)
/// and names something after it; otherwise the rule it broke.
fn url_with_scheme(raw: &str, schemes: [&str; 2]) -> Result<String, String> {
    let rest = schemes.iter().find_map(|scheme| {
        let prefix = format!("{scheme}://");
        raw.get(..prefix.len())
            .filter(|start| start.eq_ignore_ascii_case(&prefix))
            .map(|_| &raw[prefix.len()..])
    });
    match rest {
        Some(rest) if !rest.is_empty() => Ok(raw.to_owned()),
        _ => Err(format!(
            "must be a {}:// or {}:// URL",
            schemes[0], schemes[1]
        )),
    }
}

/// What to do instead of running, when the command line says so.
#[derive(Debug)]
pub enum Early {
    /// `--help` or `--version`: print this on stdout, exit 0.
    Print(String),
    /// An invalid setting: print this one line on stderr, exit 2.
    Invalid(String),
}

impl Config {
    /// Parses the command line and environment; never prints or exits itself.
    pub fn parse_from_env() -> Result<Self, Early> {
        Self::try_parse().map_err(|error| match error.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Early::Print(error.to_string()),
            _ => Early::Invalid(one_line(&error)),
        })
    }

    /// The configuration these flags give (the arguments after the program's
    /// name), with the environment ignored: every setting not among `flags`
    /// keeps its default, whatever `PORT` or `DATABASE_URL` the caller has.
    /// For tests and embedders that build an [`crate::Application`].
    ///
    /// # Errors
    /// clap's error for a flag or a value it does not accept.
    pub fn from_flags<I, T>(flags: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let arguments = std::iter::once(OsString::from("items-service"))
            .chain(flags.into_iter().map(Into::into));
        let matches = Self::command()
            .mut_args(|arg| arg.env(None::<&'static str>))
            .try_get_matches_from(arguments)?;
        Self::from_arg_matches(&matches)
    }
}

/// Renders a clap error as one line naming the setting by flag and by
/// environment variable; clap's own rendering spans several lines and adds a
/// usage hint (C1 wants exactly one line).
fn one_line(error: &clap::Error) -> String {
    let context = |kind| match error.get(kind) {
        Some(ContextValue::String(value)) => Some(value.clone()),
        _ => None,
    };
    let reason = error
        .source()
        .map(ToString::to_string)
        .or_else(|| {
            error
                .to_string()
                .lines()
                .next()
                .map(|line| line.trim_start_matches("error: ").to_owned())
        })
        .unwrap_or_default();
    let flag = context(ContextKind::InvalidArg);
    if error.kind() == ErrorKind::UnknownArgument {
        let argument = flag.unwrap_or_default();
        return format!(
            "items-service: unknown option {argument:?}; `items-service --help` lists every setting"
        );
    }
    let reason = match error.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(valid)) => format!("must be one of: {}", valid.join(", ")),
        _ => reason,
    };
    match flag.filter(|flag| flag.starts_with("--")) {
        Some(flag) => {
            let flag = flag
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned();
            let variable = flag
                .trim_start_matches("--")
                .replace('-', "_")
                .to_uppercase();
            let value = context(ContextKind::InvalidValue).unwrap_or_default();
            format!("items-service: invalid {variable} ({flag}) {value:?}: {reason}")
        }
        None => format!("items-service: {reason}"),
    }
}

use std::error::Error as _;

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, Early> {
        Config::try_parse_from(std::iter::once("items-service").chain(args.iter().copied()))
            .map_err(|error| match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    Early::Print(error.to_string())
                }
                _ => Early::Invalid(one_line(&error)),
            })
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
        assert_eq!(config.port, 3000);
        assert_eq!(config.host, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(config.database_url, None);
        assert_eq!(config.uploads_dir, PathBuf::from("uploads"));
        assert_eq!(config.rate_limit_max, 100);
        assert_eq!(config.rate_limit_window_ms, 900_000);
        assert_eq!(config.trust_proxy, 0);
        assert_eq!(config.redis_url, None);
        assert_eq!(config.max_file_bytes, 10_485_760);
        assert_eq!(config.max_json_bytes, 102_400);
        assert_eq!(config.log_format, LogFormat::Text);
        assert_eq!(config.database_pool_size, 10);
        assert_eq!(config.admin_port, None);
        assert_eq!(config.shutdown_drain_ms, 5000);
    }

    #[test]
    fn the_pool_size_is_between_1_and_1000_c1() {
        assert_eq!(
            parse(&["--database-pool-size", "1"])
                .unwrap()
                .database_pool_size,
            1
        );
        assert_eq!(
            parse(&["--database-pool-size=1000"])
                .unwrap()
                .database_pool_size,
            1000
        );
    }

    #[test]
    fn the_admin_port_is_off_unless_set_c11() {
        assert_eq!(
            parse(&["--admin-port", "9090"]).unwrap().admin_port,
            Some(9090)
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
            (&["--max-file-bytes=0"][..], "MAX_FILE_BYTES"),
            (&["--max-json-bytes", "x"][..], "MAX_JSON_BYTES"),
            (&["--log-format", "xml"][..], "LOG_FORMAT"),
            (&["--database-pool-size", "0"][..], "DATABASE_POOL_SIZE"),
            (&["--database-pool-size", "1001"][..], "DATABASE_POOL_SIZE"),
            (&["--database-pool-size", "ten"][..], "DATABASE_POOL_SIZE"),
            (&["--admin-port", "70000"][..], "ADMIN_PORT"),
            (&["--shutdown-drain-ms", "60001"][..], "SHUTDOWN_DRAIN_MS"),
        ] {
            let line = invalid(args);
            assert!(!line.contains('\n'), "{line:?} must be one line");
            assert!(line.contains(variable), "{line:?} must name {variable}");
        }
    }

    #[test]
    fn trust_proxy_is_a_flag_a_boolean_or_a_hop_count_c1() {
        let hops = |args: &[&str]| parse(args).unwrap().trust_proxy;
        assert_eq!(hops(&["--trust-proxy"]), 1);
        assert_eq!(hops(&["--trust-proxy=true"]), 1);
        assert_eq!(hops(&["--trust-proxy=TRUE"]), 1);
        assert_eq!(hops(&["--trust-proxy=false"]), 0);
        assert_eq!(hops(&["--trust-proxy=0"]), 0);
        assert_eq!(hops(&["--trust-proxy=3"]), 3);
    }

    #[test]
    fn redis_urls_must_be_redis_c1() {
        let url = parse(&["--redis-url", "redis://127.0.0.1:6379/0"])
            .unwrap()
            .redis_url;
        assert_eq!(url.as_deref(), Some("redis://127.0.0.1:6379/0"));
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
    fn an_invalid_log_format_lists_the_accepted_values_c1() {
        let line = invalid(&["--log-format", "xml"]);
        assert!(line.contains("LOG_FORMAT"), "{line}");
        assert!(line.ends_with("must be one of: text, json"), "{line}");
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
    fn database_urls_must_be_postgres_c1() {
        let config = parse(&["--database-url", "postgresql://localhost/test"]).unwrap();
        assert_eq!(
            config.database_url.as_deref(),
            Some("postgresql://localhost/test")
        );
        assert!(parse(&["--database-url", "postgres://u@h:5432/db"]).is_ok());
        assert!(parse(&["--database-url", "postgres://"]).is_err());
        assert!(parse(&["--database-url", "localhost:5432"]).is_err());
    }

    #[test]
    fn flags_alone_give_a_configuration_with_the_other_settings_at_their_defaults_c1() {
        let config = Config::from_flags(["--port", "0", "--admin-port", "0"]).unwrap();

        assert_eq!(config.port, 0);
        assert_eq!(config.admin_port, Some(0));
        assert_eq!(config.rate_limit_max, 100);
        assert!(Config::from_flags(["--port", "http"]).is_err());
    }

    #[test]
    fn localhost_is_accepted_as_a_host() {
        assert_eq!(
            parse(&["--host", "localhost"]).unwrap().host,
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
    }
}
