//! A `postgres://` URL naming several hosts, as libpq writes them
//! (`postgres://u@host1:5432,host2:5433/db?target_session_attrs=read-write`),
//! cut into one set of connection options per host.
//!
//! Invariants:
//! - a URL naming one host and neither `target_session_attrs` nor
//!   `load_balance_hosts` goes to sqlx's own parser as written: the options
//!   are exactly those it gave before hosts could be listed;
//! - any other URL becomes one single-host URL per listed host, in the
//!   listed order, each with the user, password, path and every other query
//!   parameter exactly as written, read by sqlx's parser: percent-encoding,
//!   `sslmode`, `options`, `application_name`… mean for each host what they
//!   mean for one;
//! - `target_session_attrs` and `load_balance_hosts` are read here and never
//!   reach sqlx (which would warn that it ignores them);
//! - a host is a name, an IPv4 address or an IPv6 address in brackets, each
//!   with an optional port; anything else, an empty entry, or a `host=`,
//!   `hostaddr=` or `port=` parameter beside several hosts (sqlx would apply
//!   it to every host) is refused with a one-line reason.

use std::fmt;
use std::net::Ipv6Addr;
use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;

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
pub(in crate::postgres) struct UrlError(String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UrlError {}

/// A URL read: the options of each host, in the listed order, and the
/// attribute a connection's server must have.
#[derive(Debug)]
pub(in crate::postgres) struct Parsed {
    pub(in crate::postgres) hosts: Vec<PgConnectOptions>,
    pub(in crate::postgres) attrs: SessionAttrs,
}

/// Reads `url`. A URL of another scheme goes to sqlx as written, which
/// refuses it as it always did.
///
/// # Errors
/// The reason the URL cannot be used, sqlx's own for a single-host URL.
pub(in crate::postgres) fn parse(url: &str) -> Result<Parsed, sqlx::Error> {
    let Some((scheme, rest)) = ["postgres://", "postgresql://"]
        .into_iter()
        .find_map(|scheme| strip_scheme(url, scheme).map(|rest| (&url[..scheme.len()], rest)))
    else {
        return as_written(url);
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let (authority, path) =
        before_query.split_at(before_query.find('/').unwrap_or(before_query.len()));
    let (userinfo, host_list) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    let query = Query::read(query.unwrap_or("")).map_err(configuration)?;
    let entries: Vec<&str> = host_list.split(',').collect();
    if entries.len() == 1 && !query.had_ours {
        return as_written(url);
    }
    if entries.len() > 1
        && let Some(key) = query.names_a_host
    {
        return Err(configuration(UrlError(format!(
            "`{key}=` cannot stand beside several hosts: give each host its own port \
             in the list (host1:5432,host2:5433)"
        ))));
    }
    let rest_of_query = match query.kept.is_empty() {
        true => String::new(),
        false => format!("?{}", query.kept.join("&")),
    };
    let hosts = entries
        .iter()
        .map(|entry| {
            check_host(entry).map_err(configuration)?;
            let single = format!("{scheme}{userinfo}{entry}{path}{rest_of_query}");
            PgConnectOptions::from_str(&single).map_err(|error| {
                configuration(UrlError(format!("host {entry:?} cannot be used: {error}")))
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Parsed {
        hosts,
        attrs: query.attrs,
    })
}

/// The URL as sqlx reads it, one host, no attribute.
fn as_written(url: &str) -> Result<Parsed, sqlx::Error> {
    Ok(Parsed {
        hosts: vec![PgConnectOptions::from_str(url)?],
        attrs: SessionAttrs::Any,
    })
}

fn configuration(error: UrlError) -> sqlx::Error {
    sqlx::Error::Configuration(Box::new(error))
}

/// `raw` after `scheme` when it starts with it, in any case.
fn strip_scheme<'a>(raw: &'a str, scheme: &str) -> Option<&'a str> {
    raw.get(..scheme.len())
        .filter(|start| start.eq_ignore_ascii_case(scheme))
        .map(|_| &raw[scheme.len()..])
}

/// The query string, with the parameters read here taken out.
#[derive(Debug, Default)]
struct Query<'a> {
    attrs: SessionAttrs,
    /// `target_session_attrs` or `load_balance_hosts` was given.
    had_ours: bool,
    /// A parameter that names the host or port for all hosts.
    names_a_host: Option<String>,
    /// The other parameters, as written.
    kept: Vec<&'a str>,
}

impl<'a> Query<'a> {
    fn read(query: &'a str) -> Result<Self, UrlError> {
        let mut read = Self::default();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match decode(key)?.as_str() {
                "target_session_attrs" => {
                    read.attrs = decode(value)?.parse()?;
                    read.had_ours = true;
                }
                // libpq 16's random order among the hosts is not offered:
                // the listed order is the order of preference.
                "load_balance_hosts" => {
                    let value = decode(value)?;
                    if value != "disable" {
                        return Err(UrlError(format!(
                            "load_balance_hosts={value:?} is not supported: the hosts are \
                             tried in the listed order (load_balance_hosts=disable)"
                        )));
                    }
                    read.had_ours = true;
                }
                key @ ("host" | "hostaddr" | "port") => {
                    read.names_a_host = Some(key.to_owned());
                    read.kept.push(pair);
                }
                _ => read.kept.push(pair),
            }
        }
        Ok(read)
    }
}

/// A query component percent-decoded (`+` is a space), as UTF-8.
fn decode(component: &str) -> Result<String, UrlError> {
    let invalid = || UrlError(format!("{component:?} is not valid percent-encoded UTF-8"));
    let bytes = component.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'%' => {
                let hex = component.get(at + 1..at + 3).ok_or_else(invalid)?;
                decoded.push(u8::from_str_radix(hex, 16).map_err(|_| invalid())?);
                at += 3;
            }
            b'+' => {
                decoded.push(b' ');
                at += 1;
            }
            byte => {
                decoded.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8(decoded).map_err(|_| invalid())
}

/// One entry of the host list: `name`, `name:port`, `[v6]` or `[v6]:port`.
fn check_host(entry: &str) -> Result<(), UrlError> {
    let refuse = |why: &str| Err(UrlError(format!("host {entry:?} in the list: {why}")));
    if entry.is_empty() {
        return refuse("an empty host (name every host: host1,host2)");
    }
    let (host, port) = if let Some(bracketed) = entry.strip_prefix('[') {
        let Some((address, after)) = bracketed.split_once(']') else {
            return refuse("an IPv6 address without its closing `]`");
        };
        if address.parse::<Ipv6Addr>().is_err() {
            return refuse("not an IPv6 address between the brackets");
        }
        match after {
            "" => (address, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (address, Some(port)),
                None => return refuse("only `:port` may follow `]`"),
            },
        }
    } else {
        match entry.split_once(':') {
            Some((_, port)) if port.contains(':') => {
                return refuse("an IPv6 address must be written in brackets: [::1]:5432");
            }
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        }
    };
    if host.is_empty() {
        return refuse("no host before the port");
    }
    if host.contains(['[', ']']) {
        return refuse("a bracket outside an IPv6 address");
    }
    match port {
        None => Ok(()),
        Some(port)
            if !port.is_empty()
                && port.bytes().all(|byte| byte.is_ascii_digit())
                && port.parse::<u16>().is_ok_and(|port| port > 0) =>
        {
            Ok(())
        }
        Some(_) => refuse("the port must be a number from 1 to 65535"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(url: &str) -> Vec<(String, u16)> {
        parse(url)
            .unwrap_or_else(|error| panic!("{url}: {error}"))
            .hosts
            .iter()
            .map(|options| (options.get_host().to_owned(), options.get_port()))
            .collect()
    }

    fn refusal(url: &str) -> String {
        let error = parse(url).expect_err(url);
        let text = crate::report::ErrorChain(&error).to_string();
        assert!(!text.contains('\n'), "{text:?}");
        text
    }

    fn owned(pairs: &[(&str, u16)]) -> Vec<(String, u16)> {
        pairs
            .iter()
            .map(|(host, port)| ((*host).to_owned(), *port))
            .collect()
    }

    #[test]
    fn a_single_host_url_is_read_by_sqlx_as_written() {
        for url in [
            "postgres://u:p%40ss@db.example:6543/items?sslmode=disable&application_name=x",
            "postgresql://localhost/test",
            "postgres://%2Fvar%2Frun%2Fpostgresql/items",
            "postgres://u@[::1]:5433/items",
            "POSTGRES://h",
        ] {
            let parsed = parse(url).expect(url);
            let sqlx = PgConnectOptions::from_str(url).expect(url);
            assert_eq!(parsed.attrs, SessionAttrs::Any);
            assert_eq!(parsed.hosts.len(), 1);
            assert_eq!(
                format!("{:?}", parsed.hosts[0]),
                format!("{sqlx:?}"),
                "{url}"
            );
        }
    }

    #[test]
    fn each_listed_host_gets_its_port_and_everything_else_as_written() {
        let parsed = parse(
            "postgres://u:p%40ss@h1:5432,h2,[::1]:5434,10.0.0.7:5435/my%20db\
             ?sslmode=disable&target_session_attrs=read-write&application_name=items",
        )
        .expect("a valid URL");

        assert_eq!(parsed.attrs, SessionAttrs::ReadWrite);
        let ports: Vec<(&str, u16)> = parsed
            .hosts
            .iter()
            .map(|options| (options.get_host(), options.get_port()))
            .collect();
        assert_eq!(
            ports,
            [
                ("h1", 5432),
                ("h2", 5432),
                ("[::1]", 5434),
                ("10.0.0.7", 5435)
            ]
        );
        for options in &parsed.hosts {
            assert_eq!(options.get_username(), "u");
            assert_eq!(options.get_database(), Some("my db"));
            assert_eq!(options.get_application_name(), Some("items"));
            assert!(matches!(
                options.get_ssl_mode(),
                sqlx::postgres::PgSslMode::Disable
            ));
        }
    }

    #[test]
    fn the_attribute_is_read_here_and_not_passed_on() {
        for (value, attrs) in SessionAttrs::NAMES {
            let parsed =
                parse(&format!("postgres://h1,h2/db?target_session_attrs={value}")).expect(value);
            assert_eq!(parsed.attrs, attrs);
            assert_eq!(attrs.name(), value);
        }
        // One host with the attribute: honoured, and not left to sqlx.
        let one = parse("postgres://u@h:5432/db?target_session_attrs=read%2Dwrite&sslmode=disable")
            .expect("valid");
        assert_eq!(one.attrs, SessionAttrs::ReadWrite);
        assert_eq!(one.hosts.len(), 1);
        assert_eq!(
            format!("{:?}", one.hosts[0]),
            format!(
                "{:?}",
                PgConnectOptions::from_str("postgres://u@h:5432/db?sslmode=disable")
                    .expect("valid")
            )
        );
        assert_eq!(
            hosts("postgres://h1:1,h2:2/db?load_balance_hosts=disable"),
            owned(&[("h1", 1), ("h2", 2)])
        );
    }

    #[test]
    fn a_user_without_password_and_a_url_without_path_or_query_are_fine() {
        assert_eq!(
            hosts("postgresql://h1:7000,h2:7001"),
            owned(&[("h1", 7000), ("h2", 7001)])
        );
        assert_eq!(
            hosts("postgres://me@h1,h2:7001"),
            owned(&[("h1", 5432), ("h2", 7001)])
        );
    }

    #[test]
    fn a_broken_host_list_is_refused_in_one_line_naming_the_host() {
        for (url, expected) in [
            ("postgres://h1,,h2/db", "an empty host"),
            ("postgres://h1,/db", "an empty host"),
            ("postgres://h1:5432,h2:0/db", "from 1 to 65535"),
            ("postgres://h1:5432,h2:99999/db", "from 1 to 65535"),
            ("postgres://h1:5432,h2:x/db", "from 1 to 65535"),
            ("postgres://h1:5432,h2:/db", "from 1 to 65535"),
            ("postgres://h1,::1:5432/db", "in brackets"),
            ("postgres://h1,[::1/db", "closing `]`"),
            ("postgres://h1,[nope]:5432/db", "not an IPv6 address"),
            ("postgres://h1,[::1]x/db", "only `:port`"),
            ("postgres://h1,:5432/db", "no host before the port"),
            ("postgres://h1,h2/db?port=5433", "`port=` cannot stand"),
            ("postgres://h1,h2/db?host=h3", "`host=` cannot stand"),
            (
                "postgres://h1,h2/db?target_session_attrs=writable",
                "none of any, read-write",
            ),
            (
                "postgres://h/db?target_session_attrs=primary%ZZ",
                "not valid percent-encoded",
            ),
            (
                "postgres://h1,h2/db?load_balance_hosts=random",
                "not supported",
            ),
        ] {
            let text = refusal(url);
            assert!(text.contains(expected), "{url}: {text}");
        }
    }

    #[test]
    fn a_url_sqlx_refuses_is_refused_as_before() {
        let url = "postgres://h:port/db";
        let ours = parse(url).expect_err(url);
        let sqlx = PgConnectOptions::from_str(url).expect_err(url);
        assert_eq!(ours.to_string(), sqlx.to_string());
    }

    #[test]
    fn query_components_are_percent_decoded() {
        assert_eq!(decode("read%2dwrite").as_deref(), Ok("read-write"));
        assert_eq!(decode("a+b").as_deref(), Ok("a b"));
        assert!(decode("%e9").is_err(), "not UTF-8");
        assert!(decode("%4").is_err());
    }
}
