//! Configuration (C1): every setting is a flag and an environment variable,
//! the flag wins. An invalid value stops the process with exit status 2 and
//! one line on stderr naming the setting. The settings come in groups, one
//! per thing they configure: [`ServerConfig`], [`StoreConfig`],
//! [`LimiterConfig`], [`UploadsConfig`], [`AdminConfig`], [`ChangesConfig`].

mod database;
mod groups;

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

pub use database::DatabaseUrl;
pub use groups::{
    AdminConfig, ChangesConfig, LimiterConfig, LogFormat, ServerConfig, StoreConfig, UploadsConfig,
};

/// A JSON-over-HTTP service for items, products and users. Every setting is
/// a flag or an environment variable; the flag wins.
#[derive(Debug, Clone, Parser)]
#[command(name = "items-service", version)]
pub struct Config {
    /// What to do instead of serving, if anything.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// The public listener.
    #[command(flatten)]
    pub server: ServerConfig,

    /// Where the collections are kept.
    #[command(flatten)]
    pub store: StoreConfig,

    /// Rate limiting (C9).
    #[command(flatten)]
    pub limiter: LimiterConfig,

    /// Uploaded files (C4, C5).
    #[command(flatten)]
    pub uploads: UploadsConfig,

    /// The admin listener (C11).
    #[command(flatten)]
    pub admin: AdminConfig,

    /// The change feed's streams (C14).
    #[command(flatten)]
    pub changes: ChangesConfig,
}

/// The subcommands: things the binary does instead of serving.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Print the OpenAPI document and exit.
    Openapi,
    /// Apply the schema to DATABASE_URL and exit: 0 when it is up to date,
    /// 1 with the reason when the database could not be migrated.
    Migrate,
    /// Copy the SQLite store of DATABASE_URL, consistent as of one moment,
    /// into the new file DEST, while a service may be writing to it (C12).
    Backup {
        /// The new file; an existing one is refused.
        dest: std::path::PathBuf,
    },
    /// Copy every item and product, with its id, and the id counters, from
    /// one durable store to an empty one (C12).
    Copy(CopyArgs),
}

/// The arguments of `items-service copy`.
#[derive(Debug, Clone, Args)]
pub struct CopyArgs {
    /// The store to read: `sqlite://PATH`, `sqlite:PATH` or `postgres://…`.
    #[arg(long, value_parser = DatabaseUrl::parse)]
    pub from: DatabaseUrl,
    /// The empty store to fill, of either kind (a SQLite file is created
    /// when missing).
    #[arg(long, value_parser = DatabaseUrl::parse)]
    pub to: DatabaseUrl,
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
    if let (ErrorKind::MissingRequiredArgument, Some(ContextValue::Strings(missing))) =
        (error.kind(), error.get(ContextKind::InvalidArg))
    {
        return format!("items-service: missing {}", missing.join(", "));
    }
    let flag = context(ContextKind::InvalidArg);
    if error.kind() == ErrorKind::UnknownArgument {
        let argument = flag.unwrap_or_default();
        return format!(
            "items-service: unknown option {argument:?}; `items-service --help` lists every setting"
        );
    }
    let value = context(ContextKind::InvalidValue);
    // A flag given without its value (`--port` last on the line): clap
    // reports an empty value and, for a number, an empty list of the
    // accepted ones.
    let missing = error.kind() == ErrorKind::InvalidValue && value.as_deref() == Some("");
    let reason = match error.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(valid)) if !valid.is_empty() => {
            format!("must be one of: {}", valid.join(", "))
        }
        _ if missing => "needs a value".to_owned(),
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
            if missing {
                return format!("items-service: invalid {variable} ({flag}): {reason}");
            }
            let value = value.unwrap_or_default();
            format!("items-service: invalid {variable} ({flag}) {value:?}: {reason}")
        }
        None => format!("items-service: {reason}"),
    }
}

use std::error::Error as _;

#[cfg(test)]
mod tests;
