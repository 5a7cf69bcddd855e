//! The servers a `DATABASE_URL` lists, and which of them a new connection
//! goes to: the host selection of every connection the store opens (the
//! pool's, the fate lookup's, the first one at start, a copy's).
//!
//! Invariants:
//! - one host and no `target_session_attrs`: a connection is opened exactly
//!   as before hosts could be listed, with no round trip of its own;
//! - otherwise each new connection asks its server, in one round trip at
//!   connect time, whether its sessions may write, whether it is in
//!   recovery and which timeline it writes on ([`ServerState`]), and is
//!   kept only if the server has the attribute the URL asks for
//!   ([`SessionAttrs`]); one that does not is closed and counted
//!   ([`READ_ONLY_REFUSALS`]);
//! - hosts are tried starting with the host the last connection went to,
//!   then the others in the listed order: a store that failed over stays
//!   on the new primary, never sending new connections back to an old one
//!   that came back writable beside it (two primaries would each take
//!   writes), and a first host that swallows packets costs each new
//!   connection nothing once another host took over;
//! - each host's attempt is bounded by its share of the wait, so a host
//!   that never answers cannot keep the next one from being tried;
//! - the host a connection goes to changing is a failover: logged and
//!   counted ([`FAILOVERS`]).

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio_postgres::Client;

use super::link::{self, Link, OpenError};
use super::url::{PostgresUrl, Target};

pub(super) use super::url::SessionAttrs;

/// Times the host new connections go to changed (a failover, or a return).
pub const FAILOVERS: &str = "database_failovers_total";
/// Connections refused because their server did not have the attribute
/// `target_session_attrs` asks for (with `read-write`: it was read-only).
pub const READ_ONLY_REFUSALS: &str = "database_read_only_refusals_total";

/// No host yet.
const NONE: usize = usize::MAX;
/// The least time one host's attempt is given, however many hosts share
/// the wait: a TCP and startup handshake on a sound network.
const LEAST_ATTEMPT: Duration = Duration::from_millis(250);

/// What a server said of itself at connect time.
const STATE: &str = "select current_setting('transaction_read_only'), \
     pg_is_in_recovery()::text, \
     case when pg_is_in_recovery() then '' \
     else substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) end";

/// The servers of one `DATABASE_URL`, the driver's settings for each new
/// connection, and the attribute a connection's server must have.
#[derive(Debug)]
pub(super) struct Hosts {
    targets: Vec<Target>,
    config: tokio_postgres::Config,
    attrs: SessionAttrs,
    /// The host the last connection went to ([`NONE`] before the first).
    current: AtomicUsize,
}

/// Which server a connection is on, for telling whether a later answer
/// (the fate of a transaction) comes from the same history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Server {
    /// Its index in the host list.
    pub(super) host: usize,
    /// The timeline it wrote on when the connection was opened (`None`
    /// when not asked: one host, no attribute). A standby promoted since
    /// writes on a new one, and may hand out again transaction ids the old
    /// primary had used without replicating them.
    pub(super) timeline: Option<String>,
}

/// A new connection and the server it is on.
#[derive(Debug)]
pub(super) struct Opened {
    pub(super) link: Link,
    pub(super) server: Server,
}

/// What a server said of itself ([`STATE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ServerState {
    pub(super) read_only: bool,
    pub(super) in_recovery: bool,
    /// The timeline of its WAL (none on a standby).
    pub(super) timeline: Option<String>,
}

impl ServerState {
    /// Asks `client`'s server, in one round trip.
    pub(super) async fn read(client: &Client) -> Result<Self, tokio_postgres::Error> {
        // A simple query: one round trip, text columns.
        let messages = client.simple_query(STATE).await?;
        let row = messages.iter().find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        });
        let column = |at: usize| row.and_then(|row| row.get(at)).unwrap_or_default();
        let timeline = column(2);
        Ok(Self {
            read_only: column(0) == "on",
            in_recovery: column(1) == "true",
            timeline: (!timeline.is_empty()).then(|| timeline.to_owned()),
        })
    }

    /// Whether a connection to this server may be kept under `attrs`
    /// (`PreferStandby`: on the pass that wants a standby).
    pub(super) fn fits(&self, attrs: SessionAttrs) -> bool {
        match attrs {
            SessionAttrs::Any => true,
            SessionAttrs::ReadWrite => !self.read_only,
            SessionAttrs::ReadOnly => self.read_only,
            SessionAttrs::Primary => !self.in_recovery,
            SessionAttrs::Standby | SessionAttrs::PreferStandby => self.in_recovery,
        }
    }

    /// Why a connection to this server was not kept.
    fn refusal(&self) -> &'static str {
        match (self.read_only, self.in_recovery) {
            (true, true) => "a standby (read-only)",
            (true, false) => "read-only",
            (false, true) => "a standby",
            (false, false) => "writable",
        }
    }
}

/// Why no host gave a connection: every host and what it answered.
#[derive(Debug)]
pub struct NoHost {
    attrs: SessionAttrs,
    tried: Vec<(String, String)>,
}

impl fmt::Display for NoHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no host of the database URL gave a {} session: ",
            self.attrs.name()
        )?;
        for (at, (host, why)) in self.tried.iter().enumerate() {
            let separator = if at == 0 { "" } else { "; " };
            write!(f, "{separator}{host}: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NoHost {}

impl Hosts {
    /// The servers of `url`, each new connection started with the server
    /// settings `options` (`-c name=value …`) beside the URL's own.
    pub(super) fn new(url: &PostgresUrl, options: &str) -> Self {
        Self {
            targets: url.targets().to_vec(),
            config: url.config_with(options),
            attrs: url.attrs(),
            current: AtomicUsize::new(NONE),
        }
    }

    /// Whether a new connection asks its server what it is: several hosts,
    /// or an attribute to check.
    pub(super) fn asks(&self) -> bool {
        self.targets.len() > 1 || self.attrs != SessionAttrs::Any
    }

    /// Whether the URL lists several hosts.
    pub(super) fn several(&self) -> bool {
        self.targets.len() > 1
    }

    /// The attribute a connection's server must have.
    pub(super) fn attrs(&self) -> SessionAttrs {
        self.attrs
    }

    /// How logs and `/readyz` name host `host`.
    pub(super) fn label(&self, host: usize) -> &str {
        self.targets
            .get(host)
            .map_or("no host", |target| target.label.as_str())
    }

    /// The host the last connection went to, if any went yet.
    pub(super) fn current(&self) -> Option<usize> {
        Some(self.current.load(Ordering::SeqCst)).filter(|host| *host != NONE)
    }

    /// A new connection to the first host, starting with the current one,
    /// whose server has the attribute; each host's attempt takes at most
    /// its share of `wait` (the caller bounds the whole). One host with no
    /// attribute is opened with no question asked, its error unchanged.
    ///
    /// # Errors
    /// The one host's error; with several, [`NoHost`] naming what each
    /// said, or the last host's error when every host refused for good (a
    /// wrong password everywhere, say), so that is seen as permanent.
    pub(super) async fn connect(&self, wait: Duration) -> Result<Opened, OpenError> {
        if !self.asks() {
            let link = link::open(&self.targets[0], &self.config).await?;
            self.settle_on(0);
            return Ok(Opened {
                link,
                server: Server {
                    host: 0,
                    timeline: None,
                },
            });
        }
        let share = match self.targets.len() {
            1 => wait,
            hosts => (wait / hosts as u32).max(LEAST_ATTEMPT),
        };
        let mut tried = Vec::new();
        let mut permanent = None;
        let mut all_permanent = true;
        // `prefer-standby`: the first writable server is kept aside, used
        // if no standby answers.
        let mut fallback: Option<Opened> = None;
        for host in self.order() {
            let label = self.label(host).to_owned();
            match tokio::time::timeout(share, self.attempt(host)).await {
                Ok(Ok((link, state))) if state.fits(self.attrs) => {
                    if let Some(fallback) = fallback.take() {
                        fallback.link.close(share).await;
                    }
                    self.settle_on(host);
                    return Ok(Opened {
                        link,
                        server: Server {
                            host,
                            timeline: state.timeline,
                        },
                    });
                }
                Ok(Ok((link, state))) => {
                    all_permanent = false;
                    if self.attrs == SessionAttrs::PreferStandby && fallback.is_none() {
                        fallback = Some(Opened {
                            link,
                            server: Server {
                                host,
                                timeline: state.timeline,
                            },
                        });
                        continue;
                    }
                    metrics::counter!(READ_ONLY_REFUSALS).increment(1);
                    tracing::debug!(host = %label, server = state.refusal(), attrs = self.attrs.name(),
                        "a new database connection was refused for its server");
                    tried.push((label, state.refusal().to_owned()));
                    link.close(share).await;
                }
                Ok(Err(error)) => {
                    all_permanent &= error.is_permanent();
                    tried.push((label, crate::report::ErrorChain(&error).to_string()));
                    permanent = Some(error);
                }
                Err(_) => {
                    all_permanent = false;
                    tried.push((label, format!("no answer within {} ms", share.as_millis())));
                }
            }
        }
        if let Some(fallback) = fallback {
            self.settle_on(fallback.server.host);
            return Ok(fallback);
        }
        match permanent {
            Some(error) if all_permanent => Err(error),
            _ => Err(OpenError::NoHost(NoHost {
                attrs: self.attrs,
                tried,
            })),
        }
    }

    /// Every host once: the current one first, then the others as listed.
    fn order(&self) -> Vec<usize> {
        let hosts = self.targets.len();
        let first = self.current().filter(|host| *host < hosts).unwrap_or(0);
        std::iter::once(first)
            .chain((0..hosts).filter(|host| *host != first))
            .collect()
    }

    /// Opens a connection to `host` and asks its server what it is.
    async fn attempt(&self, host: usize) -> Result<(Link, ServerState), OpenError> {
        let link = link::open(&self.targets[host], &self.config).await?;
        match ServerState::read(&link).await {
            Ok(state) => Ok((link, state)),
            Err(error) => Err(OpenError::Driver(error)),
        }
    }

    /// New connections now go to `host`: a failover when they went to
    /// another before.
    pub(super) fn settle_on(&self, host: usize) {
        let before = self.current.swap(host, Ordering::SeqCst);
        if before != host && before != NONE {
            metrics::counter!(FAILOVERS).increment(1);
            tracing::warn!(
                from = %self.label(before),
                to = %self.label(host),
                "database connections now go to another host"
            );
        }
    }
}

/// Describes this module's metrics to the installed recorder, at 0.
pub(super) fn describe_metrics() {
    metrics::describe_counter!(
        FAILOVERS,
        "Times the PostgreSQL host new connections go to changed (DATABASE_URL listing several hosts): failovers, and returns."
    );
    metrics::describe_counter!(
        READ_ONLY_REFUSALS,
        "New PostgreSQL connections closed because their server lacked the target_session_attrs of DATABASE_URL (read-write: the server was read-only, e.g. a standby)."
    );
    metrics::counter!(FAILOVERS).increment(0);
    metrics::counter!(READ_ONLY_REFUSALS).increment(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(url: &str) -> Hosts {
        Hosts::new(&PostgresUrl::parse(url).expect("valid"), "")
    }

    fn state(read_only: bool, in_recovery: bool) -> ServerState {
        ServerState {
            read_only,
            in_recovery,
            timeline: None,
        }
    }

    #[test]
    fn each_attribute_keeps_the_servers_libpq_keeps() {
        let primary = state(false, false);
        let read_only_primary = state(true, false);
        let standby = state(true, true);
        let cases = [
            (SessionAttrs::Any, [true, true, true]),
            (SessionAttrs::ReadWrite, [true, false, false]),
            (SessionAttrs::ReadOnly, [false, true, true]),
            (SessionAttrs::Primary, [true, true, false]),
            (SessionAttrs::Standby, [false, false, true]),
            (SessionAttrs::PreferStandby, [false, false, true]),
        ];
        for (attrs, expected) in cases {
            let kept = [&primary, &read_only_primary, &standby].map(|server| server.fits(attrs));
            assert_eq!(kept, expected, "{attrs:?}");
        }
    }

    #[test]
    fn hosts_are_tried_from_the_current_one_then_as_listed() {
        let hosts = hosts("postgres://h0,h1,h2/db");
        assert_eq!(hosts.order(), [0, 1, 2]);
        hosts.settle_on(0);
        hosts.settle_on(2);
        assert_eq!(hosts.order(), [2, 0, 1]);
        assert_eq!(hosts.current(), Some(2));
        assert_eq!(hosts.label(2), "h2:5432");
    }

    #[test]
    fn one_host_without_an_attribute_asks_nothing() {
        let one = hosts("postgres://u@h:5432/db?sslmode=disable");
        let attribute = hosts("postgres://u@h:5432/db?target_session_attrs=read-write");
        let two = hosts("postgres://u@h:5432,g/db");

        assert!(!one.asks());
        assert!(attribute.asks() && !attribute.several());
        assert!(two.asks() && two.several());
    }

    #[test]
    fn the_failure_names_every_host_and_what_it_said() {
        let failure = NoHost {
            attrs: SessionAttrs::ReadWrite,
            tried: vec![
                ("h1:5432".to_owned(), "connection refused".to_owned()),
                ("h2:5433".to_owned(), "a standby (read-only)".to_owned()),
            ],
        };
        assert_eq!(
            failure.to_string(),
            "no host of the database URL gave a read-write session: h1:5432: connection \
             refused; h2:5433: a standby (read-only)"
        );
    }
}
