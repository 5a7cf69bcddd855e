//! The servers a `DATABASE_URL` lists, and which of them a new connection
//! goes to: the host selection of every connection the store opens (the
//! pool's, the fate lookup's, the first one at start, a copy's).
//!
//! Invariants:
//! - each new connection asks its server, in one round trip at connect
//!   time, whether its sessions may write, whether it is in recovery and
//!   which timeline it writes on ([`ServerState`]), and is kept only if
//!   the server has the attribute the URL asks for ([`SessionAttrs`]); one
//!   that does not is closed and counted ([`READ_ONLY_REFUSALS`]). With
//!   one host and no attribute the question is asked too (a name that a
//!   failover manager moves can land on an old primary); a server that
//!   cannot answer it is then kept as before, unfenced;
//! - fencing: once a connection was kept on a primary of timeline `t`, no
//!   connection is kept on a primary of a timeline older than `t` (an old
//!   primary started again beside the promoted one: writing there would
//!   split the data). Such a host is refused like a read-only one, logged
//!   at ERROR when it becomes fenced, counted ([`FENCED_REFUSALS`],
//!   [`FENCED_HOSTS`]), tried last, and no longer fenced once it answers
//!   as a standby or on a timeline as new (rejoined, promoted again).
//!   Timelines only grow along one history, so the newest one written on
//!   is the primary's;
//! - hosts are tried starting with the host the last connection went to,
//!   then the others in the listed order, fenced ones last: a store that
//!   failed over stays on the new primary, and a first host that swallows
//!   packets costs each new connection nothing once another host took
//!   over;
//! - the hosts share the wait: each next host's attempt starts when the
//!   ones before it have all said no, or when the last one started has had
//!   its head start ([`stagger`]) without an answer, the attempts then
//!   running side by side; every host starts within the first half of the
//!   wait, so a good host anywhere in the list is reached however many
//!   hang before it. The first connection that fits is kept and the other
//!   attempts are dropped; a failure names every host and what it did;
//! - the host a connection goes to changing is a failover: logged and
//!   counted ([`FAILOVERS`]).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;
use tokio_postgres::Client;

use super::link::{self, Link, NoHost, OpenError};
use super::url::{PostgresUrl, Target};

pub(super) use super::url::SessionAttrs;

/// Times the host new connections go to changed (a failover, or a return).
pub const FAILOVERS: &str = "database_failovers_total";
/// Connections refused because their server did not have the attribute
/// `target_session_attrs` asks for (with `read-write`: it was read-only).
pub const READ_ONLY_REFUSALS: &str = "database_read_only_refusals_total";
/// Connections refused because their server was a primary on a timeline
/// older than one this instance wrote on (fenced).
pub const FENCED_REFUSALS: &str = "database_fenced_hosts_total";
/// Hosts fenced now: last seen as a primary on an older timeline.
pub const FENCED_HOSTS: &str = "database_fenced_hosts";

/// No host yet.
const NONE: usize = usize::MAX;
/// The most head start one host's attempt has before the next one starts
/// beside it: RFC 8305's connection attempt delay, ample for a TCP and
/// startup handshake on a sound network.
const HEAD_START: Duration = Duration::from_millis(250);
/// How long a refused connection's goodbye is waited for (in the
/// background: the selection goes on meanwhile).
const GOODBYE: Duration = Duration::from_secs(1);

/// What a server said of itself at connect time.
const STATE: &str = "select current_setting('transaction_read_only'), \
     pg_is_in_recovery()::text, \
     case when pg_is_in_recovery() then '' \
     else substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) end";

/// The servers of one `DATABASE_URL`, the driver's settings for each new
/// connection, the attribute a connection's server must have, and what
/// fencing knows.
#[derive(Debug)]
pub(super) struct Hosts {
    targets: Vec<Target>,
    config: tokio_postgres::Config,
    attrs: SessionAttrs,
    /// The host the last connection went to ([`NONE`] before the first).
    current: AtomicUsize,
    /// The newest timeline of a primary a connection was kept on (0: none
    /// yet; PostgreSQL's first timeline is 1).
    written: AtomicU32,
    /// Per host, the timeline it was fenced on, while it is fenced.
    fenced: Mutex<Vec<Option<u32>>>,
    /// A server could not say what it is (one host, no attribute), and
    /// that was logged: once is enough.
    told_unknown: AtomicBool,
}

/// Which server a connection is on, for telling whether a later answer
/// (the fate of a transaction) comes from the same history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Server {
    /// Its index in the host list.
    pub(super) host: usize,
    /// The timeline it wrote on when the connection was opened (`None` on
    /// a standby, or a server that could not say). A standby promoted
    /// since writes on a new one, and may hand out again transaction ids
    /// the old primary had used without replicating them.
    pub(super) timeline: Option<u32>,
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
    pub(super) timeline: Option<u32>,
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
        Ok(Self {
            read_only: column(0) == "on",
            in_recovery: column(1) == "true",
            timeline: timeline_of(column(2)),
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

    /// The timeline this primary writes on, if it is older than `written`
    /// (the newest this instance wrote on): then it is fenced. A standby
    /// is never fenced; it writes nothing.
    fn fenced_under(&self, written: u32) -> Option<u32> {
        self.timeline
            .filter(|timeline| !self.in_recovery && *timeline < written)
    }
}

/// The timeline in the first 8 hex digits of a WAL file's name
/// (`000000020000000000000003`: 2); `None` when empty or unreadable.
fn timeline_of(hex: &str) -> Option<u32> {
    u32::from_str_radix(hex, 16).ok()
}

/// What became of one host's attempt, as the selection judges it.
enum Verdict {
    /// The connection is kept.
    Keep,
    /// `prefer-standby` found a server that is no standby: kept aside,
    /// used if no standby answers.
    Fallback,
    /// Closed, for this reason.
    Refuse(String),
}

impl Hosts {
    /// The servers of `url`, each new connection started with the server
    /// settings `options` (`-c name=value …`) beside the URL's own.
    pub(super) fn new(url: &PostgresUrl, options: &str) -> Self {
        let targets = url.targets().to_vec();
        Self {
            fenced: Mutex::new(vec![None; targets.len()]),
            targets,
            config: url.config_with(options),
            attrs: url.attrs(),
            current: AtomicUsize::new(NONE),
            written: AtomicU32::new(0),
            told_unknown: AtomicBool::new(false),
        }
    }

    /// Whether the URL names what a server must be: several hosts, or an
    /// attribute to check. Otherwise a server that cannot say what it is
    /// is still used, as it was before hosts could be listed.
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

    /// The timeline of a server that said `state`, if it is a primary on a
    /// timeline older than one written on: fenced.
    pub(super) fn fenced_on(&self, state: &ServerState) -> Option<u32> {
        state.fenced_under(self.written.load(Ordering::SeqCst))
    }

    /// Whether a connection opened on `server` is behind the timeline
    /// written on since (a pooled connection to an old primary): it must
    /// not write, and is closed.
    pub(super) fn is_behind(&self, server: &Server) -> bool {
        server
            .timeline
            .is_some_and(|timeline| timeline < self.written.load(Ordering::SeqCst))
    }

    /// A new connection, to the first host (starting with the current one)
    /// whose server has the attribute and is not fenced, the hosts sharing
    /// `wait` as the module says; nothing here outlasts `wait`.
    ///
    /// # Errors
    /// With one host, its own error (or [`OpenError::TimedOut`] when it
    /// did not answer), or [`NoHost`] when it was refused. With several,
    /// [`NoHost`] naming what each did, or the last host's error when
    /// every host refused for good (a wrong password everywhere, say), so
    /// that is seen as permanent.
    pub(super) async fn connect(&self, wait: Duration) -> Result<Opened, OpenError> {
        let started = Instant::now();
        let deadline = started + wait;
        let order = self.order();
        let stagger = stagger(wait, order.len());
        // Per position in `order`: when its attempt started, what it did.
        let mut began: Vec<Option<Instant>> = vec![None; order.len()];
        let mut said: Vec<Option<String>> = vec![None; order.len()];
        let mut last_error = None;
        let mut all_permanent = true;
        let mut fallback: Option<Opened> = None;
        let mut attempts = FuturesUnordered::new();
        let mut next = 0;
        let mut next_at = started;
        loop {
            // The next host starts once every attempt before it has said
            // no, or the last one started has had its head start.
            while next < order.len() && (attempts.is_empty() || Instant::now() >= next_at) {
                let (position, host) = (next, order[next]);
                began[position] = Some(Instant::now());
                attempts.push(async move { (position, self.attempt(host).await) });
                next += 1;
                next_at = Instant::now() + stagger;
            }
            let wake = if next < order.len() {
                next_at.min(deadline)
            } else {
                deadline
            };
            let (position, result) = match tokio::time::timeout_at(wake, attempts.next()).await {
                Ok(Some(answered)) => answered,
                Ok(None) => break,
                Err(_) if Instant::now() >= deadline => break,
                Err(_) => continue,
            };
            let host = order[position];
            match result {
                Ok((link, state)) => match self.judge(host, &state) {
                    Verdict::Keep => {
                        if let Some(fallback) = fallback.take() {
                            tokio::spawn(fallback.link.close(GOODBYE));
                        }
                        return Ok(self.keep(host, link, &state));
                    }
                    Verdict::Fallback if fallback.is_none() => {
                        all_permanent = false;
                        said[position] = Some(format!(
                            "{}, kept in case no standby answers",
                            state.refusal()
                        ));
                        fallback = Some(Opened {
                            link,
                            server: Server {
                                host,
                                timeline: state.timeline,
                            },
                        });
                    }
                    Verdict::Fallback => {
                        all_permanent = false;
                        said[position] = Some(state.refusal().to_owned());
                        tokio::spawn(link.close(GOODBYE));
                    }
                    Verdict::Refuse(why) => {
                        all_permanent = false;
                        said[position] = Some(why);
                        tokio::spawn(link.close(GOODBYE));
                    }
                },
                Err(error) => {
                    all_permanent &= error.is_permanent();
                    said[position] = Some(crate::report::ErrorChain(&error).to_string());
                    last_error = Some(error);
                }
            }
            // A host that said no: the next one need not wait its turn.
            next_at = Instant::now();
        }
        drop(attempts);
        if let Some(fallback) = fallback {
            let host = fallback.server.host;
            self.raise(&fallback.server);
            self.settle_on(host);
            return Ok(fallback);
        }
        let unanswered = said.iter().any(Option::is_none);
        if self.targets.len() == 1 {
            return match (last_error, unanswered) {
                (Some(error), _) => Err(error),
                (None, true) => Err(OpenError::TimedOut(wait)),
                (None, false) => Err(self.no_host(&order, &began, said, deadline)),
            };
        }
        match last_error {
            Some(error) if all_permanent && !unanswered => Err(error),
            _ => Err(self.no_host(&order, &began, said, deadline)),
        }
    }

    /// The failure naming every host in the order tried, and what each did.
    fn no_host(
        &self,
        order: &[usize],
        began: &[Option<Instant>],
        said: Vec<Option<String>>,
        deadline: Instant,
    ) -> OpenError {
        let tried = order
            .iter()
            .zip(began)
            .zip(said)
            .map(|((host, began), said)| {
                let why = said.unwrap_or_else(|| match began {
                    Some(began) => format!(
                        "no answer within {} ms",
                        deadline.saturating_duration_since(*began).as_millis()
                    ),
                    None => "not tried: no time left".to_owned(),
                });
                (self.label(*host).to_owned(), why)
            })
            .collect();
        OpenError::NoHost(NoHost {
            attrs: self.attrs,
            tried,
        })
    }

    /// Every host once: the current one first, then the others as listed,
    /// the fenced ones last (in the same order among themselves).
    fn order(&self) -> Vec<usize> {
        let hosts = self.targets.len();
        let first = self.current().filter(|host| *host < hosts).unwrap_or(0);
        let mut order: Vec<usize> = std::iter::once(first)
            .chain((0..hosts).filter(|host| *host != first))
            .collect();
        let fenced = self.fenced_now();
        order.sort_by_key(|host| fenced.get(*host).is_some_and(Option::is_some));
        order
    }

    /// Opens a connection to `host` and asks its server what it is.
    async fn attempt(&self, host: usize) -> Result<(Link, ServerState), OpenError> {
        let link = link::open(&self.targets[host], &self.config).await?;
        match ServerState::read(&link).await {
            Ok(state) => Ok((link, state)),
            // A server that cannot say (a wire-compatible one without
            // `pg_walfile_name`, say) was used before it was asked: with
            // one host and no attribute it still is, unfenced.
            Err(error) if !self.asks() && error.as_db_error().is_some() => {
                if !self.told_unknown.swap(true, Ordering::SeqCst) {
                    tracing::warn!(host = %self.label(host), error = %crate::report::ErrorChain(&error),
                        "the database server cannot say its timeline; it is used unfenced");
                }
                Ok((
                    link,
                    ServerState {
                        read_only: false,
                        in_recovery: false,
                        timeline: None,
                    },
                ))
            }
            Err(error) => Err(OpenError::Driver(error)),
        }
    }

    /// Whether a connection to `host`, whose server said `state`, is kept:
    /// a fenced primary is refused first (and counted), then the attribute
    /// decides. A host that answers unfenced is no longer fenced.
    fn judge(&self, host: usize, state: &ServerState) -> Verdict {
        if let Some(timeline) = self.fenced_on(state) {
            metrics::counter!(FENCED_REFUSALS).increment(1);
            self.fence(host, timeline);
            return Verdict::Refuse(format!(
                "fenced: a primary on timeline {timeline}, older than timeline {} this \
                 instance wrote on",
                self.written.load(Ordering::SeqCst)
            ));
        }
        self.unfence(host, state);
        if state.fits(self.attrs) {
            return Verdict::Keep;
        }
        if self.attrs == SessionAttrs::PreferStandby {
            return Verdict::Fallback;
        }
        metrics::counter!(READ_ONLY_REFUSALS).increment(1);
        tracing::debug!(host = %self.label(host), server = state.refusal(), attrs = self.attrs.name(),
            "a new database connection was refused for its server");
        Verdict::Refuse(state.refusal().to_owned())
    }

    /// The connection to `host` is kept: its primary's timeline is now one
    /// written on, and new connections go to `host`.
    fn keep(&self, host: usize, link: Link, state: &ServerState) -> Opened {
        let server = Server {
            host,
            timeline: state.timeline.filter(|_| !state.in_recovery),
        };
        self.raise(&server);
        self.settle_on(host);
        Opened { link, server }
    }

    /// A connection on `server` may write: its timeline is the newest
    /// written on, if it is newer.
    fn raise(&self, server: &Server) {
        if let Some(timeline) = server.timeline {
            self.written.fetch_max(timeline, Ordering::SeqCst);
        }
    }

    /// New connections go to `server`'s host, and its timeline is one
    /// written on: for a store whose pool takes over from the connection
    /// that migrated (`store.rs`).
    pub(super) fn adopt(&self, server: &Server) {
        self.raise(server);
        self.settle_on(server.host);
    }

    /// Marks `host` fenced, found a primary on `timeline`: logged at ERROR
    /// when it was not fenced on that timeline already.
    pub(super) fn fence(&self, host: usize, timeline: u32) {
        let mut fenced = self.fenced.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(slot) = fenced.get_mut(host) else {
            return;
        };
        if slot.replace(timeline) != Some(timeline) {
            tracing::error!(
                host = %self.label(host),
                timeline,
                written = self.written.load(Ordering::SeqCst),
                "a database host is fenced: it is a primary on timeline {timeline}, older than \
                 timeline {} this instance wrote on (an old primary started again beside the \
                 promoted one?); no write goes to it. Rejoin it as a standby (pg_rewind or a new \
                 base backup)",
                self.written.load(Ordering::SeqCst)
            );
        }
    }

    /// `host` answered as `state`, not fenced: if it was, it is no longer.
    fn unfence(&self, host: usize, state: &ServerState) {
        let mut fenced = self.fenced.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(timeline) = fenced.get_mut(host).and_then(Option::take) {
            tracing::warn!(
                host = %self.label(host),
                was = timeline,
                now = %if state.in_recovery { "a standby" } else { "a primary on a timeline as new" },
                "a fenced database host is no longer fenced"
            );
        }
    }

    /// Per host, the timeline it is fenced on, if it is.
    fn fenced_now(&self) -> Vec<Option<u32>> {
        self.fenced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The fenced hosts, named with their timeline and the one written on
    /// (`/readyz`); `None` when no host is fenced.
    pub(super) fn fenced_report(&self) -> Option<String> {
        let written = self.written.load(Ordering::SeqCst);
        let fenced: Vec<String> = self
            .fenced_now()
            .iter()
            .enumerate()
            .filter_map(|(host, timeline)| {
                timeline.map(|timeline| {
                    format!(
                        "{} (a primary on timeline {timeline}, older than timeline {written} \
                         written on)",
                        self.label(host)
                    )
                })
            })
            .collect();
        (!fenced.is_empty()).then(|| format!("fenced: {}", fenced.join(", ")))
    }

    /// How many hosts are fenced now.
    pub(super) fn fenced_count(&self) -> usize {
        self.fenced_now()
            .iter()
            .filter(|slot| slot.is_some())
            .count()
    }

    /// Asks each fenced host again what it is, within `wait`, so that one
    /// rejoined as a standby (or promoted again, on a newer timeline) is no
    /// longer reported fenced; nothing is kept, no host settled on.
    pub(super) async fn recheck_fenced(&self, wait: Duration) {
        let fenced: Vec<usize> = self
            .fenced_now()
            .iter()
            .enumerate()
            .filter_map(|(host, timeline)| timeline.map(|_| host))
            .collect();
        let checks = fenced.into_iter().map(|host| async move {
            if let Ok(Ok((link, state))) = tokio::time::timeout(wait, self.attempt(host)).await {
                match self.fenced_on(&state) {
                    Some(timeline) => self.fence(host, timeline),
                    None => self.unfence(host, &state),
                }
                tokio::spawn(link.close(GOODBYE));
            }
        });
        futures_util::future::join_all(checks).await;
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

/// The head start of each host's attempt over the next one's, with `hosts`
/// sharing `wait`: [`HEAD_START`], less when so many hosts share the wait
/// that the last would otherwise start after half of it.
fn stagger(wait: Duration, hosts: usize) -> Duration {
    match u32::try_from(hosts.saturating_sub(1)) {
        Ok(0) | Err(_) => wait,
        Ok(others) => HEAD_START.min(wait / 2 / others),
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
    metrics::describe_counter!(
        FENCED_REFUSALS,
        "New PostgreSQL connections closed because their server was a primary on a timeline older than one this instance wrote on (an old primary started again beside the promoted one): fenced, never written to."
    );
    metrics::describe_gauge!(
        FENCED_HOSTS,
        "PostgreSQL hosts fenced now: last seen as a primary on a timeline older than one this instance wrote on. Rejoin them as standbys."
    );
    metrics::counter!(FAILOVERS).increment(0);
    metrics::counter!(READ_ONLY_REFUSALS).increment(0);
    metrics::counter!(FENCED_REFUSALS).increment(0);
    metrics::gauge!(FENCED_HOSTS).set(0.0);
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

    fn primary_on(timeline: u32) -> ServerState {
        ServerState {
            read_only: false,
            in_recovery: false,
            timeline: Some(timeline),
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
    fn one_host_without_an_attribute_asks_but_needs_no_answer() {
        let one = hosts("postgres://u@h:5432/db?sslmode=disable");
        let attribute = hosts("postgres://u@h:5432/db?target_session_attrs=read-write");
        let two = hosts("postgres://u@h:5432,g/db");

        assert!(!one.asks());
        assert!(attribute.asks() && !attribute.several());
        assert!(two.asks() && two.several());
    }

    #[test]
    fn timelines_are_read_as_hex_numbers() {
        assert_eq!(timeline_of("00000001"), Some(1));
        assert_eq!(timeline_of("0000000A"), Some(10));
        assert_eq!(timeline_of("00000010"), Some(16));
        assert_eq!(timeline_of(""), None);
        // Compared as numbers: timeline 10 is newer than 9.
        assert!(primary_on(9).fenced_under(10).is_some());
    }

    #[test]
    fn a_primary_on_an_older_timeline_than_one_written_on_is_fenced_c12() {
        let hosts = hosts("postgres://a,b/db?target_session_attrs=read-write");
        // Before any write, every primary is welcome.
        assert!(matches!(hosts.judge(0, &primary_on(1)), Verdict::Keep));
        hosts.raise(&Server {
            host: 1,
            timeline: Some(2),
        });
        hosts.settle_on(1);

        let Verdict::Refuse(why) = hosts.judge(0, &primary_on(1)) else {
            panic!("an old primary is refused");
        };
        assert_eq!(
            why,
            "fenced: a primary on timeline 1, older than timeline 2 this instance wrote on"
        );
        assert_eq!(hosts.fenced_count(), 1);
        assert_eq!(
            hosts.fenced_report().as_deref(),
            Some("fenced: a:5432 (a primary on timeline 1, older than timeline 2 written on)")
        );
        // Fenced hosts are tried last, even when listed first.
        hosts.settle_on(0);
        assert_eq!(hosts.order(), [1, 0]);
        // The same timeline, or a newer one (promoted twice), is kept.
        assert!(matches!(hosts.judge(1, &primary_on(2)), Verdict::Keep));
        assert!(matches!(hosts.judge(1, &primary_on(3)), Verdict::Keep));
        assert!(hosts.is_behind(&Server {
            host: 0,
            timeline: Some(1)
        }));
        assert!(!hosts.is_behind(&Server {
            host: 0,
            timeline: None
        }));

        // Rejoined as a standby, it is no longer fenced (and, a standby,
        // refused for writes as any standby is).
        assert!(matches!(
            hosts.judge(0, &state(true, true)),
            Verdict::Refuse(why) if why == "a standby (read-only)"
        ));
        assert_eq!(hosts.fenced_count(), 0);
        assert_eq!(hosts.fenced_report(), None);
    }

    #[test]
    fn every_host_starts_within_the_first_half_of_the_wait() {
        let second = Duration::from_secs(1);
        assert_eq!(stagger(second, 1), second);
        assert_eq!(stagger(second, 2), HEAD_START);
        assert_eq!(stagger(3 * second, 15), Duration::from_nanos(107_142_857));
        for hosts in 2..40 {
            assert!(stagger(second, hosts) * (hosts as u32 - 1) <= second / 2);
        }
    }

    /// Loopback sockets that listen and never accept: the kernel completes
    /// each TCP handshake, and the startup message is never answered.
    fn hanging(count: usize) -> Vec<std::net::TcpListener> {
        (0..count)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port"))
            .collect()
    }

    fn port_of(listener: &std::net::TcpListener) -> u16 {
        listener.local_addr().expect("bound").port()
    }

    /// A URL of the test server's `postgres` database on `hosts`.
    fn test_url(hosts: &[String]) -> String {
        let config: tokio_postgres::Config = items_testkit::postgres::test_database_url()
            .parse()
            .expect("a valid test URL");
        let user = config.get_user().unwrap_or("postgres");
        format!("postgres://{user}@{}/postgres", hosts.join(","))
    }

    #[tokio::test]
    async fn a_good_host_after_fourteen_that_hang_is_reached_within_half_the_wait_c12() {
        let good = items_testkit::postgres::test_server_address().await;
        let listeners = hanging(14);
        let mut listed: Vec<String> = listeners
            .iter()
            .map(|listener| format!("127.0.0.1:{}", port_of(listener)))
            .collect();
        listed.push(good.to_string());
        let hosts = hosts(&test_url(&listed));
        let wait = Duration::from_secs(3);

        let started = Instant::now();
        let opened = hosts.connect(wait).await.expect("the 15th host is reached");
        let took = started.elapsed();

        assert_eq!(opened.server.host, 14);
        assert_eq!(hosts.current(), Some(14));
        // The 15th starts after 14 head starts of 3 s / 2 / 14 each.
        assert!(
            took >= Duration::from_millis(1400) && took < Duration::from_millis(2500),
            "{took:?}"
        );
        // Settled on it, the next connection goes there first, at once.
        let started = Instant::now();
        let again = hosts.connect(wait).await.expect("the current host first");
        assert_eq!(again.server.host, 14);
        assert!(started.elapsed() < Duration::from_millis(1000));
        drop(listeners);
    }

    #[tokio::test]
    async fn hosts_that_refuse_hand_over_to_the_next_at_once() {
        let good = items_testkit::postgres::test_server_address().await;
        // Ports bound and let go: nothing listens, each refuses at once.
        let mut listed: Vec<String> = hanging(30)
            .iter()
            .map(|listener| format!("127.0.0.1:{}", port_of(listener)))
            .collect();
        listed.push(good.to_string());
        let hosts = hosts(&test_url(&listed));

        let started = Instant::now();
        let opened = hosts
            .connect(Duration::from_secs(3))
            .await
            .expect("the last host is reached");

        assert_eq!(opened.server.host, 30);
        // Waiting out each head start (3 s / 2 / 30 = 50 ms) would take 1.5 s.
        assert!(started.elapsed() < Duration::from_millis(1000));
    }

    #[tokio::test]
    async fn when_every_host_hangs_the_failure_names_each_within_the_wait_c12() {
        let listeners = hanging(15);
        let listed: Vec<String> = listeners
            .iter()
            .map(|listener| format!("127.0.0.1:{}", port_of(listener)))
            .collect();
        let hosts = hosts(&format!(
            "{}?target_session_attrs=read-write",
            test_url(&listed)
        ));
        let wait = Duration::from_millis(1000);

        let started = Instant::now();
        let error = hosts.connect(wait).await.expect_err("no host answers");
        let took = started.elapsed();

        let text = error.to_string();
        assert!(
            text.starts_with("no host of the database URL gave a read-write session: "),
            "{text}"
        );
        for host in &listed {
            assert!(
                text.contains(&format!("{host}: no answer within ")),
                "{host}: {text}"
            );
        }
        assert_eq!(text.matches("no answer within").count(), 15, "{text}");
        assert!(
            took >= wait && took < wait + Duration::from_millis(500),
            "{took:?}"
        );
        drop(listeners);
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
