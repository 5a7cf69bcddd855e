//! Configuration (C1): every setting is a flag and an environment variable,
//! the flag wins. An invalid value stops the process with exit status 2 and
//! one line on stderr naming the setting.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Parser, Subcommand, ValueEnum};

/// A JSON-over-HTTP service for items, products and users. Every setting is
/// a flag or an environment variable; the flag wins.
#[derive(Debug, Clone, Parser)]
#[command(name = "items-service", version)]
pub struct Config {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// TCP port to listen on.
    #[arg(long, env = "PORT", default_value_t = 3000)]
    pub port: u16,

    /// Address to bind (an IP address, or `localhost`).
    #[arg(long, env = "HOST", default_value = "0.0.0.0", value_parser = parse_host)]
    pub host: IpAddr,

    /// PostgreSQL URL (`postgres://…`); unset keeps everything in memory.
    #[arg(long, env = "DATABASE_URL", value_parser = parse_database_url)]
    pub database_url: Option<String>,

    /// Directory where uploads are stored; created at start if missing.
    #[arg(long, env = "UPLOADS_DIR", default_value = "uploads")]
    pub uploads_dir: PathBuf,

    /// Requests per client per window; 0 turns rate limiting off.
    #[arg(long, env = "RATE_LIMIT_MAX", default_value_t = 100)]
    pub rate_limit_max: u32,

    /// The rate-limit window in milliseconds.
    #[arg(long, env = "RATE_LIMIT_WINDOW_MS", default_value_t = 900_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub rate_limit_window_ms: u64,

    /// Take the client address from `Forwarded` / `X-Forwarded-For` (only
    /// behind a proxy you run).
    #[arg(long, env = "TRUST_PROXY", default_value = "false", num_args = 0..=1,
          default_missing_value = "true", value_parser = BoolishValueParser::new())]
    pub trust_proxy: bool,

    /// Largest single uploaded file, in bytes.
    #[arg(long, env = "MAX_FILE_BYTES", default_value_t = 10_485_760,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_file_bytes: u64,

    /// Largest JSON or form body, in bytes.
    #[arg(long, env = "MAX_JSON_BYTES", default_value_t = 102_400,
          value_parser = clap::value_parser!(u64).range(1..=1_073_741_824))]
    pub max_json_bytes: u64,

    /// Log format: one line per request; the level comes from `RUST_LOG`.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Print the OpenAPI document and exit.
    Openapi,
}

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

fn parse_database_url(raw: &str) -> Result<String, String> {
    let scheme_ok = ["postgres://", "postgresql://"].iter().any(|scheme| {
        raw.get(..scheme.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
    });
    if scheme_ok && raw.len() > "postgres://".len() {
        Ok(raw.to_owned())
    } else {
        Err("must be a postgres:// or postgresql:// URL".to_owned())
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
        assert!(!config.trust_proxy);
        assert_eq!(config.max_file_bytes, 10_485_760);
        assert_eq!(config.max_json_bytes, 102_400);
        assert_eq!(config.log_format, LogFormat::Text);
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
            (&["--max-file-bytes=0"][..], "MAX_FILE_BYTES"),
            (&["--max-json-bytes", "x"][..], "MAX_JSON_BYTES"),
            (&["--log-format", "xml"][..], "LOG_FORMAT"),
        ] {
            let line = invalid(args);
            assert!(!line.contains('\n'), "{line:?} must be one line");
            assert!(line.contains(variable), "{line:?} must name {variable}");
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
    fn trust_proxy_is_a_flag_or_a_boolean_value_c1() {
        assert!(parse(&["--trust-proxy"]).unwrap().trust_proxy);
        assert!(parse(&["--trust-proxy=true"]).unwrap().trust_proxy);
        assert!(!parse(&["--trust-proxy=false"]).unwrap().trust_proxy);
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
    fn localhost_is_accepted_as_a_host() {
        assert_eq!(
            parse(&["--host", "localhost"]).unwrap().host,
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
    }
}
