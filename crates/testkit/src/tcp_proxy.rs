//! A TCP proxy in front of a dependency (PostgreSQL, Redis) that a test can
//! cut and restore, or freeze and thaw, to show what an adapter does while
//! the dependency is unreachable (`RepositoryError::Unavailable`) or stalled
//! (C12's statement budget), and that it recovers; or set a [`Trap`] for one
//! message, to lose it or its answer (C12: a commit whose answer is lost).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the proxy does with its connections now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Bytes flow both ways.
    Open,
    /// Connections stay open and new ones are accepted, but no byte is
    /// forwarded either way — a server paused, or a network dropping
    /// packets silently: no reset, no refusal. Bytes already sent wait in
    /// the proxy and flow on at the thaw, as they would reach a paused
    /// server when it resumes.
    Frozen,
    /// Every connection dropped, new ones refused.
    Cut,
}

/// What happens to the next message a client sends that holds the trap's
/// bytes (e.g. PostgreSQL's `commit`), on that connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trap {
    /// The message reaches the server; nothing the server sends on that
    /// connection reaches the client again, and nothing is closed: its
    /// answer is lost.
    LoseAnswer,
    /// The message never reaches the server, nor does anything after it,
    /// and nothing comes back; nothing is closed.
    LoseMessage,
    /// The message reaches the server, then the whole proxy freezes
    /// ([`TcpProxy::freeze`]): its answer is held, and so is every other
    /// connection, new ones included, until a thaw.
    FreezeAfter,
}

/// A trap set and not yet sprung: the bytes it waits for, and what it does.
type Armed = Arc<Mutex<Option<(Vec<u8>, Trap)>>>;

/// A TCP proxy that a test can cut (every connection dropped, new ones
/// refused) and restore on the same port, freeze (nothing forwarded,
/// nothing closed) and thaw, or [`trap`](TcpProxy::trap) one message.
#[derive(Debug)]
pub struct TcpProxy {
    port: u16,
    state: watch::Sender<State>,
    armed: Armed,
    delay: Delay,
}

/// The most a chunk waits before it is forwarded, in microseconds (0: none).
type Delay = Arc<std::sync::atomic::AtomicU64>;

impl TcpProxy {
    /// Listens on a free loopback port and forwards each connection to
    /// `target`.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support: a panic fails the
    /// test).
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free loopback port");
        let port = listener
            .local_addr()
            .expect("a bound listener has an address")
            .port();
        let (state, mut watch) = watch::channel(State::Open);
        let armed = Armed::default();
        let trap = Arc::clone(&armed);
        let delay = Delay::default();
        let delays = Arc::clone(&delay);
        let freezer = state.clone();
        tokio::spawn(async move {
            let mut listener = Some(listener);
            loop {
                if *watch.borrow() == State::Cut {
                    listener = None; // refuse new connections while cut
                    if watch.changed().await.is_err() {
                        return;
                    }
                    continue;
                }
                let accepting = match &listener {
                    Some(listener) => listener,
                    None => {
                        listener = Some(
                            TcpListener::bind(("127.0.0.1", port))
                                .await
                                .expect("the proxy's port is free again"),
                        );
                        continue;
                    }
                };
                tokio::select! {
                    accepted = accepting.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        let traps = Traps {
                            armed: Arc::clone(&trap),
                            freezer: freezer.clone(),
                            delay: Arc::clone(&delays),
                        };
                        tokio::spawn(forward(client, target, watch.clone(), traps));
                    }
                    changed = watch.changed() => if changed.is_err() { return },
                }
            }
        });
        Self {
            port,
            state,
            armed,
            delay,
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Cuts (every connection dropped, new ones refused) or restores.
    pub fn set_cut(&self, cut: bool) {
        self.state
            .send_replace(if cut { State::Cut } else { State::Open });
    }

    /// Stops forwarding bytes, both ways, on every connection, old and new,
    /// without closing or refusing any: what a client sees of a paused
    /// server.
    pub fn freeze(&self) {
        self.state.send_replace(State::Frozen);
    }

    /// Forwards again what waited during the freeze, and what follows.
    pub fn thaw(&self) {
        self.state.send_replace(State::Open);
    }

    /// Sets `trap` for the next message any client sends that holds
    /// `needle` (looked for within one read, which holds a small message
    /// whole); it springs once.
    ///
    /// # Panics
    /// Never in practice: the lock is only held to swap the trap.
    pub fn trap(&self, needle: &[u8], trap: Trap) {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some((needle.to_vec(), trap));
    }

    /// Makes every chunk, both ways, wait a random time up to `most` before
    /// it is forwarded (a slow, jittery network); `Duration::ZERO` ends it.
    /// Order within a connection is kept.
    pub fn set_delay(&self, most: Duration) {
        let micros = u64::try_from(most.as_micros()).unwrap_or(u64::MAX);
        self.delay.store(micros, Ordering::Relaxed);
    }

    /// Whether the trap set last has sprung.
    pub fn trap_sprung(&self) -> bool {
        self.armed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }
}

/// What a connection needs to spring a trap.
#[derive(Debug, Clone)]
struct Traps {
    armed: Armed,
    /// Freezes the whole proxy ([`Trap::FreezeAfter`]).
    freezer: watch::Sender<State>,
    /// [`TcpProxy::set_delay`].
    delay: Delay,
}

impl Traps {
    /// The trap `chunk` springs, if one is set and `chunk` holds its bytes.
    fn spring(&self, chunk: &[u8]) -> Option<Trap> {
        let mut armed = self.armed.lock().unwrap_or_else(PoisonError::into_inner);
        let (needle, _) = armed.as_ref()?;
        if !chunk
            .windows(needle.len())
            .any(|window| window == needle.as_slice())
        {
            return None;
        }
        armed.take().map(|(_, trap)| trap)
    }
}

/// What a sprung trap stopped on one connection.
#[derive(Debug, Default)]
struct Lost {
    /// Nothing more from the client reaches the server.
    messages: AtomicBool,
    /// Nothing more from the server reaches the client.
    answers: AtomicBool,
}

/// Forwards one connection both ways until either side closes or the proxy
/// is cut.
async fn forward(
    client: TcpStream,
    target: SocketAddr,
    mut watch: watch::Receiver<State>,
    traps: Traps,
) {
    let Ok(server) = TcpStream::connect(target).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let (up, down) = (watch.clone(), watch.clone());
    let lost = Arc::new(Lost::default());
    let delay = Arc::clone(&traps.delay);
    tokio::select! {
        _ = async {
            tokio::join!(
                pump(client_read, server_write, up, Direction::Up(traps, Arc::clone(&lost))),
                pump(server_read, client_write, down, Direction::Down(lost, delay)),
            )
        } => {}
        _ = watch.wait_for(|state| *state == State::Cut) => {}
    }
}

/// Which way a pump copies, and what a sprung trap makes it drop.
enum Direction {
    /// Client to server: where traps spring.
    Up(Traps, Arc<Lost>),
    /// Server to client.
    Down(Arc<Lost>, Delay),
}

/// What a pump does with one chunk.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    Forward,
    /// Forward it, then freeze the proxy ([`Trap::FreezeAfter`]).
    ForwardThenFreeze,
    Drop,
}

impl Direction {
    /// What to do with `chunk`; springs a trap it holds.
    fn action(&self, chunk: &[u8]) -> Action {
        match self {
            Self::Down(lost, _) if lost.answers.load(Ordering::Relaxed) => Action::Drop,
            Self::Down(..) => Action::Forward,
            Self::Up(_, lost) if lost.messages.load(Ordering::Relaxed) => Action::Drop,
            Self::Up(traps, lost) => match traps.spring(chunk) {
                None => Action::Forward,
                Some(Trap::LoseAnswer) => {
                    lost.answers.store(true, Ordering::Relaxed);
                    Action::Forward
                }
                Some(Trap::LoseMessage) => {
                    lost.messages.store(true, Ordering::Relaxed);
                    lost.answers.store(true, Ordering::Relaxed);
                    Action::Drop
                }
                Some(Trap::FreezeAfter) => Action::ForwardThenFreeze,
            },
        }
    }

    fn freeze(&self) {
        if let Self::Up(traps, _) = self {
            traps.freezer.send_replace(State::Frozen);
        }
    }

    /// How long the next chunk waits: a random time up to the delay set.
    fn delay(&self, random: &mut u64) -> Option<Duration> {
        let most = match self {
            Self::Up(traps, _) => traps.delay.load(Ordering::Relaxed),
            Self::Down(_, delay) => delay.load(Ordering::Relaxed),
        };
        if most == 0 {
            return None;
        }
        // xorshift: spread enough for jitter, no dependency for it.
        *random ^= *random << 13;
        *random ^= *random >> 7;
        *random ^= *random << 17;
        Some(Duration::from_micros(*random % (most + 1)))
    }
}

/// Copies `from` to `to`, holding every chunk read while the proxy is
/// frozen until it thaws, and dropping what a sprung trap stopped (the end
/// of the stream included: nothing is closed); passes the end of the stream
/// on otherwise.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut watch: watch::Receiver<State>,
    direction: Direction,
) {
    let mut buffer = vec![0; 16 * 1024];
    let mut random = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9e37_79b9, |since| since.subsec_nanos().into())
        | 1;
    loop {
        let read = from.read(&mut buffer).await;
        if let Some(wait) = direction.delay(&mut random) {
            tokio::time::sleep(wait).await;
        }
        // A failed read ends the stream like a closed one.
        let n = read.unwrap_or_default();
        let action = direction.action(&buffer[..n]);
        if watch
            .wait_for(|state| *state != State::Frozen)
            .await
            .is_err()
        {
            return;
        }
        match (action, n) {
            (Action::Drop, 0) => return,
            (Action::Drop, _) => {}
            (_, 0) => {
                let _ = to.shutdown().await;
                return;
            }
            (action, n) => {
                if to.write_all(&buffer[..n]).await.is_err() {
                    return;
                }
                if action == Action::ForwardThenFreeze {
                    direction.freeze();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An echo server on a free loopback port.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = socket.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        address
    }

    async fn round_trip(stream: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
        stream.write_all(bytes).await.unwrap();
        let mut answer = vec![0; bytes.len()];
        stream.read_exact(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn a_frozen_proxy_forwards_nothing_closes_nothing_and_thaws_c12() {
        let proxy = TcpProxy::start(echo().await).await;
        let mut before = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert_eq!(round_trip(&mut before, b"ping").await, b"ping");

        proxy.freeze();
        before.write_all(b"held").await.unwrap();
        let mut answer = [0; 4];
        let waited =
            tokio::time::timeout(Duration::from_millis(300), before.read(&mut answer)).await;
        assert!(waited.is_err(), "no byte, no end of stream while frozen");
        // A new connection is accepted, not refused, and hears nothing.
        let mut during = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .expect("a frozen proxy accepts");
        during.write_all(b"late").await.unwrap();
        let waited =
            tokio::time::timeout(Duration::from_millis(300), during.read(&mut answer)).await;
        assert!(waited.is_err(), "no byte, no end of stream while frozen");

        proxy.thaw();
        before.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"held", "what waited flows on at the thaw");
        during.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"late");
        assert_eq!(round_trip(&mut before, b"pong").await, b"pong");
    }

    #[tokio::test]
    async fn a_cut_proxy_drops_connections_and_refuses_until_restored() {
        let proxy = TcpProxy::start(echo().await).await;
        let mut before = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert_eq!(round_trip(&mut before, b"ping").await, b"ping");

        proxy.set_cut(true);
        let mut answer = [0; 1];
        let read = tokio::time::timeout(Duration::from_secs(5), before.read(&mut answer))
            .await
            .expect("the cut ends the connection");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

        proxy.set_cut(false);
        let mut after = loop {
            // The listener is bound again a moment after the restore.
            match TcpStream::connect(("127.0.0.1", proxy.port())).await {
                Ok(stream) => break stream,
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        assert_eq!(round_trip(&mut after, b"back").await, b"back");
    }

    #[tokio::test]
    async fn a_trap_loses_the_answer_to_its_message_once_and_nothing_else() {
        let proxy = TcpProxy::start(echo().await).await;
        let mut trapped = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        let mut other = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        assert_eq!(round_trip(&mut trapped, b"ping").await, b"ping");

        proxy.trap(b"commit", Trap::LoseAnswer);
        trapped.write_all(b"commit").await.unwrap();
        let mut answer = [0; 6];
        let waited =
            tokio::time::timeout(Duration::from_millis(300), trapped.read(&mut answer)).await;
        assert!(waited.is_err(), "the answer is lost, the connection open");
        assert!(proxy.trap_sprung());
        assert_eq!(round_trip(&mut other, b"commit").await, b"commit");
    }

    #[tokio::test]
    async fn a_trap_can_lose_its_message_or_freeze_everything_after_it() {
        let proxy = TcpProxy::start(echo().await).await;
        let mut trapped = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        proxy.trap(b"commit", Trap::LoseMessage);
        trapped.write_all(b"commit").await.unwrap();
        let mut answer = [0; 6];
        let waited =
            tokio::time::timeout(Duration::from_millis(300), trapped.read(&mut answer)).await;
        assert!(waited.is_err(), "the message never arrived, so no echo");

        let mut frozen = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        proxy.trap(b"commit", Trap::FreezeAfter);
        frozen.write_all(b"commit").await.unwrap();
        let waited =
            tokio::time::timeout(Duration::from_millis(300), frozen.read(&mut answer)).await;
        assert!(waited.is_err(), "the echo is held by the freeze");
        proxy.thaw();
        frozen.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"commit", "the message had reached the server");
    }
}
