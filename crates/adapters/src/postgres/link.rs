//! One connection to one server: the driver's client, and the task that
//! drives its socket.
//!
//! The socket is opened here (TCP with `TCP_NODELAY`, or the server's Unix
//! socket) and handed to the driver's handshake (`connect_raw`), so which
//! server a connection goes to, and how long that may take, is the host
//! selection's to decide (`hosts.rs`), never the driver's own walk of the
//! host list.
//!
//! Invariants: the task ends when its [`Link`] goes (aborted: a socket that
//! answers nothing must not keep a task alive); [`Link::close`] says
//! goodbye first when the server answers in time; every warning the server
//! sends is counted before the reply it precedes reaches the client, so
//! whoever awaited a statement can tell whether that statement drew one
//! ([`Link::warning_since`]: a commit whose wait for a synchronous standby
//! was cancelled is answered as a success, with a warning only).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;
use tokio_postgres::error::{DbError, Severity, SqlState};
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::url::{Address, SessionAttrs, Target};

/// A client and its connection's task.
#[derive(Debug)]
pub(super) struct Link {
    client: Client,
    /// `None` only while being closed.
    task: Option<JoinHandle<()>>,
    /// What the server warned of on this connection.
    warnings: Arc<Warnings>,
}

/// The warnings a server sent on one connection: how many, and the last.
#[derive(Debug, Default)]
struct Warnings {
    count: AtomicU64,
    last: Mutex<Option<String>>,
}

impl Warnings {
    fn record(&self, notice: &DbError) {
        let warning = notice.parsed_severity() == Some(Severity::Warning)
            || (notice.parsed_severity().is_none() && notice.severity() == "WARNING");
        if !warning {
            return;
        }
        let text = match notice.detail() {
            Some(detail) => format!("{} ({detail})", notice.message()),
            None => notice.message().to_owned(),
        };
        // The text first: whoever sees the count move reads this one.
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(text);
        self.count.fetch_add(1, Ordering::SeqCst);
    }
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The socket could not be opened.
    #[error("cannot reach the server")]
    Io(#[from] std::io::Error),
    /// The server answered and refused, or the handshake failed.
    #[error(transparent)]
    Driver(#[from] tokio_postgres::Error),
    /// No host of several gave a connection that fits.
    #[error(transparent)]
    NoHost(#[from] NoHost),
    /// No connection within the wait.
    #[error("no connection within {} ms", .0.as_millis())]
    TimedOut(Duration),
}

impl OpenError {
    /// A refusal that no retry will change: the database does not exist
    /// (`3D000`), or the role or its password is wrong (`28000`, `28P01`).
    /// Anything else, a refused TCP connection included, may be a server
    /// still starting, and is retried.
    pub(super) fn is_permanent(&self) -> bool {
        const PERMANENT: [SqlState; 3] = [
            SqlState::INVALID_CATALOG_NAME,
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            SqlState::INVALID_PASSWORD,
        ];
        match self {
            Self::Driver(error) => error.code().is_some_and(|code| PERMANENT.contains(code)),
            _ => false,
        }
    }
}

/// Opens a connection to `target` with the driver's `config` (user,
/// password, database, server settings).
pub(super) async fn open(
    target: &Target,
    config: &tokio_postgres::Config,
) -> Result<Link, OpenError> {
    match &target.address {
        Address::Tcp { host, port } => {
            let stream = tokio::net::TcpStream::connect((host.as_str(), *port)).await?;
            // One query, one segment: nothing is gained by Nagle's wait.
            stream.set_nodelay(true)?;
            handshake(stream, config).await
        }
        Address::Unix(path) => {
            handshake(tokio::net::UnixStream::connect(path).await?, config).await
        }
    }
}

async fn handshake<S>(stream: S, config: &tokio_postgres::Config) -> Result<Link, OpenError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, mut connection) = config.connect_raw(stream, NoTls).await?;
    let warnings = Arc::new(Warnings::default());
    let heard = Arc::clone(&warnings);
    let task = tokio::spawn(async move {
        // Driven message by message rather than awaited whole (which logs
        // notices and drops them): a notice is recorded here before the
        // task reads on, so before the reply after it reaches the client.
        // The connection's error is every pending query's error, and the
        // client's `is_closed` from then on: nothing more to say here.
        while let Some(Ok(message)) =
            std::future::poll_fn(|context| connection.poll_message(context)).await
        {
            if let AsyncMessage::Notice(notice) = message {
                heard.record(&notice);
            }
        }
    });
    Ok(Link {
        client,
        task: Some(task),
        warnings,
    })
}

impl Link {
    /// How many warnings the server sent on this connection so far: taken
    /// before a statement is sent, for [`Link::warning_since`].
    pub(super) fn warnings(&self) -> u64 {
        self.warnings.count.load(Ordering::SeqCst)
    }

    /// The last warning, if the server sent any since [`Link::warnings`]
    /// said `before`: once a statement's reply (or the connection's end)
    /// has reached the client, every warning sent ahead of it is counted.
    pub(super) fn warning_since(&self, before: u64) -> Option<String> {
        if self.warnings() == before {
            return None;
        }
        let last = self
            .warnings
            .last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Some(last.unwrap_or_default())
    }

    /// Says goodbye (the driver sends `Terminate` once its client is gone)
    /// and waits for the socket to close, at most `within`.
    pub(super) async fn close(mut self, within: Duration) {
        let task = self.task.take();
        drop(self);
        if let Some(task) = task {
            let _ = tokio::time::timeout(within, task).await;
        }
    }
}

impl Deref for Link {
    type Target = Client;

    fn deref(&self) -> &Client {
        &self.client
    }
}

impl DerefMut for Link {
    /// For work that must have the connection alone (the migrations'
    /// transactions).
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Why no host gave a connection: every host and what it answered.
#[derive(Debug)]
pub struct NoHost {
    pub(super) attrs: SessionAttrs,
    pub(super) tried: Vec<(String, String)>,
}

impl fmt::Display for NoHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.attrs {
            SessionAttrs::Any => f.write_str("no host of the database URL gave a session: ")?,
            attrs => write!(
                f,
                "no host of the database URL gave a {} session: ",
                attrs.name()
            )?,
        }
        for (at, (host, why)) in self.tried.iter().enumerate() {
            let separator = if at == 0 { "" } else { "; " };
            write!(f, "{separator}{host}: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for NoHost {}
