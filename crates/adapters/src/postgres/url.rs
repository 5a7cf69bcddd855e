//! A `postgres://` URL, read once into the value the store connects with:
//! the driver's own configuration (`tokio_postgres::Config`: user,
//! password, database, `options`, `application_name`, and the host list
//! libpq writes, `postgres://u@h1:5432,h2:5433/db`) and the servers it
//! names, in order.
//!
//! Invariants:
//! - every parameter the driver reads means what it means to the driver;
//!   the only one read here is `target_session_attrs`, because the driver
//!   knows three of libpq's six values (`any`, `read-write`, `read-only`)
//!   and the store keeps all six (`primary`, `standby`, `prefer-standby`);
//!   it is taken out of the query before the driver reads the rest;
//! - a URL that names no host, or a host list the driver refuses, is
//!   refused here, at start, with a one-line reason (C1).

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;

use tokio_postgres::config::Host;

/// Which server a new connection may keep (libpq's `target_session_attrs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(in crate::postgres) enum SessionAttrs {
    /// The first server that accepts the connection.
    #[default]
    Any,
    /// One whose sessions may write (`transaction_read_only` is `off`).
    ReadWrite,
    /// One whose sessions may not write.
    ReadOnly,
    /// One that is not in recovery.
    Primary,
    /// One in recovery (a standby).
    Standby,
    /// A standby if any host is one, else any.
    PreferStandby,
}

impl SessionAttrs {
    const NAMES: [(&'static str, Self); 6] = [
        ("any", Self::Any),
        ("read-write", Self::ReadWrite),
        ("read-only", Self::ReadOnly),
        ("primary", Self::Primary),
        ("standby", Self::Standby),
        ("prefer-standby", Self::PreferStandby),
    ];

    pub(in crate::postgres) fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, attrs)| *attrs == self)
            .map_or("any", |(name, _)| name)
    }
}

impl FromStr for SessionAttrs {
    type Err = UrlError;

    fn from_str(value: &str) -> Result<Self, UrlError> {
        Self::NAMES
            .iter()
            .find(|(name, _)| *name == value)
            .map(|(_, attrs)| *attrs)
            .ok_or_else(|| {
                UrlError(format!(
                    "target_session_attrs={value:?} is none of any, read-write, read-only, \
                     primary, standby, prefer-standby"
                ))
            })
    }
}

/// Why a URL cannot be used: one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError(String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UrlError {}

/// Where one server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::postgres) enum Address {
    /// A host name or address and a port (`hostaddr`, when given, is the
    /// address to connect to, the name only a label).
    Tcp { host: String, port: u16 },
    /// The socket file in a directory (`host=/var/run/postgresql`).
    Unix(PathBuf),
}

/// One server of the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::postgres) struct Target {
    pub(in crate::postgres) address: Address,
    /// `host:port`, or the socket's directory: how logs and `/readyz` name it.
    pub(in crate::postgres) label: String,
}

/// A PostgreSQL `DATABASE_URL`, read once (C1): the app parses it when it
/// reads its configuration and hands this value to the store. Displayed
/// as written, its password hidden.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    config: tokio_postgres::Config,
    attrs: SessionAttrs,
    targets: Vec<Target>,
    /// The URL as written, its password hidden.
    shown: String,
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for PostgresUrl {
    /// The servers and the attribute; never the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<&str> = self.targets.iter().map(|t| t.label.as_str()).collect();
        f.debug_struct("PostgresUrl")
            .field("hosts", &labels)
            .field("target_session_attrs", &self.attrs.name())
            .finish_non_exhaustive()
    }
}

impl FromStr for PostgresUrl {
    type Err = UrlError;

    fn from_str(url: &str) -> Result<Self, UrlError> {
        Self::parse(url)
    }
}

impl PostgresUrl {
    /// Reads `url`.
    ///
    /// # Errors
    /// Why the URL cannot be used, in one line: the driver's reason, an
    /// unknown `target_session_attrs`, or no host.
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let (rest, attrs) = take_session_attrs(&lowercase_scheme(url))?;
        check_host_list(&rest)?;
        let config = tokio_postgres::Config::from_str(&rest)
            .map_err(|error| UrlError(crate::report::ErrorChain(&error).to_string()))?;
        let targets = targets(&config)?;
        Ok(Self {
            config,
            attrs,
            targets,
            shown: without_password(url),
        })
    }

    /// The database the URL names (the user's name when it names none, as
    /// PostgreSQL takes it).
    pub fn database(&self) -> &str {
        self.config
            .get_dbname()
            .or_else(|| self.config.get_user())
            .unwrap_or("postgres")
    }

    /// One URL per server of this one, each naming that server alone with
    /// no attribute to ask for: the standbys of `DATABASE_READ_URL` (C13),
    /// each with a pool of its own.
    pub(in crate::postgres) fn each_host(&self) -> Vec<Self> {
        self.targets
            .iter()
            .map(|target| Self {
                config: self.config.clone(),
                attrs: SessionAttrs::Any,
                targets: vec![target.clone()],
                shown: target.label.clone(),
            })
            .collect()
    }

    /// The URL's servers, in order.
    pub(in crate::postgres) fn targets(&self) -> &[Target] {
        &self.targets
    }

    pub(in crate::postgres) fn attrs(&self) -> SessionAttrs {
        self.attrs
    }

    /// The driver's configuration, with `options` (server settings, `-c
    /// name=value …`) appended to the URL's own.
    pub(in crate::postgres) fn config_with(&self, options: &str) -> tokio_postgres::Config {
        let mut config = self.config.clone();
        let options = match self.config.get_options() {
            Some(own) if !own.trim().is_empty() => format!("{own} {options}"),
            _ => options.to_owned(),
        };
        config.options(options);
        config
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`; a URL
/// without a password is returned as it is.
fn without_password(url: &str) -> String {
    let authority_start = url.find("://").map_or(0, |at| at + 3);
    let authority_end = url[authority_start..]
        .find(['/', '?'])
        .map_or(url.len(), |at| authority_start + at);
    let authority = &url[authority_start..authority_end];
    let Some((user_info, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let Some((user, _password)) = user_info.split_once(':') else {
        return url.to_owned();
    };
    format!(
        "{}{user}:***@{host}{}",
        &url[..authority_start],
        &url[authority_end..]
    )
}

/// `url` with its scheme in lower case, as the driver reads it (a scheme
/// is case-insensitive, RFC 3986).
fn lowercase_scheme(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => format!("{}://{rest}", scheme.to_ascii_lowercase()),
        None => url.to_owned(),
    }
}

/// Refuses what the driver would read otherwise than libpq's users mean
/// it: an empty entry in the host list, an IPv6 address without brackets
/// (its colons would be read as a port), or a `host`, `hostaddr` or `port`
/// parameter beside several hosts (which would apply to every one).
fn check_host_list(url: &str) -> Result<(), UrlError> {
    let (start, end) = hosts_span(url);
    if start == end {
        // No host at all: said as such once the driver has read the rest.
        return Ok(());
    }
    let hosts: Vec<&str> = url[start..end].split(',').collect();
    for entry in &hosts {
        let bare = entry.starts_with('[') || entry.matches(':').count() <= 1;
        if entry.is_empty() || !bare {
            return Err(UrlError(format!(
                "the host list has an entry {entry:?} that is no host[:port] \
                 (an IPv6 address goes in brackets: [::1]:5432)"
            )));
        }
    }
    let query = url.split_once('?').map_or("", |(_, query)| query);
    let named = query
        .split('&')
        .filter_map(|pair| pair.split_once('=').map(|(key, _)| key))
        .find(|key| ["host", "hostaddr", "port"].contains(key));
    match named {
        Some(key) if hosts.len() > 1 => Err(UrlError(format!(
            "`{key}=` beside a list of several hosts would apply to every one of them; \
             give each host its own port in the list instead"
        ))),
        _ => Ok(()),
    }
}

/// Where the host list of `url` starts and ends (after `user@`, before the
/// path or query).
fn hosts_span(url: &str) -> (usize, usize) {
    let authority_start = url.find("://").map_or(0, |at| at + 3);
    let authority_end = url[authority_start..]
        .find(['/', '?'])
        .map_or(url.len(), |at| authority_start + at);
    let hosts_start = url[authority_start..authority_end]
        .rfind('@')
        .map_or(authority_start, |at| authority_start + at + 1);
    (hosts_start, authority_end)
}

/// `url` without its `target_session_attrs` parameter, and the attribute
/// it asked for (`any` when none).
fn take_session_attrs(url: &str) -> Result<(String, SessionAttrs), UrlError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), SessionAttrs::Any));
    };
    let mut attrs = SessionAttrs::Any;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("target_session_attrs", value)) => attrs = value.parse()?,
            _ => kept.push(pair),
        }
    }
    let rest = match kept.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", kept.join("&")),
    };
    Ok((rest, attrs))
}

/// The servers of `config`, in order, each with its port (one port for
/// all, one per host, or 5432) and its `hostaddr` when given.
fn targets(config: &tokio_postgres::Config) -> Result<Vec<Target>, UrlError> {
    let hosts = config.get_hosts();
    let ports = config.get_ports();
    let addresses: &[IpAddr] = config.get_hostaddrs();
    let count = hosts.len().max(addresses.len());
    if count == 0 {
        return Err(UrlError("the URL names no host".to_owned()));
    }
    let port_of = |at: usize| match ports {
        [] => 5432,
        [one] => *one,
        many => many.get(at).copied().unwrap_or(5432),
    };
    (0..count)
        .map(|at| {
            let port = port_of(at);
            let address = addresses.get(at).map(IpAddr::to_string);
            match (hosts.get(at), address) {
                (Some(Host::Unix(directory)), _) => Ok(Target {
                    address: Address::Unix(directory.join(format!(".s.PGSQL.{port}"))),
                    label: directory.display().to_string(),
                }),
                (Some(Host::Tcp(name)), Some(address)) => Ok(Target {
                    address: Address::Tcp {
                        host: address,
                        port,
                    },
                    label: format!("{name}:{port}"),
                }),
                (Some(Host::Tcp(name)), None) => Ok(Target {
                    address: Address::Tcp {
                        host: name.clone(),
                        port,
                    },
                    label: format!("{name}:{port}"),
                }),
                (None, Some(address)) => Ok(Target {
                    label: format!("{address}:{port}"),
                    address: Address::Tcp {
                        host: address,
                        port,
                    },
                }),
                (None, None) => Err(UrlError("the URL names no host".to_owned())),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(url: &str) -> Vec<String> {
        PostgresUrl::parse(url)
            .expect("valid")
            .targets
            .into_iter()
            .map(|target| target.label)
            .collect()
    }

    fn refusal(url: &str) -> String {
        let text = PostgresUrl::parse(url).expect_err("refused").to_string();
        assert!(!text.contains('\n'), "{text:?}");
        text
    }

    #[test]
    fn each_listed_host_gets_its_port_and_everything_else_as_written() {
        let url = "postgres://u:p%40ss@h1:5433,h2,[::1]:5434/my%20db?application_name=items&target_session_attrs=read-write";
        let parsed = PostgresUrl::parse(url).expect("valid");
        assert_eq!(parsed.attrs, SessionAttrs::ReadWrite);
        assert_eq!(labels(url), ["h1:5433", "h2:5432", "::1:5434"]);
        assert_eq!(parsed.config.get_user(), Some("u"));
        assert_eq!(parsed.config.get_password(), Some(&b"p@ss"[..]));
        assert_eq!(parsed.database(), "my db");
        assert_eq!(parsed.config.get_application_name(), Some("items"));
    }

    #[test]
    fn all_six_of_libpqs_attributes_are_kept_though_the_driver_knows_three() {
        for (value, attrs) in SessionAttrs::NAMES {
            let parsed = PostgresUrl::parse(&format!(
                "postgres://u@h/db?target_session_attrs={value}&sslmode=disable"
            ))
            .expect("valid");
            assert_eq!(parsed.attrs, attrs);
            assert_eq!(attrs.name(), value);
        }
        assert_eq!(
            PostgresUrl::parse("postgres://u@h/db")
                .expect("valid")
                .attrs,
            SessionAttrs::Any
        );
    }

    #[test]
    fn the_scheme_is_read_in_any_case() {
        assert_eq!(labels("POSTGRES://h"), ["h:5432"]);
        assert_eq!(labels("PostgreSQL://u@h:6000/db"), ["h:6000"]);
    }

    #[test]
    fn a_user_without_password_and_a_url_without_path_or_query_are_fine() {
        assert_eq!(labels("postgres://u@h"), ["h:5432"]);
        assert_eq!(labels("postgresql://h:6543"), ["h:6543"]);
        assert_eq!(
            PostgresUrl::parse("postgres://u@h")
                .expect("valid")
                .database(),
            "u"
        );
    }

    #[test]
    fn a_socket_directory_is_a_host_as_libpq_reads_it() {
        let url =
            PostgresUrl::parse("postgres://u@%2Fvar%2Frun%2Fpostgresql:5433/db").expect("valid");
        assert_eq!(
            url.targets[0].address,
            Address::Unix(PathBuf::from("/var/run/postgresql/.s.PGSQL.5433"))
        );
        assert_eq!(url.targets[0].label, "/var/run/postgresql");
    }

    #[test]
    fn a_broken_host_list_is_refused_in_one_line_naming_the_entry_c1() {
        assert!(refusal("postgres://u@db1:5432,,db2:5432/items").contains("\"\""));
        assert!(refusal("postgres://u@db1,::1/items").contains("::1"));
        assert!(refusal("postgres://u@db1,db2/items?port=5433").contains("port="));
        assert!(!refusal("postgres://u@db1:5432,db2:99999/items").is_empty());
        assert_eq!(
            labels("postgres://u@db1,[::1]:5433/items"),
            ["db1:5432", "::1:5433"]
        );
    }

    #[test]
    fn a_broken_url_is_refused_in_one_line_c1() {
        assert!(refusal("postgres://u@h/db?target_session_attrs=sometimes").contains("sometimes"));
        assert!(!refusal("postgres://u@h:notaport/db").is_empty());
        assert!(!refusal("postgres://u@h/db?no_such_option=1").is_empty());
        assert!(refusal("postgres:///db").contains("no host"));
    }

    #[test]
    fn the_password_never_shows_in_debug_or_display() {
        let url = PostgresUrl::parse("postgres://u:secret@h/db").expect("valid");
        assert!(!format!("{url:?}").contains("secret"));
        assert_eq!(url.to_string(), "postgres://u:***@h/db");
        assert_eq!(
            without_password("postgres://app:s3cr:et@db.internal:5432/items?sslmode=require"),
            "postgres://app:***@db.internal:5432/items?sslmode=require"
        );
        assert_eq!(
            without_password("postgresql://u:p@h"),
            "postgresql://u:***@h"
        );
        assert_eq!(without_password("postgres://u@h/db"), "postgres://u@h/db");
    }

    #[test]
    fn server_settings_are_added_to_the_urls_own_options() {
        let url =
            PostgresUrl::parse("postgres://u@h/db?options=-c%20search_path%3Dx").expect("valid");
        let config = url.config_with("-c statement_timeout=5");
        assert_eq!(
            config.get_options(),
            Some("-c search_path=x -c statement_timeout=5")
        );
        let bare = PostgresUrl::parse("postgres://u@h/db").expect("valid");
        assert_eq!(bare.config_with("-c a=1").get_options(), Some("-c a=1"));
    }
}
